// kinfer pe: the probability of the evidence.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "apps/command_options.hpp"
#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "dist/distributed.hpp"
#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/plan.hpp"
#include "engine/util.hpp"
#include "gpu/device_api.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

namespace {

constexpr const char* kWholePlan = "whole-plan";

std::string format_log10(double x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

// The slice dealer over the ranks (null with one process), after checking that every rank made
// the same plan.
std::unique_ptr<dist::RankDealer> slice_dealer(const PeOptions& o, const ConditionedPlan& cp) {
  if (dist::size() < 2) return nullptr;
  std::string fp = std::to_string(cp.cond.slices) + " slices; conditioned on";
  for (int v : cp.cond.vars) fp += " " + std::to_string(v);
  fp += "; order";
  for (int v : cp.plan.order.order) fp += " " + std::to_string(v);
  const std::vector<std::string> all = dist::allgather(fp);
  for (int r = 1; r < dist::size(); ++r)
    if (all[r] != all[0])
      throw ResourceError("the ranks planned differently (rank 0: " + all[0].substr(0, 200) +
                          "...; rank " + std::to_string(r) + ": " + all[r].substr(0, 200) +
                          "...): give every rank the same --order-time/--seed and hardware, or "
                          "run in one process");
  spdlog::info("{} ranks: {}", dist::size(),
               cp.conditioned()
                   ? std::to_string(cp.cond.slices) + " slices dealt cyclically"
                   : std::string("the plan is not conditioned (one slice): it runs on rank 0"));
  return std::make_unique<dist::RankDealer>(o.verify, o.net.seed);
}

// How many GPUs of this process share the slices: every visible one (CUDA_VISIBLE_DEVICES), as
// many as the plan's copies fit --max-memory (each GPU's runner fills a copy of the plan's
// inputs: counted at the plan's whole estimated peak, which overstates it) and no more than the
// slices. 1 for an unconditioned plan, --check, or a plan that stays on the CPU.
int gpu_lanes(sched::Runner& runner, const ConditionedPlan& cp, double max_memory) {
  if (!cp.conditioned() || cp.cond.slices < 2 || runner.request().check ||
      !runner.wants_gpu(cp.plan))
    return 1;
  const gpu::DeviceInfo info = gpu::probe();
  if (!info.available || info.count < 2) return 1;
  int lanes = static_cast<int>(std::min<std::int64_t>(info.count, cp.cond.slices));
  if (max_memory > 0 && cp.plan.memory.peak_bytes > 0)
    lanes = std::max(1, std::min(lanes, static_cast<int>(max_memory / cp.plan.memory.peak_bytes)));
  spdlog::info("{} GPUs: the {} slices spread over {} of them{}", info.count, cp.cond.slices, lanes,
               lanes < info.count ? " (what the copies of the plan fit in --max-memory)" : "");
  return lanes;
}

// The "mpi" member of --json (collective: every rank calls it).
nlohmann::json mpi_json(const dist::RankDealer& d, const ConditionedPlan& cp) {
  nlohmann::json j = {{"ranks", dist::size()},
                      {"slices", cp.conditioned() ? cp.cond.slices : 1},
                      {"dealing", "cyclic: slice s on rank s mod ranks"},
                      {"per_rank", d.per_rank("slices")}};
  if (d.verified() > 0 || !d.mismatches().empty())
    j["verify"] = {{"recomputed", d.verified()}, {"mismatches", d.mismatches().size()}};
  return j;
}

int run_pe(const PeOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  sched::RunRequest req =
      run_request(o.device, o.schedule, o.profile, o.check, o.explain, o.gpu_memory);
  req.threads = o.net.threads;
  req.repeat = o.repeat;
  sched::Runner runner(req);
  runner.start_early();  // the device starts while the network is read and planned
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  const auto t1 = clock::now();
  log_resources("the network read");
  PlanOptions po = o.net.plan_options();
  po.keep_tables = false;  // the plan runs once: its network and model tables are dropped
  po.order.predict_seconds = runner.order_prediction();
  if (po.order.predict_seconds) po.order.predict_key = sched::kGpuSizedPredictionKey;
  po.device_budget = [&runner](const Plan& p) { return runner.device_budget(p); };
  ConditionedPlan cplan = make_conditioned_plan(net, ev, po);
  net = Network{};
  Plan& plan = cplan.plan;
  log_resources("the plan made");
  plan.memory = runner.estimate(plan);  // for the device that runs it
  // Under mpirun every rank planned alike (the order search is seeded, not timed); a rank whose
  // plan differs (e.g. other hardware sized the order search) would sum other slices: refused.
  const auto dealer = slice_dealer(o, cplan);
  const int lanes = gpu_lanes(runner, cplan, po.max_memory_bytes);
  std::vector<std::unique_ptr<sched::Runner>> more;  // lanes > 1: the runners of GPUs 1, 2, ...
  std::vector<int> lane_slices;
  std::vector<std::string> lane_gpu(std::max(1, lanes));
  const auto t2 = clock::now();
  if (cplan.conditioned())
    spdlog::info(
        "conditioning on {} variable(s), {} slices of estimated peak {}: {:.3g} FLOP, "
        "{:.1f}% over the unconditioned plan; {}",
        cplan.cond.vars.size(), cplan.cond.slices, human_bytes(cplan.cond.slice_peak_bytes),
        cplan.cond.flops, 100 * cplan.cond.overhead(), cplan.cond.choice);
  spdlog::info(
      "order {}: width {}, largest table 2^{:.1f}, total state 2^{:.1f}, {} buckets, "
      "estimated peak memory {}",
      plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
      plan.order.stats.log2_total_state, plan.tree.buckets.size(),
      human_bytes(plan.memory.peak_bytes));
  std::string impossible = plan.model.impossible;
  sched::RunResult r;
  auto t_dev = t2;
  if (!impossible.empty()) {
    r.ln_pr = -INFINITY;
    r.device = "cpu";
  } else {
    // Every slice of a conditioned plan runs through the same runner (the device opens once),
    // or with several GPUs through one runner per GPU, slices spread over them; the slices are
    // combined in slice order. A failed check in any slice fails the run.
    std::optional<sched::CheckReport> failed_check;
    bool ran_here = false;
    double device_seconds = 0, device_peak = 0;
    std::mutex mu;
    for (int k = 1; k < lanes; ++k) {
      sched::RunRequest rk = req;
      rk.gpu_index = k;
      more.push_back(std::make_unique<sched::Runner>(rk));
      more.back()->start_early();
    }
    const double ln = run_conditioned_lanes(
        cplan, lanes,
        [&](int k, const Plan& p) {
          sched::RunResult s = (k == 0 ? runner : *more[k - 1]).run(p);
          const std::lock_guard<std::mutex> lock(mu);
          if (s.check && !s.check->passed && !failed_check) failed_check = s.check;
          device_seconds += s.device_seconds;
          device_peak = std::max(device_peak, s.device_peak_bytes);
          if (k == 0 || !ran_here) r = s;  // the schedule reported: GPU 0's last slice
          ran_here = true;
          if (k < static_cast<int>(lane_gpu.size()) && lane_gpu[k].empty())
            lane_gpu[k] = s.gpu_name.empty() ? "cpu" : s.gpu_name;
          return s.ln_pr;
        },
        dealer.get(), &lane_slices);
    if (!ran_here) r.device = "none";  // a rank that was dealt no slice
    r.ln_pr = ln;
    r.device_seconds = device_seconds;
    r.device_peak_bytes = device_peak;
    if (failed_check) r.check = failed_check;
    t_dev = t2 + std::chrono::duration_cast<clock::duration>(
                     std::chrono::duration<double>(r.device_seconds));
    if (std::isinf(r.ln_pr) && r.ln_pr < 0)
      impossible = "the evidence is jointly impossible (no single factor is zero on its own)";
  }
  const auto t3 = clock::now();
  log_resources("the evidence computed");
  // Several ranks: a failed check anywhere fails the run; rank 0 alone reports.
  const bool check_failed_somewhere = dist::any(r.check && !r.check->passed);
  nlohmann::json mpi;
  if (dealer) mpi = mpi_json(*dealer, cplan);
  if (dist::rank() > 0) return check_failed_somewhere ? kExitCheckFailed : 0;
  const double log10_pr = r.ln_pr / std::log(10.0);
  if (!impossible.empty()) spdlog::warn("P(e) = 0: {}", impossible);
  if (!o.uai_output.empty())
    write_file_atomically(o.uai_output, "PR\n" + format_log10(log10_pr) + "\n");
  const std::string verdict = sched::check_verdict(r);
  if (o.json) {
    nlohmann::json j = pe_json(o.net.network, plan, r.ln_pr, {t0, t1, t2, t_dev, t3}, r.device);
    if (impossible.empty()) j.update(sched::run_json(r, o.explain));
    if (cplan.conditioned()) j["conditioning"] = conditioning_json(cplan);
    if (!impossible.empty()) j["impossible"] = impossible;
    if (!mpi.is_null()) j["mpi"] = mpi;
    if (lanes > 1 || !r.gpu_name.empty()) {  // how many GPUs, and what each did
      nlohmann::json per = nlohmann::json::array();
      for (int k = 0; k < static_cast<int>(lane_slices.size()); ++k)
        per.push_back({{"index", k}, {"name", lane_gpu[k]}, {"slices", lane_slices[k]}});
      j["gpus"] = {{"used", lanes}, {"per_gpu", per}};
    }
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "log10 P(e) = " << format_log10(log10_pr) << std::endl;
    const bool gpu_used = !r.gpu_name.empty();
    if (!o.check && impossible.empty() && (gpu_used || !o.schedule.empty() || o.explain)) {
      std::cout << "schedule " << r.policy << ": " << r.gpu_buckets << " buckets on the GPU, "
                << r.cpu_buckets << " on the CPU";
      if (gpu_used)
        std::cout << ", " << r.h2d_bytes / 1e3 << " kB to the GPU, " << r.d2h_bytes / 1e3
                  << " kB back";
      std::cout << std::endl;
      if (!r.note.empty()) std::cout << "note: " << r.note << std::endl;
    }
    if (lanes > 1) {
      std::cout << lanes << " GPUs, slices per GPU:";
      for (int n : lane_slices) std::cout << ' ' << n;
      std::cout << std::endl;
    }
    if (o.repeat > 0 && impossible.empty())
      std::cout << "compute: first run " << sched::format_seconds(r.first_seconds) << ", median of "
                << r.repeats.size() << " repeats " << sched::format_seconds(median(r.repeats))
                << std::endl;
    if (o.explain)
      for (std::size_t b = 0; b < r.buckets.size(); ++b)
        std::cout << "  bucket " << b << " " << sched::to_string(r.buckets[b].device) << "  "
                  << r.buckets[b].reason << std::endl;
    if (!verdict.empty()) std::cout << verdict << std::endl;
  }
  if (r.check && !r.check->passed) {
    spdlog::error("{}", verdict);
    return kExitCheckFailed;
  }
  if (check_failed_somewhere) {
    spdlog::error("check: FAILED on another rank (its log says where)");
    return kExitCheckFailed;
  }
  if (dealer && !dealer->mismatches().empty()) {
    for (const auto& m : dealer->mismatches())
      spdlog::error("verify: slice {} gave ln {:.17g} on rank {} and {:.17g} on rank {}", m.item,
                    m.a, m.rank_a, m.b, m.rank_b);
    return kExitCheckFailed;
  }
  if (o.verify > 0 && dist::size() < 2) {
    spdlog::warn(
        "verify: not run (it recomputes slices on another rank; run under mpirun -np 2 "
        "or more)");
    return kExitCheckNotRun;
  }
  if (!r.check_not_run.empty()) return kExitCheckNotRun;
  return 0;
}

}  // namespace

sched::RunResult run_evidence(sched::Runner& runner, ConditionedPlan& cp, std::string& impossible) {
  impossible = cp.plan.model.impossible;
  sched::RunResult r;
  if (!impossible.empty()) {
    r.ln_pr = -INFINITY;
    r.device = "cpu";
    return r;
  }
  r = runner.run(cp);
  if (std::isinf(r.ln_pr) && r.ln_pr < 0)
    impossible = "the evidence is jointly impossible (no single factor is zero on its own)";
  return r;
}

sched::RunRequest run_request(const std::string& device, const std::string& schedule,
                              const std::string& profile, bool check, bool explain,
                              const std::string& gpu_memory) {
  sched::RunRequest req;
  req.device = sched::parse_device(device);
  if (!schedule.empty()) req.policy = sched::parse_policy(schedule);
  req.profile_path = profile;  // a named profile is read now: a bad file is an error
  req.check = check;
  req.explain = explain;
  if (!gpu_memory.empty()) try {
      req.gpu_memory_bytes = parse_size(gpu_memory);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--gpu-memory", e.what());
    }
  return req;
}

void add_run_options(CLI::App& cmd, std::string& device, std::string& schedule,
                     std::string& profile, bool& check, bool& explain, std::string& gpu_memory) {
  cmd.add_option("--device", device,
                 "where buckets run: auto (the GPU when present and the plan is large enough), "
                 "cpu, or gpu (falls back to the CPU, logged, when no GPU is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd.add_flag(
      "--check", check,
      "run every bucket (of every plan) on both the CPU and the GPU and compare them (tolerance "
      "1e-9 relative in ln); exit 5 when they differ, 6 when there is no GPU");
  cmd.add_option(
         "--schedule", schedule,
         std::string("how buckets are placed when a GPU is used: cpu-only, gpu-only, greedy, "
                     "comm-aware (the DP of paper 001, from a calibration profile), or "
                     "whole-plan (every bucket a kernel takes on the GPU but small ones "
                     "whose inputs are on the host; needs no profile); default ") +
             sched::to_string(sched::kDefaultGpuPolicy) +
             ". Without a GPU in use every bucket runs on the CPU")
      ->check(CLI::IsMember({"cpu-only", "gpu-only", "greedy", "comm-aware", kWholePlan}));
  cmd.add_option("--profile", profile,
                 "calibration profile for greedy and comm-aware (default: the one `kinfer "
                 "calibrate` stored in the cache directory); without one with a GPU part they "
                 "fall back to whole-plan, logged");
  cmd.add_flag("--explain", explain, "print each bucket's device and the reason");
  cmd.add_option("--gpu-memory", gpu_memory,
                 "device memory a plan's tables may use on the GPU, e.g. 8G (default: 90% of the "
                 "device's free memory when it opens); a plan whose tables do not fit is "
                 "conditioned so that each slice fits, the slices running one after another");
}

void add_pe_options(CLI::App& cmd, PeOptions& o) {
  o.net.add(cmd);
  cmd.add_flag("--json", o.json, "print one JSON object instead of text");
  cmd.add_option("--uai-output", o.uai_output, "also write the answer in the UAI PR format");
  add_run_options(cmd, o.device, o.schedule, o.profile, o.check, o.explain, o.gpu_memory);
  cmd.add_option("--repeat", o.repeat,
                 "time the computation this many more times after the first (for benchmarks: "
                 "first run and median of the repeats in the output)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--verify", o.verify,
                 "under mpirun: recompute this fraction (0 to 1, drawn with --seed) of the slices "
                 "on a second rank and compare (exit 5 on a mismatch, with both values)")
      ->check(CLI::Range(0.0, 1.0));
}

Runner add_pe(CLI::App& root) {
  auto o = std::make_shared<PeOptions>();
  CLI::App* cmd = root.add_subcommand("pe", "compute the probability of the evidence, log10 P(e)");
  add_pe_options(*cmd, *o);
  return [o, cmd]() { return cmd->parsed() ? run_pe(*o) : -1; };
}

}  // namespace kinfer::app
