#pragma once
// Runs a Plan under a CPU/GPU assignment with two threads, as in paper 001 section 3.4:
//   the CPU thread (the caller) runs the CPU buckets with the OpenMP kernel, taking whichever
//     is ready next, so it keeps going on other branches while the GPU works;
//   the GPU manager thread uploads tables, launches the GPU buckets and downloads the outputs
//     that a CPU bucket (or the caller, for the root) needs.
// Intermediate tables stay on the device of their consumer: a GPU child of a GPU parent never
// leaves the GPU. Original inputs of GPU buckets are uploaded on a transfer stream at the start
// and the outputs of CPU children are uploaded as soon as they are ready, overlapping the
// kernels already queued on the compute stream.
#include <span>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "gpu/device_api.hpp"
#include "scheduler/cost_tree.hpp"

namespace kinfer::sched {

struct ExecOptions {
  int threads = 0;  // CPU kernel threads (0: OpenMP's default)
  // Time every kernel alone (the GPU thread waits for each one): for comparing predictions
  // with measurements, not for speed.
  bool time_buckets = false;
};

struct ExecStats {
  double seconds = 0;
  int cpu_buckets = 0, gpu_buckets = 0;
  double h2d_bytes = 0, d2h_bytes = 0;  // what actually crossed
  std::vector<Device> ran_on;           // per bucket
  std::vector<double> kernel_seconds;   // per bucket (time_buckets only; else empty)
  // time_buckets only: the upload of the original inputs (staging, queueing, waiting) plus the
  // waited-for uploads of CPU outputs; the downloads
  double h2d_seconds = 0, d2h_seconds = 0;
  std::string fallback;  // why GPU buckets ran on the CPU, if any did
};

// Returns ln P(e) like run_plan. `assignment` has one entry per bucket. With ctx == nullptr
// every bucket runs on the CPU (logged when the assignment wanted the GPU). Buckets no GPU
// kernel takes run on the CPU (logged). Errors of either thread are rethrown here.
double run_scheduled(const Plan& plan, std::span<const Device> assignment, gpu::Context* ctx,
                     const ExecOptions& opt = {}, ExecStats* stats = nullptr);

}  // namespace kinfer::sched
