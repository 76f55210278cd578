// kinfer schedule: the four CPU/GPU policies on an explicit cost tree (TREE.json).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "engine/errors.hpp"
#include "scheduler/policies.hpp"
#include "scheduler/tree_json.hpp"

namespace kinfer::app {

namespace {

struct ScheduleOptions {
  std::string tree;
  std::string policy = "comm-aware";
  bool json = false, explain = false;
};

void print_policy_table(const std::vector<sched::Schedule>& all, std::size_t nodes) {
  std::printf("%-11s %11s %8s %6s %11s %11s %11s %11s\n", "policy", "cost", "on GPU", "moves",
              "kernels", "edges", "uploads", "download");
  for (const auto& s : all)
    std::printf("%-11s %11s %4d/%-3zu %6d %11s %11s %11s %11s\n", sched::to_string(s.policy),
                sched::format_seconds(s.cost.total()).c_str(), s.cost.on_gpu, nodes,
                s.cost.crossings, sched::format_seconds(s.cost.compute).c_str(),
                sched::format_seconds(s.cost.edges).c_str(),
                sched::format_seconds(s.cost.uploads).c_str(),
                sched::format_seconds(s.cost.download).c_str());
}

int run_schedule(const ScheduleOptions& o) {
  sched::Policy chosen;
  try {
    chosen = sched::parse_policy(o.policy);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--policy", e.what());
  }
  const sched::CostTree t = sched::read_cost_tree(o.tree);
  std::vector<sched::Schedule> all;
  for (sched::Policy p : sched::kAllPolicies) all.push_back(sched::make_schedule(t, p));
  if (o.json) {
    nlohmann::json pol = nlohmann::json::object();
    for (const auto& s : all)
      pol[sched::to_string(s.policy)] = sched::to_json(t, s, o.explain || s.policy == chosen);
    std::cout << nlohmann::json{{"tree", o.tree}, {"nodes", t.nodes.size()}, {"policies", pol}}
                     .dump(2)
              << std::endl;
    return 0;
  }
  std::printf("tree %s: %zu nodes, root %lld\n\n", o.tree.c_str(), t.nodes.size(),
              t.nodes[t.root].id);
  print_policy_table(all, t.nodes.size());
  const sched::Schedule& s = all[static_cast<int>(chosen)];
  std::printf("\n%s assignment:", sched::to_string(chosen));
  for (int v : sched::postorder(t))
    std::printf(" %lld:%s", t.nodes[v].id, sched::to_string(s.device[v]));
  std::printf("\n");
  if (o.explain) {
    std::printf("\nwhy (%s, children before parents):\n", sched::to_string(chosen));
    for (int v : sched::postorder(t))
      std::printf("  node %-6lld %s  %s\n", t.nodes[v].id, sched::to_string(s.device[v]),
                  s.reason[v].c_str());
  }
  return 0;
}

}  // namespace

Runner add_schedule(CLI::App& root) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = root.add_subcommand(
      "schedule", "assign the nodes of an explicit cost tree to the CPU or the GPU under each policy");
  cmd->add_option("--tree", o->tree,
                  "TREE.json: {\"root\": id, \"nodes\": [{\"id\", \"children\", \"cpu\", \"gpu\", "
                  "\"upload\", \"to_gpu\", \"to_cpu\"}]} (seconds)")
      ->required();
  cmd->add_option("--policy", o->policy,
                  "the policy whose assignment is printed and explained: cpu-only, gpu-only, "
                  "greedy, comm-aware")
      ->capture_default_str();
  cmd->add_flag("--explain", o->explain, "print why each node went where it went");
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  return [o, cmd]() { return cmd->parsed() ? run_schedule(*o) : -1; };
}

}  // namespace kinfer::app
