// kinfer pe: the probability of the evidence.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/command_options.hpp"
#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/condition.hpp"
#include "engine/json.hpp"
#include "engine/plan.hpp"
#include "engine/util.hpp"
#include "gpu/device_api.hpp"
#include "gpu/executor.hpp"
#include "scheduler/profile.hpp"
#include "scheduler/run.hpp"

namespace kinfer::app {

namespace {

// `--device auto` uses the GPU for plans of at least this many FLOPs: below it, starting the
// device costs more than the whole CPU computation (docs/perf-notes.md, "Figures behind the
// code's choices").
constexpr double kAutoGpuMinFlops = 1e9;

// With a GPU context and no --schedule: which way the buckets are placed. The four scheduler
// policies run through sched::run_with_policy (the two-thread executor); "whole-plan" is
// gpu::run_plan_gpu (every bucket the kernels take on the GPU, small buckets with all inputs on
// the host on the CPU, no profile needed). Chosen by measurement on the GPU machine
// (bench/scheduler/results/2026-11-22-h200-pe; figures in docs/perf-notes.md).
constexpr const char* kDefaultGpuSchedule = "comm-aware";
constexpr const char* kWholePlan = "whole-plan";

std::string format_log10(double x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

// Starting the device (driver and context) in the background while the network is
// read and planned: for --device gpu and --check, which will use it whatever the plan.
struct DeviceStart {
  std::unique_ptr<gpu::Context> ctx;
  std::string why_not;
  std::string name;
  double gib = 0;
};

DeviceStart start_device() {
  DeviceStart d;
  const gpu::DeviceInfo info = gpu::probe();
  if (!info.available) {
    d.why_not = info.why_not;
    return d;
  }
  try {
    d.ctx = gpu::Context::create();
    d.name = info.name;
    d.gib = info.memory_bytes / (1 << 30);
  } catch (const std::exception& e) {
    d.why_not = e.what();
  }
  return d;
}

// Opens the GPU when the options and the plan call for it; otherwise says why not (logged).
std::unique_ptr<gpu::Context> open_device(const PeOptions& o, const Plan& plan,
                                          std::future<DeviceStart>& early, std::string& why_not) {
  if (o.device == "cpu" && !o.check) {
    why_not = "--device cpu";
    return nullptr;
  }
  if (o.device == "auto" && !o.check && plan.flops < kAutoGpuMinFlops) {
    why_not = fmt::format(
        "--device auto: the plan needs {:.3g} FLOP, below the {:.0e} that pay for "
        "starting the GPU",
        plan.flops, kAutoGpuMinFlops);
    spdlog::info("running on the CPU: {}", why_not);
    return nullptr;
  }
  DeviceStart d = early.valid() ? early.get() : start_device();
  if (d.ctx) {
    spdlog::info("GPU: {} ({:.0f} GiB)", d.name, d.gib);
    return std::move(d.ctx);
  }
  why_not = d.why_not;
  if (o.device == "gpu" || o.check)
    spdlog::warn("GPU not available ({}); running on the CPU", why_not);
  else
    spdlog::info("GPU not available ({}); running on the CPU", why_not);
  return nullptr;
}

struct CheckResult {
  int buckets = 0, cpu_only = 0;
  double max_abs_diff = 0;
  int worst_bucket = -1;
};

// |a - b| with equal infinities counting as no difference.
double difference(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return a == b ? 0.0 : INFINITY;
  if (std::isnan(a) || std::isnan(b)) return INFINITY;
  return std::abs(a - b);
}

// Runs the bucket the CPU just computed on the GPU too, from the same input tables.
void check_bucket(gpu::Context& ctx, int b, const BucketShape& shape,
                  std::span<const InputTable> in, const double* cpu_out, CheckResult& r) {
  std::vector<std::vector<int>> scopes;
  for (const auto& t : in) scopes.push_back(t.scope);
  try {
    ctx.choose(shape, scopes);
  } catch (const std::invalid_argument& e) {
    spdlog::debug("check: bucket {} has no GPU kernel: {}", b, e.what());
    ++r.cpu_only;
    return;
  }
  std::vector<gpu::DeviceInput> din;
  for (const auto& t : in) {
    std::int64_t n = 1;
    for (int v : t.scope)
      for (std::size_t i = 0; i < shape.vars.size(); ++i)
        if (shape.vars[i] == v) n *= shape.card[i];
    const gpu::Handle h = ctx.alloc(n);
    ctx.upload(h, t.data, n, 0);
    din.push_back({h, t.scope});
  }
  const std::int64_t n_out = shape.output_size();
  const gpu::Handle out = ctx.alloc(n_out);
  const gpu::KernelChoice k = ctx.run_bucket(shape, din, out, 0, gpu::Variant::automatic);
  std::vector<double> gpu_out(n_out);
  ctx.download(out, gpu_out.data(), n_out, 0);
  ctx.synchronize(0);
  double worst = 0;
  for (std::int64_t i = 0; i < n_out; ++i)
    worst = std::max(worst, difference(gpu_out[i], cpu_out[i]));
  spdlog::debug("check: bucket {} ({}, {} outputs): largest difference {:.3g}", b,
                gpu::to_string(k.variant), n_out, worst);
  if (worst > r.max_abs_diff || r.worst_bucket < 0) {
    r.max_abs_diff = std::max(r.max_abs_diff, worst);
    r.worst_bucket = b;
  }
  ++r.buckets;
  for (const auto& d : din) ctx.release(d.table);
  ctx.release(out);
}

// How pe's buckets were placed and what moved: the scheduler's policies or the whole-plan
// executor, for the log, the text output and --json.
struct PeRun {
  double ln_pr = NAN;
  std::string requested;  // --schedule, or the default
  std::string ran;        // what actually ran (after fallbacks)
  std::string note;       // fallbacks taken
  std::string profile;    // the profile used, if any
  int gpu_buckets = 0, cpu_buckets = 0;
  double h2d_bytes = NAN, d2h_bytes = NAN;  // NaN: not counted (whole-plan)
  double predicted_seconds = NAN;
  double schedule_seconds = NAN;  // of the first run: reading the profile, predicting, assigning
  double first_seconds =
      NAN;  // the first computation (after the device started), scheduling included
  std::vector<double> repeats;                       // --repeat: the computations after it
  nlohmann::json buckets = nlohmann::json::array();  // --explain: device and reason per bucket
  gpu::DeviceRunReport whole;                        // whole-plan only
};

bool policy_needs_profile(const std::string& s) { return s == "greedy" || s == "comm-aware"; }

// Runs the plan with a GPU context under --schedule (or the default), repeated --repeat times
// after the first run for timing. Falls back to the whole-plan executor, logged, when a
// policy that needs predictions has no profile with a GPU part.
PeRun run_scheduled_pe(const PeOptions& o, const Plan& plan, gpu::Context& ctx,
                       const RunOptions& ro, std::optional<sched::Profile> prof) {
  using clock = std::chrono::steady_clock;
  PeRun r;
  r.requested = o.schedule.empty() ? kDefaultGpuSchedule : o.schedule;
  std::string how = r.requested;
  if (policy_needs_profile(how)) {
    r.profile = o.profile.empty() ? sched::default_profile_path() : o.profile;
    if (!prof && std::filesystem::exists(r.profile)) prof = sched::load_profile(r.profile, false);
    if (!prof || !prof->has_gpu) {
      r.note = (!prof ? "no calibration profile at " + r.profile
                      : "the profile " + r.profile + " was made without a GPU") +
               "; running " + kWholePlan + " instead of " + how +
               " (run `kinfer calibrate` on this machine once)";
      spdlog::warn("{}", r.note);
      how = kWholePlan;
      r.profile.clear();
    }
  }
  r.ran = how;
  const int nb = static_cast<int>(plan.tree.buckets.size());
  std::vector<sched::Device> assignment;
  for (int rep = 0; rep <= o.repeat; ++rep) {
    const auto t0 = clock::now();
    double ln;
    if (how == kWholePlan) {
      ln = gpu::run_plan_gpu(plan, ctx, ro, &r.whole);
      r.gpu_buckets = r.whole.gpu_buckets;
      r.cpu_buckets = r.whole.cpu_buckets;
      if (rep == 0)
        spdlog::info(
            "{}: {} buckets on the GPU ({} cached, {} plain), {} on the CPU ({} of them "
            "small with all inputs on the host)",
            kWholePlan, r.whole.gpu_buckets, r.whole.cached_buckets, r.whole.plain_buckets,
            r.whole.cpu_buckets, r.whole.small_on_cpu);
      if (rep == 0 && o.explain) {
        std::map<int, std::string> why(r.whole.on_cpu.begin(), r.whole.on_cpu.end());
        for (const auto& [b, w] : why)
          r.buckets.push_back({{"bucket", b}, {"device", "cpu"}, {"reason", w}});
      }
    } else if (rep > 0) {
      // the same assignment again: the executor alone, as whole-plan's repeats are
      sched::ExecOptions eo;
      eo.threads = ro.threads;
      ln = sched::run_scheduled(plan, assignment, &ctx, eo);
    } else {
      sched::ScheduledRunOptions so;
      so.policy = sched::parse_policy(how);
      so.profile_path = r.profile;
      if (prof) so.profile = &*prof;
      so.exec.threads = ro.threads;
      const sched::ScheduledRun s = sched::run_with_policy(plan, &ctx, so);
      ln = s.ln_pr;
      assignment = s.assignment;
      r.schedule_seconds = s.schedule_seconds;
      r.ran = sched::to_string(s.policy);
      r.gpu_buckets = s.stats.gpu_buckets;
      r.cpu_buckets = s.stats.cpu_buckets;
      r.h2d_bytes = s.stats.h2d_bytes;
      r.d2h_bytes = s.stats.d2h_bytes;
      if (!s.schedule.device.empty()) r.predicted_seconds = s.schedule.cost.total();
      if (!s.note.empty()) r.note += (r.note.empty() ? "" : "; ") + s.note;
      spdlog::info(
          "schedule {}: {} buckets on the GPU, {} on the CPU, {:.3g} kB to the GPU, "
          "{:.3g} kB back; scheduling took {}",
          r.ran, r.gpu_buckets, r.cpu_buckets, r.h2d_bytes / 1e3, r.d2h_bytes / 1e3,
          sched::format_seconds(s.schedule_seconds));
      if (o.explain)
        for (int b = 0; b < nb; ++b) {
          const sched::Device d = s.stats.ran_on.empty() ? sched::Device::cpu : s.stats.ran_on[b];
          std::string why;
          if (!s.schedule.reason.empty())
            why = s.schedule.reason[b];
          else if (s.policy == sched::Policy::gpu_only)
            why = "gpu-only: every bucket on the GPU";
          else
            why = "cpu-only: every bucket on the CPU";
          if (!s.schedule.device.empty() && s.schedule.device[b] != d)
            why += "; ran on the CPU: no GPU kernel takes it";
          else if (s.schedule.device.empty() && s.policy == sched::Policy::gpu_only &&
                   d == sched::Device::cpu)
            why = "gpu-only, but no GPU kernel takes it: on the CPU";
          r.buckets.push_back({{"bucket", b}, {"device", sched::to_string(d)}, {"reason", why}});
        }
    }
    const double t = std::chrono::duration<double>(clock::now() - t0).count();
    if (rep == 0) {
      r.ln_pr = ln;
      r.first_seconds = t;
    } else {
      r.repeats.push_back(t);
      if (std::abs(ln - r.ln_pr) > 1e-9 * std::max(1.0, std::abs(r.ln_pr)))
        spdlog::error("repeat {}: ln P(e) {} differs from the first run's {}", rep, ln, r.ln_pr);
    }
  }
  return r;
}

int run_pe(const PeOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::future<DeviceStart> early;
  if (o.device == "gpu" || o.check) early = std::async(std::launch::async, start_device);
  // a named profile is read now, GPU or not, so that a bad file is an error (not a fallback)
  std::optional<sched::Profile> profile;
  if (!o.profile.empty()) profile = sched::load_profile(o.profile, false);
  Network net;
  Evidence ev;
  o.net.load(net, ev);
  const auto t1 = clock::now();
  PlanOptions po = o.net.plan_options();
  po.keep_tables = false;  // the plan runs once: its network and model tables are dropped
  ConditionedPlan cplan = make_conditioned_plan(net, ev, po);
  net = Network{};
  Plan& plan = cplan.plan;
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
  double ln_pr;
  std::string impossible = plan.model.impossible;
  std::string device = "cpu", why_not_gpu;
  std::unique_ptr<gpu::Context> ctx;
  PeRun sr;
  CheckResult check;
  bool checked = false;
  auto t_dev = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  if (!impossible.empty()) {
    ln_pr = -INFINITY;
  } else {
    ctx = open_device(o, plan, early, why_not_gpu);
    t_dev = clock::now();
    RunOptions ro;
    ro.threads = o.net.threads;
    if (ctx && o.check) {
      // every bucket on both backends: the CPU result drives the computation
      ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                            const double* out) { check_bucket(*ctx, b, shape, in, out, check); };
      ln_pr = run_conditioned(cplan, [&](const Plan& p) { return run_plan(p, ro); });
      checked = true;
      device = "cpu+gpu";
      spdlog::info(
          "check: {} buckets on both CPU and GPU ({} without a GPU kernel), largest "
          "difference {:.3g} (bucket {})",
          check.buckets, check.cpu_only, check.max_abs_diff, check.worst_bucket);
    } else if (ctx) {
      ln_pr = run_conditioned(cplan, [&](const Plan& p) {
        sr = run_scheduled_pe(o, p, *ctx, ro, profile);
        return sr.ln_pr;
      });
      device = sr.gpu_buckets == 0 ? "cpu" : sr.cpu_buckets == 0 ? "gpu" : "gpu+cpu";
    } else {
      if (!o.schedule.empty() && o.schedule != "cpu-only")
        spdlog::info("--schedule {}: no GPU in use ({}), every bucket on the CPU", o.schedule,
                     why_not_gpu);
      const auto a0 = clock::now();
      auto run_cpu = [&] {
        return run_conditioned(cplan, [&](const Plan& p) { return run_plan(p, ro); });
      };
      ln_pr = run_cpu();
      sr.first_seconds = secs(a0, clock::now());
      sr.requested = o.schedule.empty() ? "cpu-only" : o.schedule;
      sr.ran = "cpu-only";
      if (o.explain)
        for (std::size_t b = 0; b < plan.tree.buckets.size(); ++b)
          sr.buckets.push_back({{"bucket", b},
                                {"device", "cpu"},
                                {"reason", "no GPU in use: every bucket on the CPU"}});
      sr.cpu_buckets = static_cast<int>(plan.tree.buckets.size());
      for (int rep = 0; rep < o.repeat; ++rep) {
        const auto a = clock::now();
        const double again = run_cpu();
        sr.repeats.push_back(secs(a, clock::now()));
        if (again != ln_pr)
          spdlog::error("repeat {}: ln P(e) {} differs from {}", rep, again, ln_pr);
      }
    }
    if (std::isinf(ln_pr) && ln_pr < 0)
      impossible = "the evidence is jointly impossible (no single factor is zero on its own)";
  }
  const auto t3 = clock::now();
  const double log10_pr = ln_pr / std::log(10.0);
  if (!impossible.empty()) spdlog::warn("P(e) = 0: {}", impossible);
  if (!o.uai_output.empty())
    write_file_atomically(o.uai_output, "PR\n" + format_log10(log10_pr) + "\n");
  if (o.json) {
    nlohmann::json j = pe_json(o.net.network, plan, ln_pr, {t0, t1, t2, t_dev, t3}, device);
    if (cplan.conditioned()) j["conditioning"] = conditioning_json(cplan);
    if (ctx) {
      // buckets_gpu/buckets_cpu also here, where bench/gpu/run.sh reads them
      j["gpu"] = {
          {"name", ctx->name()}, {"buckets_gpu", sr.gpu_buckets}, {"buckets_cpu", sr.cpu_buckets}};
    } else if (!why_not_gpu.empty() && o.device != "cpu") {
      j["gpu"] = {{"why_not", why_not_gpu}};
    }
    if (!checked && impossible.empty()) {
      nlohmann::json sj = {{"requested", sr.requested},
                           {"policy", sr.ran},
                           {"buckets_gpu", sr.gpu_buckets},
                           {"buckets_cpu", sr.cpu_buckets},
                           {"h2d_bytes", number_or_null(sr.h2d_bytes)},
                           {"d2h_bytes", number_or_null(sr.d2h_bytes)},
                           {"predicted_seconds", number_or_null(sr.predicted_seconds)},
                           {"first_run_seconds", number_or_null(sr.first_seconds)},
                           {"schedule_seconds", number_or_null(sr.schedule_seconds)}};
      if (!ctx) sj["h2d_bytes"] = sj["d2h_bytes"] = 0;
      if (!sr.profile.empty()) sj["profile"] = sr.profile;
      if (!sr.note.empty()) sj["note"] = sr.note;
      if (sr.ran == kWholePlan) {
        sj["buckets_cpu_small"] = sr.whole.small_on_cpu;
        sj["cached"] = sr.whole.cached_buckets;
        sj["plain"] = sr.whole.plain_buckets;
        nlohmann::json why = nlohmann::json::array();
        for (const auto& [b, w] : sr.whole.on_cpu) why.push_back({{"bucket", b}, {"why", w}});
        sj["cpu_buckets_why"] = why;
      }
      if (o.repeat > 0) {
        sj["repeat_seconds"] = sr.repeats;
        sj["repeat_median_seconds"] = number_or_null(median(sr.repeats));
      }
      if (o.explain) sj["explain"] = sr.buckets;
      j["schedule"] = sj;
    }
    if (checked)
      j["check"] = {{"buckets", check.buckets},
                    {"buckets_without_gpu_kernel", check.cpu_only},
                    {"max_abs_diff", check.max_abs_diff},
                    {"worst_bucket", check.worst_bucket}};
    if (!impossible.empty()) j["impossible"] = impossible;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "log10 P(e) = " << format_log10(log10_pr) << std::endl;
    if (!checked && impossible.empty() && (ctx || !o.schedule.empty() || o.explain)) {
      std::cout << "schedule " << sr.ran << ": " << sr.gpu_buckets << " buckets on the GPU, "
                << sr.cpu_buckets << " on the CPU";
      if (std::isfinite(sr.h2d_bytes))
        std::cout << ", " << sr.h2d_bytes / 1e3 << " kB to the GPU, " << sr.d2h_bytes / 1e3
                  << " kB back";
      std::cout << std::endl;
      if (!sr.note.empty()) std::cout << "note: " << sr.note << std::endl;
    }
    if (o.repeat > 0)
      std::cout << "compute: first run " << sched::format_seconds(sr.first_seconds)
                << ", median of " << sr.repeats.size() << " repeats "
                << sched::format_seconds(median(sr.repeats)) << std::endl;
    if (o.explain)
      for (const auto& b : sr.buckets)
        std::cout << "  bucket " << b["bucket"].get<int>() << " " << b["device"].get<std::string>()
                  << "  " << b["reason"].get<std::string>() << std::endl;
    if (checked)
      std::cout << "check: largest GPU-CPU difference " << check.max_abs_diff << " over "
                << check.buckets << " buckets" << std::endl;
  }
  return 0;
}

}  // namespace

void add_pe_options(CLI::App& cmd, PeOptions& o) {
  o.net.add(cmd);
  cmd.add_flag("--json", o.json, "print one JSON object instead of text");
  cmd.add_option("--uai-output", o.uai_output, "also write the answer in the UAI PR format");
  cmd.add_option("--device", o.device,
                 "where buckets run: auto (the GPU when present and the plan is large enough), "
                 "cpu, or gpu (falls back to the CPU, logged, when no GPU is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd.add_flag("--check", o.check,
               "run every bucket on both the CPU and the GPU and report the largest difference");
  cmd.add_option(
         "--schedule", o.schedule,
         std::string("how buckets are placed when a GPU is used: cpu-only, gpu-only, greedy, "
                     "comm-aware (the DP of paper 001, from a calibration profile), or "
                     "whole-plan (every bucket a kernel takes on the GPU but small ones "
                     "whose inputs are on the host; needs no profile); default ") +
             kDefaultGpuSchedule + ". Without a GPU in use every bucket runs on the CPU")
      ->check(CLI::IsMember({"cpu-only", "gpu-only", "greedy", "comm-aware", kWholePlan}));
  cmd.add_option("--profile", o.profile,
                 "calibration profile for greedy and comm-aware (default: the one `kinfer "
                 "calibrate` stored in the cache directory); without one with a GPU part they "
                 "fall back to whole-plan, logged");
  cmd.add_flag("--explain", o.explain, "print each bucket's device and the reason");
  cmd.add_option("--repeat", o.repeat,
                 "time the computation this many more times after the first (for benchmarks: "
                 "first run and median of the repeats in the output)")
      ->check(CLI::NonNegativeNumber);
}

Runner add_pe(CLI::App& root) {
  auto o = std::make_shared<PeOptions>();
  CLI::App* cmd = root.add_subcommand("pe", "compute the probability of the evidence, log10 P(e)");
  add_pe_options(*cmd, *o);
  return [o, cmd]() { return cmd->parsed() ? run_pe(*o) : -1; };
}

}  // namespace kinfer::app
