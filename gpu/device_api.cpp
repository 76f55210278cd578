// The parts of device_api.hpp that need no device.
#include "gpu/device_api.hpp"

#include "gpu/policy.hpp"

namespace kinfer::gpu {

std::string why_no_kernel(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  return describe(shape, scopes).unsupported;
}

}  // namespace kinfer::gpu
