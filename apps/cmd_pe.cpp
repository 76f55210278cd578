// kinfer pe: the probability of the evidence.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/command_options.hpp"
#include "apps/commands.hpp"
#include "apps/environment.hpp"
#include "apps/network_options.hpp"
#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/plan.hpp"
#include "engine/util.hpp"
#include "mpi/distributed.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

namespace {

constexpr const char* kWholePlan = "whole-plan";

// The "mpi" member of --json (collective: every rank calls it).
nlohmann::json mpi_json(const mpi::RankDealer& d, const ConditionedPlan& cp) {
  nlohmann::json j = {{"ranks", mpi::size()},
                      {"slices", cp.conditioned() ? cp.cond.slices : 1},
                      {"dealing", "cyclic: slice s on rank s mod ranks"},
                      {"per_rank", d.per_rank("slices")}};
  if (d.verified() > 0 || !d.mismatches().empty())
    j["verify"] = {{"recomputed", d.verified()}, {"mismatches", d.mismatches().size()}};
  return j;
}

// --explain: what a user asks of a plan, most important first: the order (heuristic, width,
// largest table, total states, how it was found), where the memory goes, the buckets that do
// most of the work, then where the buckets ran: one line when every bucket ran on the CPU for
// one reason, per bucket only when a GPU was in use.
nlohmann::json explain_json(const ConditionedPlan& cp) {
  const Plan& plan = cp.plan;
  const auto& b = plan.tree.buckets;
  std::vector<double> work(b.size());
  double total = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    work[i] = bucket_flops(b[i]);
    total += work[i];
  }
  std::vector<std::size_t> idx(b.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return work[x] > work[y]; });
  constexpr std::size_t kShown = 8;
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t k = 0; k < std::min(kShown, idx.size()); ++k) {
    const Bucket& bk = b[idx[k]];
    top.push_back({{"bucket", idx[k]},
                   {"log2_states", bk.log2_states},
                   {"inputs", bk.factors.size() + bk.children.size()},
                   {"summed_out", bk.n_marg},
                   {"output_bytes", std::llround(8.0 * std::exp2(bk.log2_output))},
                   {"work_share", total > 0 ? work[idx[k]] / total : 0.0}});
  }
  const MemoryEstimate& m = plan.memory;
  return {{"order", order_json(plan)},
          {"buckets", b.size()},
          {"slices", cp.cond.slices},
          {"memory",
           {{"peak_bytes", std::llround(m.peak_bytes)},
            {"program_bytes", std::llround(m.process_bytes)},
            {"input_bytes", std::llround(m.input_bytes)},
            {"intermediate_bytes", std::llround(m.intermediate_bytes)},
            {"scratch_bytes", std::llround(m.scratch_bytes)},
            {"largest_table_bytes", std::llround(m.largest_table_bytes)}}},
          {"largest_buckets", top}};
}

void print_explain(const nlohmann::json& e, const sched::RunResult& r) {
  const auto& o = e["order"];
  std::cout << fmt::format(
      "order     {}: width {}, largest table 2^{:.1f} entries, total state space 2^{:.1f}, {} "
      "buckets\n",
      o["heuristic"].get<std::string>(), o["width"].get<int>(),
      o["log2_max_table"].get<double>(), o["log2_total_state"].get<double>(),
      e["buckets"].get<std::size_t>());
  const std::string stopped = o["stopped_by"].get<std::string>();
  if (!stopped.empty())
    std::cout << fmt::format("search    {} restarts, {} moves in {:.2f} s, stopped by its {}\n",
                             o["restarts"].get<long>(), o["moves"].get<long>(),
                             o["seconds"].get<double>(), stopped);
  const auto& m = e["memory"];
  auto mib = [&](const char* k) { return human_bytes(m[k].get<double>()); };
  std::cout << fmt::format(
      "memory    estimated peak {}: the program {}, input tables {}, intermediate tables {} at "
      "most at once, kernel scratch {}; largest table {}\n",
      mib("peak_bytes"), mib("program_bytes"), mib("input_bytes"), mib("intermediate_bytes"),
      mib("scratch_bytes"), mib("largest_table_bytes"));
  if (e["slices"].get<std::int64_t>() > 1)
    std::cout << fmt::format("slices    {} (conditioned to fit the memory limit)\n",
                             e["slices"].get<std::int64_t>());
  std::cout << "work      the largest buckets (states x (inputs + 2)):\n";
  for (const auto& t : e["largest_buckets"])
    std::cout << fmt::format(
        "  bucket {:<6} {:5.1f}% of the work, 2^{:.1f} states, {} inputs, {} summed out, output {}\n",
        t["bucket"].get<std::size_t>(), 100 * t["work_share"].get<double>(),
        t["log2_states"].get<double>(), t["inputs"].get<std::size_t>(),
        t["summed_out"].get<int>(), human_bytes(t["output_bytes"].get<double>()));
  if (r.gpu_buckets == 0) {
    std::cout << "placement "
              << (r.buckets.empty() ? std::string("every bucket on the CPU")
                                    : r.buckets.front().reason)
              << "\n";
    return;
  }
  std::cout << fmt::format("placement {} buckets on the GPU, {} on the CPU:\n", r.gpu_buckets,
                           r.cpu_buckets);
  for (std::size_t i = 0; i < r.buckets.size(); ++i)
    std::cout << "  bucket " << i << " " << sched::to_string(r.buckets[i].device) << "  "
              << r.buckets[i].reason << "\n";
}

int run_pe(const PeOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  check_output_file(o.uai_output, "--uai-output");
  sched::RunRequest req =
      run_request(o.device, o.schedule, o.profile, o.check, o.explain, o.gpu_memory);
  req.threads = o.net.threads;
  req.repeat = o.repeat;
  req.gpu_timeline_path = o.gpu_timeline;
  req.gpu_shapes_path = o.gpu_shapes;
  PlanOptions po = o.net.plan_options();
  req.host_memory_bytes = po.max_memory_bytes;  // the copies of the plan for several GPUs
  sched::Runner runner(req);
  runner.start_early();  // the device starts while the network is read and planned
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  const auto t1 = clock::now();
  log_resources("the network read");
  po.keep_tables = false;  // the plan runs once: its network and model tables are dropped
  runner.plan_for_device(po);
  // Under mpirun rank 0 plans and the other ranks build its plan (mpi/: no search there).
  ConditionedPlan cplan = mpi::conditioned_plan(net, ev, po);
  net = Network{};
  Plan& plan = cplan.plan;
  log_resources("the plan made");
  plan.memory = runner.estimate(plan);  // for the device that runs it
  runner.set_plan_options(po);          // to condition further if the GPU fills before it runs
  // Under mpirun: this process's slices (every rank's plan checked to be rank 0's).
  const auto dealer = mpi::slice_dealer(cplan, o.verify, o.net.seed);
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
  // Every slice through the runner (the device opens once; several GPUs share the slices).
  std::string impossible;
  const sched::RunResult r = run_evidence(runner, cplan, impossible, dealer.get());
  const int lanes = static_cast<int>(r.lanes.size());
  const auto t_dev = t2 + std::chrono::duration_cast<clock::duration>(
                              std::chrono::duration<double>(r.device_seconds));
  const auto t3 = clock::now();
  log_resources("the evidence computed");
  // Several ranks: a failed check anywhere fails the run; rank 0 alone reports.
  const bool check_failed_somewhere = mpi::any(r.check && !r.check->passed);
  nlohmann::json mpi_report;
  if (dealer) mpi_report = mpi_json(*dealer, cplan);
  if (mpi::rank() > 0) return check_failed_somewhere ? kExitCheckFailed : 0;
  const double log10_pr = r.ln_pr / std::log(10.0);
  if (!impossible.empty()) spdlog::warn("P(e) = 0: {}", impossible);
  if (!o.uai_output.empty())
    write_file_atomically(o.uai_output, "PR\n" + format_log10(log10_pr) + "\n");
  const std::string verdict = sched::check_verdict(r);
  if (o.json) {
    nlohmann::json j = pe_json(o.net.network, plan, r.ln_pr, {t0, t1, t2, t_dev, t3}, r.device);
    if (impossible.empty()) j.update(sched::run_json(r, o.explain));
    if (o.explain) j["explain"] = explain_json(cplan);
    if (cplan.conditioned()) j["conditioning"] = conditioning_json(cplan);
    if (!impossible.empty()) j["impossible"] = impossible;
    if (!mpi_report.is_null()) j["mpi"] = mpi_report;
    if (lanes > 1 || !r.gpu_name.empty()) {  // how many GPUs, and what each did
      nlohmann::json per = nlohmann::json::array();
      for (int k = 0; k < lanes; ++k)
        per.push_back({{"index", k}, {"name", r.lanes[k].name}, {"slices", r.lanes[k].slices}});
      j["gpus"] = {{"used", lanes}, {"per_gpu", per}};
    }
    if (const auto m = memory_limit_json(); !m.is_null()) j["memory_limit"] = m;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "log10 P(e) = " << format_log10(log10_pr) << std::endl;
    const bool gpu_used = !r.gpu_name.empty();
    if (!o.check && impossible.empty() && (gpu_used || !o.schedule.empty())) {
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
      for (const auto& l : r.lanes) std::cout << ' ' << l.slices;
      std::cout << std::endl;
    }
    if (o.repeat > 0 && impossible.empty())
      std::cout << "compute: first run " << sched::format_seconds(r.first_seconds) << ", median of "
                << r.repeats.size() << " repeats " << sched::format_seconds(median(r.repeats))
                << std::endl;
    if (o.explain && impossible.empty()) print_explain(explain_json(cplan), r);
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
  if (o.verify > 0 && mpi::size() < 2) {
    spdlog::warn(
        "verify: not run (it recomputes slices on another rank; run under mpirun -np 2 "
        "or more)");
    return kExitCheckNotRun;
  }
  if (!r.check_not_run.empty()) return kExitCheckNotRun;
  return 0;
}

}  // namespace

sched::RunResult run_evidence(sched::Runner& runner, ConditionedPlan& cp, std::string& impossible,
                              SliceDealer* dealer) {
  impossible = cp.plan.model.impossible;
  sched::RunResult r;
  if (!impossible.empty()) {
    r.ln_pr = -INFINITY;
    r.device = "cpu";
    return r;
  }
  r = runner.run(cp, dealer);
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
  req.auto_calibrate_seconds = environment().auto_calibrate_seconds;
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
                     std::string& profile, bool& check, bool* explain, std::string& gpu_memory) {
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
                     "comm-aware (weighs kernel times against transfers, from a calibration profile), or "
                     "whole-plan (every bucket a kernel takes on the GPU but small ones "
                     "whose inputs are on the host; needs no profile); default ") +
             sched::to_string(sched::kDefaultGpuPolicy) +
             ". Without a GPU in use every bucket runs on the CPU")
      ->check(CLI::IsMember({"cpu-only", "gpu-only", "greedy", "comm-aware", kWholePlan}));
  cmd.add_option("--profile", profile,
                 "calibration profile for greedy and comm-aware (default: the one `kinfer "
                 "calibrate` stored in the cache directory); without one with a GPU part they "
                 "fall back to whole-plan, logged");
  if (explain)
    cmd.add_flag("--explain", *explain,
                 "explain the plan: the order, where the memory and the work go, and where the "
                 "buckets ran (per bucket when a GPU is used)");
  cmd.add_option("--gpu-memory", gpu_memory,
                 "device memory a plan's tables may use on the GPU, e.g. 8G (default: 90% of the "
                 "device's free memory when it opens); a plan whose tables do not fit is "
                 "conditioned so that each slice fits, the slices running one after another");
}

void add_pe_options(CLI::App& cmd, PeOptions& o) {
  o.net.add(cmd);
  cmd.add_flag("--json", o.json, "print one JSON object instead of text");
  cmd.add_option("--uai-output", o.uai_output, "also write the answer in the UAI PR format");
  add_run_options(cmd, o.device, o.schedule, o.profile, o.check, &o.explain, o.gpu_memory);
  cmd.add_option("--repeat", o.repeat,
                 "time the computation this many more times after the first (for benchmarks: "
                 "first run and median of the repeats in the output)")
      ->check(count_at_least(0));
  cmd.add_option("--verify", o.verify,
                 "under mpirun: recompute this fraction (0 to 1, drawn with --seed) of the slices "
                 "on a second rank and compare (exit 5 on a mismatch, with both values)")
      ->check(CLI::Range(0.0, 1.0));
}

Runner add_pe(CLI::App& root) {
  auto o = std::make_shared<PeOptions>();
  CLI::App* cmd = root.add_subcommand("pe", "compute the probability of the evidence, log10 P(e)");
  add_pe_options(*cmd, *o);
  // diagnostics, not in --help (docs/performance.md#measuring)
  cmd->add_option("--gpu-timeline", o->gpu_timeline,
                  "write each GPU bucket's host steps and kernel times to this TSV "
                  "(bench/e2e/timeline.py)")
      ->group("");
  cmd->add_option("--gpu-shapes", o->gpu_shapes,
                  "write the GPU buckets of >= 2^20 states to this file as bucket_bench --shape "
                  "specs")
      ->group("");
  return [o, cmd]() { return cmd->parsed() ? run_pe(*o) : -1; };
}

}  // namespace kinfer::app
