#include "scheduler/executor.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "engine/errors.hpp"
#include "engine/util.hpp"
#include "gpu/random_bucket.hpp"
#include "scheduler/downward.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/preparation.hpp"
#include "scheduler/executor_internal.hpp"
#include "scheduler/staging.hpp"

namespace kinfer::sched {

using exec::clock_type;
using exec::cpu_thread;
using exec::gpu_thread;
using exec::merged_inputs;
using exec::MergedInputs;
using exec::Run;
using exec::Shared;

namespace exec {

// The CPU execution thread: the ready CPU bucket that comes first in tree order, repeatedly.
void cpu_thread(Run& r) {
  const auto& buckets = r.plan.tree.buckets;
  int left = 0;
  for (Device d : r.dev) left += d == Device::cpu;
  for (; left > 0; --left) {
    std::vector<InputTable> in;
    int b;
    {
      const auto tw = clock_type::now();
      std::unique_lock lock(r.sh.m);
      r.sh.cv.wait(lock, [&] { return r.sh.abort || !r.sh.cpu_ready.empty(); });
      r.st.cpu_wait_s += since(tw);
      if (r.sh.abort) return;
      b = *r.sh.cpu_ready.begin();
      r.sh.cpu_ready.erase(r.sh.cpu_ready.begin());
      for (int f : buckets[b].factors)
        in.push_back({r.plan.input_data[f].data(), r.plan.input_scope[f]});
      for (int c : buckets[b].children) in.push_back({r.sh.host[c], buckets[c].output_vars()});
    }
    const BucketShape shape = bucket_shape(r.plan, b, r.opt.pass);
    // not make_unique: zero-filling a large table would cost as much as a small bucket; a kept
    // output (ExecOptions::pass) is computed in place, and its consumer reads the kept table
    std::unique_ptr<double[]> out;
    double* o;
    if (r.opt.pass.outputs) {  // sized before the threads start: each writes its own buckets
      LnTable& kept = (*r.opt.pass.outputs)[b];
      kept.resize(shape.output_size());
      o = kept.data();
    } else {
      out.reset(new double[shape.output_size()]);
      o = out.get();
    }
    const auto t0 = clock_type::now();
    sum_product_log(shape, in, o, r.opt.threads, r.opt.pass.combined_of(b));
    r.st.cpu_kernel_s += since(t0);
    if (r.opt.time_buckets) r.st.kernel_seconds[b] = since(t0);
    {
      std::lock_guard lock(r.sh.m);
      for (int c : buckets[b].children) {  // each table has one consumer: this bucket
        if (r.dev[c] == Device::cpu)
          r.sh.owned[c].reset();
        else
          r.sh.give_back.push_back(const_cast<double*>(r.sh.host[c]));
        r.sh.host[c] = nullptr;
      }
      r.sh.publish(b, o);
      r.sh.owned[b] = std::move(out);
    }
    r.sh.cv.notify_all();
  }
}

}  // namespace exec

GpuHostPart gpu_host_part(const Plan& plan, std::span<const Device> assignment, int threads) {
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  std::vector<Device> dev(assignment.begin(), assignment.end());
  GpuHostPart g;
  std::vector<double> plan_bytes;
  std::vector<double> out(nb);
  for (int b = 0; b < nb; ++b) {
    const BucketShape shape = bucket_shape(plan, b);
    out[b] = 8.0 * static_cast<double>(shape.output_size());
    if (dev[b] != Device::gpu) continue;
    std::vector<std::vector<double>> owned;
    const MergedInputs m = merged_inputs(plan, b, shape, owned);
    if (!gpu::why_no_kernel(shape, m.scopes).empty()) {
      dev[b] = Device::cpu;
      continue;
    }
    plan_bytes.push_back(gpu::kernel_plan_host_bytes(shape, m.scopes));
    for (const gpu::HostInput& h : m.inputs) g.staging += 8.0 * static_cast<double>(h.size);
    for (const auto& o : owned) g.staging += 8.0 * static_cast<double>(o.size());
  }
  double live = 0;
  for (int b = 0; b < nb; ++b) {
    const int p = buckets[b].parent;
    const bool on_host = dev[b] == Device::cpu || b == nb - 1 || dev[p] == Device::cpu;
    if (on_host) live += out[b];  // allocated (or downloaded) while its inputs are alive
    g.intermediates = std::max(g.intermediates, live);
    for (int c : buckets[b].children)  // host copies of the children: freed once consumed
      if (dev[c] == Device::cpu || dev[b] == Device::cpu) live -= out[c];
    g.cpu_buckets += dev[b] == Device::cpu;
  }
  // Context::prepare builds `threads` plans at a time, each holding its tables until they are
  // copied to the device: at most the largest `threads` plans' tables at once.
  std::sort(plan_bytes.begin(), plan_bytes.end(), std::greater<>());
  const std::size_t at_once =
      static_cast<std::size_t>(std::max(1, threads > 0 ? threads : omp_get_max_threads()));
  for (std::size_t i = 0; i < std::min(at_once, plan_bytes.size()); ++i)
    g.kernel_plans += plan_bytes[i];
  return g;
}

namespace {

// Where the buckets of a run really go, and the GPU buckets' inputs as the kernels take them.
struct Placement {
  std::vector<Device> dev;
  std::vector<std::vector<gpu::HostInput>> fin;  // [GPU bucket] factor inputs to upload
  std::vector<std::vector<int>> fold;  // [GPU bucket][factor input] child it folds into
  std::vector<std::vector<std::vector<int>>> kernel_scopes;  // as run_bucket will see them
  std::vector<std::vector<double>> owned;                    // products merge_inputs made
  // [GPU bucket] its factors folded into a child's table: (factor position, child index)
  std::vector<std::vector<std::pair<int, int>>> folded;
};

// Bucket b runs on the CPU after all, for `why` (logged, and said in the stats).
void move_to_cpu(Placement& pl, ExecStats& st, int b, const std::string& why) {
  spdlog::info("bucket {} runs on the CPU: {}", b, why);
  st.fallback_reason[b] = why;
  st.fallback +=
      (st.fallback.empty() ? "" : "; ") + std::string("bucket ") + std::to_string(b) + ": " + why;
  pl.dev[b] = Device::cpu;
}

// Pass 0: no device, everything on the CPU; a bucket no GPU kernel takes, on the CPU (the
// layout check alone: choose() would also build the kernel's tables, which run_bucket builds
// once per shape anyway). Both logged.
void place_on_device(const Plan& plan, gpu::Context* ctx, Placement& pl, ExecStats& st) {
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  int wanted_gpu = 0;
  for (Device d : pl.dev) wanted_gpu += d == Device::gpu;
  if (!ctx && wanted_gpu > 0) {
    st.fallback = "no GPU: all " + std::to_string(nb) + " buckets run on the CPU";
    spdlog::warn(
        "the schedule puts {} bucket(s) on the GPU, but there is none: running every "
        "bucket on the CPU",
        wanted_gpu);
    pl.dev.assign(nb, Device::cpu);
  }
  st.fallback_reason.assign(nb, {});
  pl.fin.resize(nb);
  pl.fold.resize(nb);
  pl.kernel_scopes.resize(nb);
  pl.folded.resize(nb);
  for (int b = 0; b < nb && ctx; ++b) {
    if (pl.dev[b] != Device::gpu) continue;
    const BucketShape shape = bucket_shape(plan, b);
    const MergedInputs m = merged_inputs(plan, b, shape, pl.owned);
    if (m.inputs.size() != buckets[b].factors.size()) {
      ++st.merged_buckets;
      spdlog::debug("bucket {}: {} factor inputs multiplied into {} for the GPU kernel", b,
                    buckets[b].factors.size(), m.inputs.size());
    }
    const std::string why = gpu::why_no_kernel(shape, m.scopes);
    if (!why.empty()) {
      move_to_cpu(pl, st, b, "no GPU kernel takes it: " + why);
      continue;
    }
    pl.fin[b] = m.inputs;
    pl.fold[b] = m.fold_child;
    pl.kernel_scopes[b] = m.scopes;
    pl.folded[b] = m.folded_factors;
  }
}

// ExecOptions::shapes_path: the GPU buckets of >= 2^20 states as bucket_bench --shape specs.
void write_shapes(const std::string& path, const Plan& plan, const Placement& pl) {
  std::ofstream f(path);
  for (int b = 0; b < static_cast<int>(plan.tree.buckets.size()); ++b) {
    if (pl.dev[b] != Device::gpu) continue;
    const BucketShape shape = bucket_shape(plan, b);
    const double states = static_cast<double>(shape.output_size()) * shape.marg_size();
    if (states < 1048576.0) continue;
    f << "# bucket " << b << ": 2^" << std::log2(states) << " states, output 2^"
      << std::log2(static_cast<double>(shape.output_size())) << "\n"
      << gpu::bucket_spec(shape, pl.kernel_scopes[b]) << "\n";
  }
}

// The device bytes a run's tables may use at once: ExecOptions::device_budget_bytes, else 90% of
// the device's free memory now.
double run_device_budget(gpu::Context& ctx, const ExecOptions& opt) {
  return opt.device_budget_bytes > 0 ? opt.device_budget_bytes : 0.9 * ctx.free_bytes();
}

// Bytes of a GPU bucket's factor inputs as uploaded.
double input_bytes(const std::vector<gpu::HostInput>& v) {
  double s = 0;
  for (const gpu::HostInput& h : v) s += 8.0 * static_cast<double>(h.size);
  return s;
}

// The live device-memory budget, in tree order: every GPU bucket's factor inputs are uploaded
// at the start; a bucket then needs its output and its CPU children's tables next to the GPU
// outputs still waiting for their parents. A bucket that would not fit runs on the CPU, or
// throws DeviceMemoryError with ExecOptions::over_budget_throws.
void fit_device_budget(const Plan& plan, gpu::Context& ctx, const ExecOptions& opt, Placement& pl,
                       ExecStats& st) {
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const double budget = run_device_budget(ctx, opt);
  double live = 0;
  for (int b = 0; b < nb; ++b)
    if (pl.dev[b] == Device::gpu) live += input_bytes(pl.fin[b]);
  std::vector<double> out_bytes(nb);
  for (int b = 0; b < nb; ++b)
    out_bytes[b] = 8.0 * static_cast<double>(bucket_shape(plan, b).output_size());
  for (int b = 0; b < nb; ++b) {
    if (pl.dev[b] != Device::gpu) continue;
    double need = out_bytes[b], gpu_children = 0;
    for (int c : buckets[b].children)
      (pl.dev[c] == Device::gpu ? gpu_children : need) += out_bytes[c];
    if (live + need > budget) {
      const double mib = 1024.0 * 1024.0;
      const std::string why = "needs " + std::to_string(std::lround(need / mib)) +
                              " MiB of GPU memory with " + std::to_string(std::lround(live / mib)) +
                              " MiB in use and " + std::to_string(std::lround(budget / mib)) +
                              " MiB usable";
      if (opt.over_budget_throws) throw DeviceMemoryError("bucket " + std::to_string(b) + " " + why);
      move_to_cpu(pl, st, b, why);
      live -= input_bytes(pl.fin[b]);
      pl.fin[b].clear();
      continue;
    }
    live += out_bytes[b] - gpu_children - input_bytes(pl.fin[b]);
  }
}

// The GPU buckets whose launch plans the context has not built yet, largest first: the order
// those plans are prepared in.
std::vector<std::pair<double, int>> preparation_order(const Plan& plan, const Placement& pl,
                                                      gpu::Context& ctx) {
  std::vector<std::pair<double, int>> order;
  for (int b = 0; b < static_cast<int>(plan.tree.buckets.size()); ++b)
    if (pl.dev[b] == Device::gpu) {
      const BucketShape shape = bucket_shape(plan, b);
      if (ctx.prepared(shape, pl.kernel_scopes[b])) continue;
      order.emplace_back(
          -static_cast<double>(shape.output_size()) * static_cast<double>(shape.marg_size()), b);
    }
  std::sort(order.begin(), order.end());
  return order;
}

// ExecOptions::pass.on_device: the outputs of GPU buckets with a GPU parent, held on the device
// after the run for the MPE's traceback, which copies back the part of each it needs and has its
// large scans narrowed down there, or for the marginals' downward pass there; released with it.
class HeldOutputs final : public DeviceOutputs {
 public:
  // folded[b]: (factor position, child position) of b's factors added into held children.
  // on_gpu[b]: whether bucket b's downward step runs on the GPU (downward_on_gpu).
  HeldOutputs(gpu::Context& ctx, std::vector<char> on_gpu, std::vector<gpu::Handle> held,
              std::vector<std::vector<std::pair<int, int>>> folded, double maxima_from,
              double held_from)
      : ctx_(ctx),
        on_gpu_(std::move(on_gpu)),
        held_(std::move(held)),
        folded_(std::move(folded)),
        maxima_from_(maxima_from),
        held_from_(held_from) {}
  ~HeldOutputs() override {
    try {
      for (gpu::Handle h : held_)
        if (h >= 0) ctx_.release(h);
    } catch (...) {  // a destructor must not throw
    }
  }
  bool holds(int b) const override { return held_.at(b) >= 0; }
  void read(int b, std::int64_t first, std::int64_t n, double* to) override {
    ctx_.bind();
    ctx_.download_range(held_.at(b), first, n, to, 0);
  }
  std::span<const std::pair<int, int>> folded(int b) const override { return folded_.at(b); }
  double maxima_from() const override { return maxima_from_; }
  double held_from() const override { return held_from_; }
  bool maxima(const BucketShape& shape, std::span<const InputTable> inputs,
              std::span<const HeldPart> held, double* out) override {
    std::vector<std::vector<int>> scopes;
    for (const InputTable& t : inputs) scopes.push_back(t.scope);
    if (!gpu::why_no_kernel(shape, scopes).empty()) return false;
    ctx_.bind();
    std::vector<gpu::Handle> tables;
    const auto release_all = [&] {
      for (gpu::Handle h : tables) ctx_.release(h);
    };
    try {
      std::vector<gpu::DeviceInput> in;
      std::vector<std::int64_t> st(shape.vars.size());
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const InputTable& t = inputs[i];
        const std::int64_t n = input_strides(shape, t.scope, st.data());
        tables.push_back(ctx_.alloc(n));
        if (!held.empty() && held[i].bucket >= 0)
          ctx_.copy_range(tables.back(), held_.at(held[i].bucket), held[i].first, n, 0);
        else
          ctx_.upload(tables.back(), t.data, n, 0);
        in.push_back({tables.back(), t.scope});
      }
      const std::int64_t n_out = shape.output_size();
      tables.push_back(ctx_.alloc(n_out));
      ctx_.run_bucket(shape, in, tables.back(), 0);
      ctx_.download(tables.back(), out, n_out, 0);
      ctx_.synchronize(0);
    } catch (const DeviceMemoryError&) {
      ctx_.synchronize(0);
      release_all();
      return false;
    }
    release_all();
    return true;
  }
  bool downward(const Plan& plan, std::vector<LnTable>& up, std::vector<LnTable>& down,
                std::vector<LnTable>& joint,
                const std::function<void(int)>& on_host, int threads) override {
    ctx_.bind();
    try {
      run_downward(ctx_, plan, on_gpu_, held_, folded_, up, down, joint, on_host, threads);
    } catch (const DeviceMemoryError& e) {
      spdlog::info("the downward pass did not fit the GPU ({}): on the CPU", e.what());
      for (gpu::Handle& h : held_)
        if (h >= 0) ctx_.release(h), h = -1;
      return false;
    }
    return true;
  }

 private:
  gpu::Context& ctx_;
  std::vector<char> on_gpu_;
  std::vector<gpu::Handle> held_;
  std::vector<std::vector<std::pair<int, int>>> folded_;
  double maxima_from_, held_from_;
};

std::vector<char> gpu_buckets(const Placement& pl) {
  std::vector<char> on(pl.dev.size());
  for (std::size_t b = 0; b < on.size(); ++b) on[b] = pl.dev[b] == Device::gpu;
  return on;
}

// Whether the outputs of GPU buckets with a GPU parent may stay on the device: all of them, with
// every GPU bucket's factor inputs, fit the run's device budget, with the marginals' downward
// pass too (its GPU buckets set in `downward`). The MPE traceback's scans on the device are
// left to the CPU when they do not fit beside them.
bool fits_held(const Plan& plan, gpu::Context& ctx, const ExecOptions& opt, const Placement& pl,
               std::vector<char>& downward) {
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  double need = 0;
  for (int b = 0; b < nb; ++b) {
    if (pl.dev[b] != Device::gpu) continue;
    need += 8.0 * static_cast<double>(bucket_shape(plan, b).output_size());
    need += input_bytes(pl.fin[b]);
  }
  if (!opt.pass.maximise) {
    downward = downward_on_gpu(plan, gpu_buckets(pl));
    need += downward_device_bytes(plan, downward);
  }
  return need <= run_device_budget(ctx, opt);
}

// Where the run's time went (-v).
void log_run_times(double seconds, double gpu_from, double gpu_to, const ExecStats& st,
                   const gpu::Context& ctx) {
  spdlog::debug(
      "executor: {:.3f} s (the GPU thread {:.1f} to {:.1f} ms); kernel plans prepared in "
      "{:.3f} s (the GPU thread waited {:.3f} s for them); CPU thread {} buckets: kernels "
      "{:.3f} s, waiting {:.3f} s; GPU "
      "thread {} buckets: staging {:.3f} s, run_bucket (host) {:.3f} s, allocations {:.3f} "
      "s, waiting for CPU children {:.3f} s and uploads {:.3f} s, downloads {:.3f} s; the "
      "context holds {} of host memory for kernel plans and spent {:.3f} s building them",
      seconds, 1e3 * gpu_from, 1e3 * gpu_to, st.gpu_prepare_s, st.gpu_plan_wait_s,
      st.cpu_buckets, st.cpu_kernel_s, st.cpu_wait_s, st.gpu_buckets, st.gpu_stage_s,
      st.gpu_launch_s, st.gpu_alloc_s, st.gpu_child_wait_s, st.gpu_upload_wait_s,
      st.gpu_download_s, human_bytes(ctx.own_host_bytes()), ctx.own_setup_seconds());
}

}  // namespace

double run_scheduled(const Plan& plan, std::span<const Device> assignment, gpu::Context* ctx,
                     const ExecOptions& opt, ExecStats* stats) {
  const auto t0 = clock_type::now();
  const int nb = static_cast<int>(plan.tree.buckets.size());
  if (static_cast<int>(assignment.size()) != nb)
    throw std::invalid_argument("the assignment has " + std::to_string(assignment.size()) +
                                " entries for " + std::to_string(nb) + " buckets");
  Placement pl;
  pl.dev.assign(assignment.begin(), assignment.end());
  ExecStats st;
  if (opt.time_buckets) st.kernel_seconds.assign(nb, 0.0);
  place_on_device(plan, ctx, pl, st);
  if (!opt.shapes_path.empty() && ctx) write_shapes(opt.shapes_path, plan, pl);
  if (ctx) fit_device_budget(plan, *ctx, opt, pl, st);
  const std::vector<Device>& dev = pl.dev;
  for (Device d : dev) (d == Device::gpu ? st.gpu_buckets : st.cpu_buckets)++;
  log_resources("the executor's GPU inputs merged");
  // The kernels' launch plans are built on every thread (largest buckets first), their tables
  // queued for upload, beside the run: built one at a time by the GPU thread they would be
  // most of a GPU run's time. The GPU thread starts on its first buckets at once and, at a
  // bucket whose plan nobody has started, builds it itself (else waits for it). With
  // time_buckets they are all built before the run (calibration times kernels alone).
  Shared sh(plan.tree, dev);
  if (opt.pass.outputs) opt.pass.outputs->assign(nb, {});
  if (opt.pass.outputs && opt.pass.combined) opt.pass.combined->assign(nb, {});
  std::vector<std::pair<double, int>> order;
  if (ctx && st.gpu_buckets > 0) order = preparation_order(plan, pl, *ctx);
  const int upload_stream = ctx && ctx->num_streams() > 1 ? 1 : 0;
  Preparation prep(nb);
  const std::function<void(int)> prepare = [&](int b) {
    prep.build(b, [&] { ctx->prepare(bucket_shape(plan, b), pl.kernel_scopes[b], upload_stream); });
  };
  // The preparing threads run beside the CPU thread's kernels: no more of them than plans to
  // build (each such thread is a new OpenMP team, whose idle threads would spin on the cores
  // those kernels use).
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  const int preparing = static_cast<int>(std::min<std::size_t>(threads, order.size()));
  auto prepare_all = [&] {
    const auto tp = clock_type::now();
#pragma omp parallel for schedule(dynamic, 1) num_threads(preparing)
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (prep.failed()) continue;
      prepare(order[i].second);
    }
    st.gpu_prepare_s = since(tp);
  };
  const bool ahead = opt.time_buckets;
  if (!order.empty() && ahead) {
    prepare_all();
    prep.rethrow();
  }

  std::optional<StagingPool> pool;
  if (ctx && st.gpu_buckets > 0) pool.emplace(*ctx);
  Run r{plan, dev, opt, sh, st, pl.fin, pl.fold, prepare};
  std::vector<gpu::Handle> held(nb, -1);
  std::vector<char> downward;  // the marginals' downward pass: its GPU buckets
  if (opt.pass.on_device && opt.pass.outputs && pool) {
    r.hold_on_device = fits_held(plan, *ctx, opt, pl, downward);
    r.held = &held;
    if (!r.hold_on_device)
      spdlog::debug("executor: the bucket outputs do not all fit the device: kept on the host");
  }
  double gpu_from = 0, gpu_to = 0;  // the GPU thread's start and end, seconds into the run
  {
    std::thread preparer, gpu;
    if (!order.empty() && !ahead)
      preparer = std::thread([&] {
        prepare_all();
        if (prep.failed()) try {
            prep.rethrow();
          } catch (...) {
            sh.fail(std::current_exception());
          }
      });
    if (pool)
      gpu = std::thread([&] {
        gpu_from = since(t0);
        try {
          ctx->bind();  // this thread drives the context's device (not always device 0)
          gpu_thread(r, *ctx, *pool);
        } catch (...) {
          sh.fail(std::current_exception());
        }
        gpu_to = since(t0);
      });
    try {
      cpu_thread(r);
    } catch (...) {
      sh.fail(std::current_exception());
    }
    if (gpu.joinable()) gpu.join();
    if (preparer.joinable()) {
      prep.stop();  // an early end: what is left is not built
      preparer.join();
    }
  }
  if (sh.error) {
    // Copies may still read pinned buffers: let every stream finish before the pool frees them.
    if (pool)
      for (int s = 0; s < ctx->num_streams(); ++s) try {
          ctx->synchronize(s);
        } catch (...) {  // the first error is the one to report
        }
    for (gpu::Handle h : held)
      if (h >= 0) try {
          ctx->release(h);
        } catch (...) {
        }
    std::rethrow_exception(sh.error);
  }
  if (r.hold_on_device) {
    // The factors each bucket's kernel found inside a held child's table (a child the CPU
    // computed was folded into on its uploaded copy: its host table lacks them).
    std::vector<std::vector<std::pair<int, int>>> folded(nb);
    for (int b = 0; b < nb; ++b)
      for (auto [f, ci] : pl.folded[b])
        if (held[plan.tree.buckets[b].children[ci]] >= 0) folded[b].emplace_back(f, ci);
    *opt.pass.on_device =
        std::make_unique<HeldOutputs>(*ctx, std::move(downward), std::move(held), std::move(folded),
                                      opt.traceback_maxima_from, opt.traceback_held_from);
  }
  log_resources("the executor's buckets done");
  if (ctx) log_run_times(since(t0), gpu_from, gpu_to, st, *ctx);
  const double root_value = sh.host[nb - 1][0];
  if (pool) {
    for (double* p : sh.give_back) pool->give(p);
    if (dev[nb - 1] == Device::gpu) pool->give(const_cast<double*>(sh.host[nb - 1]));
  }
  st.ran_on = dev;
  st.seconds = since(t0);
  if (stats) *stats = std::move(st);
  return root_value + plan.model.log_constant();
}

}  // namespace kinfer::sched
