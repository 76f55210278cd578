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
// see_one_gpu's line: a largest table of 2^31 entries (16 GiB) fits one GPU of kinfer's class
// with room for the rest of the plan, so such a plan is not sliced over several GPUs.
constexpr double kOneGpuLog2Table = 31;
// Under --gpu-memory: a largest table of at most this share of the limit (16 GiB of an 80 GB
// H100 is 0.2). On a 4-H200 host, linkage_13/14/17 under --gpu-memory 8G (one GPU's plans) took
// 1.15-1.40 s end to end with the driver started for every GPU, 0.41-0.59 s with one visible.
constexpr double kOneGpuShare = 0.2;
// The order search's first rounds have largest tables 2^4-2^11 above its answer's (linkage_17:
// 2^36.3 at round 0, 2^25.2 in the end; pedigree50 2^36.7; linkage_11 2^40.6): their guess for
// see_one_gpu is discounted by this much. A plan it misjudges still runs, its slices on one GPU.
constexpr double kEarlyTableDiscountLog2 = 10;

struct Runner::Gpu {
  gpu::Context* given = nullptr;
  bool use_given = false;
  std::future<OpenedDevice> early;
  clock_type::time_point early_at;  // when `early` was started
  // start_early left the start to the order search's first round (several GPUs visible: the
  // round's best order says whether one GPU holds the plan, see_one_gpu).
  bool start_at_first_round = false;
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
