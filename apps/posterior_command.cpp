#include "apps/posterior_command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/errors.hpp"
#include "engine/posterior.hpp"
#include "engine/util.hpp"

namespace kinfer::app {

void add_posterior_options(CLI::App& cmd, PosteriorOptions& o, const std::string& uai_format) {
  o.net.add(cmd);
  cmd.add_flag("--json", o.json, "print one JSON object instead of text");
  cmd.add_option("--uai-output", o.uai_output,
                 "also write the answer in the UAI 2014 " + uai_format + " format");
}

ConditionedPlan plan_posterior(const PosteriorOptions& o, const std::string& command,
                               bool marginals, Network& net) {
  check_output_file(o.uai_output, "--uai-output");
  Evidence ev;
  o.net.load(net, ev);
  const PlanOptions po = o.net.plan_options();
  PlanOptions trial = po;
  trial.keep_tables = false;  // the plan runs once: the reduced model's tables are dropped
  // pe's planner conditions a plan to fit its own estimate; the second pass keeps more (every
  // bucket's output), so the budget it plans for is lowered until that fits too.
  constexpr int kAttempts = 6;
  ConditionedPlan cp;
  double need = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    try {
      cp = make_conditioned_plan(net, ev, trial);
    } catch (const ResourceError& e) {
      std::string message = command + ": ";
      message += e.what();
      if (attempt > 0)
        message += " (planning within " + human_bytes(trial.max_memory_bytes) + " so that " +
                   command + "'s second pass fits " + human_bytes(po.max_memory_bytes) + ")";
      throw ResourceError(message);
    }
    need = posterior_peak_bytes(cp.plan, marginals);
    if (!(po.max_memory_bytes > 0) || need <= po.max_memory_bytes) break;
    if (attempt + 1 == kAttempts)
      throw ResourceError(command + " needs an estimated " + human_bytes(need) +
                          " (every bucket's output kept for the second pass) even conditioned "
                          "into " + std::to_string(cp.cond.slices) + " slices, above the limit " +
                          human_bytes(po.max_memory_bytes) +
                          ": raise --max-memory or run on a machine with more memory");
    trial.max_memory_bytes = std::min(trial.max_memory_bytes, cp.plan.memory.peak_bytes) * 0.95 *
                             po.max_memory_bytes / need;
  }
  const Plan& plan = cp.plan;
  if (cp.conditioned())
    spdlog::info("conditioning on {} variable(s): {} slices; {}", cp.cond.vars.size(),
                 cp.cond.slices, cp.cond.choice);
  spdlog::info(
      "order {}: width {}, largest table 2^{:.1f}, total state 2^{:.1f}, {} buckets, "
      "estimated peak memory {}",
      plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
      plan.order.stats.log2_total_state, plan.tree.buckets.size(), human_bytes(need));
  return cp;
}

void refuse_impossible(const Plan& plan, const std::string& what) {
  std::string message = "P(e) = 0";
  if (!plan.model.impossible.empty()) message += " (" + plan.model.impossible + ")";
  message += ": " + what + " undefined";
  throw ResourceError(message);
}

}  // namespace kinfer::app
