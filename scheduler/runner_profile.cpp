// The runner's calibration profile: found for the machine's GPU and read once, derived for a GPU
// none knows, or calibrated briefly when asked for (RunRequest::auto_calibrate_seconds).
#include <spdlog/spdlog.h>

#include <omp.h>

#include "scheduler/calibrate.hpp"
#include "scheduler/runner.hpp"
#include "scheduler/runner_internal.hpp"

namespace kinfer::sched {

const Profile* Runner::profile(std::string& path) {
  if (!profile_read_) {
    profile_read_ = true;
    if (gpu_->opened && gpu_->opened->profile_looked) {  // read beside the GPU's opening
      profile_path_ = gpu_->opened->profile_path;
      profile_ = std::move(gpu_->opened->profile);
    } else {
      find_and_read_profile(gpu_name(), profile_path_, profile_);
    }
    if (profile_) spdlog::info("profile: {}", profile_path_);
    fit_cpu_to_threads();
    if (profile_ && profile_->has_gpu && profile_->gpu_kernels < gpu::kKernelGeneration)
      spdlog::warn(
          "the profile {} was fitted on GPU kernels of generation {}, this kinfer's are of "
          "generation {}: its GPU predictions (the --device auto choice, the placement) may be "
          "off; run `kinfer calibrate` again",
          profile_path_, profile_->gpu_kernels, gpu::kKernelGeneration);
  }
  if ((!profile_ || !profile_->has_gpu) && !derive_tried_ &&
      (gpu_->use_given ? gpu_->given != nullptr : gpu_->opened && gpu_->opened->ctx)) {
    derive_tried_ = true;
    derive_for_open_gpu();
  }
  path = profile_path_.empty() ? default_profile_path() : profile_path_;
  return profile_ ? &*profile_ : nullptr;
}

void Runner::derive_for_open_gpu() {
  if (req_.auto_calibrate_seconds > 0) return;
  gpu::Context* ctx = gpu_->use_given ? gpu_->given : gpu_->opened->ctx.get();
  const std::string name = ctx->name();
  if (name.empty()) return;
  try {
    const auto t0 = clock_type::now();
    const GpuFigures here = ctx->quick_figures();
    if (!here.measured()) return;
    const std::string base_path = closest_shipped_profile(here);
    if (base_path.empty()) return;
    const Profile base = load_profile(base_path, false);
    const bool own_cpu = profile_ && !profile_->has_gpu;  // the user's CPU calibration
    const double memory = gpu_->use_given ? 0 : gpu_->opened->memory_bytes;
    const double start = gpu_->use_given ? 0 : gpu_->opened->seconds;
    Profile p = derive_profile(base, here, name, memory, start, own_cpu ? &profile_->cpu : nullptr);
    const std::string to = auto_profile_path(name);
    std::string kept;
    try {
      save_profile(p, to);
      p.path = to;
      kept = "kept in " + to + " for later runs";
    } catch (const std::exception& e) {
      p.path = base_path;
      kept = std::string("not kept (") + e.what() + ")";
    }
    spdlog::info(
        "no calibration profile for the GPU '{}': derived one in {:.0f} ms from {}; {}; `kinfer "
        "calibrate` fits one to this machine",
        name, 1e3 * since(t0), p.derived_from, kept);
    profile_path_ = p.path;
    profile_ = std::move(p);
    placed_.reset();  // schedules from the profile it replaces
    fit_cpu_to_threads();
  } catch (const std::exception& e) {
    spdlog::warn("could not derive a calibration profile for the GPU '{}': {}", name, e.what());
  }
}

void Runner::fit_cpu_to_threads() {
  if (!profile_) return;
  const int threads = req_.threads > 0 ? req_.threads : omp_get_max_threads();
  if (profile_->cpu.threads <= 0 || profile_->cpu.threads == threads) return;
  spdlog::debug("the profile's CPU part, fitted on {} threads, scaled to this run's {}",
                profile_->cpu.threads, threads);
  profile_->cpu = cpu_for_threads(profile_->cpu, threads);
}

const Profile* Runner::calibrate_briefly(gpu::Context& ctx, std::string& path) {
  // a new user on a GPU none of the shipped profiles knows: measure it once, briefly
  const std::string to = auto_profile_path(ctx.name());
  spdlog::warn(
      "no calibration profile for the GPU '{}' (none shipped for it, none cached): "
      "calibrating it for {:.0f} s, once; kept in {} for later runs (a full `kinfer "
      "calibrate` predicts better)",
      ctx.name(), req_.auto_calibrate_seconds, to);
  CalibrateOptions co;
  co.seconds = req_.auto_calibrate_seconds;
  co.threads = req_.threads;
  Profile p = calibrate(co, &ctx, ctx.name());
  p.gpu_start = gpu_->opened ? gpu_->opened->seconds : 0;
  p.host = "automatic calibration (" + std::to_string(static_cast<int>(co.seconds)) + " s)";
  try {
    save_profile(p, to);
    p.path = to;
  } catch (const std::exception& e) {
    spdlog::warn("could not keep the calibration profile: {}", e.what());
  }
  profile_ = std::move(p);
  placed_.reset();  // schedules from the profile it replaces
  profile_path_ = to;
  path = to;
  return &*profile_;
}

}  // namespace kinfer::sched
