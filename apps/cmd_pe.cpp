// kinfer pe: the probability of the evidence.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/solver.hpp"

namespace kinfer::app {

namespace {

struct PeOptions {
  NetworkOptions net;
  bool json = false;
  std::string uai_output;
};

std::string format_log10(double x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

int run_pe(const PeOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  const auto t1 = clock::now();
  Plan plan = make_plan(net, ev, o.net.plan_options());
  const auto t2 = clock::now();
  spdlog::info("order {}: width {}, largest table 2^{:.1f}, total state 2^{:.1f}, {} buckets, "
               "estimated peak memory {:.3g} MB",
               plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
               plan.order.stats.log2_total_state, plan.tree.buckets.size(),
               plan.memory.peak_bytes / 1e6);
  double ln_pr;
  std::string impossible = plan.model.impossible;
  if (!impossible.empty()) {
    ln_pr = -INFINITY;
  } else {
    ln_pr = run_plan(plan);
    if (std::isinf(ln_pr) && ln_pr < 0)
      impossible = "the evidence is jointly impossible (no single factor is zero on its own)";
  }
  const auto t3 = clock::now();
  const double log10_pr = ln_pr / std::log(10.0);
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  if (!impossible.empty()) spdlog::warn("P(e) = 0: {}", impossible);
  if (!o.uai_output.empty()) write_atomically(o.uai_output, "PR\n" + format_log10(log10_pr) + "\n");
  if (o.json) {
    nlohmann::json j = {
        {"network", o.net.network},
        {"evidence_observed", plan.model.num_observed},
        {"log10_pr", std::isinf(log10_pr) ? nlohmann::json("-inf") : nlohmann::json(log10_pr)},
        {"ln_pr", std::isinf(ln_pr) ? nlohmann::json("-inf") : nlohmann::json(ln_pr)},
        {"seconds", secs(t0, t3)},
        {"timings", {{"read", secs(t0, t1)}, {"plan", secs(t1, t2)}, {"compute", secs(t2, t3)}}},
        {"order", order_json(plan)},
        {"buckets", plan.tree.buckets.size()},
        {"memory", memory_json(plan)},
        {"device", "cpu"}};
    if (!impossible.empty()) j["impossible"] = impossible;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "log10 P(e) = " << format_log10(log10_pr) << std::endl;
  }
  return 0;
}

}  // namespace

Runner add_pe(CLI::App& root) {
  auto o = std::make_shared<PeOptions>();
  CLI::App* cmd = root.add_subcommand("pe", "compute the probability of the evidence, log10 P(e)");
  o->net.add(*cmd);
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_option("--uai-output", o->uai_output, "also write the answer in the UAI PR format");
  return [o, cmd]() { return cmd->parsed() ? run_pe(*o) : -1; };
}

}  // namespace kinfer::app
