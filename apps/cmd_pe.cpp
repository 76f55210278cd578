// kinfer pe: the probability of the evidence.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/solver.hpp"
#include "gpu/device_api.hpp"
#include "gpu/executor.hpp"

namespace kinfer::app {

namespace {

// `--device auto` uses the GPU for plans of at least this many FLOPs: below it, starting the
// device (~0.2-0.5 s) costs more than the whole CPU computation.
constexpr double kAutoGpuMinFlops = 1e9;

struct PeOptions {
  NetworkOptions net;
  bool json = false;
  std::string uai_output;
  std::string device = "auto";
  bool check = false;
};

std::string format_log10(double x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

// Starting the device (driver and context, ~0.2 s) in the background while the network is
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
  if (o.device == "auto" && !o.check && plan.memory.flops < kAutoGpuMinFlops) {
    why_not = fmt::format("--device auto: the plan needs {:.3g} FLOP, below the {:.0e} that pay for "
                          "starting the GPU", plan.memory.flops, kAutoGpuMinFlops);
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
  for (std::int64_t i = 0; i < n_out; ++i) worst = std::max(worst, difference(gpu_out[i], cpu_out[i]));
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

int run_pe(const PeOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::future<DeviceStart> early;
  if (o.device == "gpu" || o.check) early = std::async(std::launch::async, start_device);
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
  std::string device = "cpu", why_not_gpu;
  std::unique_ptr<gpu::Context> ctx;
  gpu::DeviceRunReport gpu_report;
  CheckResult check;
  bool checked = false;
  auto t_dev = clock::now();
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
      ln_pr = run_plan(plan, ro);
      checked = true;
      device = "cpu+gpu";
      spdlog::info("check: {} buckets on both CPU and GPU ({} without a GPU kernel), largest "
                   "difference {:.3g} (bucket {})",
                   check.buckets, check.cpu_only, check.max_abs_diff, check.worst_bucket);
    } else if (ctx && o.device != "cpu") {
      ln_pr = gpu::run_plan_gpu(plan, *ctx, ro, &gpu_report);
      device = gpu_report.cpu_buckets == 0 ? "gpu" : gpu_report.gpu_buckets == 0 ? "cpu" : "gpu+cpu";
      spdlog::info("{} buckets on the GPU ({} cached, {} plain), {} on the CPU ({} of them small "
                   "with all inputs on the host)", gpu_report.gpu_buckets, gpu_report.cached_buckets,
                   gpu_report.plain_buckets, gpu_report.cpu_buckets, gpu_report.small_on_cpu);
    } else {
      ln_pr = run_plan(plan, ro);
    }
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
        {"timings",
         {{"read", secs(t0, t1)}, {"plan", secs(t1, t2)}, {"compute", secs(t2, t3)},
          {"device_start", secs(t2, t_dev)}}},
        {"order", order_json(plan)},
        {"buckets", plan.tree.buckets.size()},
        {"memory", memory_json(plan)},
        {"device", device}};
    if (ctx) {
      nlohmann::json g = {{"name", ctx->name()},
                          {"buckets_gpu", gpu_report.gpu_buckets},
                          {"buckets_cpu", gpu_report.cpu_buckets},
                          {"buckets_cpu_small", gpu_report.small_on_cpu},
                          {"cached", gpu_report.cached_buckets},
                          {"plain", gpu_report.plain_buckets}};
      nlohmann::json why = nlohmann::json::array();
      for (const auto& [b, w] : gpu_report.on_cpu) why.push_back({{"bucket", b}, {"why", w}});
      g["cpu_buckets_why"] = why;
      j["gpu"] = g;
    } else if (!why_not_gpu.empty() && o.device != "cpu") {
      j["gpu"] = {{"why_not", why_not_gpu}};
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
    if (checked)
      std::cout << "check: largest GPU-CPU difference " << check.max_abs_diff << " over "
                << check.buckets << " buckets" << std::endl;
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
  cmd->add_option("--device", o->device,
                  "where buckets run: auto (the GPU when present and the plan is large enough), "
                  "cpu, or gpu (falls back to the CPU, logged, when no GPU is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_flag("--check", o->check,
                "run every bucket on both the CPU and the GPU and report the largest difference");
  return [o, cmd]() { return cmd->parsed() ? run_pe(*o) : -1; };
}

}  // namespace kinfer::app
