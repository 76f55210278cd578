#pragma once
// The runner's parts that its source files share (runner.cpp, runner_auto.cpp,
// runner_profile.cpp, runner_slices.cpp); not for other folders.
#include <chrono>
#include <future>
#include <optional>
#include <string>

#include "engine/util.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::sched::detail {

using clock_type = std::chrono::steady_clock;

// A plan as the runner's caches know it: the object and its sizes (a plan is not changed once
// made; the sizes catch one that was).
struct PlanKey {
  const Plan* plan = nullptr;
  std::size_t buckets = 0, inputs = 0;
  double flops = 0, states = 0;
  explicit PlanKey(const Plan& p)
      : plan(&p),
        buckets(p.tree.buckets.size()),
        inputs(p.input_scope.size()),
        flops(p.flops),
        states(p.order.stats.log2_total_state) {}
  bool operator==(const PlanKey&) const = default;
};

}  // namespace kinfer::sched::detail

namespace kinfer::sched {

using detail::clock_type;
using detail::PlanKey;

// The last profile schedule placement() made (or auto_gpu's prediction did), for its plan.
struct Runner::Placed {
  PlanKey key;
  Policy policy;
  const Profile* profile;
  bool warm;
  Schedule schedule;
};

// The GPU: the machine's (opened once, maybe in the background) or one given by a test.
struct Runner::Gpu {
  gpu::Context* given = nullptr;
  bool use_given = false;
  std::future<OpenedDevice> early;
  clock_type::time_point early_at;  // when `early` was started
  std::optional<OpenedDevice> opened;
  // The last --device auto decision made with the GPU open, for the plan it was made for (the
  // planner, the accountant and run() each ask; a prediction is ~10 ms on a large network).
  struct AutoDecision {
    PlanKey key;
    bool gpu = false;
    std::string why;
  };
  std::optional<AutoDecision> decided;
};

}  // namespace kinfer::sched
