#include "apps/posterior_command.hpp"

#include <spdlog/spdlog.h>

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

Plan plan_posterior(const PosteriorOptions& o, const std::string& command, bool marginals,
                    Network& net) {
  check_output_file(o.uai_output, "--uai-output");
  Evidence ev;
  o.net.load(net, ev);
  PlanOptions po = o.net.plan_options();
  po.keep_tables = false;  // the plan runs once: the reduced model's tables are dropped
  const std::string no_conditioning =
      command + " does not condition a plan to fit a memory limit as pe does (not supported yet)";
  Plan plan;
  try {
    plan = make_plan(net, ev, po);
  } catch (const ResourceError& e) {
    std::string message = command + ": ";
    message += e.what();
    message += "; " + no_conditioning;
    throw ResourceError(message);
  }
  const double need = posterior_peak_bytes(plan, marginals);
  if (po.max_memory_bytes > 0 && need > po.max_memory_bytes) {
    std::string message = command + " needs an estimated " + human_bytes(need) +
                          " (every bucket's output is kept for the second pass), above the "
                          "memory limit " +
                          human_bytes(po.max_memory_bytes) + "; ";
    message += no_conditioning;
    message += ": raise --max-memory or run on a machine with more memory";
    throw ResourceError(message);
  }
  spdlog::info(
      "order {}: width {}, largest table 2^{:.1f}, total state 2^{:.1f}, {} buckets, "
      "estimated peak memory {}",
      plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
      plan.order.stats.log2_total_state, plan.tree.buckets.size(), human_bytes(need));
  return plan;
}

void refuse_impossible(const Plan& plan, const std::string& what) {
  std::string message = "P(e) = 0";
  if (!plan.model.impossible.empty()) message += " (" + plan.model.impossible + ")";
  message += ": " + what + " undefined";
  throw ResourceError(message);
}

}  // namespace kinfer::app
