// kinfer schedule: the four CPU/GPU policies on an explicit cost tree (TREE.json).
// kinfer schedule-compare: the four policies on a network, predicted and (where the device is
// there) measured, like Table 2 of paper 001.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/errors.hpp"
#include "engine/json.hpp"
#include "engine/util.hpp"
#include "scheduler/runner.hpp"
#include "scheduler/executor.hpp"
#include "scheduler/plan_costs.hpp"
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
    std::cout
        << nlohmann::json{{"tree", o.tree}, {"nodes", t.nodes.size()}, {"policies", pol}}.dump(2)
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

struct CompareOptions {
  NetworkOptions net;
  std::string profile, gpu, save_tree, bucket_log;
  bool json = false, no_gpu = false, explain = false;
  int repeat = 3;
};

std::string percent(double x) {
  if (!std::isfinite(x)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
  return buf;
}

// Per-bucket kernel predictions against one timed run on a device.
struct BucketCheck {
  int buckets = 0;
  double median_error = NAN;           // median over buckets of |predicted / measured - 1|
  double predicted = 0, measured = 0;  // totals over the same buckets
  nlohmann::json to_json() const {
    return {{"buckets", buckets},
            {"median_relative_error", number_or_null(median_error)},
            {"predicted_seconds", predicted},
            {"measured_seconds", measured}};
  }
};

BucketCheck check_buckets(const sched::PlanCosts& pc, const sched::Profile& prof,
                          const sched::ExecStats& st, sched::Device d) {
  BucketCheck c;
  std::vector<double> err;
  for (std::size_t b = 0; b < st.ran_on.size(); ++b) {
    if (st.ran_on[b] != d) continue;
    // the kernel alone: what a timed bucket measures (the executor's own cost is not in it)
    const double pred = d == sched::Device::gpu ? pc.tree.nodes[b].gpu - prof.gpu.dispatch
                                                : pc.tree.nodes[b].cpu - prof.cpu.dispatch;
    const double meas = st.kernel_seconds[b];
    if (!(meas > 0) || !std::isfinite(pred)) continue;
    err.push_back(std::abs(pred / meas - 1));
    c.predicted += pred;
    c.measured += meas;
  }
  c.buckets = static_cast<int>(err.size());
  c.median_error = median(err);
  return c;
}

struct ComparedProfile {
  std::string path, why;
};

// The profile the policies are predicted with: --profile; else the shipped profile --gpu names;
// else, with a GPU here, the one made for it (`kinfer calibrate`, an automatic calibration, or
// a shipped one of that GPU); else the shipped profile of the reference GPU (the H100): a
// comparison needs no GPU and no calibration.
ComparedProfile compare_profile(const CompareOptions& o, const std::string& gpu_here) {
  const std::vector<std::string> names = sched::shipped_gpu_profile_names();
  auto listed = [&] {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : "|") + n;
    return s.empty() ? std::string("none found") : s;
  };
  if (!o.profile.empty()) return {o.profile, "given by --profile"};
  if (!o.gpu.empty()) {
    const std::string p = sched::shipped_profile(o.gpu);
    if (p.empty())
      throw CLI::ValidationError("--gpu", "no shipped profile named '" + o.gpu +
                                              "' (shipped: " + listed() + ")");
    return {p, "the shipped profile of --gpu " + o.gpu};
  }
  if (!gpu_here.empty()) {
    const std::string p = sched::find_profile_for_gpu(gpu_here);
    if (!p.empty()) return {p, "the profile of this machine's " + gpu_here};
  }
  const std::string reference = "h100";
  const std::string p = sched::shipped_profile(reference);
  if (p.empty())
    throw InputError("schedule-compare", 0,
                     "no profile to predict with: give --profile FILE (from `kinfer calibrate`); "
                     "no shipped profile was found beside the program");
  return {p, (gpu_here.empty() ? std::string("no GPU here")
                               : "no profile of this machine's " + gpu_here) +
                 ": the shipped " + reference + " profile (choose with --gpu " + listed() + ")"};
}

struct PolicyRow {
  sched::Schedule s;
  sched::Traffic predicted_bytes;
  bool measured = false;
  double seconds = NAN, ln_pr = NAN;
  sched::ExecStats st;
};

// What schedule-compare found: every policy predicted and, where the device is here, measured;
// every bucket timed alone on each device.
struct Comparison {
  int buckets = 0;
  std::vector<PolicyRow> rows;  // in kAllPolicies order: the last is comm-aware
  double reference = NAN;       // ln P(e) of the first policy measured
  double worst_diff = 0;        // the largest difference of another policy's ln P(e) from it
  bool gpu_measured = false;
  sched::ExecStats cpu_st, gpu_st;  // bucket by bucket, each timed alone
  BucketCheck cpu_check, gpu_check;
  double predicted_uploads = 0;  // of the buckets that ran on the GPU
};

// Every policy's schedule predicted, and run (a warm-up that also checks ln P(e), then `repeat`
// timed runs) unless it needs the GPU and there is none.
void measure_policies(const Plan& plan, const sched::PlanCosts& pc, const sched::OpenedDevice& dev,
                      int repeat, Comparison& c) {
  for (sched::Policy p : sched::kAllPolicies) {
    PolicyRow r;
    r.s = sched::make_schedule(pc.tree, p);
    r.predicted_bytes = sched::schedule_traffic(pc, r.s.device);
    const bool needs_gpu = p == sched::Policy::gpu_only || r.s.cost.on_gpu > 0;
    if (needs_gpu && !c.gpu_measured) {
      c.rows.push_back(std::move(r));
      continue;
    }
    std::vector<double> times;
    for (int rep = 0; rep <= repeat; ++rep) {  // the first run warms caches and checks
      const double ln = sched::run_scheduled(plan, r.s.device, dev.ctx.get(), {}, &r.st);
      if (rep == 0) {
        if (std::isnan(c.reference)) c.reference = ln;
        c.worst_diff = std::max(c.worst_diff, std::abs(ln - c.reference));
        r.ln_pr = ln;
      } else {
        times.push_back(r.st.seconds);
      }
    }
    r.measured = true;
    r.seconds = median(times);
    c.rows.push_back(std::move(r));
  }
}

// Kernel predictions bucket by bucket: every bucket timed alone on the CPU, and on the GPU.
void time_buckets_alone(const Plan& plan, const sched::PlanCosts& pc, const sched::Profile& prof,
                        const sched::OpenedDevice& dev, Comparison& c) {
  const int nb = c.buckets;
  sched::ExecOptions timed;
  timed.time_buckets = true;
  sched::run_scheduled(plan, std::vector<sched::Device>(nb, sched::Device::cpu), nullptr, timed,
                       &c.cpu_st);
  c.cpu_check = check_buckets(pc, prof, c.cpu_st, sched::Device::cpu);
  if (!c.gpu_measured) return;
  sched::run_scheduled(plan, std::vector<sched::Device>(nb, sched::Device::gpu), dev.ctx.get(),
                       timed, &c.gpu_st);
  c.gpu_check = check_buckets(pc, prof, c.gpu_st, sched::Device::gpu);
  for (int b = 0; b < nb; ++b)
    if (c.gpu_st.ran_on[b] == sched::Device::gpu) c.predicted_uploads += pc.tree.nodes[b].upload;
}

// --bucket-log: per bucket its features, predicted and measured seconds on each device, and
// where comm-aware puts it (tab-separated).
void write_bucket_log(const std::string& path, const sched::PlanCosts& pc, const Comparison& c) {
  std::string t = "bucket";
  for (const char* n : sched::BucketFeatures::names()) t += std::string("\t") + n;
  t += "\tcpu_predicted\tcpu_measured\tgpu_predicted\tgpu_measured\tcomm_aware\n";
  const sched::Schedule& ca = c.rows.back().s;
  for (int b = 0; b < c.buckets; ++b) {
    t += std::to_string(b);
    for (double x : pc.features[b].values()) t += fmt::format("\t{:.4g}", x);
    const bool g = c.gpu_measured && c.gpu_st.ran_on[b] == sched::Device::gpu;
    t += fmt::format("\t{:.4g}\t{:.4g}\t{:.4g}\t{}\t{}\n", pc.tree.nodes[b].cpu,
                     c.cpu_st.kernel_seconds[b], pc.tree.nodes[b].gpu,
                     g ? fmt::format("{:.4g}", c.gpu_st.kernel_seconds[b]) : "-",
                     sched::to_string(ca.device[b]));
  }
  write_file_atomically(path, t);
}

void print_comparison_json(const CompareOptions& o, const ComparedProfile& chosen,
                           const sched::Profile& prof, const sched::PlanCosts& pc,
                           const std::string& gpu_name, const Comparison& c) {
  nlohmann::json pol = nlohmann::json::array();
  for (const PolicyRow& r : c.rows) {
    nlohmann::json j = {{"policy", sched::to_string(r.s.policy)},
                        {"predicted_seconds", number_or_null(r.s.cost.total())},
                        {"measured", r.measured},
                        {"measured_seconds", number_or_null(r.seconds)},
                        {"gpu_buckets", r.s.cost.on_gpu},
                        {"predicted_h2d_bytes", bytes_or_null(r.predicted_bytes.h2d)},
                        {"predicted_d2h_bytes", bytes_or_null(r.predicted_bytes.d2h)},
                        {"crossings", r.s.cost.crossings}};
    if (r.measured) {
      j["h2d_bytes"] = bytes_or_null(r.st.h2d_bytes);
      j["d2h_bytes"] = bytes_or_null(r.st.d2h_bytes);
      j["gpu_buckets_ran"] = r.st.gpu_buckets;
      j["ln_pr"] = r.ln_pr;
      j["relative_error"] = number_or_null(r.s.cost.total() / r.seconds - 1);
    }
    pol.push_back(j);
  }
  nlohmann::json j = {{"network", o.net.network},
                      {"buckets", c.buckets},
                      {"profile", chosen.path},
                      {"profile_choice", chosen.why},
                      {"profile_host", prof.host},
                      {"gpu", c.gpu_measured ? nlohmann::json(gpu_name) : nlohmann::json(nullptr)},
                      {"gpu_missing_reason", c.gpu_measured ? "" : gpu_name},
                      {"repeat", o.repeat},
                      {"ln_pr", number_or_null(c.reference)},
                      {"log10_pr", number_or_null(c.reference / std::log(10.0))},
                      {"max_ln_pr_difference", c.worst_diff},
                      {"policies", pol},
                      {"bucket_predictions", {{"cpu", c.cpu_check.to_json()}}}};
  if (o.explain) j["comm_aware"] = sched::to_json(pc.tree, c.rows.back().s, true);
  if (c.gpu_measured) {
    j["bucket_predictions"]["gpu"] = c.gpu_check.to_json();
    j["uploads"] = {{"predicted_seconds", c.predicted_uploads},
                    {"measured_seconds", c.gpu_st.h2d_seconds}};
  }
  std::cout << j.dump(2) << std::endl;
}

void print_comparison_text(const CompareOptions& o, const ComparedProfile& chosen,
                           const sched::Profile& prof, const std::string& gpu_name,
                           const Comparison& c, bool disagree) {
  const int nb = c.buckets;
  std::printf("network  %s: %d buckets, log10 P(e) = %.10g\n", o.net.network.c_str(), nb,
              c.reference / std::log(10.0));
  std::printf("profile  %s (%s; made on %s, %s)\n", chosen.path.c_str(), chosen.why.c_str(),
              prof.host.c_str(), prof.created.c_str());
  if (c.gpu_measured)
    std::printf("GPU      %s: every policy measured (median of %d runs after a warm-up)\n",
                gpu_name.c_str(), o.repeat);
  else
    std::printf(
        "GPU      none here (%s): policies that use the GPU are PREDICTED ONLY, from the "
        "profile%s; measured figures are this machine's\n",
        gpu_name.c_str(),
        (prof.has_gpu ? " (" + prof.gpu.name + ")" : std::string(" (no GPU in it either)"))
            .c_str());
  std::printf("\n%-11s %11s %11s %8s %11s %10s %10s\n", "policy", "predicted", "measured", "error",
              "GPU nodes", "to GPU", "to CPU");
  for (const PolicyRow& r : c.rows) {
    char nodes[32];
    std::snprintf(nodes, sizeof nodes, "%d/%d", r.s.cost.on_gpu, nb);
    std::printf("%-11s %11s %11s %8s %11s %10s %10s\n", sched::to_string(r.s.policy),
                sched::format_seconds(r.s.cost.total()).c_str(),
                r.measured ? sched::format_seconds(r.seconds).c_str() : "(predicted)",
                r.measured ? percent(r.s.cost.total() / r.seconds - 1).c_str() : "", nodes,
                human_bytes(r.measured ? r.st.h2d_bytes : r.predicted_bytes.h2d).c_str(),
                human_bytes(r.measured ? r.st.d2h_bytes : r.predicted_bytes.d2h).c_str());
  }
  std::printf("\nkernel predictions, bucket by bucket (each timed alone):\n");
  auto print_check = [](const char* device, const BucketCheck& bc) {
    std::printf(
        "  %s  median |predicted/measured - 1| = %.1f%% over %d buckets; total %s predicted, %s "
        "measured\n",
        device, 100 * bc.median_error, bc.buckets, sched::format_seconds(bc.predicted).c_str(),
        sched::format_seconds(bc.measured).c_str());
  };
  print_check("CPU", c.cpu_check);
  if (c.gpu_measured) {
    print_check("GPU", c.gpu_check);
    std::printf("  uploads of the original inputs: %s predicted, %s measured\n",
                sched::format_seconds(c.predicted_uploads).c_str(),
                sched::format_seconds(c.gpu_st.h2d_seconds).c_str());
  }
  if (o.explain) {
    const sched::Schedule& ca = c.rows.back().s;
    std::printf("\nwhy (comm-aware, bucket by bucket):\n");
    for (int b = 0; b < nb; ++b)
      std::printf("  bucket %-5d %s  %s\n", b, sched::to_string(ca.device[b]),
                  ca.reason[b].c_str());
  }
  if (disagree) std::printf("\nWARNING: the policies disagree on ln P(e) by %.3g\n", c.worst_diff);
}

int run_compare(const CompareOptions& o) {
  check_output_file(o.save_tree, "--save-tree");
  check_output_file(o.bucket_log, "--bucket-log");
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  const Plan plan = make_plan(net, ev, o.net.plan_options());
  if (!plan.model.impossible.empty())
    throw InputError(
        o.net.network, 0,
        "P(e) = 0 before any bucket runs (" + plan.model.impossible + "): nothing to schedule");
  sched::OpenedDevice dev;
  if (o.no_gpu)
    dev.name = "--no-gpu";
  else
    dev = sched::open_gpu();
  Comparison c;
  c.buckets = static_cast<int>(plan.tree.buckets.size());
  c.gpu_measured = dev.ctx != nullptr;
  const ComparedProfile chosen = compare_profile(o, c.gpu_measured ? dev.name : std::string());
  const sched::Profile prof = sched::load_profile(chosen.path);
  spdlog::info("profile {}: {}", chosen.path, chosen.why);
  if (c.gpu_measured && !prof.has_gpu)
    spdlog::warn(
        "the profile {} was made without a GPU: every prediction keeps the buckets on "
        "the CPU; run `kinfer calibrate` on this machine",
        chosen.path);
  // every measured run follows a warm-up, so no bucket pays its shape's first GPU use
  const sched::PlanCosts pc = sched::plan_costs(plan, prof, true);
  if (!o.save_tree.empty())
    write_file_atomically(o.save_tree, sched::to_json(pc.tree).dump(1) + "\n");
  measure_policies(plan, pc, dev, o.repeat, c);
  time_buckets_alone(plan, pc, prof, dev, c);
  if (!o.bucket_log.empty()) write_bucket_log(o.bucket_log, pc, c);
  const double tolerance = 1e-9 * std::max(1.0, std::abs(c.reference));
  if (c.worst_diff > tolerance)
    spdlog::error("the policies disagree on ln P(e) by {:.3g} (tolerance {:.3g})", c.worst_diff,
                  tolerance);
  if (o.json)
    print_comparison_json(o, chosen, prof, pc, dev.name, c);
  else
    print_comparison_text(o, chosen, prof, dev.name, c, c.worst_diff > tolerance);
  return 0;
}

}  // namespace

Runner add_schedule(CLI::App& root) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = root.add_subcommand(
      "schedule",
      "assign the nodes of an explicit cost tree to the CPU or the GPU under each policy");
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

Runner add_schedule_compare(CLI::App& root) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = root.add_subcommand(
      "schedule-compare",
      "the four CPU/GPU policies on a network: predicted and measured runtime, GPU buckets, bytes "
      "moved");
  o->net.add(*cmd);
  cmd->add_option(
      "--profile", o->profile,
      "calibration profile (default: the shipped profile of --gpu; else the profile of this "
      "machine's GPU; else the shipped H100 profile)");
  cmd->add_option("--gpu", o->gpu,
                  "predict with the shipped profile of this GPU (h100, h200), no calibration "
                  "needed");
  cmd->add_option("--repeat", o->repeat, "timed runs per policy after a warm-up")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--save-tree", o->save_tree, "also write the network's cost tree as TREE.json");
  cmd->add_option("--bucket-log", o->bucket_log,
                  "write each bucket's features, predicted and measured kernel times (TSV)");
  cmd->add_flag("--no-gpu", o->no_gpu, "do not use a GPU even if there is one (predictions only)");
  cmd->add_flag("--explain", o->explain, "print why each bucket went where it went (comm-aware)");
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  return [o, cmd]() { return cmd->parsed() ? run_compare(*o) : -1; };
}

}  // namespace kinfer::app
