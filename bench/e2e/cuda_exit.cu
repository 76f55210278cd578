// Where a GPU process's start and end go (issue 12, docs/perf-notes.md): the driver's probe,
// the context, a module with kernels, memory, and the exit. Built by hand for the GPU machine:
//   nvcc -O2 -arch=sm_90 -o cuda_exit bench/e2e/cuda_exit.cu
//   cuda_exit MODE [MiB]   MODE: none | count | context | kernel | malloc
// Prints the seconds since the process started at each step; the caller times the whole process
// (the exit is the difference).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void touch(double* p, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) p[i] = i;
}

int main(int argc, char** argv) {
  const auto t0 = std::chrono::steady_clock::now();
  auto now = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const char* mode = argc > 1 ? argv[1] : "none";
  const long mib = argc > 2 ? std::atol(argv[2]) : 0;
  if (!std::strcmp(mode, "none")) return std::printf("none %.4f\n", now()), 0;
  int n = 0;
  cudaGetDeviceCount(&n);
  std::printf("count %.4f (%d)\n", now(), n);
  if (!std::strcmp(mode, "count")) return 0;
  cudaFree(nullptr);
  std::printf("context %.4f\n", now());
  if (!std::strcmp(mode, "context")) return 0;
  double* p = nullptr;
  const long bytes = std::max(1L, mib) << 20;
  cudaMalloc(&p, bytes);
  std::printf("malloc %.4f\n", now());
  touch<<<(bytes / 8 + 255) / 256, 256>>>(p, bytes / 8);
  cudaDeviceSynchronize();
  std::printf("kernel %.4f\n", now());
  if (!std::strcmp(mode, "free")) {
    cudaFree(p);
    cudaDeviceReset();
    std::printf("reset %.4f\n", now());
  }
  return 0;
}
