#pragma once
// Listing the GPUs through NVML (the driver's management library, loaded at run time) instead
// of the CUDA runtime: NVML reads the devices' names, memory and compute capability without
// starting the CUDA driver in this process, which takes about a second with four GPUs visible
// (`kinfer info --device gpu` on a 4-H200 host: 1.3-1.4 s through the runtime, 0.25 s through
// NVML; docs/performance.md). `kinfer info`, the batch's supervisor and its order searches
// only need the list; the processes that compute start the driver on their GPU themselves.
#include <optional>

#include "gpu/device_api.hpp"

namespace kinfer::gpu::detail {

// The devices the CUDA runtime would list, or nullopt whenever NVML cannot say so for certain;
// the caller then asks the runtime (probe()). nullopt when: libnvidia-ml is missing or fails to
// start; the driver supports an older CUDA than `runtime_version` (CUDART_VERSION: the runtime
// then explains); any device is in MIG mode or older than compute capability 7.0; the devices
// differ in name (the runtime's order, fastest first, need not be NVML's PCI order); or
// CUDA_VISIBLE_DEVICES names devices by UUID, MIG instance, or any form other than a list of
// indices (which both number in PCI order when the devices are alike).
std::optional<DeviceInfo> list_by_nvml(int runtime_version);

// The list from the CUDA runtime (starting the driver on every visible device): probe()'s
// answer when NVML has none, and the reference list_by_nvml is tested against.
DeviceInfo probe_runtime();

}  // namespace kinfer::gpu::detail
