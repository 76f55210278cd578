#pragma once
// The cached bucket kernel: the software-managed cache of papers 000/001. Private to gpu/:
// included by sum_product.cu only.
//
// A block owns consecutive cache pages (P consecutive outputs each) and stages the segments of
// the cached inputs in shared memory, transposed to [summed index][output row] so the threads of
// a warp read consecutive words; a segment is restaged only when the CPU-made refetch table says
// the page changed it. Terms in chunks of four (lse_chunk), as the plain kernel.
#include <cuda_runtime.h>

#include "gpu/detail/log_sum_exp.cuh"

namespace kinfer::gpu {
namespace {

template <class T, int NF, bool ALL_CACHED>
__global__ void __launch_bounds__(256, 4) cached_kernel(const __grid_constant__ KernelArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double tab[64];
  load_exp_table_shifted(tab);
  T* cache = reinterpret_cast<T*>(smem);
  int* sumtab = reinterpret_cast<int*>(smem + a.sum_table_offset);
  const int rows = a.Mi * a.nfp;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) sumtab[i] = __ldg(a.sum_lo + i);
  // (both made visible by the barrier after the first page's staging: every block stages first)
  const unsigned tab_a = opaque(smem_addr(tab));
  const int G = 1 << a.lanes_log2;
  const int g = threadIdx.x & (G - 1);
  const int item0 = threadIdx.x >> a.lanes_log2;
  const int per_pass = blockDim.x >> a.lanes_log2;
  const long long first = static_cast<long long>(blockIdx.x) * a.pages_per_block;
  const long long last = min(a.n_pages, first + a.pages_per_block);
  for (long long page = first; page < last; ++page) {
    const long long* hi = a.out_hi + page * a.nip;
    const unsigned bits = page == first ? a.cached_mask : __ldg(a.refetch + page);
    if (bits) {
      __syncthreads();  // everyone is done with the segments about to be overwritten
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        if (!(bits >> f & 1)) continue;
        const T* src = a.in[f] + hi[f];
        T* dst = cache + a.seg_off[f];
        const int mf = a.m_f[f], pitch = a.pitch[f], n = a.seg_size[f];
        const DevDiv d = a.div_mf[f];
        // coalesced global reads; transposed so the compute loop's warp reads are contiguous
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
          const int lo = fdiv(e, d);
          dst[(e - lo * mf) * pitch + lo] = __ldg(src + e);
        }
      }
      __syncthreads();
    }
    for (int base = 0; base < static_cast<int>(a.P); base += per_pass) {
      const int ol = base + item0;
      const bool active = ol < static_cast<int>(a.P);
      T mx = lowest(T(0)), acc = 0;
      if (active) {
        const int* lo = a.out_lo + static_cast<long long>(ol) * a.nip;
        const int* clo = a.cache_lo + static_cast<long long>(ol) * a.nfp;
        const T c = const_part(a, NF, lo, hi);
        const T* q[NF];
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          if (ALL_CACHED || (a.cached_mask >> f & 1))
            q[f] = cache + a.seg_off[f] + clo[f];
          else
            q[f] = a.in[f] + hi[f] + clo[f];
        }
        auto term = [&](int m) {
          int idx[NF];
          load_row<NF>(sumtab + m * a.nfp, idx);
          T x = c;
#pragma unroll
          for (int f = 0; f < NF; ++f) x += q[f][idx[f]];
          return x;
        };
        int m = g;
        for (; m + 3 * G < a.Mi; m += 4 * G) {
          const T x[4] = {term(m), term(m + G), term(m + 2 * G), term(m + 3 * G)};
          lse_chunk<4>(mx, acc, x, tab_a);
        }
        for (; m < a.Mi; m += G) {
          const T x[1] = {term(m)};
          lse_chunk<1>(mx, acc, x, tab_a);
        }
      }
      lanes_merge_finite(mx, acc, G, tab_a);
      finite_to_canonical(mx, acc);
      if (active && g == 0) a.out[page * a.P + ol] = a.maximise ? mx : lse_value(mx, acc);
    }
  }
}

}  // namespace
}  // namespace kinfer::gpu
