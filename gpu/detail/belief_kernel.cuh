#pragma once
// Context::belief_sums: a bucket's belief summed onto several targets in one pass over its
// configurations (gpu/belief_plan.hpp says how a configuration is split and read). Private to
// gpu/: included by sum_product.cu only.
#include <cuda_runtime.h>
#include <math_constants.h>

#include "gpu/sum_product.cuh"

namespace kinfer::gpu {
namespace {

constexpr int kBeliefThreads = 256;

// A block takes a contiguous range of tiles. Per tile: the tables' bases (a thread per table;
// the hi part recomputed when h changes), the tile's beliefs into shared memory (a thread per
// entry: the inputs' sum, exponentiated against ln_total), then each target's entries in its
// `order`, a key's entries adjacent: a warp adds up each run of one key (a segmented scan over
// shuffles) and its last lane adds the run onto the target, in shared memory for the targets
// kept there (added onto the device table when the block ends), else with an atomic add. Entries
// of zero belief add nothing.
__global__ void __launch_bounds__(kBeliefThreads) belief_kernel(const BeliefArgs a) {
  extern __shared__ double shared[];
  double* belief = shared;          // [inner]
  double* kept = shared + a.inner;  // [shared_entries]
  __shared__ long long base[kBeliefMaxTables];
  const int n_tab = a.n_in + a.n_t;
  const int tid = threadIdx.x, lane = tid & 31;
  const unsigned all = 0xffffffffu;
  for (int i = tid; i < a.shared_entries; i += blockDim.x) kept[i] = 0;
  const long long first = a.outer * blockIdx.x / gridDim.x;
  const long long last = a.outer * (blockIdx.x + 1) / gridDim.x;
  long long hi_h = -1, hi_base = 0;  // thread tid < n_tab: table tid's hi part for h = hi_h
  for (long long o = first; o < last; ++o) {
    const long long h = o / a.lo;
    const int l = static_cast<int>(o - h * a.lo);
    if (tid < n_tab) {
      if (h != hi_h) {
        long long rest = h, b = 0;
        for (int v = a.n_hi - 1; v >= 0; --v) {
          const long long c = a.hi_card[v];
          b += (rest % c) * a.hi_stride[tid * a.n_hi + v];
          rest /= c;
        }
        hi_base = b, hi_h = h;
      }
      base[tid] = hi_base + a.lo_off[tid * a.lo + l];
    }
    __syncthreads();
    for (int j = tid; j < a.inner; j += blockDim.x) {
      double x = 0;
      for (int s = 0; s < a.n_in; ++s) x += __ldg(a.in[s] + base[s] + a.in_off[s * a.inner + j]);
      belief[j] = exp(x - a.ln_total);
    }
    __syncthreads();
    for (int t = 0; t < a.n_t; ++t) {
      const int per = a.per[t];
      const int* at = a.at + a.at_first[t];
      const short* order = a.order + static_cast<long long>(t) * a.inner;
      double* to = a.shared_at[t] >= 0 ? kept + a.shared_at[t] : a.acc[t] + base[a.n_in + t];
      for (int q0 = 0; q0 < a.inner; q0 += blockDim.x) {
        const int q = q0 + tid;
        const bool valid = q < a.inner;
        double v = valid ? belief[order[q]] : 0.0;
        const int key = valid ? q / per : -1;
        if (per > 1)
          for (int d = 1; d < 32; d <<= 1) {
            const double u = __shfl_up_sync(all, v, d);
            const int k = __shfl_up_sync(all, key, d);
            if (lane >= d && k == key) v += u;
          }
        const int next = __shfl_down_sync(all, key, 1);
        if (valid && (lane == 31 || next != key) && v != 0) atomicAdd(to + at[key], v);
      }
    }
    __syncthreads();
  }
  for (int t = 0; t < a.n_t; ++t) {
    if (a.shared_at[t] < 0) continue;
    const double* from = kept + a.shared_at[t];
    const int n = a.inner / a.per[t];  // an inner-only target's entries are its keys
    for (int k = tid; k < n; k += blockDim.x)
      if (from[k] != 0) atomicAdd(a.acc[t] + k, from[k]);
  }
}

// t[i] = ln t[i] + ln_total, -inf where t[i] is 0.
__global__ void belief_log_kernel(double* t, long long n, double ln_total) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    t[i] = t[i] > 0 ? log(t[i]) + ln_total : -CUDART_INF;
}

}  // namespace
}  // namespace kinfer::gpu
