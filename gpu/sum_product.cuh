#pragma once
// Launching the log-domain sum-product kernels (sum_product.cu) for one bucket. CUDA-only
// header: the rest of kinfer reaches the kernels through device_api.hpp.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "gpu/policy.hpp"

namespace kinfer::gpu {

// A policy's tables in device memory (one allocation, sections 16-byte aligned).
struct DeviceTables {
  const int* out_lo = nullptr;
  const long long* out_hi = nullptr;
  const int* sum_lo = nullptr;
  const long long* sum_hi = nullptr;
  const long long* sum_mid = nullptr;
  const int* cache_lo = nullptr;
  const unsigned* refetch = nullptr;
};

// Bytes of the device copy of p's tables (16-byte aligned tables one after another), and that
// copy made at `dev`: each table straight from p's vectors on `stream` (from pageable memory,
// staged by the driver before each call returns, so p's tables may be dropped right after).
std::size_t table_image_bytes(const LaunchPlan& p);
DeviceTables upload_table_image(const LaunchPlan& p, void* dev, cudaStream_t stream);

// in[s]: input of slot s (p.slot_input order; nullptr for padding slots: the zero table). partial:
// 2 * splits * n_out elements, needed when p.splits > 1. `maximise`: max-product (each output
// the largest of its terms; BucketShape::maximise). Checks the launch.
template <class T>
void launch_sum_product(const LaunchPlan& p, const DeviceTables& t, const T* const* in, T* out,
                        T* partial, cudaStream_t stream, bool maximise = false);

// child[i] += factor[sum_v digit_v(i) * stride[v]] over the n entries of child (Context::fold),
// child[i] = factor[...] (Context::permute), or child[i] -= factor[...], -inf where factor[...]
// is -inf (Context::divide). Dimensions (the last fastest) of at most 2^31 entries each, each
// with its division by a multiply (`div`, the dimension's size).
// `tiled` > 0: the factor's innermost entries are those of the dimensions tile_dims[0..tiled)
// (its stride-1 dimension first, then the one of stride its size, ...), none the child's last:
// the entries go through shared memory in tiles of those and of the child's last dimension, so
// that both the reads and the writes are coalesced (a transpose).
// Otherwise `set_dims` (where the child has fewer than 2^31 entries): tiles over a set of
// dimensions, the child's last ones and the factor's innermost ones together (`set`, at most
// kFoldSetMax entries), for a child whose last dimensions are short (two or three values each,
// as the marginals' downward pass lays inputs out): a block reads a tile in the factor's order
// into shared memory and writes it in the child's, the other dimensions' digits in 32 bits
// (`div32`). A factor's innermost dimension too long for the set is split in two (its fastest
// part, a divisor of its size, joins the set).
// Otherwise `low_dims` > 0: the child's last low_dims dimensions (`low` entries, at most
// kFoldLowMax) have their factor offsets in a table each block builds once in shared memory; a
// block takes `low` consecutive child entries at a time, each thread dividing the block's index
// over the other dimensions once for every low / (its block's threads) entries instead of its
// every index over all of them.
enum class FoldMode : int { add, assign, divide };
inline constexpr int kFoldSetMax = 2048, kFoldLowMax = 2048;
struct FoldArgs {
  long long n = 0;
  int nv = 0;
  FoldMode mode = FoldMode::add;
  int tiled = 0;
  int tile_dims[4];
  int set_dims = 0, set = 1;
  int set_dim[16];      // the set's dimensions, in the child's order
  int set_fstride[16];  // each one's stride among the set's entries in the factor's order
  int low_dims = 0, low = 1;
  long long stride[48];
  long long child_stride[48];
  FastDiv64 div[48];
  FastDiv div32[48];
};
// The arguments of a fold, permute or divide over a child table of these variables' sizes and
// the factor's strides: adjacent variables that are adjacent in the factor too (or both absent
// from it) made one dimension, so that a thread divides its index a few times, not once per
// variable (a permute in the marginals' downward pass keeps most of its input's order).
FoldArgs fold_args(std::span<const int> card, std::span<const std::int64_t> stride, FoldMode mode);
void launch_fold(double* child, const double* factor, const FoldArgs& a, cudaStream_t stream);

// CUDA loads a kernel at its first use (lazy loading, CUDA 12's default), the module's first
// kernel costing 10-17 ms on an H100 (docs/performance.md): load_module() loads the module (one
// kernel), load_kernels(p) the kernels p launches, ahead of the run.
void load_module();
template <class T>
void load_kernels(const LaunchPlan& p);

// The compute ceiling of the kernels' arithmetic: elements per second of the inner loop with
// `nf` operands held in registers (no memory traffic at all), one term at a time through the
// canonical (max, sum) pair (gpu/detail/arith_rate.cuh). Returns elements/s.
template <class T>
double measure_element_rate(int nf, cudaStream_t stream);
// The same for the bucket kernels' inner loops as they run: terms in chunks of four, the finite
// pair (double).
double measure_element_rate_chunked(int nf, cudaStream_t stream);

}  // namespace kinfer::gpu
