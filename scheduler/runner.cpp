#include "scheduler/runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "engine/errors.hpp"
#include "engine/util.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/runner_internal.hpp"

namespace kinfer::sched {

namespace {

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

}  // namespace

bool Runner::holds_gpu() const {
  return gpu_->early.valid() || (gpu_->opened && gpu_->opened->ctx);
}

double gpu_context_host_bytes() {
  int queues = 8;  // the driver's default
  if (const char* c = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"); c && std::atoi(c) >= 1)
    queues = std::min(std::atoi(c), 32);
  return (80.0 + 10.0 * (queues - 1)) * 1024 * 1024;
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
    // With several GPUs visible the order search's first round decides how many this process
    // sees (see_one_gpu), a few milliseconds after the network is read.
    if (gpu::several_visible())
      gpu_->start_at_first_round = true;
    else
      start_in_background();
  }
}

void Runner::start_in_background() {
  gpu_->early = std::async(std::launch::async, open_gpu, req_.gpu_index, !profile_read_);
  gpu_->early_at = clock_type::now();
}

void Runner::see_one_gpu(double log2_max_table) {
  // Under --gpu-memory the line is that share of the limit: a plan with larger tables may be
  // conditioned into slices for several GPUs.
  const double line =
      req_.gpu_memory_bytes > 0
          ? std::min(kOneGpuLog2Table, std::log2(kOneGpuShare * req_.gpu_memory_bytes / 8))
          : kOneGpuLog2Table;
  if (gpu_->use_given || gpu_->opened || gpu_->early.valid() || log2_max_table > line ||
      !gpu::see_only(req_.gpu_index))
    return;
  spdlog::debug("only GPU {} made visible to this process (CUDA_VISIBLE_DEVICES={}): a largest "
                "table of 2^{:.1f} entries fits one",
                req_.gpu_index, std::getenv("CUDA_VISIBLE_DEVICES"), log2_max_table);
  req_.gpu_index = 0;
  gpu_count_ = 1;
  probed_.reset();
  gpu_name_.reset();
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

gpu::Context* Runner::open(const Plan* plan) {
  if (gpu_->use_given) {
    if (gpu_->given) gpu_->given->bind();
    return gpu_->given;
  }
  if (!gpu_->opened) {
    if (!gpu_->early.valid() && plan) see_one_gpu(plan->order.stats.log2_max_table);
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
  gpu::Context* ctx = open(&plan);
  if (!ctx) return 0;
  const auto t0 = clock_type::now();
  const double usable = 0.9 * ctx->free_bytes();
  if (since(t0) > 0.001) spdlog::debug("the GPU's free memory read in {:.1f} ms", 1e3 * since(t0));
  return req_.gpu_memory_bytes > 0 ? std::min(req_.gpu_memory_bytes, usable) : usable;
}

void Runner::budget_for_device(PlanOptions& po) {
  if (req_.device == DeviceChoice::cpu) return;
  po.device_budget = [this](const Plan& p) { return device_budget(p); };
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

RunResult Runner::run(const Plan& plan) {
  RunResult r;
  const Policy asked = req_.policy.value_or(kDefaultGpuPolicy);
  r.requested = to_string(asked);
  ++totals_.runs;
  std::string why_not;
  gpu::Context* ctx = device_for(plan, r, why_not);
  if (req_.check) {
    run_check(plan, ctx, why_not, r);
    return r;
  }
  if (!ctx) {
    if (req_.policy && *req_.policy != Policy::cpu_only)
      r.note = "no GPU in use (" + why_not + "): every bucket on the CPU";
    run_on_cpu(plan, "no GPU in use (" + why_not + "): every bucket on the CPU", r);
    return r;
  }
  const auto t_sched = clock_type::now();
  const Schedule s = schedule_for(plan, asked, *ctx, r);
  r.schedule_seconds = since(t_sched);
  run_placed(plan, s, ctx, t_sched, r);
  return r;
}

gpu::Context* Runner::device_for(const Plan& plan, RunResult& r, std::string& why_not) {
  // The GPU only when the request and the plan call for it and one opens.
  gpu::Context* ctx = nullptr;
  const bool use_gpu = req_.check || req_.device == DeviceChoice::gpu ||
                       (req_.device == DeviceChoice::automatic && auto_gpu(plan, why_not));
  if (!use_gpu) {
    if (req_.device == DeviceChoice::cpu) why_not = "--device cpu";
  } else {
    const auto t0 = clock_type::now();
    const bool first = gpu_->use_given || !gpu_->opened;
    ctx = open(&plan);
    if (first) r.device_seconds = since(t0);
    log_resources("the GPU open");
    if (ctx)
      r.gpu_name = ctx->name();
    else
      why_not = gpu_->use_given ? "no GPU" : gpu_->opened->name;
  }
  if (!ctx) r.why_not_gpu = why_not;
  return ctx;
}

void Runner::run_on_cpu(const Plan& plan, const std::string& why, RunResult& r) {
  const std::size_t nb = plan.tree.buckets.size();
  r.policy = to_string(Policy::cpu_only);
  r.device = "cpu";
  r.cpu_buckets = static_cast<int>(nb);
  r.buckets.assign(nb, {Device::cpu, why});
  RunOptions ro;
  ro.threads = req_.threads;
  ro.pass = pass_;
  const auto t0 = clock_type::now();
  r.ln_pr = run_plan(plan, ro);  // the engine's reference executor: its answers on the CPU
  r.first_seconds = since(t0);
  for (int k = 0; k < req_.repeat; ++k) {
    const auto t1 = clock_type::now();
    const double again = run_plan(plan, ro);
    r.repeats.push_back(since(t1));
    if (again != r.ln_pr)
      spdlog::error("repeat {}: ln P(e) {} differs from {}", k + 1, again, r.ln_pr);
  }
  ++totals_.cpu_runs;
}

void Runner::run_check(const Plan& plan, gpu::Context* ctx, const std::string& why_not,
                       RunResult& r) {
  if (!ctx) {
    r.check_not_run = "no GPU to compare with (" + why_not + ")";
    if (totals_.runs == 0 || !check_warned_)  // once per runner (lod runs many plans)
      spdlog::warn("--check: {}; running on the CPU alone", r.check_not_run);
    check_warned_ = true;
    run_on_cpu(plan, "check without a GPU: every bucket on the CPU", r);
    return;
  }
  const std::size_t nb = plan.tree.buckets.size();
  CheckReport rep;
  const auto t0 = clock_type::now();
  r.ln_pr = run_checked(plan, *ctx, req_.threads, rep, kCheckTolerance, pass_);
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
  add_to_check_totals(rep);
  spdlog::info(
      "check: {} buckets on both CPU and GPU ({} without a GPU kernel), largest "
      "relative difference {:.3g} (bucket {}), tolerance {:.0e}: {}",
      rep.buckets, rep.buckets_without_kernel, rep.max_rel_diff, rep.worst_bucket, rep.tolerance,
      rep.passed ? "passed" : "FAILED");
  r.check = std::move(rep);
  ++totals_.gpu_runs;
}

void Runner::add_to_check_totals(const CheckReport& rep) {
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
}

Schedule Runner::schedule_for(const Plan& plan, Policy asked, gpu::Context& ctx, RunResult& r) {
  // The policy asked, from the profile when it needs one (calibrated now when asked for and
  // there is none), else whole-plan (noted).
  std::string path;
  const Profile* prof = needs_profile(asked) ? profile(path) : nullptr;
  if (needs_profile(asked) && (!prof || !prof->has_gpu) && req_.auto_calibrate_seconds > 0 &&
      !gpu_->use_given && plan.flops >= kAutoGpuMinFlops && !ctx.name().empty())
    prof = calibrate_briefly(ctx, path);
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
  return s;
}

void Runner::run_placed(const Plan& plan, const Schedule& s, gpu::Context* ctx,
                        clock_type::time_point t_sched, RunResult& r) {
  ExecOptions eo;
  eo.threads = req_.threads;
  eo.pass = pass_;
  eo.device_budget_bytes = device_budget(plan);
  eo.over_budget_throws = rethrow_device_full_;
  eo.timeline_path = req_.gpu_timeline_path;
  eo.shapes_path = req_.gpu_shapes_path;
  ExecStats st;
  try {
    r.ln_pr = run_scheduled(plan, s.device, ctx, eo, &st);
  } catch (const DeviceMemoryError& e) {
    if (rethrow_device_full_) throw;  // run(cp) conditions the plan to what is usable now
    run_on_cpu_after(plan, e, r);
    return;
  }
  r.first_seconds = since(t_sched);
  for (int k = 0; k < req_.repeat; ++k) {
    const auto t1 = clock_type::now();
    const double again = run_scheduled(plan, s.device, ctx, eo);
    r.repeats.push_back(since(t1));
    if (std::abs(again - r.ln_pr) > 1e-9 * std::max(1.0, std::abs(r.ln_pr)))
      spdlog::error("repeat {}: ln P(e) {} differs from the first run's {}", k + 1, again, r.ln_pr);
  }
  record_placed(plan, s, st, r);
}

void Runner::run_on_cpu_after(const Plan& plan, const DeviceMemoryError& e, RunResult& r) {
  // The budget came from the device's free memory when it opened: another process may hold it
  // now. The CPU computes the plan instead when its own peak (the context's host part stays)
  // fits the host limit; else the run is refused with both sides' numbers. plan.memory is the
  // GPU run's estimate (Runner::estimate): the CPU's intermediate tables and scratch from the
  // engine's accountant, the context's host part kept.
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
  run_on_cpu(plan, why, r);
  r.note = why;
}

void Runner::record_placed(const Plan& plan, const Schedule& s, const ExecStats& st,
                           RunResult& r) {
  const std::size_t nb = plan.tree.buckets.size();
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
}

}  // namespace kinfer::sched
