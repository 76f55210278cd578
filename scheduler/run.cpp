#include "scheduler/run.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <optional>

namespace kinfer::sched {

ScheduledRun run_with_policy(const Plan& plan, gpu::Context* ctx, const ScheduledRunOptions& opt) {
  ScheduledRun r;
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t nb = plan.tree.buckets.size();
  std::vector<Device> a(nb, Device::cpu);
  r.policy = Policy::cpu_only;
  if (!ctx) {
    if (opt.policy != Policy::cpu_only) r.note = "no GPU: every bucket on the CPU";
  } else if (opt.policy == Policy::cpu_only || opt.policy == Policy::gpu_only) {
    r.policy = opt.policy;  // needs no predictions
    a.assign(nb, opt.policy == Policy::gpu_only ? Device::gpu : Device::cpu);
  } else {
    const std::string path = opt.profile_path.empty() ? default_profile_path() : opt.profile_path;
    std::optional<Profile> prof;
    if (opt.profile)
      prof = *opt.profile;
    else if (!opt.profile_path.empty() || std::filesystem::exists(path))
      prof = load_profile(path, false);
    if (!prof || !prof->has_gpu) {
      r.note = !prof ? "no calibration profile at " + path
                     : "the profile " + path + " was made without a GPU";
      r.note += "; running gpu-only instead of " + std::string(to_string(opt.policy)) +
                " (run `kinfer calibrate` on this machine once)";
      spdlog::warn("{}", r.note);
      r.policy = Policy::gpu_only;
      a.assign(nb, Device::gpu);
    } else {
      const PlanCosts pc = plan_costs(plan, *prof, opt.warm_gpu);
      r.schedule = make_schedule(pc.tree, opt.policy);
      r.policy = opt.policy;
      a = r.schedule.device;
      spdlog::info("schedule {}: {} of {} buckets on the GPU, predicted {} (profile {})",
                   to_string(opt.policy), r.schedule.cost.on_gpu, nb,
                   format_seconds(r.schedule.cost.total()), path);
      if (opt.explain)
        for (std::size_t b = 0; b < nb; ++b)
          spdlog::info("bucket {} on {}: {}", b, to_string(a[b]), r.schedule.reason[b]);
    }
  }
  r.schedule_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.assignment = a;
  r.ln_pr = run_scheduled(plan, a, ctx, opt.exec, &r.stats);
  if (!r.stats.fallback.empty()) r.note += (r.note.empty() ? "" : "; ") + r.stats.fallback;
  return r;
}

}  // namespace kinfer::sched
