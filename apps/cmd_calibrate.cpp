// kinfer calibrate: measure this machine's kernels and transfers once, fit the runtime models,
// and store the profile the scheduler plans with.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/plan.hpp"
#include "io/uai.hpp"
#include "scheduler/calibrate.hpp"
#include "scheduler/cost_tree.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

namespace {

struct CalibrateCmdOptions {
  std::string output;
  double seconds = 60;
  int threads = 0;
  std::uint64_t seed = 1;
  bool no_gpu = false, json = false, quick = false;
  std::vector<std::string> networks;
};

std::string percent(double x) {
  if (std::isnan(x)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

void print_model(const char* device, const sched::DeviceProfile& d) {
  const auto& m = d.model;
  std::printf("%-4s %s\n", device, d.name.c_str());
  std::printf(
      "     %zu buckets timed; model %s; cross-validated median error: loglinear %s, "
      "loglinear+tree %s, tree %s\n",
      d.samples.size(), sched::to_string(m.kind), percent(m.cv_loglinear).c_str(),
      percent(m.cv_loglinear_tree).c_str(), percent(m.cv_tree).c_str());
  std::printf("     executor overhead %s per bucket\n", sched::format_seconds(d.dispatch).c_str());
}

// --quick: the GPU's quick figures alone (what a profile is derived by), printed as JSON.
int run_quick(const sched::OpenedDevice& dev) {
  if (!dev.ctx) {
    spdlog::error("--quick needs a GPU ({})", dev.name);
    return 3;
  }
  const sched::GpuFigures q = dev.ctx->quick_figures();
  std::cout << nlohmann::json{{"gpu", dev.name},
                              {"copy_bandwidth", q.copy_bandwidth},
                              {"h2d_bandwidth", q.h2d_bandwidth},
                              {"d2h_bandwidth", q.d2h_bandwidth}}
                   .dump()
            << std::endl;
  return 0;
}

int run_calibrate(const CalibrateCmdOptions& o) {
  if (o.quick) return run_quick(sched::open_gpu(0, false));
  const std::string out = o.output.empty() ? sched::default_profile_path() : o.output;
  if (!o.output.empty()) check_output_file(out, "--output");
  sched::CalibrateOptions co;
  co.seconds = o.seconds;
  co.threads = o.threads;
  co.seed = o.seed;
  co.progress = [](const std::string& s) { spdlog::info("calibrating: {}", s); };
  std::vector<Plan> plans;
  plans.reserve(o.networks.size());
  for (const std::string& path : o.networks) {
    const io::NetworkWithEvidence r = io::read_network_and_evidence(path);
    PlanOptions po;
    po.order.time_budget = 2;
    plans.push_back(make_plan(r.net, r.ev, po));
  }
  for (const Plan& p : plans) co.networks.push_back(&p);

  sched::OpenedDevice dev;
  if (o.no_gpu)
    dev.name = "--no-gpu";
  else
    dev = sched::open_gpu();
  if (!dev.ctx) spdlog::info("no GPU ({}): calibrating the CPU only", dev.name);
  sched::Profile p = sched::calibrate(co, dev.ctx.get(), dev.name);
  // this process's own GPU start (a fresh process: the driver's start included), for
  // `--device auto`'s choice
  if (dev.ctx) p.gpu_start = dev.seconds;
  sched::save_profile(p, out);
  if (o.json) {
    std::cout << nlohmann::json{{"profile", out},
                                {"cpu_samples", p.cpu.samples.size()},
                                {"cpu_model", sched::to_string(p.cpu.model.kind)},
                                {"cpu_cv_median_relative_error",
                                 p.cpu.model.to_json()["cv_median_relative_error"]},
                                {"gpu", p.has_gpu}}
                     .dump(2)
              << std::endl;
    return 0;
  }
  std::printf("profile written to %s\n", out.c_str());
  print_model("CPU", p.cpu);
  if (p.has_gpu) {
    print_model("GPU", p.gpu);
    std::printf("host->GPU  latency %s, %.3g GB/s (staged through pinned memory)\n",
                sched::format_seconds(p.h2d.latency).c_str(), p.h2d.bandwidth / 1e9);
    std::printf("GPU->host  latency %s, %.3g GB/s\n", sched::format_seconds(p.d2h.latency).c_str(),
                p.d2h.bandwidth / 1e9);
    if (p.pin.bandwidth > 0)
      std::printf(
          "pinning    latency %s, %.3g GB/s (a download's new staging buffer, and its free)\n",
          sched::format_seconds(p.pin.latency).c_str(), p.pin.bandwidth / 1e9);
    std::printf("GPU start  %s (driver and context, this process)\n",
                sched::format_seconds(p.gpu_start).c_str());
  } else {
    std::printf("GPU  none (%s): schedules from this profile keep every bucket on the CPU\n",
                dev.name.c_str());
  }
  return 0;
}

}  // namespace

Runner add_calibrate(CLI::App& root) {
  auto o = std::make_shared<CalibrateCmdOptions>();
  CLI::App* cmd = root.add_subcommand(
      "calibrate", "time this machine's CPU and GPU kernels and transfers for the scheduler");
  cmd->add_option("-o,--output", o->output,
                  "where to write the profile (default: $XDG_CACHE_HOME/kinfer/profile.json)");
  cmd->add_option("--seconds", o->seconds, "time budget of the measurements")
      ->check(number_at_least(0.001))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads of the kernel (default: all cores)")
      ->check(count_at_least(1));
  cmd->add_option("--network", o->networks,
                  "UAI networks whose buckets join the synthetic sweep (repeatable)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", o->seed, "seed of the synthetic bucket sweep")->capture_default_str();
  cmd->add_flag("--no-gpu", o->no_gpu, "calibrate the CPU only, even with a GPU present");
  cmd->add_flag("--json", o->json, "print a JSON summary instead of text");
  cmd->add_flag("--quick", o->quick,
                "measure the GPU's quick figures only (copy bandwidth on the device, pinned "
                "copies each way; what a profile for a GPU without one is derived by) and print "
                "them as JSON; writes no profile");
  return [o, cmd]() { return cmd->parsed() ? run_calibrate(*o) : -1; };
}

}  // namespace kinfer::app
