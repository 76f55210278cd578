#pragma once
// What `kinfer mar` and `kinfer mpe` share: their options (the network options of pe, --json,
// --uai-output) and the plan they run on, conditioned when it must be, with the second pass's
// memory checked.
#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "apps/network_options.hpp"
#include "engine/condition.hpp"
#include "engine/plan.hpp"

namespace kinfer::app {

struct PosteriorOptions {
  NetworkOptions net;
  bool json = false;
  std::string uai_output;
};

// Registers the network options and --json, --uai-output (`uai_format` names the format).
void add_posterior_options(CLI::App& cmd, PosteriorOptions& o, const std::string& uai_format);

// Checks --uai-output, reads the network and the evidence (into `net`) and plans as pe does,
// conditioning (engine/condition.hpp) when the plan does not fit --max-memory; the budget is
// lowered until the second pass (`marginals`: the downward pass, else the MPE traceback) fits
// too. ResourceError (exit 3) naming `command` when nothing fits.
ConditionedPlan plan_posterior(const PosteriorOptions& o, const std::string& command,
                               bool marginals, Network& net);

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
