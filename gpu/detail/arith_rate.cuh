#pragma once
// The compute ceiling of the roofline: elements per second of the bucket kernels' inner-loop
// arithmetic with every operand in registers (no memory traffic at all). Private to gpu/:
// included by sum_product.cu only.
//
// Each probe flips the lowest mantissa bit of each operand per term (an integer op, as the real
// loop's address arithmetic) so nothing can be hoisted, while the floating-point work per term
// is exactly the kernels': NF adds and the log-sum-exp step.
#include <cuda_runtime.h>

#include <algorithm>

#include "gpu/cuda_check.cuh"
#include "gpu/detail/log_sum_exp.cuh"

namespace kinfer::gpu {
namespace {

__device__ __forceinline__ double flip(double v) {
  return __longlong_as_double(__double_as_longlong(v) ^ 1);
}
__device__ __forceinline__ float flip(float v) { return __int_as_float(__float_as_int(v) ^ 1); }

// The canonical pair's arithmetic on register operands: one term at a time (lse_add, expneg).
template <class T, int NF>
__global__ void __launch_bounds__(256) arith_rate_kernel(T* out, int iters, T seed) {
  __shared__ double tab[64];
  load_exp_table(tab);
  __syncthreads();
  T v[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) v[f] = seed * (threadIdx.x % 7 + f + 1);
  T mx = neg_inf(T(0)), acc = 0;
#pragma unroll 4
  for (int i = 0; i < iters; ++i) {
    T x = seed;  // the constant part of the real loop
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      x += v[f];
      v[f] = flip(v[f]);
    }
    lse_add(mx, acc, x, tab);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = lse_value(mx, acc);
}

// The bucket kernels' arithmetic on register operands: terms in chunks of four (lse_chunk,
// exp_neg_add), the finite pair, as their inner loops.
template <class T, int NF>
__global__ void __launch_bounds__(256) arith_rate_chunked_kernel(T* out, int iters, T seed) {
  __shared__ double tab[64];
  load_exp_table_shifted(tab);
  __syncthreads();
  const unsigned tab_a = opaque(smem_addr(tab));
  T v[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) v[f] = seed * (threadIdx.x % 7 + f + 1);
  T mx = lowest(T(0)), acc = 0;
  for (int i = 0; i < iters; i += 4) {
    T x[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      x[c] = seed;
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        x[c] += v[f];
        v[f] = flip(v[f]);
      }
    }
    lse_chunk(mx, acc, x, tab_a);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = lse_value_finite(mx, acc);
}

template <class T, int NF, bool CHUNKED>
// Elements per second of the probe over the whole device (the best of four timed runs after a
// warm-up run).
double measure_arith_rate(cudaStream_t stream) {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int blocks = sms * 8, threads = 256, iters = 4096;
  T* out = nullptr;
  CUDA_CHECK(cudaMallocAsync(&out, sizeof(T) * blocks * threads, stream));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0, stream));
    if constexpr (CHUNKED)
      arith_rate_chunked_kernel<T, NF><<<blocks, threads, 0, stream>>>(out, iters, T(-0.5));
    else
      arith_rate_kernel<T, NF><<<blocks, threads, 0, stream>>>(out, iters, T(-0.5));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0) best = std::min(best, ms);  // the first run warms up
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaFreeAsync(out, stream));
  return static_cast<double>(blocks) * threads * iters / (best * 1e-3);
}

}  // namespace
}  // namespace kinfer::gpu
