#pragma once
// The short-sum kernel: one thread per output for plain plans of few terms (LaunchPlan::
// lean_chunks: one lane, M <= kLeanMaxTerms, Mh = 1, one split), double, with 1-3 varying inputs
// and output-table rows of 4 or 8 columns. Private to gpu/: included by sum_product.cu only.
//
// On such buckets (up to 2^30 outputs of 2-16 terms) the per-output work outweighs the terms, so
// this kernel cuts it where the plain kernel's one-lane path spends it: the page-local output
// index and the row offsets in 32 bits; each output-table row in one or two 16-byte loads; the
// terms in chunks of four (the last predicated; every load of a chunk before its arithmetic; the
// first chunk's max is the running max, no rescale), or, where the plan's term count is one of
// kLeanFixedTerms, all at once with the max by a knockout (lse_knockout); the max as a compare
// and select (terms are finite or -inf and the running max starts finite: no NaN can arise); and
// the log of the sum by log_of_sum.
#include <cuda_runtime.h>

#include "gpu/detail/log_sum_exp.cuh"
#include "gpu/detail/plain_kernel.cuh"  // fill_sum_columns

namespace kinfer::gpu {
namespace {

// ALL_DIRECT: every varying input holds the summed variables last (its terms consecutive: the
// common case, one summed variable), known at compile time so a term's load is an immediate
// offset from a pointer advanced per chunk; else the direct mask decides per input.
// MI: the number of terms known at compile time, one of kLeanFixedTerms (0: a.Mi at run time,
// in chunks of four). Then the terms are loaded at once and the max found by a knockout, with no
// loop, no predicated empty slots and no running rescale: at M = 2 one exp and the log per
// output, where a chunk would issue the loads and adds of four slots and two exps.
// TD: 0, or a tile of two outputs (an output variable of two values dropped from the items):
// the first TD varying slots hold its variable and load the second output's terms tile_off1[f]
// further, the others are loaded once for both (terms compiled in, every input direct, one
// output a thread).
// OUTS: outputs per thread, a grid-stride apart.
template <int NF, int NIP, int OUTS, bool ALL_DIRECT, int MI = 0, int TD = 0>
__global__ void __launch_bounds__(256, 4)
    short_sum_kernel(const __grid_constant__ KernelArgs<double> a) {
  static_assert(NF >= 1 && NF < NIP && (NIP == 4 || NIP == 8),
                "1-3 varying inputs, rows of 4 or 8");
  static_assert(MI == 0 || (MI >= 2 && MI <= 8), "2-8 terms compiled in");
  static_assert(TD == 0 || (MI > 0 && ALL_DIRECT && OUTS == 1 && TD < NF),
                "a tile: terms compiled in, direct inputs, one output a thread, a shared input");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double tab[64];
  __shared__ double2 ltab[64];
  for (int i = threadIdx.x; i < 64;
       i += blockDim.x) {  // load_exp_table_shifted's copy and the log table's, fused
    tab[i] = __ldg(g_exp2_64_shifted + i);
    ltab[i] = __ldg(g_log_table + i);
  }
  int* sumtab = reinterpret_cast<int*>(smem);
  const int Mi = a.Mi;
  if constexpr (!ALL_DIRECT) fill_sum_columns<double, NF>(a, sumtab);
  __syncthreads();
  const unsigned tab_a = opaque(smem_addr(tab)), ltab_a = smem_addr(ltab);
  const unsigned col0 = smem_addr(sumtab), colstride = 4u * static_cast<unsigned>(Mi);
  const unsigned dmask = a.direct_mask;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long item = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
  for (int u = 0; u < OUTS; ++u, item += stride) {
    if (item >= static_cast<unsigned long long>(a.n_items)) break;
    // pages hold at most 2^31 outputs and number at most 2^20 (the planner): 32-bit parts
    const unsigned long long page = fdiv64(item, a.div_P);
    const unsigned ol = static_cast<unsigned>(item) - static_cast<unsigned>(page) * a.P;
    int4 lv[NIP / 4];
    longlong2 hv[NIP / 2];
    const int4* lr = reinterpret_cast<const int4*>(a.out_lo) + ol * (NIP / 4);
    const longlong2* hr =
        reinterpret_cast<const longlong2*>(a.out_hi) + static_cast<unsigned>(page) * (NIP / 2);
#pragma unroll
    for (int v = 0; v < NIP / 4; ++v) lv[v] = __ldg(lr + v);
#pragma unroll
    for (int v = 0; v < NIP / 2; ++v) hv[v] = __ldg(hr + v);
    // column s's offset (s known at compile time once the loops unroll: registers, no stack)
    auto off = [&](int s) -> long long {
      const int4 l = lv[s >> 2];
      const longlong2 h = hv[s >> 1];
      const int lo = (s & 3) == 0 ? l.x : (s & 3) == 1 ? l.y : (s & 3) == 2 ? l.z : l.w;
      return ((s & 1) ? h.y : h.x) + lo;
    };
    // the constant inputs (slots NF .. n_in - 1) and the output (column n_in)
    double c = 0;
    long long ob = 0;
#pragma unroll
    for (int s = NF; s < NIP; ++s) {
      const long long o = off(s);
      if (s < a.n_in) c += __ldg(a.in[s] + o);
      ob = s == a.n_in ? o : ob;  // a select: a branch let the compiler index the rows at run time
    }
    const double* q[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) q[f] = a.in[f] + off(f);
    if constexpr (MI > 0 && TD > 0) {
      // the tile's second output: its constant part, its place, its terms
      double c1 = 0;
#pragma unroll
      for (int s = NF; s < NIP; ++s)
        if (s < a.n_in) c1 += __ldg(a.in[s] + off(s) + a.tile_all1[s]);
      const long long ob1 = ob + a.tile_all1[a.n_in];
      double x[MI], y[MI];
#pragma unroll
      for (int k = 0; k < MI; ++k) {
        double v = c, w = c1;
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          const double t = __ldg(q[f] + k);
          v += t;
          w += f < TD ? __ldg(q[f] + a.tile_off1[f] + k) : t;
        }
        x[k] = v;
        y[k] = w;
      }
      const double vx = lse_knockout<MI>(x, tab_a, ltab_a);
      const double vy = lse_knockout<MI>(y, tab_a, ltab_a);
      a.out[ob] = a.maximise ? x[0] : vx;  // the knockout leaves the max in x[0]
      a.out[ob1] = a.maximise ? y[0] : vy;
      continue;
    } else if constexpr (MI > 0) {
      double x[MI];
#pragma unroll
      for (int k = 0; k < MI; ++k) {
        double v = c;
#pragma unroll
        for (int f = 0; f < NF; ++f)
          v += __ldg(ALL_DIRECT || (dmask >> f & 1) ? q[f] + k
                                                    : q[f] + lds32(col0 + f * colstride + 4 * k));
        x[k] = v;
      }
      const double v = lse_knockout<MI>(x, tab_a, ltab_a);
      a.out[ob] = a.maximise ? x[0] : v;  // the knockout leaves the max in x[0]
      continue;
    }
    double mx = lowest(0.0), acc = 0;
    const double* p[NF];  // direct inputs: the chunk's first term
#pragma unroll
    for (int f = 0; f < NF; ++f) p[f] = q[f];
    for (int m0 = 0; m0 < Mi; m0 += 4) {
      double x[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const bool valid = m0 + k < Mi;
        double v = c;
#pragma unroll
        for (int f = 0; f < NF; ++f)
          if (valid)
            v += __ldg(ALL_DIRECT || (dmask >> f & 1)
                           ? p[f] + k
                           : q[f] + lds32(col0 + f * colstride + 4 * (m0 + k)));
        x[k] = valid ? v : lowest(0.0);
      }
#pragma unroll
      for (int f = 0; f < NF; ++f) p[f] += 4;
      const double cm = max_select(max_select(x[0], x[1]), max_select(x[2], x[3]));
      if (m0 == 0) {
        mx = max_select(mx, cm);
      } else if (cm > mx) {
        acc *= exp_neg_add(cm - mx, tab_a, 0.0);
        mx = cm;
      }
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (m0 + k < Mi) acc = exp_neg_add(mx - x[k], tab_a, acc);
    }
    // acc >= 1 once a finite term was added; below 0.5 every term was -inf
    a.out[ob] = acc < 0.5                  ? -INFINITY
                : Mi == 1 || a.maximise ? mx
                                        : mx + log_of_sum(acc, ltab_a);
  }
}

}  // namespace
}  // namespace kinfer::gpu
