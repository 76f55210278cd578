// The device behind gpu::Context: probing for it, and making a CudaContext
// (gpu/detail/cuda_context.cuh) on it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/detail/cuda_context.cuh"
#include "gpu/detail/nvml_list.hpp"
#include "gpu/device_api.hpp"

namespace kinfer::gpu {

namespace {
std::atomic<bool> g_driver_started{false};
}

bool driver_started() { return g_driver_started.load(); }
void mark_driver_started() { g_driver_started = true; }

DeviceInfo probe() {
  if (auto listed = detail::list_by_nvml(CUDART_VERSION)) return *std::move(listed);
  return detail::probe_runtime();
}

DeviceInfo detail::probe_runtime() {
  mark_driver_started();
  DeviceInfo info;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    // Without an NVIDIA device node the runtime's reason ("CUDA driver version is insufficient
    // for CUDA runtime version" when no driver is installed at all) would read as "upgrade your
    // driver": a machine without a GPU is a normal machine, said plainly.
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (visible && (!*visible || *visible == '-'))
      info.why_not = "CUDA_VISIBLE_DEVICES hides every GPU";
    else if (!likely_present())
      info.why_not = "no NVIDIA GPU on this machine";
    else if (e == cudaErrorInsufficientDriver)
      info.why_not = "the NVIDIA driver is older than the CUDA runtime kinfer was built with";
    else if (e != cudaSuccess)
      info.why_not = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    else
      info.why_not = "no CUDA device";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return info;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    info.why_not = "cannot read the properties of CUDA device 0";
    return info;
  }
  if (prop.major < 7) {
    info.why_not = std::string(prop.name) + " has compute capability " +
                   std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                   "; the kernels need 7.0 or newer";
    return info;
  }
  info.available = true;
  info.count = n;
  info.name = prop.name;
  info.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (d > 0 && cudaGetDeviceProperties(&p, d) != cudaSuccess) p = prop;  // as device 0
    const cudaDeviceProp& q = d == 0 ? prop : p;
    info.devices.push_back({q.name, static_cast<double>(q.totalGlobalMem)});
  }
  return info;
}

bool likely_present() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string s(v);
    if (s.empty() || s[0] == '-') return false;  // "" or "-1": every device hidden
  }
  std::error_code ec;
  if (std::filesystem::exists("/dev/nvidia0", ec)) return true;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)e;
    return true;
  }
  return false;
}

namespace {
// CUDA_VISIBLE_DEVICES's entry (or the index) that makes only GPU `device` visible, when more
// than one is visible (as CUDA_VISIBLE_DEVICES lists them, else the NVIDIA device nodes).
std::optional<std::string> only_entry(int device) {
  if (device < 0) return std::nullopt;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::vector<std::string> listed;
    std::string item;
    for (const char* c = v;; ++c) {
      if (*c == ',' || *c == '\0') {
        listed.push_back(item);
        item.clear();
        if (*c == '\0') break;
      } else if (*c != ' ') {
        item += *c;
      }
    }
    // "" or "-1" hide every device; a list the runtime would cut short is left to it
    for (const std::string& x : listed)
      if (x.empty() || x[0] == '-') return std::nullopt;
    if (listed.size() < 2 || static_cast<std::size_t>(device) >= listed.size())
      return std::nullopt;
    return listed[device];
  }
  // the runtime numbers the devices it sees 0..n-1; the device nodes count them
  int nodes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
        std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c); }))
      ++nodes;
  }
  if (nodes < 2 || device >= nodes) return std::nullopt;
  return std::to_string(device);
}
}  // namespace

bool several_visible() { return !driver_started() && only_entry(0).has_value(); }

bool see_only(int device) {
  if (driver_started()) return false;
  const std::optional<std::string> only = only_entry(device);
  if (!only) return false;
  setenv("CUDA_VISIBLE_DEVICES", only->c_str(), 1);
  return true;
}

using detail::CudaContext;
using detail::DevBuf;

std::unique_ptr<Context> Context::create(int device, const PlannerOptions& planner) {
  mark_driver_started();
  return std::make_unique<CudaContext>(device, planner);
}

QuickFigures CudaContext::quick_figures() {
  CUDA_CHECK(cudaSetDevice(device_));
  QuickFigures q;
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  // the best of three timed copies after a warm-up, in seconds
  auto best_of = [&](auto&& copy) {
    float best = 1e30f;
    for (int rep = 0; rep < 4; ++rep) {
      CUDA_CHECK(cudaEventRecord(e0, st));
      copy();
      CUDA_CHECK(cudaEventRecord(e1, st));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep > 0) best = std::min(best, ms);
    }
    return 1e-3 * static_cast<double>(best);
  };
  std::size_t f = 0, t = 0;
  CUDA_CHECK(cudaMemGetInfo(&f, &t));
  const std::size_t dev = std::min(std::size_t{256} << 20, f / 8 / 4096 * 4096);
  const std::size_t host = std::min(std::size_t{32} << 20, dev);
  if (dev >= (std::size_t{1} << 20)) {
    DevBuf a(dev), b(dev);
    CUDA_CHECK(cudaMemsetAsync(a.p, 1, dev, st));
    q.copy_bandwidth = 2.0 * static_cast<double>(dev) / best_of([&] {
                         CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, dev, cudaMemcpyDeviceToDevice, st));
                       });
    void* h = nullptr;
    CUDA_CHECK(cudaMallocHost(&h, host));
    std::memset(h, 1, host);
    q.h2d_bandwidth = static_cast<double>(host) / best_of([&] {
                        CUDA_CHECK(cudaMemcpyAsync(a.p, h, host, cudaMemcpyHostToDevice, st));
                      });
    q.d2h_bandwidth = static_cast<double>(host) / best_of([&] {
                        CUDA_CHECK(cudaMemcpyAsync(h, b.p, host, cudaMemcpyDeviceToHost, st));
                      });
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaFreeHost(h));
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaStreamDestroy(st));
  return q;
}

}  // namespace kinfer::gpu
