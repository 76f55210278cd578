#pragma once
// `kinfer calibrate`: measures this machine once. The CPU kernel (and the GPU kernel when a
// Context is given) over a sweep of synthetic bucket shapes shaped like linkage buckets (mostly
// binary variables, one large message and several small CPTs, a few summed variables), plus
// the buckets of any networks given; host<->device bandwidth and latency both ways. Each
// model is then fitted (predictor.hpp).
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"
#include "engine/plan.hpp"
#include "gpu/device_api.hpp"
#include "scheduler/profile.hpp"

namespace kinfer::sched {

struct SweepBucket {
  BucketShape shape;
  std::vector<std::vector<int>> scopes;
  std::vector<std::vector<double>> data;  // log values in [-5, 0]: never timed on zeros
  std::vector<InputTable> inputs() const;
};

// A random bucket of about 2^log2_states states; no input table above 2^max_log2_input entries.
SweepBucket sweep_bucket(std::mt19937_64& rng, double log2_states, double max_log2_input = 24);
// The same shape and scopes as bucket b of a plan, with random values.
SweepBucket plan_bucket(const Plan& plan, int b, std::mt19937_64& rng);

struct CalibrateOptions {
  double seconds = 60;  // total budget, split between the devices and transfers
  int threads = 0;      // CPU kernel threads (0: OpenMP's default)
  std::uint64_t seed = 1;
  double cpu_max_log2_states = 28;
  double gpu_max_log2_states = 31;
  std::vector<const Plan*> networks;                 // whose buckets join the sweep
  std::function<void(const std::string&)> progress;  // one line per phase
};

// Median wall time of `run` after one warm-up, repeated until `min_seconds` or `max_reps`.
// `first`, when given, receives the warm-up's own time.
double time_median(const std::function<void()>& run, double min_seconds = 0.05, int max_reps = 7,
                   double* first = nullptr);

// Times each run in rounds (every run once per round, in order) after a warm-up round, so that
// none is timed in a hot loop; per run the median over the rounds. `first`: warm-up times.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& runs,
                                     double budget_seconds, std::vector<double>* first = nullptr);

std::vector<Sample> measure_cpu(const std::vector<SweepBucket>& buckets, int threads,
                                double budget_seconds);
// `first_use`, when given, receives per bucket how much longer its first run took (the GPU
// builds and uploads a kernel policy for each new bucket shape).
std::vector<Sample> measure_gpu(const std::vector<SweepBucket>& buckets, gpu::Context& ctx,
                                double budget_seconds, std::vector<double>* first_use = nullptr);
// Staged uploads (host memcpy into pinned memory, then the copy) and downloads into pinned
// memory, exactly as the executor moves tables: one copy waited for (`h2d`, `d2h`), and many
// queued back to back with one wait (`h2d_batch`, per copy); and pinning a host buffer then
// freeing it (`pin`: what a download's new staging buffer costs).
void measure_transfers(gpu::Context& ctx, TransferModel& h2d, TransferModel& h2d_batch,
                       TransferModel& d2h, TransferModel& pin, double budget_seconds);

// The executor's own cost per bucket beyond the kernel (bookkeeping, allocation, handing tables
// between threads; on the GPU also launching, allocating and releasing device tables): a chain
// network of `buckets` tiny buckets is run through run_scheduled untimed and with every kernel
// timed; the difference per bucket. Device part only with a ctx.
struct DispatchCost {
  double cpu = 0, gpu = 0;  // seconds per bucket
};
DispatchCost measure_dispatch(gpu::Context* ctx, int threads, int buckets = 400);

// Runs the whole calibration; `ctx` may be null (no GPU: the profile has a CPU part only).
Profile calibrate(const CalibrateOptions& opt, gpu::Context* ctx, const std::string& gpu_name);

}  // namespace kinfer::sched
