// kinfer info: what a network is and what computing it would take, without computing.
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/plan.hpp"

namespace kinfer::app {

namespace {

struct InfoOptions {
  NetworkOptions net;
  bool json = false;
};

int run_info(const InfoOptions& o) {
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  PlanOptions po = o.net.plan_options();
  const double limit = po.max_memory_bytes;
  po.max_memory_bytes = 0;  // report the estimate even when it would not fit
  Plan plan = make_plan(net, ev, po);
  int max_card = 0;
  for (int c : net.card) max_card = std::max(max_card, c);
  int free_vars = 0;
  for (char f : plan.model.fixed) free_vars += !f;
  nlohmann::json j = {{"network", o.net.network},
                      {"type", net.kind},
                      {"variables", net.num_vars()},
                      {"max_cardinality", max_card},
                      {"factors", net.factors.size()},
                      {"evidence_observed", plan.model.num_observed},
                      {"free_variables", free_vars},
                      {"values_removed", plan.model.values_removed},
                      {"reduced_factors", plan.model.factors.size()},
                      {"components", plan.components},
                      {"order", order_json(plan)},
                      {"buckets", plan.tree.buckets.size()},
                      {"memory", memory_json(plan)},
                      {"memory_limit_bytes", limit},
                      {"fits_memory_limit", plan.memory.peak_bytes <= limit}};
  if (!plan.model.impossible.empty()) j["impossible"] = plan.model.impossible;
  if (o.json) {
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::printf("network            %s (%s)\n", o.net.network.c_str(), net.kind.c_str());
  std::printf("variables          %d (largest domain %d), %d free after evidence\n", net.num_vars(),
              max_card, free_vars);
  std::printf("factors            %zu (%zu after evidence reduction), %d connected component(s)\n",
              net.factors.size(), plan.model.factors.size(), plan.components);
  std::printf("evidence           %d observed variable(s); value elimination removed %d value(s)\n",
              plan.model.num_observed, plan.model.values_removed);
  std::printf("order              %s, %d restarts in %.2f s\n", plan.order.heuristic.c_str(),
              plan.order.restarts, plan.order.seconds);
  std::printf("width              %d\n", plan.order.stats.width);
  std::printf("largest table      2^%.2f entries\n", plan.order.stats.log2_max_table);
  std::printf("total state space  2^%.2f\n", plan.order.stats.log2_total_state);
  std::printf("buckets            %zu\n", plan.tree.buckets.size());
  std::printf("estimated memory   %.4g MB peak (limit %.4g MB)%s\n", plan.memory.peak_bytes / 1e6,
              limit / 1e6, plan.memory.peak_bytes <= limit ? "" : "  -- does NOT fit");
  std::printf("estimated FLOPs    %.4g\n", plan.flops);
  if (!plan.model.impossible.empty())
    std::printf("impossible         %s\n", plan.model.impossible.c_str());
  return 0;
}

}  // namespace

Runner add_info(CLI::App& root) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = root.add_subcommand("info", "describe a network and the cost of computing it");
  o->net.add(*cmd);
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  return [o, cmd]() { return cmd->parsed() ? run_info(*o) : -1; };
}

}  // namespace kinfer::app
