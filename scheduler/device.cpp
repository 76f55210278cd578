#include "scheduler/device.hpp"

#include <exception>

namespace kinfer::sched {

OpenedDevice open_gpu() {
  OpenedDevice d;
  const gpu::DeviceInfo info = gpu::probe();
  if (!info.available) {
    d.name = info.why_not.empty() ? "no GPU" : info.why_not;
    return d;
  }
  try {
    d.ctx = gpu::Context::create(0);
    d.name = info.name;
  } catch (const std::exception& e) {
    d.ctx.reset();
    d.name = std::string("the GPU could not be opened: ") + e.what();
  }
  return d;
}

}  // namespace kinfer::sched
