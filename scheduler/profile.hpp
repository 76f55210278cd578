#pragma once
// A machine's calibration profile: fitted runtime models of the CPU kernel and (when the
// machine had one) the GPU kernel, and host<->device transfer time. Stored as JSON in the
// user's cache directory by `kinfer calibrate`; any profile can be loaded with --profile, so a
// schedule for a GPU machine can be planned and inspected elsewhere.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/device_api.hpp"
#include "scheduler/predictor.hpp"

namespace kinfer::sched {

// seconds = latency + bytes / bandwidth, one direction.
struct TransferModel {
  double latency = 0;                              // seconds
  double bandwidth = 0;                            // bytes per second
  std::vector<std::pair<double, double>> samples;  // (bytes, seconds)
  double seconds(double bytes) const { return bytes <= 0 ? 0 : latency + bytes / bandwidth; }
  // Least squares on the relative error, so small and large transfers both count.
  static TransferModel fit(std::vector<std::pair<double, double>> samples);
};

// A GPU's quick figures as gpu::Context::quick_figures measures them (gpu/device_api.hpp):
// derive_profile compares a GPU's with a shipped profile's.
using GpuFigures = gpu::QuickFigures;

struct DeviceProfile {
  std::string name;  // "2 x Intel(R) ..." / "NVIDIA H100 80GB HBM3"
  int threads = 0;   // CPU threads the kernel used
  double memory_bytes = 0;
  double dispatch = 0;  // the executor's own seconds per bucket beyond the kernel
  RuntimeModel model;
  std::vector<Sample> samples;
};

struct Profile {
  std::string path;     // where it was read from (for messages)
  std::string created;  // ISO date
  std::string host;
  DeviceProfile cpu;
  bool has_gpu = false;
  DeviceProfile gpu;
  int gpu_max_inputs = 16;  // the GPU kernel takes at most this many input tables
  // Extra time of a bucket shape's first GPU run (the kernel's policy tables are built and
  // uploaded once per shape and context; later evaluations of the same plan reuse them).
  double gpu_first_use = 0;
  // Seconds from a fresh process to a usable GPU (driver start and context), as `kinfer
  // calibrate` measured it; 0: not measured (the runner assumes kGpuStartSeconds).
  double gpu_start = 0;
  // The GPU kernels' generation it was fitted on (gpu::kKernelGeneration at calibration; 0:
  // before generations were recorded).
  int gpu_kernels = 0;
  // The GPU's quick figures (measured by `kinfer calibrate`, or by the run that derived this
  // profile); a shipped profile needs them to be derived from.
  GpuFigures gpu_figures;
  // Set on a derived profile: the profile it was derived from and how (derive_profile).
  std::string derived_from;
  TransferModel h2d, d2h;   // one copy, waited for
  TransferModel h2d_batch;  // per copy of many queued back to back (bandwidth 0: not measured)
  // Pinning host memory and freeing it again (bandwidth 0: not measured; pin_seconds then uses
  // kPinLatency and kPinBandwidth). A download to a CPU bucket lands in a new pinned buffer held
  // to the run's end, which costs this besides the copy.
  TransferModel pin;

  // Seconds to pin a staging buffer for `bytes` (the pool's power-of-two size) and free it.
  double pin_seconds(double bytes) const;

  // A bucket's time in the executor: its kernel plus the executor's own cost per bucket.
  double cpu_seconds(const BucketFeatures& f) const { return cpu.model.predict(f) + cpu.dispatch; }
  // Infinite when there is no GPU in the profile. `first_use`: the shape was never run on
  // this device before.
  double gpu_seconds(const BucketFeatures& f, bool first_use = false) const;
};

// Pinning for a profile that did not measure it. On the nvidia-h200 host cudaHostAlloc took
// 4.0-4.1 ms for 8 MiB and 34-35 ms for 64 MiB, cudaFreeHost 1.2-1.4 ms for 8 MiB: about 0.65
// ms per MiB for both.
inline constexpr double kPinLatency = 2e-5, kPinBandwidth = 1.5e9;

// Now in UTC, ISO 8601 to the second (a profile's `created`).
std::string utc_timestamp();

// $XDG_CACHE_HOME/kinfer/profile.json, else $HOME/.cache/kinfer/profile.json.
std::string default_profile_path();

// A folder of shipped profiles to look in before the others (the commands set it from
// $KINFER_PROFILES, apps/environment.hpp); empty: none. Set it before any thread looks for one.
void set_profiles_folder(std::string dir);

// Folders holding the profiles shipped with kinfer (data/profiles: one per GPU model), in the
// order searched: set_profiles_folder's, then beside the executable (../share/kinfer/profiles for
// an install, ../data/profiles for a device bundle, ../../data/profiles for a build tree), then the
// source tree's data/profiles. Only those that exist.
std::vector<std::string> shipped_profile_dirs();
// The shipped profile called `name` (its file name without .json, e.g. "h100"): the first in
// shipped_profile_dirs(); empty when there is none.
std::string shipped_profile(const std::string& name);
// The names of the shipped profiles measured on a GPU (for choices and messages), sorted.
std::vector<std::string> shipped_gpu_profile_names();
// Where an automatic calibration for the GPU named `gpu_name` is cached: beside
// default_profile_path(), in profiles/<the name in lower case, letters and digits>.json.
std::string auto_profile_path(const std::string& gpu_name);
// The profile to use for the GPU named `gpu_name`, without running anything: the user's
// (default_profile_path(), from `kinfer calibrate`) when made with that GPU, else one an
// automatic calibration cached (auto_profile_path), else a shipped one made with a GPU of
// exactly that name. Empty when there is none. Unreadable candidates are skipped.
std::string find_profile_for_gpu(const std::string& gpu_name);

// A profile for a GPU that no profile knows (what a new user's run there uses instead of
// `kinfer calibrate`): `base`'s, with its GPU kernels' times (the part above the fixed launch
// overhead) scaled by base's copy bandwidth over `here`'s (the kernels are bound by the device's
// memory: docs/performance.md), its transfer bandwidths by the ratios of the pinned copies each
// way, and the GPU's name, memory and start (seconds; 0: base's) as given. The CPU part is
// `cpu`'s when given (the user's own CPU calibration), else base's. Throws
// std::invalid_argument when base has no GPU part or either side's figures are not measured.
Profile derive_profile(const Profile& base, const GpuFigures& here, const std::string& gpu_name,
                       double memory_bytes, double start_seconds,
                       const DeviceProfile* cpu = nullptr);
// A profile's CPU part for a run on `threads` CPU threads when it was fitted on another count
// (a shipped profile's reference machine has 16): the kernel times above the fixed overhead
// times (fitted / threads)^kCpuThreadExponent, at most kCpuMostThreadSpeedup times faster.
// Measured on the H100 machine's 16 cores (docs/performance.md): 16 -> 2 threads made
// linkage_14/18/17 5.3-6.6x slower (exponent 0.80-0.93) and the small DBN_11/linkage_24
// 3.7-4.1x (their fixed costs). Unchanged when either count is unknown.
inline constexpr double kCpuThreadExponent = 0.85;
inline constexpr double kCpuMostThreadSpeedup = 2;
DeviceProfile cpu_for_threads(const DeviceProfile& cpu, int threads);

// The shipped profile (shipped_profile_dirs) to derive a profile from for a GPU with these
// figures: among those with a GPU part and measured figures, the one whose copy bandwidth is
// closest in ratio (ties: the first by file name). Empty when there is none.
std::string closest_shipped_profile(const GpuFigures& here);

nlohmann::json to_json(const Profile& p);
// Throws InputError naming the file and what is wrong.
Profile profile_from_json(const nlohmann::json& j, const std::string& source);
// `with_samples` false: the fitted models only, not the calibration samples (faster; enough to
// predict).
Profile load_profile(const std::string& path, bool with_samples = true);
// Atomic (temporary file, then rename); creates the directory.
void save_profile(const Profile& p, const std::string& path);

}  // namespace kinfer::sched
