// The runner's --device auto choice and the order search's device-sized prediction: which
// plans go to the GPU, and when the device starts in the background during the planning.
#include <spdlog/spdlog.h>

#include <omp.h>
#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/util.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/runner.hpp"
#include "scheduler/runner_internal.hpp"

namespace kinfer::sched {

// The search's first rounds start the GPU early only if it would win with this many times
// (log2) fewer states than their best order: the search's answer has 2^3-2^6 fewer
// (linkage_17: 2^39.0 at round 0, 2^33.2 in the end; linkage_16: 2^29.5 and 2^24.3).
constexpr double kEarlyStartDiscountLog2 = 6;
// The later rounds, only if it would win with 2x fewer states than their best: a best order
// still shrinking near the line must not start the driver (linkage_21: 2^28.6 at round 2, 2^26.8
// in the end, 0.03 s on 16 cores; linkage_14: 2^29.7 at round 2, 2^29.0, 0.23 s).
constexpr double kLateStartDiscountLog2 = 1;

AutoChoice auto_choice(const Plan& plan, const Profile& profile, Policy policy,
                       double start_seconds, Schedule* gpu_schedule) {
  AutoChoice c;
  const PlanCosts pc = plan_costs(plan, profile);
  c.cpu_seconds = make_schedule(pc.tree, Policy::cpu_only).cost.total();
  Schedule gs = make_schedule(pc.tree, policy);
  c.gpu_seconds = gs.cost.total() + start_seconds;
  if (gpu_schedule) *gpu_schedule = std::move(gs);
  c.gpu = c.gpu_seconds < c.cpu_seconds;
  c.why = fmt::format(
      "--device auto: predicted {} on the CPU, {} with the GPU ({}, {} of it to start the "
      "device), from the profile {}",
      format_seconds(c.cpu_seconds), format_seconds(c.gpu_seconds), to_string(policy),
      format_seconds(start_seconds), profile.path.empty() ? profile.gpu.name : profile.path);
  return c;
}

std::string gpu_sized_prediction_key() { return kGpuSizedPredictionKey; }

namespace {
// The GPU's part of gpu_sized_prediction, in nominal core-seconds of search.
double gpu_search_part(double states) {
  const double gpu_wall = std::max(kGpuSearchFloorStarts * kGpuStartSeconds,
                                   kGpuComputeBase + states / kGpuStatesPerSecond);
  return gpu_wall * kSearchCoreSecondsPerSecond;
}
}  // namespace

double gpu_sized_prediction(const OrderStats& s) {
  const double states = std::exp2(s.log2_total_state);
  return std::min(states / kCpuSearchStatesPerSecond, gpu_search_part(states));
}

std::function<double(const OrderStats&)> Runner::order_prediction() {
  if (req_.device == DeviceChoice::cpu) return {};
  auto calls = std::make_shared<int>(0);
  return [this, calls](const OrderStats& s) {
    const double states = std::exp2(s.log2_total_state);
    const double cpu = states / kCpuSearchStatesPerSecond;  // the engine's own prediction
    if (*calls < 8)
      spdlog::debug("order search round {}: best 2^{:.2f} states, largest table 2^{:.2f}", *calls,
                    s.log2_total_state, s.log2_max_table);
    // The first rounds' best orders are far worse than the search's answer (2^3-2^6 states):
    // sized for the CPU, so that a small network never touches the GPU's driver.
    // They start the GPU in the background only when even 2^6 fewer states would make it win
    // clearly, so that its start (~0.3 s) begins with the search instead of after its first
    // rounds and a probe on the search's thread.
    if (gpu_->start_at_first_round) {  // --device gpu or --check with several GPUs visible
      gpu_->start_at_first_round = false;
      see_one_gpu(s.log2_max_table - kEarlyTableDiscountLog2);
      start_in_background();
    }
    if ((*calls)++ < kCpuSizedRounds) {
      start_if_likely(s, kEarlyStartDiscountLog2);
      return cpu;
    }
    // GPU-sized, and the device started in the background, only when the GPU's part wins
    // clearly (2x) against one core's guessed rate: a best order still shrinking near the line
    // (linkage_21's 2^27.7 at round 2, 2^25.3 in the end) must not start the driver. Not the
    // sizing's own CPU rate: with it linkage_14 goes CPU-sized (its search 0.19 -> 0.34 s, its
    // device started 0.06-0.13 s after the plan).
    if (2 * gpu_search_part(states) >= states / kCpuCoreStatesGuess) return cpu;
    start_if_likely(s, kLateStartDiscountLog2);
    // Whether there is a GPU, without waiting for the driver (a probe costs ~0.1 s on the
    // search's thread): the device nodes decide, so that the same seed gives the same order on
    // the machine whatever the threads, the load and the background start's progress.
    const bool likely = gpu_->use_given ? gpu_->given != nullptr : gpu::likely_present();
    return likely ? gpu_sized_prediction(s) : cpu;
  };
}

void Runner::start_if_likely(const OrderStats& s, double discount_log2) {
  if (req_.device != DeviceChoice::automatic || describe_only_ || gpu_->use_given || gpu_->opened ||
      gpu_->early.valid())
    return;
  // The GPU's rates of gpu_sized_prediction and kCpuCoreStatesGuess on this machine's threads:
  // a guess only (the profile decides in run()), so that the device starts while the plan is
  // being made.
  const double log2_states = s.log2_total_state - discount_log2;
  const double states = std::exp2(log2_states);
  const int threads = req_.threads > 0 ? req_.threads : omp_get_max_threads();
  const double cpu = states / (kCpuCoreStatesGuess * threads);
  const double gpu = kGpuStartSeconds + kGpuComputeBase + states / kGpuStatesPerSecond;
  if (2 * gpu >= cpu) return;
  spdlog::debug("starting the GPU in the background (2^{:.1f} states: about {} on the CPU)",
                log2_states, format_seconds(cpu));
  see_one_gpu(s.log2_max_table -
              (discount_log2 >= kEarlyStartDiscountLog2 ? kEarlyTableDiscountLog2 : discount_log2));
  start_in_background();
}

bool Runner::auto_gpu(const Plan& plan, std::string& why_not) {
  // A plan the CPU finishes before the GPU could start never touches the GPU's driver (whose
  // start and teardown alone would make a small run several times slower).
  const double states = std::exp2(plan.order.stats.log2_total_state);
  const int threads = req_.threads > 0 ? req_.threads : omp_get_max_threads();
  // Also while a background start on the search's early guess is still under way: such a plan
  // does not wait for the driver (once open, the profile decides: batch and lod plans).
  const bool opened = gpu_->opened && gpu_->opened->ctx;
  const double cpu_guess = states / (kCpuCoreStatesGuess * threads);
  if (!gpu_->use_given && !opened && cpu_guess < kGpuStartSeconds) {
    why_not = fmt::format(
        "--device auto: 2^{:.1f} states, about {} on the CPU, less than starting the GPU takes",
        plan.order.stats.log2_total_state, format_seconds(cpu_guess));
    return false;
  }
  // A plan whose inputs are not restructured yet (the planner asking for the device budget
  // before conditioning) has no input tables to predict from: the fixed threshold below decides
  // there; the profile decides when the filled plan runs.
  const bool filled = plan.input_scope.size() == plan.model.factors.size();
  const std::string& name = gpu_name();
  std::string path;
  const Profile* prof = name.empty() || !filled ? nullptr : profile(path);
  if (!prof || !prof->has_gpu) {
    // no GPU (open() will say why) or no profile for it: the fixed threshold
    if (auto_wants_gpu(plan.flops)) return true;
    why_not = name.empty() ? "--device auto: no usable GPU"
                           : fmt::format(
                                 "--device auto: the plan needs {:.3g} FLOP, below the {:.0e} "
                                 "that pay for starting the GPU (no profile for it to predict "
                                 "from)",
                                 plan.flops, kAutoGpuMinFlops);
    return false;
  }
  // what is left of the GPU's start: nothing when open, less when it started in the background
  const bool open = gpu_->use_given || opened;
  if (open && gpu_->decided && gpu_->decided->key == PlanKey(plan)) {
    if (!gpu_->decided->gpu) why_not = gpu_->decided->why;
    return gpu_->decided->gpu;
  }
  double start = open ? 0.0 : prof->gpu_start > 0 ? prof->gpu_start : kGpuStartSeconds;
  if (!open && gpu_->early.valid()) start = std::max(0.0, start - since(gpu_->early_at));
  const Policy asked = req_.policy.value_or(kDefaultGpuPolicy);
  const Policy predicted = asked == Policy::gpu_only ? asked : Policy::comm_aware;
  Schedule s;
  const auto t_pred = clock_type::now();
  const AutoChoice c = auto_choice(plan, *prof, predicted, start, &s);
  spdlog::debug("{}: {} (predicted in {:.1f} ms{})", c.gpu ? "GPU" : "CPU", c.why,
                1e3 * since(t_pred), open ? "" : ", the GPU still opening");
  if (!c.gpu) why_not = c.why;
  if (open) {
    gpu_->decided = Gpu::AutoDecision{PlanKey(plan), c.gpu, c.why};
    // the schedule run() places by, when it asks for the same (auto_choice's costs are cold)
    if (!(req_.repeated_plans && gpu_warm_))
      placed_.reset(new Placed{PlanKey(plan), predicted, prof, false, std::move(s)});
  }
  return c.gpu;
}

}  // namespace kinfer::sched
