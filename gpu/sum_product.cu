// The log-domain sum-product kernels of one bucket (paper 000 Fig. 4, paper 001 Fig. 3),
//   out(o) = ln sum_m exp( sum_f in_f(o, m) ),
// templated on the element type (double, float) and on the number of inputs that vary with
// the summed variables (NF), so the per-input loops unroll and the pointers stay in registers.
// This file holds the entry points of sum_product.cuh; the kernels are in gpu/detail/:
//   kernel_args.cuh       KernelArgs (what a launch passes) and small device helpers
//   exp_log.cuh           the exp and log of the inner loops (table methods)
//   log_sum_exp.cuh       the running (max, sum) pair: add, merge across lanes, value
//   plain_kernel.cuh      `plain`: inputs read through L1/L2, the summed range split over blocks
//                         where outputs are few
//   short_sum_kernel.cuh  one thread per output for sums of at most 16 terms
//   cached_kernel.cuh     `cached`: input segments staged in shared memory (the software cache)
//   combine_kernel.cuh    merges the split plain launch's partial pairs
//   table_kernels.cuh     the page-offset table filled on the device; Context::fold
//   arith_rate.cuh        the roofline's compute ceiling (register-operand probes)
//   launch.cuh            from a LaunchPlan to the template instance compiled for it
// They are included here, into one translation unit, because one translation unit is one CUDA
// module: load_module() then loads every kernel's module ahead of the run (lazy loading would
// otherwise charge each further module's load to its first launch).
//
// Numerics: a running (max, sum) pair per lane, one exp per term; lanes that share an output
// merge their pairs with shuffles, splits through a second kernel (combine_kernel).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/detail/arith_rate.cuh"
#include "gpu/detail/combine_kernel.cuh"
#include "gpu/detail/kernel_args.cuh"
#include "gpu/detail/launch.cuh"
#include "gpu/detail/table_kernels.cuh"
#include "gpu/sum_product.cuh"

namespace kinfer::gpu {

namespace {

std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

// The launch's arguments: p's numbers, the device tables t, the inputs (padding slots: the zero
// table) and the outputs.
template <class T>
KernelArgs<T> make_kernel_args(const LaunchPlan& p, const DeviceTables& t, const T* const* in,
                               T* out, T* partial, bool maximise) {
  KernelArgs<T> a{};
  a.maximise = maximise;
  const int n_in = p.nf + p.nc;
  if (n_in > kMaxSlots) throw std::invalid_argument("more input slots than a launch takes");
  for (int s = 0; s < n_in; ++s) a.in[s] = in[s] ? in[s] : zero_table<T>();
  a.out = out;
  a.partial = partial;
  a.out_lo = t.out_lo;
  a.out_hi = t.out_hi;
  a.sum_lo = t.sum_lo;
  a.sum_hi = t.sum_hi;
  a.sum_mid = t.sum_mid;
  a.cache_lo = t.cache_lo;
  a.refetch = t.refetch;
  a.n_in = n_in;
  a.nip = p.nip;
  a.nfp = p.nfp;
  a.n_out = p.n_out;
  a.n_items = p.n_items;
  a.P = static_cast<unsigned>(p.P);
  a.n_pages = p.n_pages;
  a.Mi = static_cast<int>(p.Mi);
  a.splits = p.splits;
  a.lanes_log2 = p.lanes_log2;
  a.Mh = p.Mh;
  a.Mh2 = p.Mh2;
  a.mh_per_split = p.mh_per_split;
  a.div_P = dev_div(p.div_P);
  a.div_items = dev_div(p.div_items);
  a.cached_mask = p.cached_mask;
  a.direct_mask = p.direct_mask;
  for (int f = 0; f < p.nf && p.variant == Variant::cached; ++f) {
    a.seg_off[f] = p.seg_off[f];
    a.seg_size[f] = p.seg_size[f];
    a.pitch[f] = p.pitch[f];
    a.div_mf[f] = dev_div(p.div_mf[f]);
    a.m_f[f] = static_cast<int>(p.div_mf[f].d);
  }
  a.pages_per_block = p.pages_per_block;
  a.sum_table_offset = p.sum_table_offset;
  if (p.variant == Variant::plain && p.tile == 2) {
    a.tile_summed = p.tile_summed;
    for (int f = 0; f < p.nf; ++f) a.tile_off1[f] = p.tile_off[p.nfp + f];
    for (int s = 0; s <= n_in; ++s) a.tile_all1[s] = p.tile_all[p.nip + s];
  }
  return a;
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

}  // namespace

namespace {

// Dimension v of a (size c, stride s) as two: its slower part (c / k, stride s * k) at v and its
// faster part (k, stride s) at v + 1; the child's strides follow.
void split_dim(FoldArgs& a, int v, std::int64_t k) {
  for (int j = a.nv; j > v + 1; --j) a.div[j] = a.div[j - 1], a.stride[j] = a.stride[j - 1];
  const std::int64_t c = static_cast<std::int64_t>(a.div[v].d), s = a.stride[v];
  a.div[v] = FastDiv64(static_cast<std::uint32_t>(c / k)), a.stride[v] = s * k;
  a.div[v + 1] = FastDiv64(static_cast<std::uint32_t>(k)), a.stride[v + 1] = s;
  ++a.nv;
  for (std::int64_t j = a.nv - 1, t = 1; j >= 0; --j) a.child_stride[j] = t, t *= a.div[j].d;
}

// FoldArgs::set_dims where it pays: the child's last dimensions (at least kSetRun entries, at
// most kSetChild) and the factor's innermost ones (at least kSetRun consecutive entries) together
// within kFoldSetMax entries, the factor's stride-1 dimension not the child's last (where it is,
// a thread per entry reads the factor in runs already). Where it does not pay, `a` may be left
// with a dimension split (the same fold).
void fold_set(FoldArgs& a) {
  constexpr std::int64_t kSetRun = 16, kSetChild = 64;
  if (a.nv < 2 || a.n >= (std::int64_t{1} << 31) || a.stride[a.nv - 1] == 1) return;
  std::vector<char> in(a.nv, 0);
  std::int64_t set = 1, child_run = 1;
  for (int k = a.nv - 1; k >= 0 && child_run * static_cast<std::int64_t>(a.div[k].d) <= kSetChild;
       --k)
    child_run *= a.div[k].d, set *= a.div[k].d, in[k] = 1;
  if (child_run < kSetRun) return;
  // The factor's innermost dimensions, in its order, while the set stays within its bound; one
  // too long is split, its fastest part (the largest divisor of its size that fits) taken.
  std::int64_t factor_run = 1;
  for (;;) {
    int next = -1;
    for (int k = 0; k < a.nv; ++k)
      if (a.stride[k] == factor_run) next = k;
    if (next < 0) break;
    std::int64_t c = static_cast<std::int64_t>(a.div[next].d);
    if (!in[next] && set * c > kFoldSetMax) {
      std::int64_t k = kFoldSetMax / set;
      while (k >= 2 && c % k != 0) --k;
      if (k < 2 || a.nv >= static_cast<int>(std::size(a.stride))) break;
      split_dim(a, next, k);
      in.insert(in.begin() + next + 1, 0);
      ++next, c = k;
    }
    if (!in[next]) set *= c;
    in[next] = 1, factor_run *= c;
  }
  if (factor_run < kSetRun) return;
  // The set's entries in the factor's order: its dimensions by stride in the factor (those the
  // factor lacks last).
  std::vector<int> dims;
  for (int k = 0; k < a.nv; ++k)
    if (in[k]) dims.push_back(k);
  if (dims.size() > std::size(a.set_dim)) return;
  std::vector<int> by_factor = dims;
  std::stable_sort(by_factor.begin(), by_factor.end(), [&](int x, int y) {
    const auto key = [&](int k) { return a.stride[k] == 0 ? INT64_MAX : a.stride[k]; };
    return key(x) < key(y);
  });
  std::vector<int> fstride(a.nv, 0);
  for (int k = 0, s = 1; k < static_cast<int>(by_factor.size()); ++k)
    fstride[by_factor[k]] = s, s *= static_cast<int>(a.div[by_factor[k]].d);
  a.set_dims = static_cast<int>(dims.size());
  a.set = static_cast<int>(set);
  for (int g = 0; g < a.set_dims; ++g) a.set_dim[g] = dims[g], a.set_fstride[g] = fstride[dims[g]];
  for (int k = 0; k < a.nv; ++k) a.div32[k] = FastDiv(static_cast<std::uint32_t>(a.div[k].d));
}

// FoldArgs::low_dims where it saves a thread two divisions or more per entry: the child's last
// dimensions while they have at most kFoldLowMax entries, some dimension left over, and at least
// kFoldLowThreads of them (a block's threads each take an entry of a run).
constexpr int kFoldLowThreads = 256;
void fold_low(FoldArgs& a) {
  std::int64_t low = 1;
  int k = a.nv;
  while (k > 0 && low * static_cast<std::int64_t>(a.div[k - 1].d) <= kFoldLowMax)
    low *= a.div[--k].d;
  if (k == 0 || a.nv - k < 2 || low < kFoldLowThreads) return;
  a.low_dims = a.nv - k;
  a.low = static_cast<int>(low);
}

}  // namespace

FoldArgs fold_args(std::span<const int> card, std::span<const std::int64_t> stride, FoldMode mode) {
  if (card.size() > std::size(FoldArgs{}.stride) || stride.size() != card.size())
    throw std::invalid_argument(std::string(mode == FoldMode::assign   ? "permute"
                                            : mode == FoldMode::divide ? "divide"
                                                                       : "fold") +
                                ": more variables than it takes");
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
  // Dimensions fastest first while merging, as (size, stride in the factor).
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;
  FoldArgs a;
  a.mode = mode;
  a.n = 1;
  for (std::size_t v = card.size(); v-- > 0;) {
    a.n *= card[v];
    if (card[v] == 1) continue;
    if (!dims.empty() && stride[v] == dims.back().first * dims.back().second &&
        dims.back().first * card[v] <= kMaxDim)
      dims.back().first *= card[v];
    else
      dims.emplace_back(card[v], stride[v]);
  }
  a.nv = static_cast<int>(dims.size());
  for (int k = 0; k < a.nv; ++k) {  // slowest first, as the kernel reads them
    const auto& [size, st] = dims[dims.size() - 1 - k];
    a.div[k] = FastDiv64(static_cast<std::uint32_t>(size));
    a.stride[k] = st;
  }
  for (std::int64_t k = a.nv - 1, s = 1; k >= 0; --k) a.child_stride[k] = s, s *= a.div[k].d;
  // Tiles where the factor's innermost entries are not along the child's last dimension and
  // both are long enough to fill most of a tile.
  constexpr std::int64_t kTileFill = 16;
  const int last = a.nv - 1;
  if (a.nv < 2 || a.stride[last] == 1 || static_cast<std::int64_t>(a.div[last].d) < kTileFill) {
    fold_set(a);
    if (a.set_dims == 0) fold_low(a);
    return a;
  }
  std::int64_t inner = 1;
  while (a.tiled < static_cast<int>(std::size(a.tile_dims)) && inner < 2 * kTileFill) {
    int next = -1;
    for (int k = 0; k < last; ++k)
      if (a.stride[k] == inner) next = k;
    if (next < 0) break;
    a.tile_dims[a.tiled++] = next;
    inner *= a.div[next].d;
  }
  if (inner < kTileFill) a.tiled = 0;
  if (a.tiled == 0) fold_set(a);
  if (a.tiled == 0 && a.set_dims == 0) fold_low(a);
  return a;
}

// The set-of-dimensions and low-dimensions kernels' blocks at most: each block builds its index
// tables once, then takes tiles until the table is done (a few blocks per multiprocessor).
constexpr long long kFoldBlocks = 2048;

void launch_fold(double* child, const double* factor, const FoldArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  if (a.set_dims > 0) {
    const long long tiles = a.n / a.set;
    const unsigned blocks = static_cast<unsigned>(std::min<long long>(tiles, kFoldBlocks));
    fold_set_kernel<<<blocks, 256, 0, stream>>>(child, factor, a);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (a.tiled > 0) {
    long long inner = 1;
    for (int g = 0; g < a.tiled; ++g) inner *= static_cast<long long>(a.div[a.tile_dims[g]].d);
    const long long last = static_cast<long long>(a.div[a.nv - 1].d);
    const long long tiles =
        ceil_div(inner, kFoldTile) * ceil_div(last, kFoldTile) * (a.n / (inner * last));
    const unsigned blocks = static_cast<unsigned>(std::min<long long>(tiles, 1 << 20));
    fold_tiled_kernel<<<blocks, dim3(kFoldTile, kFoldTileRows), 0, stream>>>(child, factor, a);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (a.low_dims > 0) {
    const unsigned blocks = static_cast<unsigned>(std::min<long long>(a.n / a.low, kFoldBlocks));
    fold_low_kernel<<<blocks, kFoldLowThreads, 0, stream>>>(child, factor, a);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>((a.n + threads - 1) / threads, 1 << 20));
  fold_kernel<<<blocks, threads, 0, stream>>>(child, factor, a);
  CUDA_CHECK(cudaGetLastError());
}

std::size_t table_image_bytes(const LaunchPlan& p) {
  std::size_t b = 0;
  LaunchPlan::for_each_device_table(p,
                                    [&](const auto& t) { b += align16(sizeof(t[0]) * t.size()); });
  if (p.out_hi_fill.rows > 0)  // the table the device fills, then the fill's parameters
    b += align16(8 * static_cast<std::size_t>(p.out_hi_fill.rows) * p.nip) +
         align16(8 * fill_params(p).size());
  return b;
}

DeviceTables upload_table_image(const LaunchPlan& p, void* dev, cudaStream_t stream) {
  DeviceTables t;
  std::size_t off = 0;
  auto put = [&](const void* src, std::size_t bytes) {
    void* d = static_cast<char*>(dev) + off;
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, stream));
    off += (bytes + 15) / 16 * 16;
    return static_cast<const void*>(d);
  };
  t.out_lo = static_cast<const int*>(put(p.out_lo.data(), 4 * p.out_lo.size()));
  t.out_hi = static_cast<const long long*>(put(p.out_hi.data(), 8 * p.out_hi.size()));
  t.sum_lo = static_cast<const int*>(put(p.sum_lo.data(), 4 * p.sum_lo.size()));
  t.sum_hi = static_cast<const long long*>(put(p.sum_hi.data(), 8 * p.sum_hi.size()));
  t.sum_mid = static_cast<const long long*>(put(p.sum_mid.data(), 8 * p.sum_mid.size()));
  t.cache_lo = static_cast<const int*>(put(p.cache_lo.data(), 4 * p.cache_lo.size()));
  t.refetch = static_cast<const unsigned*>(put(p.refetch.data(), 4 * p.refetch.size()));
  if (const std::int64_t rows = p.out_hi_fill.rows; rows > 0) {
    // out_hi filled here from its strides (p.out_hi is empty), on the same stream as the copies
    if (p.nip % 4 != 0) throw std::logic_error("out_hi_fill: rows of a multiple of 4 expected");
    long long* hi = reinterpret_cast<long long*>(static_cast<char*>(dev) + off);
    off += align16(8 * static_cast<std::size_t>(rows) * p.nip);
    const std::vector<long long> params = fill_params(p);
    const auto* dp = static_cast<const long long*>(put(params.data(), 8 * params.size()));
    const int threads = 256;
    const unsigned blocks =
        static_cast<unsigned>(std::min<std::int64_t>((rows + threads - 1) / threads, 1 << 16));
    fill_offsets_kernel<<<blocks, threads, 0, stream>>>(
        hi, rows, p.nip, static_cast<int>(p.out_hi_fill.card.size()), dp);
    CUDA_CHECK(cudaGetLastError());
    t.out_hi = hi;
  }
  return t;
}

template <class T>
void launch_sum_product(const LaunchPlan& p, const DeviceTables& t, const T* const* in, T* out,
                        T* partial, cudaStream_t stream, bool maximise) {
  const KernelArgs<T> a = make_kernel_args(p, t, in, out, partial, maximise);
  dispatch_nf(p, a, stream, false);
  if (p.variant == Variant::plain && p.splits > 1) {
    const unsigned warps_per_block = 8;
    const unsigned blocks =
        static_cast<unsigned>((p.n_out + warps_per_block - 1) / warps_per_block);
    combine_kernel<T>
        <<<blocks, 32 * warps_per_block, 0, stream>>>(partial, out, p.n_out, p.splits, maximise);
    CUDA_CHECK(cudaGetLastError());
  }
}

template <class T>
void load_kernels(const LaunchPlan& p) {
  dispatch_nf(p, KernelArgs<T>{}, nullptr, true);
  if (p.variant == Variant::plain && p.splits > 1) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, combine_kernel<T>));
  }
}

void load_module() {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, combine_kernel<double>));
}

template <class T>
double measure_element_rate(int nf, cudaStream_t stream) {
  switch (nf) {
    case 1:
      return measure_arith_rate<T, 1, false>(stream);
    case 2:
      return measure_arith_rate<T, 2, false>(stream);
    case 3:
      return measure_arith_rate<T, 3, false>(stream);
    case 4:
      return measure_arith_rate<T, 4, false>(stream);
    case 5:
      return measure_arith_rate<T, 5, false>(stream);
    case 6:
      return measure_arith_rate<T, 6, false>(stream);
    case 7:
      return measure_arith_rate<T, 7, false>(stream);
    default:
      return measure_arith_rate<T, 8, false>(stream);
  }
}

double measure_element_rate_chunked(int nf, cudaStream_t stream) {
  switch (nf) {
    case 1:
      return measure_arith_rate<double, 1, true>(stream);
    case 2:
      return measure_arith_rate<double, 2, true>(stream);
    case 3:
      return measure_arith_rate<double, 3, true>(stream);
    case 4:
      return measure_arith_rate<double, 4, true>(stream);
    case 5:
      return measure_arith_rate<double, 5, true>(stream);
    case 6:
      return measure_arith_rate<double, 6, true>(stream);
    case 7:
      return measure_arith_rate<double, 7, true>(stream);
    default:
      return measure_arith_rate<double, 8, true>(stream);
  }
}

template void launch_sum_product<double>(const LaunchPlan&, const DeviceTables&,
                                         const double* const*, double*, double*, cudaStream_t,
                                         bool);
template void launch_sum_product<float>(const LaunchPlan&, const DeviceTables&, const float* const*,
                                        float*, float*, cudaStream_t, bool);
template void load_kernels<double>(const LaunchPlan&);
template void load_kernels<float>(const LaunchPlan&);
template double measure_element_rate<double>(int, cudaStream_t);
template double measure_element_rate<float>(int, cudaStream_t);

}  // namespace kinfer::gpu
