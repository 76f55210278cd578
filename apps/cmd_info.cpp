// kinfer info: what a network is and what computing it would take, without computing.
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/command_options.hpp"
#include "apps/network_options.hpp"
#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/json.hpp"
#include "engine/util.hpp"
#include "engine/plan.hpp"
#include "scheduler/devices.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

namespace {

struct InfoOptions {
  NetworkOptions net;
  bool json = false;
  std::string device = "auto";  // the device pe would be given: it sizes the order search
  std::string gpu_memory;
};

// How a conditioned plan's `lanes` GPUs would share its slices (Runner::run(ConditionedPlan&):
// each takes the next slice when it is free, so the counts are about even).
nlohmann::json slice_spread(const ConditionedPlan& cp, int lanes) {
  const std::int64_t s = cp.cond.slices;
  std::string text = lanes > 1 ? std::to_string(s) + " slices over " + std::to_string(lanes) +
                                     " GPUs, about " + std::to_string(s / lanes) + "-" +
                                     std::to_string((s + lanes - 1) / lanes) + " each"
                               : std::to_string(s) + " slices one after another on one device";
  return {{"gpus_used", lanes}, {"slices", s}, {"text", text}};
}

int run_info(const InfoOptions& o) {
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  PlanOptions po = o.net.plan_options();
  po.keep_tables = false;  // what `kinfer pe` would need
  const double limit = po.max_memory_bytes;
  // Planned as pe plans for the same device (the search's prediction and the device budget),
  // so that the order it finds, and caches with --order-cache, is the one pe would use.
  sched::Runner runner(run_request(o.device, "", "", false, false, o.gpu_memory));
  runner.plan_for_device(po, /*describe_only=*/true);
  // What pe would run: the best order, conditioned when it does not fit the limit. When even
  // conditioning cannot fit, the unconditioned estimate is reported.
  ConditionedPlan cp;
  bool fits = true;
  try {
    cp = make_conditioned_plan(net, ev, po);
  } catch (const ResourceError& e) {
    spdlog::warn("{}", e.what());
    fits = false;
    po.max_memory_bytes = 0;
    cp = make_conditioned_plan(net, ev, po);
  }
  // The host memory of the device that would run it (a GPU holds the intermediate tables), as
  // pe estimates it before running.
  cp.plan.memory = runner.estimate(cp.plan);
  const Plan& plan = cp.plan;
  const double peak = cp.cond.unconditioned_peak_bytes;
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
                      {"memory_limit_bytes", bytes_or_null(limit)},
                      {"unconditioned_peak_bytes", bytes_or_null(peak)},
                      {"fits_memory_limit", fits}};
  if (cp.conditioned()) j["conditioning"] = conditioning_json(cp);
  if (!plan.model.impossible.empty()) j["impossible"] = plan.model.impossible;
  // The GPUs this process sees (probed, not opened) and how a conditioned plan's slices would
  // spread over them when the plan runs on the GPU (pe --device gpu, or auto when it is chosen).
  const sched::GpuList gpus = sched::list_gpus();
  const bool on_gpu = gpus.available && runner.wants_gpu(plan);
  j["device"] = on_gpu ? "gpu" : "cpu";
  const int lanes = sched::slice_lanes(gpus.available ? gpus.count : 0, cp, limit);
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t d = 0; d < gpus.devices.size(); ++d)
    devices.push_back({{"index", d},
                       {"name", gpus.devices[d].name},
                       {"memory_bytes", bytes_or_null(gpus.devices[d].memory_bytes)}});
  j["gpus"] = {{"count", gpus.available ? gpus.count : 0}, {"devices", devices}};
  if (!gpus.available) j["gpus"]["why_none"] = gpus.why_not;
  if (cp.conditioned()) j["gpus"]["slice_spread"] = slice_spread(cp, lanes);
  if (o.json) {
    if (const auto m = memory_limit_json(); !m.is_null()) j["memory_limit"] = m;
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
  std::printf("pe would run on    %s (--device %s)\n", on_gpu ? "the GPU" : "the CPU",
              o.device.c_str());
  std::printf("estimated memory   %s peak (limit %s)%s\n", human_bytes(peak).c_str(),
              human_bytes(limit).c_str(),
              peak <= limit ? ""
              : fits        ? "  -- conditioned to fit"
                            : "  -- does NOT fit");
  std::printf("estimated FLOPs    %.4g\n", cp.cond.unconditioned_flops);
  if (cp.conditioned()) {
    std::string vars;
    for (std::size_t i = 0; i < cp.cond.vars.size(); ++i)
      vars += (i ? " " : "") + std::to_string(cp.cond.vars[i]);
    std::printf("conditioning       %zu variable(s) [%s], %lld slices\n", cp.cond.vars.size(),
                vars.c_str(), static_cast<long long>(cp.cond.slices));
    std::printf("  per slice        %s peak, width %d, largest table 2^%.2f\n",
                human_bytes(cp.cond.slice_peak_bytes).c_str(), plan.order.stats.width,
                plan.order.stats.log2_max_table);
    std::printf("  total FLOPs      %.4g (%.1f%% over the unconditioned plan)\n", cp.cond.flops,
                100 * cp.cond.overhead());
    std::printf("  chosen           %s\n", cp.cond.choice.c_str());
  }
  if (!plan.model.impossible.empty())
    std::printf("impossible         %s\n", plan.model.impossible.c_str());
  if (!gpus.available) std::printf("GPUs               none (%s)\n", gpus.why_not.c_str());
  for (std::size_t d = 0; d < gpus.devices.size(); ++d)
    std::printf("GPU %-14zu %s, %.1f GiB\n", d, gpus.devices[d].name.c_str(),
                gpus.devices[d].memory_bytes / (1 << 30));
  if (cp.conditioned())
    std::printf("slices on the GPU  %s\n",
                j["gpus"]["slice_spread"]["text"].get<std::string>().c_str());
  return 0;
}

}  // namespace

Runner add_info(CLI::App& root) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = root.add_subcommand("info", "describe a network and the cost of computing it");
  o->net.add(*cmd);
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_option("--device", o->device,
                  "the device `kinfer pe --device` would be given (auto, cpu, gpu): the order "
                  "search is sized for it as pe's is, and the plan conditioned for the GPU's "
                  "memory when it would run there; the GPU is probed, never opened")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option("--gpu-memory", o->gpu_memory,
                  "as pe's --gpu-memory (default: 90% of the GPU's memory)");
  return [o, cmd]() { return cmd->parsed() ? run_info(*o) : -1; };
}

}  // namespace kinfer::app
