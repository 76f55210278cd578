#pragma once
// What `kinfer mar` and `kinfer mpe` share: their options (the network options of pe, pe's run
// options, --json, --uai-output), the plan they run on, conditioned when it must be, with the
// second pass's memory checked, and their upward pass through the scheduler's Runner (any
// device, its check mode included).
#include <CLI/CLI.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/network_options.hpp"
#include "engine/condition.hpp"
#include "engine/plan.hpp"
#include "engine/posterior.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

struct PosteriorOptions {
  NetworkOptions net;
  bool json = false;
  std::string uai_output;
  // pe's run options (scheduler/runner.hpp): where the upward pass runs
  std::string device = "auto", schedule, profile, gpu_memory;
  bool check = false;
};

// Registers the network options, the run options but --explain, and --json, --uai-output
// (`uai_format` names the format).
void add_posterior_options(CLI::App& cmd, PosteriorOptions& o, const std::string& uai_format);

// The runner's request of the options (pe's run_request, the commands' --threads).
sched::RunRequest posterior_run_request(const PosteriorOptions& o);

// Checks --uai-output, reads the network and the evidence (into `net`) and plans as pe does for
// the device `runner` will use, conditioning (engine/condition.hpp) when the plan does not fit
// --max-memory; the budget is lowered until the second pass (`marginals`: the downward pass,
// else the MPE traceback) fits too. ResourceError (exit 3) naming `command` when nothing fits.
ConditionedPlan plan_posterior(const PosteriorOptions& o, const std::string& command,
                               bool marginals, Network& net, sched::Runner& runner);

// --check with a GPU also checks the second pass: the command's passes again as a run without
// --check takes them (mar's downward pass on the GPU, mpe's traceback narrowed down there),
// their answer against the checked run's, which is the CPU's (marginals: the largest absolute
// difference of a probability; mpe: the relative difference of the other run's assignment's own
// ln probability from the maximum).
struct SecondPassCheck {
  bool run = false;
  std::string what;    // "marginals" or "assignment"
  std::string device;  // where that run's upward pass ran (UpwardRuns::device)
  double largest = 0, tolerance = sched::kCheckTolerance;
  bool passed = true;
};

// The upward passes of one command through `runner` (every slice's): where they ran.
struct UpwardRuns {
  int gpu_runs = 0;  // the passes that put a bucket on the GPU
  std::string device;    // the last run's: "cpu", "gpu", "gpu+cpu", "cpu+gpu" (a check)
  std::string gpu_name;  // the GPU used, if any
  std::string note;      // fallbacks taken, the first
  std::string check_not_run;
  double upward_seconds = 0;  // the passes' computation
  SecondPassCheck second;
};
UpwardRunner upward_through(sched::Runner& runner, UpwardRuns& runs);

// The JSON object both commands print but their answer: the network, the evidence observed, the
// slices, `log10_pr`, `seconds` and `timings` (t0 to t1: reading and planning; t1 to t2: both
// passes), where the upward pass ran and the check; the text lines about the same; and their
// exit code: 5 when the check failed, 6 when it could not run (no GPU), else 0.
nlohmann::json posterior_json(const PosteriorOptions& o, const ConditionedPlan& cp,
                              double log10_pr, std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1,
                              std::chrono::steady_clock::time_point t2,
                              const sched::Runner& runner, const UpwardRuns& runs);
std::string run_lines(const sched::Runner& runner, const UpwardRuns& runs, bool check);
// Whether --check asks for the second pass's check: a GPU took part in the checked run.
bool wants_second_check(const PosteriorOptions& o, const UpwardRuns& runs);
// The request of that run: the options' without --check, on the GPU where they say auto.
sched::RunRequest unchecked_run_request(const PosteriorOptions& o);

// The second pass's check, when wants_second_check: `passes(upward)` computes the command's
// answer again through a runner without --check, and `difference(answer)` measures it against
// the checked run's; runs.second records `what` was compared, where, and the verdict.
template <class Passes, class Difference>
void check_second_pass(const PosteriorOptions& o, UpwardRuns& runs, const char* what,
                       Passes&& passes, Difference&& difference) {
  if (!wants_second_check(o, runs)) return;
  sched::Runner unchecked(unchecked_run_request(o));
  UpwardRuns again;
  const auto answer = passes(upward_through(unchecked, again));
  runs.second.run = true;
  runs.second.what = what;
  runs.second.device = again.device;
  runs.second.largest = difference(answer);
  runs.second.passed = runs.second.largest <= runs.second.tolerance;
}
int posterior_exit(const sched::Runner& runner, const UpwardRuns& runs, bool check);

// ResourceError (exit 3) saying that P(e) = 0 leaves `what` undefined, with the reduction's
// reason when it found one.
[[noreturn]] void refuse_impossible(const Plan& plan, const std::string& what);

// Seconds from `a` to `b` (the JSON's "seconds" and "timings": plan = reading and planning,
// compute = both passes).
inline double seconds_between(std::chrono::steady_clock::time_point a,
                              std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace kinfer::app
