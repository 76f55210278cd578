#include "scheduler/runner.hpp"

#include <spdlog/spdlog.h>

#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>

#include "engine/errors.hpp"
#include "engine/json.hpp"
#include "engine/util.hpp"
#include "scheduler/calibrate.hpp"
#include "scheduler/plan_costs.hpp"

namespace kinfer::sched {

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string device_word(int gpu_buckets, int cpu_buckets) {
  return gpu_buckets == 0 ? "cpu" : cpu_buckets == 0 ? "gpu" : "gpu+cpu";
}

// Schedule with the same device and reason for every bucket.
Schedule uniform(std::size_t n, Policy p, Device d, const std::string& why) {
  Schedule s;
  s.policy = p;
  s.device.assign(n, d);
  s.reason.assign(n, why);
  return s;
}

// The calibration profile for the GPU `gpu_name`: the one made with it, else whatever the user's
// cache holds (e.g. a CPU-only calibration); `profile` empty when the file is not there. Throws
// InputError for a malformed file.
void find_and_read_profile(const std::string& gpu_name, std::string& path,
                           std::optional<Profile>& profile) {
  path = find_profile_for_gpu(gpu_name);
  if (path.empty()) path = default_profile_path();
  if (std::filesystem::exists(path)) profile = load_profile(path, false);
}
}  // namespace

namespace {
struct KeptGpus {
  std::mutex mutex;
  bool keep = false;
  std::map<int, OpenedDevice> open;  // by visible index, profile read
};
KeptGpus& kept_gpus() {
  static KeptGpus k;
  return k;
}
OpenedDevice open_gpu_now(int device, bool with_profile);
}  // namespace

void keep_gpus_open() {
  std::lock_guard lock(kept_gpus().mutex);
  kept_gpus().keep = true;
}

OpenedDevice open_gpu(int device, bool with_profile) {
  KeptGpus& k = kept_gpus();
  std::lock_guard lock(k.mutex);
  if (!k.keep) return open_gpu_now(device, with_profile);
  auto it = k.open.find(device);
  if (it == k.open.end()) {
    OpenedDevice d = open_gpu_now(device, true);
    if (!d.ctx) return d;  // not kept: a later job tries again and says why
    it = k.open.emplace(device, std::move(d)).first;
  }
  OpenedDevice d = it->second;
  d.seconds = 0;  // already open
  return d;
}

namespace {
OpenedDevice open_gpu_now(int device, bool with_profile) {
  const auto t0 = clock_type::now();
  OpenedDevice d;
  const gpu::DeviceInfo info = gpu::probe();
  if (!info.available) {
    d.name = info.why_not.empty() ? "no GPU" : info.why_not;
    d.seconds = since(t0);
    return d;
  }
  // The profile is read while the context is made: the GPU's name is known from the probe.
  struct Read {
    std::string path;
    std::optional<Profile> profile;
    bool looked = false;
  };
  std::future<Read> read;
  if (with_profile)
    read = std::async(std::launch::async, [name = info.name] {
      Read r;
      try {
        find_and_read_profile(name, r.path, r.profile);
        r.looked = true;
      } catch (const std::exception&) {  // Runner::profile reads it again and reports the error
      }
      return r;
    });
  try {
    const double probed = since(t0);
    d.ctx = gpu::Context::create(device);
    d.name = info.name;
    d.memory_bytes = info.memory_bytes;
    spdlog::debug("GPU {} opened in {:.3f} s (the driver's probe {:.3f} s, the context {:.3f} s)",
                  device, since(t0), probed, since(t0) - probed);
  } catch (const std::exception& e) {
    d.ctx.reset();
    d.name = std::string("the GPU could not be opened: ") + e.what();
  }
  d.seconds = since(t0);
  if (read.valid()) {
    Read r = read.get();
    if (d.ctx) {
      d.profile_path = std::move(r.path);
      d.profile = std::move(r.profile);
      d.profile_looked = r.looked;
    }
  }
  return d;
}
}  // namespace

// The search's first rounds start the GPU early only if it would win with this many times
// (log2) fewer states than their best order: the search's answer has 2^3-2^6 fewer
// (linkage_17: 2^39.0 at round 0, 2^33.2 in the end; linkage_16: 2^29.5 and 2^24.3).
constexpr double kEarlyStartDiscountLog2 = 6;
// The later rounds, only if it would win with 2x fewer states than their best: a best order
// still shrinking near the line must not start the driver (linkage_21: 2^28.6 at round 2, 2^26.8
// in the end, 0.03 s on 16 cores; linkage_14: 2^29.7 at round 2, 2^29.0, 0.23 s).
constexpr double kLateStartDiscountLog2 = 1;

AutoChoice auto_choice(const Plan& plan, const Profile& profile, Policy policy,
                       double start_seconds, Schedule* gpu_schedule) {
  AutoChoice c;
  const PlanCosts pc = plan_costs(plan, profile);
  c.cpu_seconds = make_schedule(pc.tree, Policy::cpu_only).cost.total();
  Schedule gs = make_schedule(pc.tree, policy);
  c.gpu_seconds = gs.cost.total() + start_seconds;
  if (gpu_schedule) *gpu_schedule = std::move(gs);
  c.gpu = c.gpu_seconds < c.cpu_seconds;
  c.why = fmt::format(
      "--device auto: predicted {} on the CPU, {} with the GPU ({}, {} of it to start the "
      "device), from the profile {}",
      format_seconds(c.cpu_seconds), format_seconds(c.gpu_seconds), to_string(policy),
      format_seconds(start_seconds), profile.path.empty() ? profile.gpu.name : profile.path);
  return c;
}

std::string gpu_sized_prediction_key() { return kGpuSizedPredictionKey; }

namespace {
// The GPU's part of gpu_sized_prediction, in nominal core-seconds of search.
double gpu_search_part(double states) {
  const double gpu_wall = std::max(kGpuSearchFloorStarts * kGpuStartSeconds,
                                   kGpuComputeBase + states / kGpuStatesPerSecond);
  return gpu_wall * kSearchCoreSecondsPerSecond;
}
}  // namespace

double gpu_sized_prediction(const OrderStats& s) {
  const double states = std::exp2(s.log2_total_state);
  return std::min(states / kCpuSearchStatesPerSecond, gpu_search_part(states));
}

namespace {
// A plan as the runner's caches know it: the object and its sizes (a plan is not changed once
// made; the sizes catch one that was).
struct PlanKey {
  const Plan* plan = nullptr;
  std::size_t buckets = 0, inputs = 0;
  double flops = 0, states = 0;
  explicit PlanKey(const Plan& p)
      : plan(&p),
        buckets(p.tree.buckets.size()),
        inputs(p.input_scope.size()),
        flops(p.flops),
        states(p.order.stats.log2_total_state) {}
  bool operator==(const PlanKey&) const = default;
};
}  // namespace

// The last profile schedule placement() made (or auto_gpu's prediction did), for its plan.
struct Runner::Placed {
  PlanKey key;
  Policy policy;
  const Profile* profile;
  bool warm;
  Schedule schedule;
};

// The GPU: the machine's (opened once, maybe in the background) or one given by a test.
struct Runner::Gpu {
  gpu::Context* given = nullptr;
  bool use_given = false;
  std::future<OpenedDevice> early;
  clock_type::time_point early_at;  // when `early` was started
  std::optional<OpenedDevice> opened;
  // The last --device auto decision made with the GPU open, for the plan it was made for (the
  // planner, the accountant and run() each ask; a prediction is ~10 ms on a large network).
  struct AutoDecision {
    PlanKey key;
    bool gpu = false;
    std::string why;
  };
  std::optional<AutoDecision> decided;
};

std::function<double(const OrderStats&)> Runner::order_prediction() {
  if (req_.device == DeviceChoice::cpu) return {};
  auto calls = std::make_shared<int>(0);
  return [this, calls](const OrderStats& s) {
    const double states = std::exp2(s.log2_total_state);
    const double cpu = states / kCpuSearchStatesPerSecond;  // the engine's own prediction
    if (*calls < 8)
      spdlog::debug("order search round {}: best 2^{:.2f} states", *calls, s.log2_total_state);
    // The first rounds' best orders are far worse than the search's answer (2^3-2^6 states):
    // sized for the CPU, so that a small network never touches the GPU's driver.
    // They start the GPU in the background only when even 2^6 fewer states would make it win
    // clearly, so that its start (~0.3 s) begins with the search instead of after its first
    // rounds and a probe on the search's thread.
    if ((*calls)++ < kCpuSizedRounds) {
      start_if_likely(s, kEarlyStartDiscountLog2);
      return cpu;
    }
    // GPU-sized, and the device started in the background, only when the GPU's part wins
    // clearly (2x) against one core's guessed rate: a best order still shrinking near the line
    // (linkage_21's 2^27.7 at round 2, 2^25.3 in the end) must not start the driver. (With the
    // sizing's own CPU rate here, linkage_14 went CPU-sized: its search 0.19 -> 0.34 s and its
    // device's start after the plan, 0.06-0.13 s later.)
    if (2 * gpu_search_part(states) >= states / kCpuCoreStatesGuess) return cpu;
    start_if_likely(s, kLateStartDiscountLog2);
    // Whether there is a GPU, without waiting for the driver (a probe costs ~0.1 s on the
    // search's thread): the device nodes decide, so that the same seed gives the same order on
    // the machine whatever the threads, the load and the background start's progress.
    const bool likely = gpu_->use_given ? gpu_->given != nullptr : gpu::likely_present();
    return likely ? gpu_sized_prediction(s) : cpu;
  };
}

void Runner::start_if_likely(const OrderStats& s, double discount_log2) {
  if (req_.device != DeviceChoice::automatic || describe_only_ || gpu_->use_given || gpu_->opened ||
      gpu_->early.valid())
    return;
  // The GPU's rates of gpu_sized_prediction and kCpuCoreStatesGuess on this machine's threads:
  // a guess only (the profile decides in run()), so that the device starts while the plan is
  // being made.
  const double log2_states = s.log2_total_state - discount_log2;
  const double states = std::exp2(log2_states);
  const int threads = req_.threads > 0 ? req_.threads : omp_get_max_threads();
  const double cpu = states / (kCpuCoreStatesGuess * threads);
  const double gpu = kGpuStartSeconds + kGpuComputeBase + states / kGpuStatesPerSecond;
  if (2 * gpu >= cpu) return;
  spdlog::debug("starting the GPU in the background (2^{:.1f} states: about {} on the CPU)",
                log2_states, format_seconds(cpu));
  gpu_->early = std::async(std::launch::async, open_gpu, req_.gpu_index, !profile_read_);
  gpu_->early_at = clock_type::now();
}

bool Runner::holds_gpu() const {
  return gpu_->early.valid() || (gpu_->opened && gpu_->opened->ctx);
}

double gpu_context_host_bytes() {
  int queues = 8;  // the driver's default
  if (const char* c = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"); c && std::atoi(c) >= 1)
    queues = std::min(std::atoi(c), 32);
  return (80.0 + 10.0 * (queues - 1)) * 1024 * 1024;
}

const char* to_string(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::automatic:
      return "auto";
    case DeviceChoice::cpu:
      return "cpu";
    case DeviceChoice::gpu:
      return "gpu";
  }
  return "?";
}

DeviceChoice parse_device(const std::string& name) {
  for (DeviceChoice d : {DeviceChoice::automatic, DeviceChoice::cpu, DeviceChoice::gpu})
    if (name == to_string(d)) return d;
  throw std::invalid_argument("unknown device '" + name + "' (expected auto, cpu or gpu)");
}

Runner::Runner(RunRequest req) : req_(std::move(req)), gpu_(std::make_unique<Gpu>()) {
  if (!req_.profile_path.empty()) {
    profile_ = load_profile(req_.profile_path, false);
    profile_read_ = true;
    profile_path_ = req_.profile_path;
    fit_cpu_to_threads();
  }
}

Runner::Runner(RunRequest req, gpu::Context* device, std::optional<Profile> profile)
    : req_(std::move(req)), gpu_(std::make_unique<Gpu>()) {
  gpu_->given = device;
  gpu_->use_given = true;
  if (profile) {
    profile_ = std::move(profile);
    profile_read_ = true;
    profile_path_ = profile_->path;
  } else if (!req_.profile_path.empty()) {
    profile_ = load_profile(req_.profile_path, false);
    profile_read_ = true;
    profile_path_ = req_.profile_path;
  }
  fit_cpu_to_threads();
}

Runner::~Runner() {
  if (gpu_ && gpu_->early.valid()) gpu_->early.wait();
}

void Runner::start_early() {
  if (gpu_->use_given || gpu_->opened || gpu_->early.valid()) return;
  if (req_.device == DeviceChoice::gpu || req_.check) {
    gpu_->early = std::async(std::launch::async, open_gpu, req_.gpu_index, !profile_read_);
    gpu_->early_at = clock_type::now();
  }
}

bool Runner::wants_gpu(const Plan& plan) {
  std::string why_not;
  if (req_.check) return true;
  switch (req_.device) {
    case DeviceChoice::cpu:
      return false;
    case DeviceChoice::gpu:
      return true;
    case DeviceChoice::automatic:
      return auto_gpu(plan, why_not);
  }
  return false;
}

const std::string& Runner::gpu_name() {
  if (!gpu_name_) {
    if (gpu_->use_given)
      gpu_name_ = gpu_->given ? gpu_->given->name() : "";
    else if (gpu_->opened)
      gpu_name_ = gpu_->opened->ctx ? gpu_->opened->name : "";
    else
      gpu_name_ = probed().available ? probed().name : "";
  }
  return *gpu_name_;
}

const gpu::DeviceInfo& Runner::probed() {
  if (!probed_) probed_ = gpu::probe();
  return *probed_;
}

bool Runner::auto_gpu(const Plan& plan, std::string& why_not) {
  // A plan the CPU finishes before the GPU could start never touches the GPU's driver (whose
  // start and teardown alone would make a small run several times slower).
  const double states = std::exp2(plan.order.stats.log2_total_state);
  const int threads = req_.threads > 0 ? req_.threads : omp_get_max_threads();
  // Also while a background start on the search's early guess is still under way: such a plan
  // does not wait for the driver (once open, the profile decides: batch and lod plans).
  const bool opened = gpu_->opened && gpu_->opened->ctx;
  const double cpu_guess = states / (kCpuCoreStatesGuess * threads);
  if (!gpu_->use_given && !opened && cpu_guess < kGpuStartSeconds) {
    why_not = fmt::format(
        "--device auto: 2^{:.1f} states, about {} on the CPU, less than starting the GPU takes",
        plan.order.stats.log2_total_state, format_seconds(cpu_guess));
    return false;
  }
  // A plan whose inputs are not restructured yet (the planner asking for the device budget
  // before conditioning) has no input tables to predict from: the fixed threshold below decides
  // there; the profile decides when the filled plan runs.
  const bool filled = plan.input_scope.size() == plan.model.factors.size();
  const std::string& name = gpu_name();
  std::string path;
  const Profile* prof = name.empty() || !filled ? nullptr : profile(path);
  if (!prof || !prof->has_gpu) {
    // no GPU (open() will say why) or no profile for it: the fixed threshold
    if (auto_wants_gpu(plan.flops)) return true;
    why_not = name.empty() ? "--device auto: no usable GPU"
                           : fmt::format(
                                 "--device auto: the plan needs {:.3g} FLOP, below the {:.0e} "
                                 "that pay for starting the GPU (no profile for it to predict "
                                 "from)",
                                 plan.flops, kAutoGpuMinFlops);
    return false;
  }
  // what is left of the GPU's start: nothing when open, less when it started in the background
  const bool open = gpu_->use_given || opened;
  if (open && gpu_->decided && gpu_->decided->key == PlanKey(plan)) {
    if (!gpu_->decided->gpu) why_not = gpu_->decided->why;
    return gpu_->decided->gpu;
  }
  double start = open ? 0.0 : prof->gpu_start > 0 ? prof->gpu_start : kGpuStartSeconds;
  if (!open && gpu_->early.valid()) start = std::max(0.0, start - since(gpu_->early_at));
  const Policy asked = req_.policy.value_or(kDefaultGpuPolicy);
  const Policy predicted = asked == Policy::gpu_only ? asked : Policy::comm_aware;
  Schedule s;
  const auto t_pred = clock_type::now();
  const AutoChoice c = auto_choice(plan, *prof, predicted, start, &s);
  spdlog::debug("{}: {} (predicted in {:.1f} ms{})", c.gpu ? "GPU" : "CPU", c.why,
                1e3 * since(t_pred), open ? "" : ", the GPU still opening");
  if (!c.gpu) why_not = c.why;
  if (open) {
    gpu_->decided = Gpu::AutoDecision{PlanKey(plan), c.gpu, c.why};
    // the schedule run() places by, when it asks for the same (auto_choice's costs are cold)
    if (!(req_.repeated_plans && gpu_warm_))
      placed_.reset(new Placed{PlanKey(plan), predicted, prof, false, std::move(s)});
  }
  return c.gpu;
}

gpu::Context* Runner::open() {
  if (gpu_->use_given) {
    if (gpu_->given) gpu_->given->bind();
    return gpu_->given;
  }
  if (!gpu_->opened) {
    gpu_->opened = gpu_->early.valid() ? gpu_->early.get() : open_gpu(req_.gpu_index);
    if (gpu_->opened->ctx)
      spdlog::info("GPU {}: {} ({:.0f} GiB)", req_.gpu_index, gpu_->opened->name,
                   gpu_->opened->memory_bytes / (1 << 30));
  }
  gpu::Context* ctx = gpu_->opened->ctx.get();
  if (ctx) ctx->bind();  // opened in another thread, or used from several (one per GPU)
  return ctx;
}

double Runner::device_budget(const Plan& plan) {
  if (!wants_gpu(plan)) return 0;
  if (describe_only_) {
    const gpu::DeviceInfo& info = probed();
    if (!info.available) return 0;
    const double usable = 0.9 * info.memory_bytes;
    return req_.gpu_memory_bytes > 0 ? std::min(req_.gpu_memory_bytes, usable) : usable;
  }
  gpu::Context* ctx = open();
  if (!ctx) return 0;
  const auto t0 = clock_type::now();
  const double usable = 0.9 * ctx->free_bytes();
  if (since(t0) > 0.001) spdlog::debug("the GPU's free memory read in {:.1f} ms", 1e3 * since(t0));
  return req_.gpu_memory_bytes > 0 ? std::min(req_.gpu_memory_bytes, usable) : usable;
}

void Runner::plan_for_device(PlanOptions& po, bool describe_only) {
  describe_only_ = describe_only;
  po.order.predict_seconds = order_prediction();
  po.order.predict_key = po.order.predict_seconds ? gpu_sized_prediction_key() : "";
  po.device_budget = [this](const Plan& p) { return device_budget(p); };
}

Schedule Runner::placement(const Plan& plan, Policy p, const Profile* prof) {
  if (needs_profile(p)) {
    if (prof && prof->has_gpu) {
      const bool warm = req_.repeated_plans && gpu_warm_;
      if (placed_ && placed_->key == PlanKey(plan) && placed_->policy == p &&
          placed_->profile == prof && placed_->warm == warm)
        return placed_->schedule;
      Schedule s = make_schedule(plan_costs(plan, *prof, warm).tree, p);
      placed_.reset(new Placed{PlanKey(plan), p, prof, warm, s});
      return s;
    }
    p = Policy::whole_plan;  // the one fallback: no profile with a GPU part
  }
  if (p == Policy::whole_plan) return whole_plan_schedule(plan.tree);
  return uniform(plan.tree.buckets.size(), p, p == Policy::gpu_only ? Device::gpu : Device::cpu,
                 std::string("policy ") + to_string(p));
}

std::vector<Device> Runner::planned_assignment(const Plan& plan) {
  // The placement run() will choose (before the executor's own fallbacks, which gpu_host_part
  // models); a plan whose inputs are not filled yet has no tables to predict from: whole-plan.
  const Policy p = req_.policy.value_or(kDefaultGpuPolicy);
  std::string path;
  const bool filled = plan.input_scope.size() == plan.model.factors.size();
  const Profile* prof = needs_profile(p) && filled ? profile(path) : nullptr;
  return placement(plan, p, prof).device;
}

MemoryEstimate Runner::estimate(const Plan& plan) {
  MemoryEstimate m = plan.memory;
  const double budget = device_budget(plan);
  if (budget <= 0) {
    m.device_bytes = 0;
    return m;
  }
  // Tables that do not fit the device run on the CPU (the executor's fallback): then the host
  // holds them as before. Else the host holds what the executor keeps there: the tables of the
  // buckets no kernel takes (and the small ones whole-plan leaves on the CPU), the downloads,
  // the pinned upload block and merged products. Placement as whole-plan places (the profile
  // policies put more on the CPU only where it is faster: their host part is not modelled).
  if (req_.check) {  // the CPU computes everything as the reference, the GPU again beside it
    m.device_host_bytes = gpu_context_host_bytes() + m.input_bytes;
  } else if (m.device_bytes <= budget && !plan.tree.buckets.empty()) {
    const GpuHostPart g = gpu_host_part(plan, planned_assignment(plan), req_.threads);
    m.intermediate_bytes = g.intermediates;
    m.device_host_bytes = gpu_context_host_bytes() + g.staging + g.kernel_plans;
  } else {
    m.device_host_bytes = gpu_context_host_bytes() + m.input_bytes;
  }
  update_peak(m);
  return m;
}

int slice_lanes(int gpus, const ConditionedPlan& cp, double host_memory_bytes) {
  if (gpus < 2 || !cp.conditioned() || cp.cond.slices < 2) return 1;
  int lanes = static_cast<int>(std::min<std::int64_t>(gpus, cp.cond.slices));
  if (host_memory_bytes > 0 && cp.plan.memory.peak_bytes > 0)
    lanes = std::max(
        1, std::min(lanes, static_cast<int>(host_memory_bytes / cp.plan.memory.peak_bytes)));
  return lanes;
}

int Runner::lanes(const ConditionedPlan& cp) {
  if (!cp.conditioned() || cp.cond.slices < 2 || req_.check || !wants_gpu(cp.plan)) return 1;
  if (!gpu_count_) {
    if (gpu_->use_given) {
      gpu_count_ = gpu_->given ? 1 + static_cast<int>(lane_devices_.size()) : 0;
    } else {
      gpu_count_ = probed().available ? probed().count : 0;
    }
  }
  const int n = slice_lanes(*gpu_count_, cp, req_.host_memory_bytes);
  if (n > 1 && n != lanes_said_)  // once per runner and count (lod runs many plans)
    spdlog::info("{} GPUs: the {} slices spread over {} of them{}", *gpu_count_, cp.cond.slices, n,
                 n < *gpu_count_ ? " (what the copies of the plan fit in --max-memory)" : "");
  lanes_said_ = n;
  return n;
}

void Runner::set_plan_options(PlanOptions po) {
  po.device_budget = nullptr;  // the runner's own, called directly
  po.order.predict_seconds = nullptr;
  plan_options_ = std::move(po);
}

bool Runner::fit_to_free_device(ConditionedPlan& cp, bool after_failure) {
  const double budget = device_budget(cp.plan);
  if (budget <= 0) return false;
  if (cp.plan.memory.device_bytes <= (after_failure ? 0.9 : 1.0) * budget) {
    if (after_failure)
      spdlog::info("the GPU has {} usable now, enough for the plan's {}: it runs again as it is",
                   human_bytes(budget), human_bytes(cp.plan.memory.device_bytes));
    return false;
  }
  bool feasible = false;
  // After a failure, to 90% of what is usable: the executor's own count of a slice's tables can
  // exceed the accountant's estimate by a few percent.
  const double target = after_failure ? 0.9 * budget : budget;
  // While the new plan is built, the tables it is cut from exist three times (the plan's, the
  // copy recondition starts from, the new plan's source).
  double host = req_.host_memory_bytes;
  if (host > 0) {
    host -= 2 * (cp.conditioned() ? cp.plan.memory.source_bytes : cp.plan.memory.input_bytes);
    if (host <= 0) return false;
  }
  ConditionedPlan next = recondition(cp, host, target, *plan_options_, feasible);
  if (!feasible) {
    spdlog::info(
        "the GPU has {} usable now and the plan needs {} there; conditioning cannot fit it: "
        "what does not fit runs on the CPU",
        human_bytes(budget), human_bytes(cp.plan.memory.device_bytes));
    return false;
  }
  next.plan.memory = estimate(next.plan);
  spdlog::warn(
      "the GPU has {} usable now ({}), the plan needs {} there: conditioned on {} more "
      "variable(s), {} slices of {} ({:.3g} FLOP, {:.1f}% over the unconditioned plan)",
      human_bytes(budget),
      after_failure ? "an allocation failed: another process holds the rest"
                    : "less than when it was planned: another process holds the rest",
      human_bytes(cp.plan.memory.device_bytes), next.cond.vars.size() - cp.cond.vars.size(),
      next.cond.slices, human_bytes(next.plan.memory.device_bytes), next.cond.flops,
      100 * next.cond.overhead());
  cp = std::move(next);
  return true;
}

RunResult Runner::run(ConditionedPlan& cp, SliceDealer* dealer) {
  if (!plan_options_ || dealer || req_.check || !cp.plan.model.impossible.empty())
    return run_slices(cp, dealer);
  fit_to_free_device(cp, false);
  // While the plan can be conditioned further, a slice that does not fit the device's memory
  // usable now (read when it starts, or an allocation that fails: other processes on the GPU)
  // is conditioned to it and the slices run again; the last try places what does not fit on
  // the CPU, and an allocation that fails then computes the plan on the CPU.
  constexpr int kTries = 4;
  int handed_up = kTries - 1;  // the tries whose full device is handed up here to condition
  for (int done = 1; handed_up > 0; ++done) {
    rethrow_device_full_ = true;
    try {
      RunResult r = run_slices(cp, dealer);
      rethrow_device_full_ = false;
      return r;
    } catch (const DeviceMemoryError& e) {
      rethrow_device_full_ = false;
      --handed_up;
      spdlog::warn("{}: conditioning the plan to the GPU's memory usable now (try {} of at most {})",
                   e.what(), done + 1, kTries);
      // nothing to condition (the plan fits what is usable now, or cannot be cut): once more as
      // it is, then the last try
      if (!fit_to_free_device(cp, true)) handed_up = std::min(handed_up, 1);
    } catch (...) {
      rethrow_device_full_ = false;
      throw;
    }
  }
  return run_slices(cp, dealer);  // the last try: run(plan) falls back to the CPU itself
}

RunResult Runner::run_slices(ConditionedPlan& cp, SliceDealer* dealer) {
  const int n = lanes(cp);
  for (int k = static_cast<int>(lanes_.size()) + 1; k < n; ++k) {  // GPU k's runner, kept
    RunRequest rk = req_;
    rk.gpu_index = k;
    if (gpu_->use_given) {
      lanes_.push_back(std::make_unique<Runner>(rk, lane_devices_.at(k - 1), profile_));
    } else {
      lanes_.push_back(std::make_unique<Runner>(rk));
      lanes_.back()->start_early();
    }
  }
  RunResult r;
  std::optional<CheckReport> failed_check;
  bool ran_here = false;
  double device_seconds = 0, device_peak = 0;
  std::vector<int> lane_slices;
  std::vector<std::string> lane_name(std::max(1, n));
  std::mutex mu;
  const double ln = run_conditioned_lanes(
      cp, n,
      [&](int k, const Plan& p) {
        RunResult s = (k == 0 ? *this : *lanes_[k - 1]).run(p);
        const double v = s.ln_pr;
        const std::lock_guard<std::mutex> lock(mu);
        if (s.check && !s.check->passed && !failed_check) failed_check = s.check;
        device_seconds += s.device_seconds;
        device_peak = std::max(device_peak, s.device_peak_bytes);
        if (lane_name[k].empty()) lane_name[k] = s.gpu_name.empty() ? "cpu" : s.gpu_name;
        if (k == 0 || !ran_here) r = std::move(s);  // the schedule reported: GPU 0's last slice
        ran_here = true;
        return v;
      },
      dealer, &lane_slices);
  if (!ran_here) r.device = "none";  // e.g. a rank that was dealt no slice
  r.ln_pr = ln;
  r.device_seconds = device_seconds;
  r.device_peak_bytes = device_peak;
  if (failed_check) r.check = failed_check;
  for (std::size_t k = 0; k < lane_slices.size(); ++k)
    r.lanes.push_back({lane_name[k], lane_slices[k]});
  return r;
}

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

RunResult Runner::run(const Plan& plan) {
  RunResult r;
  const std::size_t nb = plan.tree.buckets.size();
  const Policy asked = req_.policy.value_or(kDefaultGpuPolicy);
  r.requested = to_string(asked);
  ++totals_.runs;

  // Where: the GPU only when the request and the plan call for it and one opens.
  gpu::Context* ctx = nullptr;
  std::string why_not;
  const bool use_gpu = req_.check || req_.device == DeviceChoice::gpu ||
                       (req_.device == DeviceChoice::automatic && auto_gpu(plan, why_not));
  if (!use_gpu) {
    if (req_.device == DeviceChoice::cpu) why_not = "--device cpu";
  } else {
    const auto t0 = clock_type::now();
    const bool first = gpu_->use_given || !gpu_->opened;
    ctx = open();
    if (first) r.device_seconds = since(t0);
    log_resources("the GPU open");
    if (ctx)
      r.gpu_name = ctx->name();
    else
      why_not = gpu_->use_given ? "no GPU" : gpu_->opened->name;
  }
  if (!ctx) r.why_not_gpu = why_not;

  auto all_cpu = [&](const std::string& why) {
    r.policy = to_string(Policy::cpu_only);
    r.device = "cpu";
    r.cpu_buckets = static_cast<int>(nb);
    r.buckets.assign(nb, {Device::cpu, why});
    RunOptions ro;
    ro.threads = req_.threads;
    const auto t0 = clock_type::now();
    r.ln_pr = run_plan(plan, ro);  // the engine's reference executor: today's CPU answers
    r.first_seconds = since(t0);
    for (int k = 0; k < req_.repeat; ++k) {
      const auto t1 = clock_type::now();
      const double again = run_plan(plan, ro);
      r.repeats.push_back(since(t1));
      if (again != r.ln_pr)
        spdlog::error("repeat {}: ln P(e) {} differs from {}", k + 1, again, r.ln_pr);
    }
    ++totals_.cpu_runs;
  };

  if (req_.check) {
    if (!ctx) {
      r.check_not_run = "no GPU to compare with (" + why_not + ")";
      if (totals_.runs == 0 || !check_warned_)  // once per runner (lod runs many plans)
        spdlog::warn("--check: {}; running on the CPU alone", r.check_not_run);
      check_warned_ = true;
      all_cpu("check without a GPU: every bucket on the CPU");
      return r;
    }
    CheckReport rep;
    const auto t0 = clock_type::now();
    r.ln_pr = run_checked(plan, *ctx, req_.threads, rep);
    r.first_seconds = since(t0);
    r.policy = "check";
    r.device = "cpu+gpu";
    r.cpu_buckets = static_cast<int>(nb);
    r.gpu_buckets = rep.buckets;
    for (std::size_t b = 0; b < nb; ++b) {
      const double d = rep.bucket_rel_diff[b];
      r.buckets.push_back({Device::cpu, std::isnan(d)
                                            ? std::string("check: CPU only, no GPU kernel takes it")
                                            : fmt::format("check: CPU and GPU, relative difference "
                                                          "{:.3g}",
                                                          d)});
    }
    // totals over every checked run
    Totals& t = totals_;
    const int run_index = t.checked++;
    t.check.tolerance = rep.tolerance;
    t.check.buckets += rep.buckets;
    t.check.buckets_without_kernel += rep.buckets_without_kernel;
    t.check.max_abs_diff = std::max(t.check.max_abs_diff, rep.max_abs_diff);
    if (!rep.passed && t.check.passed) {
      t.check.passed = false;
      t.check.first_failed_bucket = rep.first_failed_bucket;
      t.check_run = run_index;
    }
    if (rep.worst_bucket >= 0 &&
        (t.check.worst_bucket < 0 || rep.max_rel_diff > t.check.max_rel_diff)) {
      t.check.max_rel_diff = rep.max_rel_diff;
      t.check.worst_bucket = rep.worst_bucket;
      if (t.check.passed) t.check_run = run_index;
    }
    spdlog::info(
        "check: {} buckets on both CPU and GPU ({} without a GPU kernel), largest "
        "relative difference {:.3g} (bucket {}), tolerance {:.0e}: {}",
        rep.buckets, rep.buckets_without_kernel, rep.max_rel_diff, rep.worst_bucket, rep.tolerance,
        rep.passed ? "passed" : "FAILED");
    r.check = std::move(rep);
    ++totals_.gpu_runs;
    return r;
  }

  if (!ctx) {
    if (req_.policy && *req_.policy != Policy::cpu_only)
      r.note = "no GPU in use (" + why_not + "): every bucket on the CPU";
    all_cpu("no GPU in use (" + why_not + "): every bucket on the CPU");
    return r;
  }

  // Which buckets go where: the policy asked, from the profile when it needs one (calibrated
  // now when asked for and there is none), else whole-plan (noted).
  const auto t_sched = clock_type::now();
  std::string path;
  const Profile* prof = needs_profile(asked) ? profile(path) : nullptr;
  if (needs_profile(asked) && (!prof || !prof->has_gpu) && req_.auto_calibrate_seconds > 0 &&
      !gpu_->use_given && plan.flops >= kAutoGpuMinFlops && !ctx->name().empty()) {
    // a new user on a GPU none of the shipped profiles knows: measure it once, briefly
    const std::string to = auto_profile_path(ctx->name());
    spdlog::warn(
        "no calibration profile for the GPU '{}' (none shipped for it, none cached): "
        "calibrating it for {:.0f} s, once; kept in {} for later runs (a full `kinfer "
        "calibrate` predicts better)",
        ctx->name(), req_.auto_calibrate_seconds, to);
    CalibrateOptions co;
    co.seconds = req_.auto_calibrate_seconds;
    co.threads = req_.threads;
    Profile p = calibrate(co, ctx, ctx->name());
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
    prof = &*profile_;
    path = to;
  }
  const Schedule s = placement(plan, asked, prof);
  if (needs_profile(asked) && s.policy == asked) {
    r.profile = path;
    r.predicted_seconds = s.cost.total();
  } else if (needs_profile(asked)) {
    r.note = (!prof ? "no calibration profile at " + path
                    : "the profile " + path + " was made without a GPU") +
             "; running whole-plan instead of " + to_string(asked) +
             " (run `kinfer calibrate` on this machine once)";
    if (profile_note_ != r.note) spdlog::warn("{}", r.note);  // once per runner
    profile_note_ = r.note;
  }
  r.policy = to_string(s.policy);
  r.schedule_seconds = since(t_sched);

  ExecOptions eo;
  eo.threads = req_.threads;
  eo.device_budget_bytes = device_budget(plan);
  eo.over_budget_throws = rethrow_device_full_;
  eo.timeline_path = req_.gpu_timeline_path;
  eo.shapes_path = req_.gpu_shapes_path;
  ExecStats st;
  try {
    r.ln_pr = run_scheduled(plan, s.device, ctx, eo, &st);
  } catch (const DeviceMemoryError& e) {
    if (rethrow_device_full_) throw;  // run(cp) conditions the plan to what is usable now
    // The budget came from the device's free memory when it opened: another process may hold
    // it now. The CPU computes the plan instead when its own peak (the context's host part
    // stays) fits the host limit; else the run is refused with both sides' numbers.
    // plan.memory is the GPU run's estimate (Runner::estimate): the CPU's intermediate tables
    // and scratch from the engine's accountant, the context's host part kept.
    MemoryEstimate cpu = plan.memory;
    const MemoryEstimate engine = estimate_memory(plan.model, plan.tree, 0, true, req_.threads);
    cpu.intermediate_bytes = engine.intermediate_bytes;
    cpu.scratch_bytes = engine.scratch_bytes;
    cpu.device_host_bytes = gpu_context_host_bytes();
    update_peak(cpu);
    const double cpu_peak = cpu.peak_bytes;
    if (req_.host_memory_bytes > 0 && cpu_peak > req_.host_memory_bytes)
      throw ResourceError(fmt::format(
          "{}; on the CPU instead the plan needs an estimated {} of host memory, over the limit "
          "of {} (--max-memory)",
          e.what(), human_bytes(cpu_peak), human_bytes(req_.host_memory_bytes)));
    const std::string why = fmt::format(
        "the GPU's memory ran out during the run ({}): every bucket on the CPU instead", e.what());
    spdlog::warn("{}", why);
    all_cpu(why);
    r.note = why;
    return r;
  }
  r.first_seconds = since(t_sched);
  for (int k = 0; k < req_.repeat; ++k) {
    const auto t1 = clock_type::now();
    const double again = run_scheduled(plan, s.device, ctx, eo);
    r.repeats.push_back(since(t1));
    if (std::abs(again - r.ln_pr) > 1e-9 * std::max(1.0, std::abs(r.ln_pr)))
      spdlog::error("repeat {}: ln P(e) {} differs from the first run's {}", k + 1, again, r.ln_pr);
  }
  r.gpu_buckets = st.gpu_buckets;
  r.cpu_buckets = st.cpu_buckets;
  r.merged_buckets = st.merged_buckets;
  r.h2d_bytes = st.h2d_bytes;
  r.d2h_bytes = st.d2h_bytes;
  r.device_peak_bytes = st.device_peak_bytes;
  r.device = device_word(st.gpu_buckets, st.cpu_buckets);
  if (!st.fallback.empty()) r.note += (r.note.empty() ? "" : "; ") + st.fallback;
  for (std::size_t b = 0; b < nb; ++b) {
    std::string why = s.reason[b];
    if (!st.fallback_reason[b].empty()) why += "; ran on the CPU: " + st.fallback_reason[b];
    r.buckets.push_back({st.ran_on[b], std::move(why)});
  }
  if (st.gpu_buckets > 0) gpu_warm_ = true;
  (st.gpu_buckets > 0 ? totals_.gpu_runs : totals_.cpu_runs)++;
  spdlog::info(
      "schedule {}: {} buckets on the GPU, {} on the CPU, {:.3g} kB to the GPU, {:.3g} "
      "kB back; scheduling took {}",
      r.policy, r.gpu_buckets, r.cpu_buckets, r.h2d_bytes / 1e3, r.d2h_bytes / 1e3,
      format_seconds(r.schedule_seconds));
  for (std::size_t b = 0; b < nb && spdlog::should_log(spdlog::level::debug); ++b)
    spdlog::debug("bucket {} on {}: {}", b, to_string(r.buckets[b].device), r.buckets[b].reason);
  return r;
}

nlohmann::json check_json(const CheckReport& c) {
  auto num = [](double x) { return number_or_null(x); };
  return {{"tolerance", c.tolerance},
          {"buckets", c.buckets},
          {"buckets_without_gpu_kernel", c.buckets_without_kernel},
          {"max_abs_diff", num(c.max_abs_diff)},
          {"max_rel_diff", num(c.max_rel_diff)},
          {"worst_bucket", c.worst_bucket},
          {"failed_bucket", c.first_failed_bucket >= 0 ? nlohmann::json(c.first_failed_bucket)
                                                       : nlohmann::json(nullptr)},
          {"passed", c.passed}};
}

nlohmann::json run_json(const RunResult& r, bool explain) {
  auto num = number_or_null;
  nlohmann::json j = nlohmann::json::object();
  if (!r.gpu_name.empty())
    j["gpu"] = {
        {"name", r.gpu_name}, {"buckets_gpu", r.gpu_buckets}, {"buckets_cpu", r.cpu_buckets}};
  else if (!r.why_not_gpu.empty())
    j["gpu"] = {{"why_not", r.why_not_gpu}};
  nlohmann::json s = {{"requested", r.requested},
                      {"policy", r.policy},
                      {"buckets_gpu", r.gpu_buckets},
                      {"buckets_cpu", r.cpu_buckets},
                      {"buckets_merged", r.merged_buckets},
                      {"h2d_bytes", bytes_or_null(r.h2d_bytes)},
                      {"d2h_bytes", bytes_or_null(r.d2h_bytes)},
                      {"device_peak_bytes", bytes_or_null(r.device_peak_bytes)},
                      {"predicted_seconds", num(r.predicted_seconds)},
                      {"first_run_seconds", num(r.first_seconds)},
                      {"schedule_seconds", num(r.schedule_seconds)}};
  if (!r.profile.empty()) s["profile"] = r.profile;
  if (!r.note.empty()) s["note"] = r.note;
  if (!r.repeats.empty()) {
    s["repeat_seconds"] = r.repeats;
    s["repeat_median_seconds"] = num(median(r.repeats));
  }
  if (explain) {
    nlohmann::json e = nlohmann::json::array();
    for (std::size_t b = 0; b < r.buckets.size(); ++b)
      e.push_back({{"bucket", b},
                   {"device", to_string(r.buckets[b].device)},
                   {"reason", r.buckets[b].reason}});
    s["explain"] = e;
  }
  j["schedule"] = s;
  if (r.check)
    j["check"] = check_json(*r.check);
  else if (!r.check_not_run.empty())
    j["check"] = {{"passed", nullptr}, {"not_run", r.check_not_run}};
  return j;
}

std::string check_report_verdict(const CheckReport& c) {
  const std::string nums = fmt::format(
      "{} buckets compared, {} without a GPU kernel; largest difference {:.3g} ({:.3g} "
      "relative, bucket {}); tolerance {:.0e} relative in ln",
      c.buckets, c.buckets_without_kernel, c.max_abs_diff, c.max_rel_diff, c.worst_bucket,
      c.tolerance);
  if (c.passed) return "check: passed (" + nums + ")";
  return fmt::format("check: FAILED at bucket {} ({})", c.first_failed_bucket, nums);
}

std::string check_verdict(const RunResult& r) {
  if (r.check) return check_report_verdict(*r.check);
  if (!r.check_not_run.empty()) return "check: not run (" + r.check_not_run + ")";
  return {};
}

}  // namespace kinfer::sched
