// The parts of device_api.hpp that need no device.
#include "gpu/device_api.hpp"

#include <cstdlib>

#include "gpu/policy.hpp"

namespace kinfer::gpu {

bool under_cuda_tool() {
  return std::getenv("CUDA_INJECTION64_PATH") || std::getenv("NV_COMPUTE_SANITIZER") ||
         std::getenv("NSYS_PROFILING_SESSION_ID");
}

void set_driver_environment() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 0); }

std::string why_no_kernel(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  return describe(shape, scopes).unsupported;
}

double kernel_plan_host_bytes(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  const BucketLayout lay = describe(shape, scopes);
  if (!lay.unsupported.empty()) return 0;
  try {
    return launch_table_bytes(lay, DeviceLimits{});  // the planner options kinfer's Context uses
  } catch (const std::exception&) {
    return 0;  // no launch takes it: it runs on the CPU
  }
}

}  // namespace kinfer::gpu
