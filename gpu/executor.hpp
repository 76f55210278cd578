#pragma once
// Running a whole plan on the GPU through a Context (plain C++): every bucket the kernels take
// runs on the device and its table stays there for its parent; input factors are staged once in
// pinned memory and uploaded asynchronously; independent subtrees run on different streams. A
// bucket that no kernel takes, or whose tables do not fit the device's memory, runs on the CPU
// with a log line that says why.
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "gpu/device_api.hpp"

namespace kinfer::gpu {

struct DeviceRunOptions {
  // A bucket smaller than this (states) whose inputs are all on the host runs on the CPU: there
  // it takes microseconds, less than the launch and the copies would. 0: every bucket on the GPU.
  double min_gpu_states = 32768;
};

struct DeviceRunReport {
  int gpu_buckets = 0, cpu_buckets = 0, small_on_cpu = 0;
  int cached_buckets = 0, plain_buckets = 0;
  std::vector<std::pair<int, std::string>> on_cpu;  // bucket, why it ran on the CPU
  double seconds = 0;
};

// Returns ln P(e) like run_plan. `opt.threads` is used for the CPU buckets.
double run_plan_gpu(const Plan& plan, Context& ctx, const RunOptions& opt = {},
                    DeviceRunReport* report = nullptr, const DeviceRunOptions& dev = {});

}  // namespace kinfer::gpu
