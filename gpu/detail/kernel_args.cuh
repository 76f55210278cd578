#pragma once
// What every bucket kernel receives (KernelArgs) and the small device helpers they share:
// division by a multiply and a shift, 32-bit shared-memory loads, values made opaque to the
// compiler. Private to gpu/: included by sum_product.cu only (see there why one file).
#include <cuda_runtime.h>

#include "gpu/policy.hpp"

namespace kinfer::gpu {
namespace {

constexpr unsigned kFull = 0xffffffffu;  // every lane of a warp (shuffle masks)

// n / d by FastDiv's multiply and shift (policy.hpp), 32 and 64 bits.
struct DevDiv {
  unsigned mul, shift;
};

__device__ __forceinline__ unsigned fdiv(unsigned n, DevDiv d) {
  return (__umulhi(n, d.mul) + n) >> d.shift;
}

DevDiv dev_div(const FastDiv& f) { return {f.mul, f.shift}; }

struct DevDiv64 {
  unsigned long long mul;
  unsigned shift;
};

__device__ __forceinline__ unsigned long long fdiv64(unsigned long long n, DevDiv64 d) {
  return (__umul64hi(n, d.mul) + n) >> d.shift;
}

DevDiv64 dev_div(const FastDiv64& f) { return {f.mul, f.shift}; }

// Everything a launch needs, passed by value: it lives in the constant bank (the papers'
// policy tables in constant memory); the larger tables are behind read-only pointers.
template <class T>
struct KernelArgs {
  const T* in[kMaxSlots];
  T* out;
  T* partial;
  const int* out_lo;
  const long long* out_hi;
  const int* sum_lo;
  const long long* sum_hi;
  const long long* sum_mid;
  const int* cache_lo;
  const unsigned* refetch;
  int n_in, nip, nfp;  // n_in: slots; column n_in of the plain tables is the output
  unsigned P;
  long long n_out, n_items, n_pages;
  int Mi, splits, lanes_log2;
  long long Mh, Mh2, mh_per_split;
  DevDiv64 div_P, div_items;
  unsigned cached_mask;
  unsigned direct_mask;  // plain: slots read at mi (no offset table)
  int seg_off[kMaxVarying], seg_size[kMaxVarying], pitch[kMaxVarying], m_f[kMaxVarying];
  DevDiv div_mf[kMaxVarying];
  int pages_per_block, sum_table_offset;
  // plain, tile of 2: the varying offsets of configuration 1 (the first tile_dep slots), every
  // slot's and the output column's
  bool tile_summed;
  int tile_off1[kMaxVarying];
  long long tile_all1[kMaxSlots + 1];
  // Max-product (BucketShape::maximise): each output is the largest of its terms, the running
  // pair's max, instead of their log-sum-exp. The pairs are formed as for a sum (the exps are
  // spent either way); only the stores differ.
  bool maximise;
};

// Shared memory read through 32-bit shared-window addresses: a generic pointer would have its
// shared address rebuilt at every load.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ int lds32(unsigned a) {
  int v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ double lds64(unsigned a) {
  double v;
  asm volatile("ld.shared.f64 %0, [%1];" : "=d"(v) : "r"(a));
  return v;
}

// A value the compiler cannot see through, so it keeps it in a register as given instead of
// rebuilding it: an input's row pointer (a table-read address is then one IMAD.WIDE, index x 8
// + pointer, not a 64-bit add and shift from an element offset) and a lane's shared-window
// address (kept rather than rebuilt from the window every chunk).
__device__ __forceinline__ unsigned opaque(unsigned v) {
  asm("" : "+r"(v));
  return v;
}
template <class T>
__device__ __forceinline__ const T* opaque(const T* p) {
  asm("" : "+l"(p));
  return p;
}

// One row of an int table with NF entries, as 16-byte loads (rows are padded to 4 or 8).
template <int NF>
__device__ __forceinline__ void load_row(const int* row, int (&v)[NF > 0 ? NF : 1]) {
#pragma unroll
  for (int j = 0; j < NF; j += 4) {
    const int4 a = *reinterpret_cast<const int4*>(row + j);
    v[j] = a.x;
    if (j + 1 < NF) v[j + 1] = a.y;
    if (j + 2 < NF) v[j + 2] = a.z;
    if (j + 3 < NF) v[j + 3] = a.w;
  }
}

// The sum of the inputs that do not vary with the summed variables (slots nf .. n_in - 1).
template <class T>
__device__ __forceinline__ T const_part(const KernelArgs<T>& a, int nf, const int* lo,
                                        const long long* hi) {
  T c = 0;
  for (int s = nf; s < a.n_in; ++s) c += __ldg(a.in[s] + hi[s] + lo[s]);
  return c;
}

}  // namespace
}  // namespace kinfer::gpu
