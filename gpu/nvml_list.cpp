// gpu::detail::list_by_nvml: the GPUs from NVML, loaded with dlopen (kinfer does not link it:
// a machine without the NVIDIA driver runs kinfer on the CPU). The few NVML entry points used
// are declared here with their C signatures (nvml.h is not part of the CUDA toolkit's runtime
// headers everywhere); they are stable across driver versions.
#include "gpu/detail/nvml_list.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace kinfer::gpu::detail {

namespace {

using NvmlDevice = void*;
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct NvmlMemoryV2 {  // nvmlMemory_v2_t: `reserved` is the driver's, never the runtime's
  unsigned version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kNvmlMemoryV2 = sizeof(NvmlMemoryV2) | (2u << 24);
constexpr int kNvmlSuccess = 0;

// NVML's library, opened once per call and closed with it (nvmlShutdown before dlclose).
class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    init_ = sym<int (*)()>("nvmlInit_v2");
    shutdown_ = sym<int (*)()>("nvmlShutdown");
    count = sym<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
    handle = sym<int (*)(unsigned, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2");
    name = sym<int (*)(NvmlDevice, char*, unsigned)>("nvmlDeviceGetName");
    memory = sym<int (*)(NvmlDevice, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
    memory_v2 = sym<int (*)(NvmlDevice, NvmlMemoryV2*)>("nvmlDeviceGetMemoryInfo_v2");
    capability = sym<int (*)(NvmlDevice, int*, int*)>("nvmlDeviceGetCudaComputeCapability");
    driver_cuda = sym<int (*)(int*)>("nvmlSystemGetCudaDriverVersion_v2");
    mig_mode = sym<int (*)(NvmlDevice, unsigned*, unsigned*)>("nvmlDeviceGetMigMode");
    started_ = init_ && shutdown_ && count && handle && name && memory && capability &&
               driver_cuda && init_() == kNvmlSuccess;
  }
  ~Nvml() {
    if (started_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool ready() const { return started_; }

  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, NvmlDevice*) = nullptr;
  int (*name)(NvmlDevice, char*, unsigned) = nullptr;
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  int (*memory_v2)(NvmlDevice, NvmlMemoryV2*) = nullptr;  // absent on old drivers
  int (*capability)(NvmlDevice, int*, int*) = nullptr;
  int (*driver_cuda)(int*) = nullptr;
  int (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;  // absent on old drivers

 private:
  template <class F>
  F sym(const char* s) {
    return reinterpret_cast<F>(dlsym(lib_, s));
  }
  void* lib_ = nullptr;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  bool started_ = false;
};

// CUDA_VISIBLE_DEVICES as device indices (in its order, stopping at the first index out of
// range, as the runtime does); nullopt when it is set in another form.
std::optional<std::vector<unsigned>> visible_indices(unsigned n) {
  std::vector<unsigned> all;
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v) {
    for (unsigned d = 0; d < n; ++d) all.push_back(d);
    return all;
  }
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || !std::all_of(item.begin(), item.end(),
                                     [](unsigned char c) { return std::isdigit(c); }))
      return std::nullopt;
    const unsigned long d = std::stoul(item);
    if (d >= n) break;
    for (unsigned seen : all)
      if (seen == d) return std::nullopt;  // a repeated index: the runtime's rules decide
    all.push_back(static_cast<unsigned>(d));
  }
  if (all.empty()) return std::nullopt;  // every device hidden: the runtime says so
  return all;
}

}  // namespace

std::optional<DeviceInfo> list_by_nvml(int runtime_version) {
  Nvml nvml;
  if (!nvml.ready()) return std::nullopt;
  int driver = 0;
  if (nvml.driver_cuda(&driver) != kNvmlSuccess || driver < runtime_version) return std::nullopt;
  unsigned n = 0;
  if (nvml.count(&n) != kNvmlSuccess || n == 0) return std::nullopt;
  const auto visible = visible_indices(n);
  if (!visible) return std::nullopt;
  DeviceInfo info;
  for (unsigned d : *visible) {
    NvmlDevice dev = nullptr;
    char name[96] = {};
    NvmlMemory mem{};
    int major = 0, minor = 0;
    if (nvml.handle(d, &dev) != kNvmlSuccess || nvml.name(dev, name, sizeof name) != kNvmlSuccess ||
        nvml.memory(dev, &mem) != kNvmlSuccess ||
        nvml.capability(dev, &major, &minor) != kNvmlSuccess || major < 7)
      return std::nullopt;
    unsigned mig = 0, pending = 0;
    if (!nvml.mig_mode || nvml.mig_mode(dev, &mig, &pending) == kNvmlSuccess) {
      if (mig != 0) return std::nullopt;
    }
    if (!info.devices.empty() && info.devices.front().name != name) return std::nullopt;
    // The runtime's total memory leaves out what the driver reserves: total - reserved.
    double bytes = static_cast<double>(mem.total);
    NvmlMemoryV2 v2{};
    v2.version = kNvmlMemoryV2;
    if (nvml.memory_v2 && nvml.memory_v2(dev, &v2) == kNvmlSuccess && v2.reserved < v2.total)
      bytes = static_cast<double>(v2.total - v2.reserved);
    info.devices.push_back({name, bytes});
  }
  info.available = true;
  info.count = static_cast<int>(info.devices.size());
  info.name = info.devices.front().name;
  info.memory_bytes = info.devices.front().memory_bytes;
  return info;
}

}  // namespace kinfer::gpu::detail
