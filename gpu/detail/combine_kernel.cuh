#pragma once
// The split combine: a plain launch split over its summed range (LaunchPlan::splits) leaves a
// canonical (max, sum) pair per split and output in `partial`; this kernel merges them into the
// output. Private to gpu/: included by sum_product.cu only.
#include <cuda_runtime.h>

#include "gpu/detail/log_sum_exp.cuh"

namespace kinfer::gpu {
namespace {

// One warp per output merges the splits' partial pairs; `maximise`: stores the merged max.
template <class T>
__global__ void combine_kernel(const T* __restrict__ partial, T* __restrict__ out, long long n_out,
                               int splits, bool maximise) {
  __shared__ double tab[64];
  load_exp_table(tab);
  __syncthreads();
  const long long warp = static_cast<long long>(
      (static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  const int lane = threadIdx.x & 31;
  if (warp >= n_out) return;  // whole warps leave together
  T mx = neg_inf(T(0)), acc = 0;
  for (int s = lane; s < splits; s += 32) {
    const long long i = 2 * (static_cast<long long>(s) * n_out + warp);
    lse_merge(mx, acc, partial[i], partial[i + 1], tab);
  }
  lanes_merge(mx, acc, 32, tab);
  if (lane == 0) out[warp] = maximise ? mx : lse_value(mx, acc);
}

}  // namespace
}  // namespace kinfer::gpu
