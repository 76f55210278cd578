#pragma once
// The GPU as the rest of kinfer sees it: plain C++, no CUDA type. Implemented in gpu/*.cu when
// CUDA is compiled in, and by gpu/no_cuda.cpp otherwise (probe() then says why there is no GPU).
// Contract between the GPU kernel (gpu/) and the scheduler's executor (scheduler/): the scheduler
// drives a Context from its GPU manager thread; tables stay on the device between buckets.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"  // BucketShape

namespace kinfer::gpu {

struct DeviceInfo {
  bool available = false;
  std::string name;        // e.g. "NVIDIA H100 80GB HBM3"
  std::string why_not;     // when unavailable: "built without CUDA", "no CUDA device", ...
  double memory_bytes = 0;
};

// Never throws.
DeviceInfo probe();

using Handle = std::int64_t;  // a table in device memory

struct DeviceInput {
  Handle table = -1;
  std::vector<int> scope;  // as InputTable::scope: a subsequence of the bucket's vars
};

class Context {
 public:
  // Throws std::runtime_error when no device is usable.
  static std::unique_ptr<Context> create(int device = 0);
  virtual ~Context() = default;

  virtual Handle alloc(std::int64_t entries) = 0;        // throws ResourceError when full
  virtual void release(Handle h) = 0;
  virtual double free_bytes() = 0;
  // Host buffers for asynchronous copies (pinned); free with free_host.
  virtual double* alloc_host(std::int64_t entries) = 0;
  virtual void free_host(double* p) = 0;
  // Asynchronous on `stream` (0..num_streams()-1); ordered within a stream.
  virtual void upload(Handle dst, const double* host, std::int64_t entries, int stream) = 0;
  virtual void download(Handle src, double* host, std::int64_t entries, int stream) = 0;
  virtual void run_bucket(const BucketShape& shape, std::span<const DeviceInput> inputs,
                          Handle out, int stream) = 0;
  virtual void synchronize(int stream) = 0;
  virtual int num_streams() const = 0;
};

}  // namespace kinfer::gpu
