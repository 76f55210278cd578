// Where a GPU process's start and end go (issue 12, docs/perf-notes.md): the driver's probe,
// the context, a module with kernels, memory, and the exit. Built by hand for the GPU machine:
//   nvcc -O2 -arch=sm_90 -o cuda_exit bench/e2e/cuda_exit.cu
//   cuda_exit MODE [MiB]   MODE: none | count | context | kernel | malloc | firsts
// firsts: after the context, each first use a kinfer GPU run makes (memory info, streams, a
// 64 MiB and an 8 MiB cudaMalloc, pinned blocks, a pageable and a pinned upload, events, a
// kernel's first and second launch), timed one by one.
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
  if (!std::strcmp(mode, "firsts")) {
    double last = now();
    auto step = [&](const char* what) {
      const double t = now();
      std::printf("%s %.2f ms\n", what, 1e3 * (t - last));
      last = now();
    };
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    step("memgetinfo");
    cudaStream_t s1, s2;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    step("streams");
    void *d1 = nullptr, *d2 = nullptr, *d3 = nullptr;
    cudaMalloc(&d1, 64 << 20);
    step("malloc64M-first");
    cudaMalloc(&d2, 8 << 20);
    step("malloc8M");
    cudaMalloc(&d3, 64 << 20);
    step("malloc64M-second");
    void *h1 = nullptr, *h2 = nullptr, *h3 = nullptr;
    cudaMallocHost(&h1, 300 << 10);
    step("mallochost300K-first");
    cudaMallocHost(&h2, 300 << 10);
    step("mallochost300K-second");
    cudaMallocHost(&h3, 4 << 20);
    step("mallochost4M");
    static char pageable[300 << 10];
    for (int k = 0; k < 78; ++k)
      cudaMemcpyAsync(static_cast<char*>(d1) + k * 4096, pageable + k * 3900, 3900,
                      cudaMemcpyHostToDevice, s1);
    step("pageable-78-copies-queued");
    cudaStreamSynchronize(s1);
    step("pageable-sync");
    for (int k = 0; k < 78; ++k)
      cudaMemcpyAsync(static_cast<char*>(d1) + k * 4096, static_cast<char*>(h1) + k * 3900, 3900,
                      cudaMemcpyHostToDevice, s1);
    step("pinned-78-copies-queued");
    cudaStreamSynchronize(s1);
    step("pinned-sync");
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    step("event");
    touch<<<1024, 256>>>(static_cast<double*>(d1), 1 << 18);
    step("kernel-first-launch");
    cudaStreamSynchronize(0);
    step("kernel-first-sync");
    touch<<<1024, 256>>>(static_cast<double*>(d1), 1 << 18);
    cudaStreamSynchronize(0);
    step("kernel-second");
    std::printf("firsts-end %.4f\n", now());
    return 0;
  }
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
