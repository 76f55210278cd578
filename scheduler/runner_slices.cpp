// The runner's conditioned plans: the slices spread over the GPUs (lanes), and the conditioning
// at run time when the device has less usable memory than when the plan was made.
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "engine/errors.hpp"
#include "engine/util.hpp"
#include "scheduler/runner.hpp"
#include "scheduler/runner_internal.hpp"

namespace kinfer::sched {

int slice_lanes(int gpus, const ConditionedPlan& cp, double host_memory_bytes) {
  if (gpus < 2 || !cp.conditioned() || cp.cond.slices < 2) return 1;
  int lanes = static_cast<int>(std::min<std::int64_t>(gpus, cp.cond.slices));
  if (host_memory_bytes > 0 && cp.plan.memory.peak_bytes > 0)
    lanes = std::max(
        1, std::min(lanes, static_cast<int>(host_memory_bytes / cp.plan.memory.peak_bytes)));
  return lanes;
}

int lanes_that_pay(const ConditionedPlan& cp, int lanes) {
  const double per_slice =
      kGpuSliceBaseSeconds + std::exp2(cp.plan.order.stats.log2_total_state) / kGpuStatesPerSecond;
  const double total = static_cast<double>(cp.cond.slices) * per_slice;
  int n = 1;
  while (n < lanes && total / (n + 1) > n * kGpuStartSeconds) ++n;
  return n;
}

int Runner::lanes(const ConditionedPlan& cp) {
  if (!cp.conditioned() || cp.cond.slices < 2 || req_.check || !wants_gpu(cp.plan)) return 1;
  if (!gpu_count_) {
    if (gpu_->use_given) {
      gpu_count_ = gpu_->given ? 1 + static_cast<int>(lane_devices_.size()) : 0;
    } else {
      gpu_count_ = probed().available ? probed().count : 0;
    }
  }
  const int fit = slice_lanes(*gpu_count_, cp, req_.host_memory_bytes);
  // GPUs this process must still open: only as many as pay for their start.
  const int n = gpu_->use_given ? fit : lanes_that_pay(cp, fit);
  if (n < *gpu_count_ && n != lanes_said_)  // once per runner and count (lod runs many plans)
    spdlog::info("{} GPUs: the {} slices spread over {} of them ({})", *gpu_count_,
                 cp.cond.slices, n,
                 n < fit ? "a GPU more would take longer to start than it would save"
                         : "what the copies of the plan fit in --max-memory");
  else if (n > 1 && n != lanes_said_)
    spdlog::info("{} GPUs: the {} slices spread over all of them", *gpu_count_, cp.cond.slices);
  lanes_said_ = n;
  return n;
}

void Runner::set_plan_options(PlanOptions po) {
  po.device_budget = nullptr;  // the runner's own, called directly
  po.order.predict_seconds = nullptr;
  plan_options_ = std::move(po);
}

bool Runner::fit_to_free_device(ConditionedPlan& cp, bool after_failure) {
  const double budget = device_budget(cp.plan);
  if (budget <= 0) return false;
  if (cp.plan.memory.device_bytes <= (after_failure ? 0.9 : 1.0) * budget) {
    if (after_failure)
      spdlog::info("the GPU has {} usable now, enough for the plan's {}: it runs again as it is",
                   human_bytes(budget), human_bytes(cp.plan.memory.device_bytes));
    return false;
  }
  bool feasible = false;
  // After a failure, to 90% of what is usable: the executor's own count of a slice's tables can
  // exceed the accountant's estimate by a few percent.
  const double target = after_failure ? 0.9 * budget : budget;
  // While the new plan is built, the tables it is cut from exist three times (the plan's, the
  // copy recondition starts from, the new plan's source).
  double host = req_.host_memory_bytes;
  if (host > 0) {
    host -= 2 * (cp.conditioned() ? cp.plan.memory.source_bytes : cp.plan.memory.input_bytes);
    if (host <= 0) return false;
  }
  ConditionedPlan next = recondition(cp, host, target, *plan_options_, feasible);
  if (!feasible) {
    spdlog::info(
        "the GPU has {} usable now and the plan needs {} there; conditioning cannot fit it: "
        "what does not fit runs on the CPU",
        human_bytes(budget), human_bytes(cp.plan.memory.device_bytes));
    return false;
  }
  next.plan.memory = estimate(next.plan);
  spdlog::warn(
      "the GPU has {} usable now ({}), the plan needs {} there: conditioned on {} more "
      "variable(s), {} slices of {} ({:.3g} FLOP, {:.1f}% over the unconditioned plan)",
      human_bytes(budget),
      after_failure ? "an allocation failed: another process holds the rest"
                    : "less than when it was planned: another process holds the rest",
      human_bytes(cp.plan.memory.device_bytes), next.cond.vars.size() - cp.cond.vars.size(),
      next.cond.slices, human_bytes(next.plan.memory.device_bytes), next.cond.flops,
      100 * next.cond.overhead());
  cp = std::move(next);
  return true;
}

RunResult Runner::run(ConditionedPlan& cp, SliceDealer* dealer) {
  if (!plan_options_ || dealer || req_.check || !cp.plan.model.impossible.empty())
    return run_slices(cp, dealer);
  fit_to_free_device(cp, false);
  // While the plan can be conditioned further, a slice that does not fit the device's memory
  // usable now (read when it starts, or an allocation that fails: other processes on the GPU)
  // is conditioned to it and the slices run again; the last try places what does not fit on
  // the CPU, and an allocation that fails then computes the plan on the CPU.
  constexpr int kTries = 4;
  int handed_up = kTries - 1;  // the tries whose full device is handed up here to condition
  for (int done = 1; handed_up > 0; ++done) {
    rethrow_device_full_ = true;
    try {
      RunResult r = run_slices(cp, dealer);
      rethrow_device_full_ = false;
      return r;
    } catch (const DeviceMemoryError& e) {
      rethrow_device_full_ = false;
      --handed_up;
      spdlog::warn("{}: conditioning the plan to the GPU's memory usable now (try {} of at most {})",
                   e.what(), done + 1, kTries);
      // nothing to condition (the plan fits what is usable now, or cannot be cut): once more as
      // it is, then the last try
      if (!fit_to_free_device(cp, true)) handed_up = std::min(handed_up, 1);
    } catch (...) {
      rethrow_device_full_ = false;
      throw;
    }
  }
  return run_slices(cp, dealer);  // the last try: run(plan) falls back to the CPU itself
}

RunResult Runner::run_slices(ConditionedPlan& cp, SliceDealer* dealer) {
  const int n = lanes(cp);
  // Each lane (a thread driving one GPU) runs its slices' CPU buckets and builds its kernel
  // plans with its share of the cores: with the whole OpenMP team each, n lanes would start n
  // times as many threads as there are cores, and their parallel regions would wait on each
  // other.
  const int all_threads = req_.threads > 0 ? req_.threads : omp_get_max_threads();
  const int lane_threads = n > 1 ? std::max(1, all_threads / n) : req_.threads;
  struct Restore {
    Runner& r;
    int threads;
    ~Restore() { r.set_threads(threads); }
  } restore{*this, req_.threads};
  set_threads(lane_threads);
  for (auto& l : lanes_) l->set_threads(lane_threads);
  for (int k = static_cast<int>(lanes_.size()) + 1; k < n; ++k) {  // GPU k's runner, kept
    RunRequest rk = req_;
    rk.gpu_index = k;
    if (gpu_->use_given) {
      lanes_.push_back(std::make_unique<Runner>(rk, lane_devices_.at(k - 1), profile_));
    } else {
      lanes_.push_back(std::make_unique<Runner>(rk));
      lanes_.back()->start_early();
    }
  }
  RunResult r;
  std::optional<CheckReport> failed_check;
  bool ran_here = false;
  double device_seconds = 0, device_peak = 0;
  std::vector<int> lane_slices;
  std::vector<std::string> lane_name(std::max(1, n));
  std::mutex mu;
  const double ln = run_conditioned_lanes(
      cp, n,
      [&](int k, const Plan& p) {
        RunResult s = (k == 0 ? *this : *lanes_[k - 1]).run(p);
        const double v = s.ln_pr;
        const std::lock_guard<std::mutex> lock(mu);
        if (s.check && !s.check->passed && !failed_check) failed_check = s.check;
        device_seconds += s.device_seconds;
        device_peak = std::max(device_peak, s.device_peak_bytes);
        if (lane_name[k].empty()) lane_name[k] = s.gpu_name.empty() ? "cpu" : s.gpu_name;
        if (k == 0 || !ran_here) r = std::move(s);  // the schedule reported: GPU 0's last slice
        ran_here = true;
        return v;
      },
      dealer, &lane_slices);
  if (!ran_here) r.device = "none";  // e.g. a rank that was dealt no slice
  r.ln_pr = ln;
  r.device_seconds = device_seconds;
  r.device_peak_bytes = device_peak;
  if (failed_check) r.check = failed_check;
  for (std::size_t k = 0; k < lane_slices.size(); ++k)
    r.lanes.push_back({lane_name[k], lane_slices[k]});
  return r;
}

}  // namespace kinfer::sched
