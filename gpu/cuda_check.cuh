#pragma once
// One macro for every CUDA runtime call: a failure throws with the expression, the function,
// the file and the line, so a log line says exactly which call failed.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "engine/errors.hpp"

namespace kinfer::gpu {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* expr, const char* func,
                                   const char* file, int line) {
  const std::string what = std::string("CUDA error ") + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ") in " + expr + " at " + func + " " + file +
                           ":" + std::to_string(line);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: the context stays usable
    throw DeviceMemoryError(what);
  }
  throw std::runtime_error(what);
}

// Records that this process starts the CUDA driver (driver_started() in device_api.hpp); called
// before the first CUDA call of every way in (gpu/context.cu).
void mark_driver_started();

}  // namespace kinfer::gpu

#define CUDA_CHECK(expr)                                                               \
  do {                                                                                 \
    const cudaError_t kinfer_cuda_err_ = (expr);                                       \
    if (kinfer_cuda_err_ != cudaSuccess)                                               \
      ::kinfer::gpu::cuda_fail(kinfer_cuda_err_, #expr, __func__, __FILE__, __LINE__); \
  } while (0)
