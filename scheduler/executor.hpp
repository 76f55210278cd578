#pragma once
// The one executor: runs a Plan under any CPU/GPU assignment (every policy of policies.hpp) with
// two threads, as in paper 001 section 3.4:
//   the CPU thread (the caller) runs the CPU buckets with the OpenMP kernel, taking whichever
//     is ready next, so it keeps going on other branches while the GPU works;
//   the GPU manager thread uploads tables, launches the GPU buckets and downloads the outputs
//     that a CPU bucket (or the caller, for the root) needs.
// Intermediate tables stay on the device of their consumer: a GPU child of a GPU parent never
// leaves the GPU. Original inputs of GPU buckets are uploaded on a transfer stream at the start
// and the outputs of CPU children are uploaded as soon as they are ready, overlapping the
// kernels already queued. GPU buckets run on several compute streams: a bucket continues on its
// first GPU child's stream and waits for the others', so independent subtrees overlap.
// Before running, the executor moves to the CPU, with a reason per bucket, a GPU bucket that no
// kernel takes (after merging its smallest factor inputs, gpu/merge_inputs.hpp) or whose tables
// would not fit the device's free memory next to those still alive there.
//
// The check mode (run_checked) runs every bucket on the CPU, as the reference, and again on the
// GPU from the same inputs, and compares them under a stated tolerance.
#include <span>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "gpu/device_api.hpp"
#include "scheduler/cost_tree.hpp"

namespace kinfer::sched {

struct ExecOptions {
  int threads = 0;  // CPU kernel threads (0: OpenMP's default)
  // The posterior commands' upward pass (engine/plan.hpp UpwardPass): max-product buckets on
  // either device, and every bucket's output copied to the host (a GPU output that stays on the
  // device for its parent is downloaded as well), or, with pass.on_device and room on the
  // device, such outputs held there after the run.
  UpwardPass pass;
  // The MPE traceback's scans narrowed down on the device (engine/plan.hpp DeviceOutputs): those
  // of more than traceback_maxima_from entries (a scan of 2^26 takes a 16-core CPU about 20 ms,
  // the device's group maxima a few ms), and those reading more than traceback_held_from
  // entries of the outputs held there (2^18, 2 MiB, take about 1 ms to copy back; the part the
  // device narrows a scan down to, microseconds). Tests lower them.
  double traceback_maxima_from = 1 << 26, traceback_held_from = 1 << 18;
  // Time every kernel alone (the GPU thread waits for each one): for comparing predictions
  // with measurements, not for speed.
  bool time_buckets = false;
  // Device memory the plan's tables may use at once (--gpu-memory); 0: 90% of the device's
  // free memory when the run starts.
  double device_budget_bytes = 0;
  // A GPU bucket that does not fit the budget throws DeviceMemoryError (before any bucket runs)
  // instead of running on the CPU: the runner then conditions the plan to the budget
  // (Runner::fit_to_free_device), where a large bucket on the CPU would cost minutes.
  bool over_budget_throws = false;
  // Diagnostics (`kinfer pe --gpu-timeline FILE --gpu-shapes FILE`, docs/performance.md); empty:
  // none. Each run of the executor rewrites them (a conditioned plan's last slice; one GPU).
  // timeline_path: each GPU bucket's host steps and kernel times, a TSV (where a GPU run waits;
  // bench/e2e/timeline.py reads it). shapes_path: the GPU buckets of >= 2^20 states as
  // bucket_bench --shape specs, as the kernels take them (merged inputs), with their bucket
  // numbers (the census of the buckets a run really has).
  std::string timeline_path, shapes_path;
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
  std::vector<std::string> fallback_reason;  // per bucket: why a GPU bucket ran on the CPU
  std::string fallback;                      // the same, summed up (empty when none did)
  int merged_buckets = 0;        // GPU buckets whose factor inputs were merged to fit the kernels
  double device_peak_bytes = 0;  // the most device bytes the run held at once (its own tables)
  // Where each thread's wall time went (always measured; logged at debug level): building the
  // kernels' launch plans on every thread beside the run (gpu_prepare_s: from the first to the
  // last; gpu_plan_wait_s: the GPU thread's waits for them); the CPU
  // thread's kernels and waits; the GPU thread's staging of the inputs, host time inside
  // run_bucket (launches, and building a shape's kernel tables the first time), device
  // allocations, waits for CPU children and downloads (with their synchronisation).
  double cpu_kernel_s = 0, cpu_wait_s = 0, gpu_prepare_s = 0, gpu_plan_wait_s = 0;
  double gpu_stage_s = 0, gpu_launch_s = 0, gpu_alloc_s = 0, gpu_child_wait_s = 0,
         gpu_download_s = 0, gpu_upload_wait_s = 0;
};

// Returns ln P(e) like run_plan (a maximising pass: see run_plan). `assignment` has one entry per bucket. With ctx == nullptr
// every bucket runs on the CPU (logged when the assignment wanted the GPU). Buckets no GPU
// kernel takes, or that do not fit device memory, run on the CPU (logged, and in
// stats->fallback_reason). Errors of either thread are rethrown here. An all-CPU assignment
// gives run_plan's answer bit for bit (the same kernel on the same inputs in the same order).
double run_scheduled(const Plan& plan, std::span<const Device> assignment, gpu::Context* ctx,
                     const ExecOptions& opt = {}, ExecStats* stats = nullptr);

// The host's part of a run of `plan` under `assignment` with a GPU, as the executor will hold it
// (for the accountant, Runner::estimate): buckets no kernel takes move to the CPU as in
// run_scheduled; `intermediates` is the most host tables alive at once in tree order (outputs of
// CPU buckets, GPU outputs downloaded for a CPU parent or the root, until their consumer ran);
// `staging` the factor inputs of the GPU buckets as uploaded (one pinned block) plus the merged
// products, both alive for the whole run. Device memory is assumed to suffice.
struct GpuHostPart {
  double intermediates = 0, staging = 0;
  // the kernels' launch plans while the executor builds them (`threads` at a time, before the
  // run): the largest plans' tables until they are copied to the device
  double kernel_plans = 0;
  int cpu_buckets = 0;
};
// `threads`: the executor's (0: OpenMP's default), how many launch plans it builds at once.
GpuHostPart gpu_host_part(const Plan& plan, std::span<const Device> assignment, int threads = 0);

// Check mode. A bucket's outputs agree when |gpu - cpu| <= tolerance * max(1, |cpu|) for every
// entry (ln values; equal infinities agree, NaN never does).
inline constexpr double kCheckTolerance = 1e-9;

struct CheckReport {
  double tolerance = kCheckTolerance;
  int buckets = 0;                 // compared on both backends
  int buckets_without_kernel = 0;  // no GPU kernel takes them: CPU only, not compared
  double max_abs_diff = 0;         // largest |gpu - cpu| over every compared entry
  double max_rel_diff = 0;         // largest |gpu - cpu| / max(1, |cpu|)
  int worst_bucket = -1;           // the bucket with max_rel_diff (-1: none compared)
  int first_failed_bucket = -1;    // first bucket (tree order) over the tolerance
  bool passed = true;
  std::vector<double> bucket_rel_diff;  // per bucket (NaN: not compared)
};

// Runs the plan on the CPU (run_plan: the answer is the CPU's, bit for bit) and every bucket a
// GPU kernel takes again on `ctx` from the same input tables (factor inputs merged as the
// executor merges them), comparing outputs under `tolerance`.
// `pass`: the posterior commands' upward pass (max-product buckets compared, outputs kept).
double run_checked(const Plan& plan, gpu::Context& ctx, int threads, CheckReport& report,
                   double tolerance = kCheckTolerance, const UpwardPass& pass = {});

}  // namespace kinfer::sched
