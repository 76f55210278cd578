#pragma once
// Options shared by the commands that load a network and plan its elimination.
#include <CLI/CLI.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/condition.hpp"
#include "engine/model.hpp"
#include "engine/plan.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

// A memory limit above what the system can give now (other processes hold the rest) is lowered
// to 90% of what is available, said in a warning (at info for the default limit): a plan sized
// to the limit would otherwise be killed by the system instead of conditioned to fit. The
// adjustment is kept for the commands' JSON (memory_limit_json(); null when none was made).
double within_available_memory(double limit, bool given);
nlohmann::json memory_limit_json();


// Output paths checked before any computing, so that a mistyped path costs nothing: exit 2
// (CLI::ValidationError naming the option and the path) when `path` is a folder, or its folder
// does not exist or takes no new file; for a folder option (made here when missing), when it
// exists as a file, cannot be made or takes no new file. An empty path is no output.
void check_output_file(const std::string& path, const std::string& option);
void check_output_folder(const std::string& path, const std::string& option);


// Range checks of numeric options with plain messages ("--threads: must be a whole number >= 1,
// not 0"), where CLI11's own name a range up to the largest double.
CLI::Validator number_at_least(double min);
CLI::Validator count_at_least(long min);


struct NetworkOptions {
  std::string network, evidence, order = "stochastic", max_memory, order_cache;
  double order_time = 40.0;  // nominal core-seconds of order-search work at most
  int threads = 0;
  std::uint64_t seed = 1;

  void add(CLI::App& cmd);
  // Reads the network and the evidence (NETWORK.evid when -e is absent, logged).
  void load(Network& net, Evidence& ev) const;
  // The plan options these command-line options ask for (CLI::ValidationError for a bad
  // --max-memory). `for_run`: the options of a run about to plan, whose memory limit is then
  // kept within what the machine has available (within_available_memory); false for a batch's
  // validation and sizing of its jobs, which run later in processes of their own.
  PlanOptions plan_options(bool for_run = true) const;
};

// Where orders are kept when --order-cache is not given: $KINFER_ORDER_CACHE, else
// $XDG_CACHE_HOME/kinfer/orders (else ~/.cache/kinfer/orders); "none" turns the cache off.
std::string default_order_cache_dir();

// A log10 probability as the commands print it: 10 significant digits, "-inf" for P = 0.
std::string format_log10(double x);

nlohmann::json order_json(const Plan& plan);
nlohmann::json memory_json(const Plan& plan);
// "conditioning": variables, slices, per-slice peak, total FLOPs, overhead over the
// unconditioned plan, and why this plan was chosen.
nlohmann::json conditioning_json(const ConditionedPlan& cp);

// The object `kinfer pe --json` prints (also each pe result of `kinfer batch`): the answer, the
// order, the memory estimate, and the times between reading (t0), planning (t1), computing (t2),
// the device being up (t_dev) and the end (t3).
struct PeTimes {
  std::chrono::steady_clock::time_point t0, t1, t2, t_dev, t3;
};
nlohmann::json pe_json(const std::string& network, const Plan& plan, double ln_pr, const PeTimes& t,
                       const std::string& device);

// pe's run block, also the batch worker's: P(e) of a compiled plan (every slice of a
// conditioned one) through `runner`, or -inf without running when the reduction found the
// evidence impossible. `impossible` is set to why when P(e) = 0. With a `dealer` (pe under
// mpirun), only this process's slices run here (Runner::run(ConditionedPlan&, SliceDealer*)).
sched::RunResult run_evidence(sched::Runner& runner, ConditionedPlan& cp, std::string& impossible,
                              SliceDealer* dealer = nullptr);

}  // namespace kinfer::app
