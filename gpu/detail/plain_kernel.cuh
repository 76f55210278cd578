#pragma once
// The plain bucket kernel: inputs read from global memory through L1/L2 (no staging), any bucket
// the layout supports; the summed range may be split over blocks (few outputs, many terms: the
// splits' pairs are merged by combine_kernel). Private to gpu/: included by sum_product.cu only.
//
// One item = (output, split); 2^lanes_log2 lanes per item read interleaved summed steps, in
// chunks of four terms (lse_chunk). The inner summed block's offset table sits in shared memory
// column by column (a 4-byte load per input and term, consecutive lanes on consecutive words),
// and inputs holding every inner summed variable (direct_mask) are read at mi itself, without
// the table. The integer work per term is kept small (counted in the machine code): each input's
// row pointer and the lane's offset-column address are opaque registers (kernel_args.cuh), the
// column address advancing by 16 G bytes per chunk with the columns a uniform stride apart.
//
// Template parameters: GC, the lanes per item known at compile time (1: one lane, compiled for 4
// blocks per SM, LaunchPlan::lean; 32, 8 and 4: the four terms' addresses then differ by
// immediates) or 0 (a run-time count); TD, a tile of two configurations (LaunchPlan::tile) whose
// variable the first TD varying slots hold; OUTS, outputs per thread.
#include <cuda_runtime.h>

#include "gpu/detail/log_sum_exp.cuh"

namespace kinfer::gpu {
namespace {

// Blocks per SM the kernel is compiled for (registers): a tile's second chain needs more; the
// one-lane kernel of at most kLeanMaxVarying inputs fits 64 registers, so 4.
template <int NF, int R = 1, int GC = 0>
constexpr int plain_min_blocks() {
  return NF > 8 ? 1 : R > 1 ? 2 : GC == 1 && NF <= kLeanMaxVarying ? 4 : NF <= 4 ? 3 : 2;
}

// One row (mh) of the lane's summed steps. MODE 1: every input direct; 2: none; 0: direct_mask.
template <class T, int NF, int GC, int MODE>
__device__ __forceinline__ void plain_row(const T* const (&rp)[NF], T c, int g, int G, int Mi,
                                          unsigned col0, unsigned colstride, unsigned dmask, T& mx,
                                          T& acc, unsigned tab_a) {
  auto direct = [&](int f) { return MODE == 1 || (MODE == 0 && (dmask >> f & 1)); };
  int mi = g;
  unsigned ad = col0;
  for (; mi + 3 * G < Mi; mi += 4 * G, ad += 16 * G) {
    T x[4] = {c, c, c, c};
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      if (direct(f)) {
        const T* p = rp[f] + mi;
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] += __ldg(p + k * G);
      } else {
        const unsigned af = ad + f * colstride;
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] += __ldg(rp[f] + lds32(af + 4 * k * G));
      }
    }
    lse_chunk<4>(mx, acc, x, tab_a);
  }
  for (; mi < Mi; mi += G, ad += 4 * G) {
    T x[1] = {c};
#pragma unroll
    for (int f = 0; f < NF; ++f)
      x[0] += __ldg(rp[f] + (direct(f) ? mi : lds32(ad + f * colstride)));
    lse_chunk<1>(mx, acc, x, tab_a);
  }
}

// One row of the tiled kernel: the lane's summed steps for two configurations of a binary tile
// variable (two outputs, or two summed configurations of one output). The first TD varying
// slots hold the tile variable and load a second value toff[f] further; the others are loaded
// once and added to both, and the offset column is read once for both.
template <class T, int NF, int GC, int MODE, int TD>
__device__ __forceinline__ void plain_row_tiled(const T* const (&rp)[NF], T c0, T c1, int g, int G,
                                                int Mi, unsigned col0, unsigned colstride,
                                                unsigned dmask, const int* toff, T (&mx)[2],
                                                T (&acc)[2], unsigned tab_a) {
  auto direct = [&](int f) { return MODE == 1 || (MODE == 0 && (dmask >> f & 1)); };
  int mi = g;
  unsigned ad = col0;
  for (; mi + 3 * G < Mi; mi += 4 * G, ad += 16 * G) {
    T x[4] = {c0, c0, c0, c0}, y[4] = {c1, c1, c1, c1};
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      if (direct(f)) {
        const T* p = rp[f] + mi;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const T v = __ldg(p + k * G);
          x[k] += v;
          y[k] += f < TD ? __ldg(p + k * G + toff[f]) : v;
        }
      } else {
        const unsigned af = ad + f * colstride;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const T* p = rp[f] + lds32(af + 4 * k * G);
          const T v = __ldg(p);
          x[k] += v;
          y[k] += f < TD ? __ldg(p + toff[f]) : v;
        }
      }
    }
    lse_chunk<4>(mx[0], acc[0], x, tab_a);
    lse_chunk<4>(mx[1], acc[1], y, tab_a);
  }
  for (; mi < Mi; mi += G, ad += 4 * G) {
    T x[1] = {c0}, y[1] = {c1};
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      const T* p = rp[f] + (direct(f) ? mi : lds32(ad + f * colstride));
      const T v = __ldg(p);
      x[0] += v;
      y[0] += f < TD ? __ldg(p + toff[f]) : v;
    }
    lse_chunk<1>(mx[0], acc[0], x, tab_a);
    lse_chunk<1>(mx[1], acc[1], y, tab_a);
  }
}

// The inner summed block's offset table in shared memory, column by column ([f][Mi]: a 4-byte
// load per input and term, consecutive lanes on consecutive words); the columns of direct
// inputs (read at mi itself) are left unwritten.
template <class T, int NF>
__device__ __forceinline__ void fill_sum_columns(const KernelArgs<T>& a, int* sumtab) {
#pragma unroll
  for (int f = 0; f < NF; ++f)
    if (!(a.direct_mask >> f & 1))
      for (int i = threadIdx.x; i < a.Mi; i += blockDim.x)
        sumtab[f * a.Mi + i] = __ldg(a.sum_lo + i * a.nfp + f);
}

// TD: 0 untiled; 1 or 2: a tile of two configurations, TD varying slots holding its variable.
// OUTS (one lane, untiled): outputs per thread, a grid-stride apart (LaunchPlan::outs: two
// independent chains of dependent loads per thread).
template <class T, int NF, int GC, int TD, int OUTS = 1>
__global__ void __launch_bounds__(256, plain_min_blocks<NF, TD ? 2 : 1, GC>())
    plain_kernel(const __grid_constant__ KernelArgs<T> a) {
  static_assert(OUTS == 1 || (GC == 1 && TD == 0), "several outputs per thread: one lane, untiled");
  constexpr int R = TD ? 2 : 1;
  static_assert(TD <= NF, "the tile's slots are varying slots");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double tab[64];
  load_exp_table_shifted(tab);
  int* sumtab = reinterpret_cast<int*>(smem);
  const int Mi = a.Mi;
  fill_sum_columns<T, NF>(a, sumtab);
  __syncthreads();
  const unsigned tab_a = opaque(smem_addr(tab));
  const int G = GC ? GC : 1 << a.lanes_log2;
  const unsigned long long stride =
      OUTS > 1 ? static_cast<unsigned long long>(gridDim.x) * blockDim.x : 0;
#pragma unroll
  for (int u = 0; u < OUTS; ++u) {
    const unsigned long long gid =
        static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x + u * stride;
    const long long item = static_cast<long long>(gid >> a.lanes_log2);
    const int g = static_cast<int>(gid & (G - 1));
    const bool active = item < a.n_items * a.splits;
    T mx[R], acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      mx[r] = lowest(T(0));
      acc[r] = 0;
    }
    long long obase = 0, sp = 0;
    if (active) {
      sp = a.splits == 1 ? 0 : static_cast<long long>(fdiv64(item, a.div_items));
      const long long o = item - sp * a.n_items;
      const long long page = static_cast<long long>(fdiv64(o, a.div_P));
      const long long ol = o - page * a.P;
      const int* lo = a.out_lo + ol * a.nip;
      const long long* hi = a.out_hi + page * a.nip;
      obase = hi[a.n_in] + lo[a.n_in];
      T c = 0, c1 = 0;
      for (int s = NF; s < a.n_in; ++s) {
        const T* p = a.in[s] + hi[s] + lo[s];
        c += __ldg(p);
        if constexpr (R == 2) c1 += __ldg(p + a.tile_all1[s]);
      }
      const long long mh0 = sp * a.mh_per_split;
      const long long mh1 = min(a.Mh, mh0 + a.mh_per_split);
      if constexpr (NF == 0) {
        // nothing varies with m: the lane's terms are all c
        const long long per = (Mi - g + G - 1) / G;
        const T cnt = static_cast<T>(per * (mh1 - mh0));
        if (cnt > 0 && c != neg_inf(c)) {
          mx[0] = c;
          acc[0] = cnt;
        }
      } else {
        const T* q[NF];
#pragma unroll
        for (int f = 0; f < NF; ++f) q[f] = a.in[f] + hi[f] + lo[f];
        const unsigned col0 = opaque(smem_addr(sumtab + g));  // column 0, the lane's first entry
        const unsigned colstride = 4u * static_cast<unsigned>(Mi);
        // mh = mt * Mh2 + mm: one division per thread, then a carry per row
        long long mm = mh0 % a.Mh2;
        const long long* top = a.sum_hi + (mh0 / a.Mh2) * a.nfp;
        const long long* mid = a.sum_mid + mm * a.nfp;
        for (long long mh = mh0; mh < mh1; ++mh) {
          const T* rp[NF];
#pragma unroll
          for (int f = 0; f < NF; ++f) rp[f] = opaque(q[f] + (__ldg(top + f) + __ldg(mid + f)));
          mid += a.nfp;
          if (++mm == a.Mh2) {
            mm = 0;
            mid = a.sum_mid;
            top += a.nfp;
          }
          const T* const(&rpc)[NF] = rp;
          // every input direct, none, or a mix (a uniform branch per row, not per term: with the
          // mix the compiler predicates both paths of each input, so the pure cases get their own)
          if constexpr (R == 1) {
            if (a.direct_mask == (1u << NF) - 1)
              plain_row<T, NF, GC, 1>(rpc, c, g, G, Mi, col0, colstride, 0, mx[0], acc[0], tab_a);
            else if (a.direct_mask == 0)
              plain_row<T, NF, GC, 2>(rpc, c, g, G, Mi, col0, colstride, 0, mx[0], acc[0], tab_a);
            else
              plain_row<T, NF, GC, 0>(rpc, c, g, G, Mi, col0, colstride, a.direct_mask, mx[0],
                                      acc[0], tab_a);
          } else {
            if (a.direct_mask == (1u << NF) - 1)
              plain_row_tiled<T, NF, GC, 1, TD>(rpc, c, c1, g, G, Mi, col0, colstride, 0,
                                                a.tile_off1, mx, acc, tab_a);
            else if (a.direct_mask == 0)
              plain_row_tiled<T, NF, GC, 2, TD>(rpc, c, c1, g, G, Mi, col0, colstride, 0,
                                                a.tile_off1, mx, acc, tab_a);
            else
              plain_row_tiled<T, NF, GC, 0, TD>(rpc, c, c1, g, G, Mi, col0, colstride,
                                                a.direct_mask, a.tile_off1, mx, acc, tab_a);
          }
        }
      }
    }
    // a summed tile is one output: its two configurations' pairs merge first
    const bool summed = R == 2 && a.tile_summed;
    if (summed) lse_merge_finite(mx[0], acc[0], mx[R - 1], acc[R - 1], tab_a);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r > 0 && summed) break;
      lanes_merge_finite(mx[r], acc[r], G, tab_a);
      finite_to_canonical(mx[r], acc[r]);
      if (active && g == 0) {
        const long long ob = obase + (r > 0 ? a.tile_all1[a.n_in] : 0);
        if (a.splits == 1) {
          a.out[ob] = a.maximise ? mx[r] : lse_value(mx[r], acc[r]);
        } else {
          a.partial[2 * (sp * a.n_out + ob)] = mx[r];
          a.partial[2 * (sp * a.n_out + ob) + 1] = acc[r];
        }
      }
    }
  }
}

}  // namespace
}  // namespace kinfer::gpu
