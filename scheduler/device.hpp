#pragma once
// Opening the GPU for the scheduler, with the reason when there is none (logged by callers:
// "no GPU (built without CUDA): every bucket runs on the CPU").
#include <memory>
#include <string>

#include "gpu/device_api.hpp"

namespace kinfer::sched {

struct OpenedDevice {
  std::unique_ptr<gpu::Context> ctx;  // null when there is no usable GPU
  std::string name;                   // the GPU's name, or why there is none
};

// Never throws.
OpenedDevice open_gpu();

}  // namespace kinfer::sched
