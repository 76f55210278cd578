#include "scheduler/devices.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>

#include "engine/util.hpp"
#include "gpu/chain_api.hpp"

namespace kinfer::sched {

namespace {
using clock_type = std::chrono::steady_clock;
}  // namespace

const char* to_string(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::automatic:
      return "auto";
    case DeviceChoice::cpu:
      return "cpu";
    case DeviceChoice::gpu:
      return "gpu";
  }
  return "?";
}

DeviceChoice parse_device(const std::string& name) {
  for (DeviceChoice d : {DeviceChoice::automatic, DeviceChoice::cpu, DeviceChoice::gpu})
    if (name == to_string(d)) return d;
  throw std::invalid_argument("unknown device '" + name + "' (expected auto, cpu or gpu)");
}

GpuList list_gpus() { return gpu::probe(); }

void find_and_read_profile(const std::string& gpu_name, std::string& path,
                           std::optional<Profile>& profile) {
  path = find_profile_for_gpu(gpu_name);
  if (path.empty()) path = default_profile_path();
  if (std::filesystem::exists(path)) profile = load_profile(path, false);
}

namespace {
struct KeptGpus {
  std::mutex mutex;
  bool keep = false;
  std::map<int, OpenedDevice> open;  // by visible index, profile read
};
KeptGpus& kept_gpus() {
  static KeptGpus k;
  return k;
}

OpenedDevice open_gpu_now(int device, bool with_profile) {
  const auto t0 = clock_type::now();
  OpenedDevice d;
  const gpu::DeviceInfo info = gpu::probe();
  if (!info.available) {
    d.name = info.why_not.empty() ? "no GPU" : info.why_not;
    d.seconds = since(t0);
    return d;
  }
  // The profile is read while the context is made: the GPU's name is known from the probe.
  struct Read {
    std::string path;
    std::optional<Profile> profile;
    bool looked = false;
  };
  std::future<Read> read;
  if (with_profile)
    read = std::async(std::launch::async, [name = info.name] {
      Read r;
      try {
        find_and_read_profile(name, r.path, r.profile);
        r.looked = true;
      } catch (const std::exception&) {  // Runner::profile reads it again and reports the error
      }
      return r;
    });
  try {
    const double probed = since(t0);
    d.ctx = gpu::Context::create(device);
    d.name = info.name;
    d.memory_bytes = info.memory_bytes;
    spdlog::debug("GPU {} opened in {:.3f} s (the driver's probe {:.3f} s, the context {:.3f} s)",
                  device, since(t0), probed, since(t0) - probed);
  } catch (const std::exception& e) {
    d.ctx.reset();
    d.name = std::string("the GPU could not be opened: ") + e.what();
  }
  d.seconds = since(t0);
  if (read.valid()) {
    Read r = read.get();
    if (d.ctx) {
      d.profile_path = std::move(r.path);
      d.profile = std::move(r.profile);
      d.profile_looked = r.looked;
    }
  }
  return d;
}
}  // namespace

void keep_gpus_open() {
  std::lock_guard lock(kept_gpus().mutex);
  kept_gpus().keep = true;
}

OpenedDevice open_gpu(int device, bool with_profile) {
  KeptGpus& k = kept_gpus();
  std::lock_guard lock(k.mutex);
  if (!k.keep) return open_gpu_now(device, with_profile);
  auto it = k.open.find(device);
  if (it == k.open.end()) {
    OpenedDevice d = open_gpu_now(device, true);
    if (!d.ctx) return d;  // not kept: a later job tries again and says why
    it = k.open.emplace(device, std::move(d)).first;
  }
  OpenedDevice d = it->second;
  d.seconds = 0;  // already open
  return d;
}

void set_gpu_driver_environment() { gpu::set_driver_environment(); }
bool gpu_driver_started() { return gpu::driver_started(); }
bool under_gpu_tool() { return gpu::under_cuda_tool(); }

ChainBackends gpu_chain_backends(DeviceChoice device, double host_bytes) {
  if (device == DeviceChoice::cpu) return {};
  return [gpu_only = device == DeviceChoice::gpu, host_bytes, said = std::make_shared<bool>(false)](
             const linkage::ChainLayout& l) -> std::unique_ptr<linkage::ChainBackend> {
    if (!gpu_only && l.bits < 18) return nullptr;
    try {
      // The chain runs on GPU 0 alone: with only it visible the driver starts about three
      // times sooner on a 4-GPU host (gpu::see_only; nothing when the driver has started).
      gpu::see_only(0);
      return gpu::make_gpu_chain(l, host_bytes);
    } catch (const std::exception& e) {
      // A machine without a GPU is normal under --device auto: said at -v only.
      if (!*said) {
        if (gpu_only || gpu::likely_present())
          spdlog::warn("the inheritance chain runs on the CPU: {}", e.what());
        else
          spdlog::debug("the inheritance chain runs on the CPU: {}", e.what());
      }
      *said = true;
      return nullptr;
    }
  };
}

}  // namespace kinfer::sched
