#pragma once
// The running log-sum-exp of the bucket kernels: a (max, sum) pair per lane, one exp per term,
// out = max + log(sum). Private to gpu/: included by sum_product.cu only.
//
// Two conventions for the pair:
//  * canonical: (-inf, 0) when empty; lse_add, lse_merge, lse_value (expneg). The split combine
//    and the arithmetic-rate probe use it, and every kernel's result is stored in it.
//  * finite: the max starts at the lowest finite value, never -inf, so `max - x` is never NaN and
//    needs no clamp: the sum is >= 1 once a finite term was added (the largest contributes
//    exp(0) = 1), so a sum < 0.5 means every term was -inf. The bucket kernels' inner loops use
//    it (exp_neg_add): each term is compared with the max (one predicate per term, a rarely taken
//    branch once the largest terms were seen) instead of fmax's NaN handling and a rescale.
#include <cuda_runtime.h>

#include "gpu/detail/exp_log.cuh"

namespace kinfer::gpu {
namespace {

// ---- the canonical pair ----

// Adds one term: the smaller of (running max, x) is shifted by the larger, one exp per term.
template <class T>
__device__ __forceinline__ void lse_add(T& mx, T& acc, T x, const double* tab) {
  const T hi = fmax(mx, x), lo = fmin(mx, x);
  const T e = expneg(lo - hi, tab);
  acc = x > mx ? fma(acc, e, T(1)) : acc + e;
  mx = hi;
}

template <class T>
__device__ __forceinline__ void lse_merge(T& mx, T& acc, T mx2, T acc2, const double* tab) {
  const T hi = fmax(mx, mx2), lo = fmin(mx, mx2);
  const T e = expneg(lo - hi, tab);
  acc = mx2 > mx ? fma(acc, e, acc2) : fma(acc2, e, acc);
  mx = hi;
}

template <class T>
__device__ __forceinline__ T lse_value(T mx, T acc) {
  return mx == neg_inf(mx) ? mx : mx + log_of(acc);
}

// Merges the pairs of groups of G consecutive lanes (butterfly); every lane of a group ends with
// the group's pair.
template <class T>
__device__ __forceinline__ void lanes_merge(T& mx, T& acc, int G, const double* tab) {
  for (int d = G >> 1; d > 0; d >>= 1) {
    const T mx2 = __shfl_xor_sync(kFull, mx, d);
    const T acc2 = __shfl_xor_sync(kFull, acc, d);
    lse_merge(mx, acc, mx2, acc2, tab);
  }
}

// ---- the finite pair ----

template <class T>
__device__ __forceinline__ T lse_value_finite(T mx, T acc) {
  return acc < T(0.5) ? neg_inf(mx) : mx + log_of(acc);
}

template <class T>
__device__ __forceinline__ void lse_merge_finite(T& mx, T& acc, T mx2, T acc2, unsigned tab) {
  const T e = exp_neg_add(fabs(mx - mx2), tab, T(0));
  acc = mx2 > mx ? fma(acc, e, acc2) : fma(acc2, e, acc);
  mx = fmax(mx, mx2);
}

// Adds C terms: each is compared with the running max (a predicate), and only when one exceeds
// it (rare once the largest terms were seen) the max moves and the sum is rescaled; then one
// exp and one FMA per term.
template <int C, class T>
__device__ __forceinline__ void lse_chunk(T& mx, T& acc, const T (&x)[C], unsigned tab) {
  bool up = x[0] > mx;
#pragma unroll
  for (int c = 1; c < C; ++c) up |= x[c] > mx;
  if (up) {
    T cm = x[0];
#pragma unroll
    for (int c = 1; c < C; ++c) cm = fmax(cm, x[c]);
    acc *= exp_neg_add(cm - mx, tab, T(0));
    mx = cm;
  }
#pragma unroll
  for (int c = 0; c < C; ++c) acc = exp_neg_add(mx - x[c], tab, acc);
}

// lanes_merge for finite pairs.
template <class T>
__device__ __forceinline__ void lanes_merge_finite(T& mx, T& acc, int G, unsigned tab) {
  for (int d = G >> 1; d > 0; d >>= 1) {
    const T mx2 = __shfl_xor_sync(kFull, mx, d);
    const T acc2 = __shfl_xor_sync(kFull, acc, d);
    lse_merge_finite(mx, acc, mx2, acc2, tab);
  }
}

// A finite pair made canonical, as the split combine and lse_value expect: (-inf, 0) when empty.
template <class T>
__device__ __forceinline__ void finite_to_canonical(T& mx, T& acc) {
  if (acc < T(0.5)) {
    mx = neg_inf(mx);
    acc = 0;
  }
}

// ---- a fixed number of terms, no running pair (the short-sum kernel) ----

// max(x, y) as one compare and select, for values that are finite or -inf (fmax would add its
// NaN handling, 6-8 instructions).
__device__ __forceinline__ double max_select(double x, double y) { return x > y ? x : y; }

// The log-sum-exp of MI terms known at compile time: the knockout round r matches x[i] with
// x[i + 2^r] (i a multiple of 2^(r+1)), the winner kept in x[i], the loser in lo[] (x's values
// in another order: a term is finite or -inf); every index is known once the loops unroll
// (registers), and only the losers take an exp (the winner's exp(0) = 1 starts the sum). A loser
// of -inf adds exp(-708) (the exp's clamp) to 1: nothing; when the winner is -inf every term is,
// and the select drops the NaN of -inf - -inf.
template <int MI>
__device__ __forceinline__ double lse_knockout(double (&x)[MI], unsigned tab_a, unsigned ltab_a) {
  double lo[MI - 1];
  int n_lo = 0;
#pragma unroll
  for (int r = 0; (1 << r) < MI; ++r) {
#pragma unroll
    for (int i = 0; i + (1 << r) < MI; i += 2 << r) {
      const double y = x[i + (1 << r)];
      lo[n_lo++] = x[i] > y ? y : x[i];
      x[i] = max_select(x[i], y);
    }
  }
  const double mx = x[0];
  double acc = 1.0;
#pragma unroll
  for (int k = 0; k < MI - 1; ++k) acc = exp_neg_add(mx - lo[k], tab_a, acc);
  return mx == -INFINITY ? -INFINITY : mx + log_of_sum(acc, ltab_a);
}

}  // namespace
}  // namespace kinfer::gpu
