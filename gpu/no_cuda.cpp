// The GPU half when kinfer is built without CUDA (-Dcuda=disabled, or no nvcc with
// -Dcuda=auto): probe() says why, and everything that would need a device throws, so callers
// fall back to the CPU with that reason.
#include <stdexcept>

#include "gpu/chain_api.hpp"
#include "gpu/detail/nvml_list.hpp"
#include "gpu/device_api.hpp"
#include "gpu/host_run.hpp"

namespace kinfer::gpu {

namespace {
constexpr const char* kWhy = "built without CUDA";
}

DeviceInfo probe() {
  DeviceInfo info;
  info.why_not = kWhy;
  return info;
}

DeviceInfo detail::probe_runtime() { return probe(); }

bool likely_present() { return false; }

bool driver_started() { return false; }

bool see_only(int) { return false; }
bool several_visible() { return false; }

std::unique_ptr<Context> Context::create(int, const PlannerOptions&) {
  throw std::runtime_error(kWhy);
}

HostRunResult run_host_bucket(Context&, const BucketShape&, std::span<const InputTable>,
                              const HostRunOptions&) {
  throw std::runtime_error(kWhy);
}

Ceilings measure_ceilings(Context&) { throw std::runtime_error(kWhy); }

std::unique_ptr<linkage::ChainBackend> make_gpu_chain(const linkage::ChainLayout&, double) {
  throw std::runtime_error(kWhy);
}

}  // namespace kinfer::gpu
