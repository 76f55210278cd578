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
#include "gpu/merge_inputs.hpp"
#include "gpu/random_bucket.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/staging.hpp"

namespace kinfer::sched {

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// What the two threads share. Everything here is guarded by `m`; a table pointer published
// with ready[b] = 1 is not written again, so it may be read without the lock afterwards.
struct Shared {
  Shared(const TaskTree& tree, const std::vector<Device>& dev)
      : host(tree.buckets.size(), nullptr),
        ready(tree.buckets.size(), 0),
        owned(tree.buckets.size()),
        missing(tree.buckets.size(), 0),
        tree(tree),
        dev(dev) {
    for (std::size_t b = 0; b < tree.buckets.size(); ++b) {
      missing[b] = static_cast<int>(tree.buckets[b].children.size());
      if (missing[b] == 0 && dev[b] == Device::cpu) cpu_ready.insert(static_cast<int>(b));
    }
  }
  std::mutex m;
  std::condition_variable cv;
  std::vector<const double*> host;               // [bucket] output on the host
  std::vector<char> ready;                       // [bucket] host output complete
  std::vector<std::unique_ptr<double[]>> owned;  // [bucket] outputs the CPU made
  std::vector<double*> give_back;                // pinned downloads the CPU finished reading
  std::vector<int> missing;                      // [bucket] children whose host output is not ready
  std::set<int> cpu_ready;                       // CPU buckets whose inputs are all on the host
  bool abort = false;
  std::exception_ptr error;
  const TaskTree& tree;
  const std::vector<Device>& dev;

  // With `m` held: b's output is on the host now.
  void publish(int b, const double* p) {
    host[b] = p;
    ready[b] = 1;
    const int parent = tree.buckets[b].parent;
    if (parent >= 0 && --missing[parent] == 0 && dev[parent] == Device::cpu)
      cpu_ready.insert(parent);
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(m);
      if (!error) error = e;
      abort = true;
    }
    cv.notify_all();
  }
};

// The kernel plans' preparation beside the run: each GPU bucket's plan built once, by whichever
// thread claims it first (the preparing threads, largest first, or the GPU thread reaching it);
// the others wait for it. The first error is kept and rethrown by the run.
class Preparation {
 public:
  explicit Preparation(int nb) : state_(static_cast<std::size_t>(nb)) {}
  template <class F>
  void build(int b, F&& f) {
    int expected = 0;
    if (state_[b].compare_exchange_strong(expected, 1)) {
      if (!stop_.load())
        try {
          f();
        } catch (...) {
          std::lock_guard lock(m_);
          if (!error_) error_ = std::current_exception();
          failed_ = true;
        }
      {
        std::lock_guard lock(m_);
        state_[b].store(2);
      }
      cv_.notify_all();
      return;
    }
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return state_[b].load() == 2; });
  }
  bool failed() const { return failed_.load() || stop_.load(); }
  void stop() { stop_ = true; }
  void rethrow() {
    std::lock_guard lock(m_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::vector<std::atomic<int>> state_;  // 0 not started, 1 being built, 2 built (or failed)
  std::atomic<bool> failed_{false}, stop_{false};
  std::mutex m_;
  std::condition_variable cv_;
  std::exception_ptr error_;
};

struct Run {
  const Plan& plan;
  const std::vector<Device>& dev;
  const ExecOptions& opt;
  Shared& sh;
  ExecStats& st;
  const std::vector<std::vector<gpu::HostInput>>& fin;  // [GPU bucket] factor inputs to upload
  const std::vector<std::vector<int>>& fold;  // [GPU bucket][factor input] child it folds into
  const std::function<void(int)>& prepare;  // bucket b's kernel plan built (or waited for)
  int root() const { return static_cast<int>(plan.tree.buckets.size()) - 1; }
  bool to_host(int b) const {  // does b's output have to reach the host?
    const int p = plan.tree.buckets[b].parent;
    return b == root() || dev[p] == Device::cpu;
  }
};

// Bucket b's factor inputs merged to fit the GPU kernels (every one uploaded), which of them
// the device folds into a child's table instead of passing to the kernel (fold_child: the
// child's index among the bucket's children, -1 for a kernel input; gpu/merge_inputs.hpp rule
// 3), and the scopes of the kernel's inputs in launch order (the kernel's factors, then the
// children).
struct MergedInputs {
  std::vector<gpu::HostInput> inputs;
  std::vector<int> fold_child;
  std::vector<std::vector<int>> scopes;
};
MergedInputs merged_inputs(const Plan& plan, int b, const BucketShape& shape,
                           std::vector<std::vector<double>>& owned) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<gpu::HostInput> factors;
  std::vector<std::vector<int>> factor_scopes;
  for (int f : bk.factors) {
    factors.push_back({plan.input_data[f].data(),
                       static_cast<std::int64_t>(plan.input_data[f].size()), plan.input_scope[f]});
    factor_scopes.push_back(plan.input_scope[f]);
  }
  std::vector<std::vector<int>> children;
  for (int c : bk.children) children.push_back(plan.tree.buckets[c].output_vars());
  const gpu::MergePlan mp = gpu::merge_plan(shape, factor_scopes, children);
  MergedInputs m;
  m.inputs = gpu::merge_inputs(shape, std::move(factors), mp, owned);
  m.fold_child = gpu::fold_targets(shape, mp, children);  // one per merged input
  for (std::size_t k = 0; k < m.inputs.size(); ++k)
    if (m.fold_child[k] < 0) m.scopes.push_back(m.inputs[k].scope);
  m.scopes.insert(m.scopes.end(), children.begin(), children.end());
  return m;
}

// Context::fold's arguments for a factor table over `factor` folded into a child's table over
// `child` (both subsequences of the bucket's variables): the child's cardinalities and, per
// child variable, the factor's stride (0 where the factor lacks it).
void fold_into(gpu::Context& ctx, const BucketShape& shape, gpu::Handle child,
               const std::vector<int>& child_scope, gpu::Handle factor,
               const std::vector<int>& factor_scope, int stream) {
  const std::size_t nv = shape.vars.size();
  std::vector<std::int64_t> in_child(nv, 0), in_factor(nv, 0);
  input_strides(shape, child_scope, in_child.data());
  input_strides(shape, factor_scope, in_factor.data());
  std::vector<int> card;
  std::vector<std::int64_t> stride;
  for (std::size_t i = 0; i < nv; ++i)  // the child's variables, in its (the bucket's) order
    if (in_child[i] != 0) {
      card.push_back(shape.card[i]);
      stride.push_back(in_factor[i]);
    }
  ctx.fold(child, card, stride, factor, stream);
}

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
    const BucketShape shape = bucket_shape(r.plan, b);
    // not make_unique: zero-filling a large table would cost as much as a small bucket
    std::unique_ptr<double[]> out(new double[shape.output_size()]);
    const auto t0 = clock_type::now();
    sum_product_log(shape, in, out.get(), r.opt.threads);
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
      r.sh.publish(b, out.get());
      r.sh.owned[b] = std::move(out);
    }
    r.sh.cv.notify_all();
  }
}

// ExecOptions::timeline_path's file: per GPU bucket, host seconds from the GPU thread's start (the
// bucket's turn, its wait for uploads, its launch call) and the kernel's start and end on the
// device (from timed events; the first event was queued at host time 0, so the device's times
// lag the host's by at most that event's queueing).
template <class Row>
void write_timeline(const std::string& path, const std::vector<Row>& rows,
                    const std::vector<double>& t) {
  std::ofstream f(path);
  f << "bucket\tstream\thost_begin\thost_wait0\thost_wait1\thost_launch0\thost_launch1\tgpu_begin"
       "\tgpu_end\n";
  for (const Row& x : rows) {
    const bool timed = x.m0 >= 0 && x.m1 >= 0 && static_cast<std::size_t>(x.m1) < t.size();
    f << x.b << '\t' << x.stream << '\t' << x.begin << '\t' << x.wait0 << '\t' << x.wait1 << '\t'
      << x.launch0 << '\t' << x.launch1 << '\t' << (timed ? t[x.m0] : -1.0) << '\t'
      << (timed ? t[x.m1] : -1.0) << '\n';
  }
  spdlog::info("GPU timeline of {} buckets written to {}", rows.size(), path);
}

// The GPU management thread.
void gpu_thread(Run& r, gpu::Context& ctx, StagingPool& pool) {
  const auto& buckets = r.plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  // one transfer stream; the others compute (one stream: it does both)
  const int xfer = ctx.num_streams() > 1 ? 1 : 0;
  std::vector<int> compute_streams;
  for (int s = 0; s < ctx.num_streams(); ++s)
    if (s != xfer || ctx.num_streams() == 1) compute_streams.push_back(s);
  std::vector<int> stream_of(nb, 0);
  std::size_t next_stream = 0;
  std::vector<gpu::Handle> out(nb, -1);               // GPU outputs waiting for a GPU parent
  std::vector<std::vector<gpu::Handle>> factors(nb);  // uploaded original inputs
  std::vector<gpu::Handle> used;                      // the inputs of the bucket at hand
  // Device tables still held when this thread leaves early (an error elsewhere): released.
  struct Guard {
    gpu::Context& ctx;
    std::vector<gpu::Handle>& out;
    std::vector<std::vector<gpu::Handle>>& factors;
    std::vector<gpu::Handle>& used;
    ~Guard() {
      try {
        for (gpu::Handle h : used) ctx.release(h);
        for (gpu::Handle h : out)
          if (h >= 0) ctx.release(h);
        for (auto& v : factors)
          for (gpu::Handle h : v) ctx.release(h);
      } catch (...) {  // a destructor must not throw; the first error is what matters
      }
    }
  } guard{ctx, out, factors, used};

  // The device bytes this run holds at once (ExecStats::device_peak_bytes).
  std::unordered_map<gpu::Handle, double> held;
  double live_bytes = 0;
  auto dev_alloc = [&](std::int64_t n) {
    const auto ta = clock_type::now();
    const gpu::Handle h = ctx.alloc(n);
    r.st.gpu_alloc_s += since(ta);
    held[h] = 8.0 * static_cast<double>(n);
    live_bytes += held[h];
    r.st.device_peak_bytes = std::max(r.st.device_peak_bytes, live_bytes);
    return h;
  };
  auto dev_release = [&](gpu::Handle h) {
    ctx.release(h);
    live_bytes -= held[h];
    held.erase(h);
  };

  std::vector<double*> staged;  // pinned buffers read by uploads queued on `xfer`
  bool xfer_busy = false;       // uploads queued on `xfer` since its last synchronize
  auto stage_upload = [&](const double* src, std::int64_t n) {
    const gpu::Handle h = dev_alloc(n);
    double* p = pool.take(n);
    std::memcpy(p, src, sizeof(double) * n);
    ctx.upload(h, p, n, xfer);
    staged.push_back(p);
    xfer_busy = true;
    r.st.h2d_bytes += 8.0 * n;
    return h;
  };
  const auto gpu_t0 = clock_type::now();
  // ExecOptions::timeline_path: each GPU bucket's host steps and kernel times
  struct TimelineRow {
    int b, stream, m0, m1;
    double begin, wait0, wait1, launch0, launch1;
  };
  const bool timed = !r.opt.timeline_path.empty();
  std::vector<TimelineRow> timeline;
  if (timed) ctx.mark(0);  // time 0 of the marks, at host time 0
  double wait0 = 0, wait1 = 0;
  auto finish_uploads = [&](int b) {
    if (!xfer_busy) return;
    xfer_busy = false;
    const auto t0 = clock_type::now();
    ctx.synchronize(xfer);
    const double waited = since(t0);
    wait1 = since(gpu_t0);
    wait0 = wait1 - waited;
    r.st.gpu_upload_wait_s += waited;
    if (waited > 0.002)  // where a GPU run waits
      spdlog::debug(
          "executor: bucket {} waited {:.1f} ms for its uploads, {:.3f} s into the "
          "GPU thread",
          b, 1e3 * waited, since(gpu_t0));
    if (r.opt.time_buckets) r.st.h2d_seconds += waited;
    for (double* p : staged) pool.give(p);
    staged.clear();
  };
  auto take_back = [&] {
    std::vector<double*> g;
    {
      std::lock_guard lock(r.sh.m);
      g.swap(r.sh.give_back);
    }
    for (double* p : g) pool.give(p);
  };

  // pass 1: the original inputs of every GPU bucket, staged in one pinned block and queued on
  // the transfer stream now, so that they travel while the CPU works
  const auto pass1 = clock_type::now();
  std::int64_t total = 0;
  for (int b = 0; b < nb; ++b)
    if (r.dev[b] == Device::gpu)
      for (const gpu::HostInput& h : r.fin[b]) total += h.size;
  struct Block {
    gpu::Context& ctx;
    int stream;
    double* p = nullptr;
    ~Block() {
      if (!p) return;
      try {
        ctx.synchronize(stream);  // no copy may still read it
        ctx.free_host(p);
      } catch (...) {  // a destructor must not throw; the first error is what matters
      }
    }
  } block{ctx, xfer};
  const auto pinned0 = clock_type::now();
  if (total > 0) block.p = ctx.alloc_host(total);
  const double pinned_s = since(pinned0);
  const double alloc_before = r.st.gpu_alloc_s;
  std::int64_t at = 0;
  for (int b = 0; b < nb; ++b)
    if (r.dev[b] == Device::gpu)
      for (const gpu::HostInput& hi : r.fin[b]) {
        const std::int64_t n = hi.size;
        std::memcpy(block.p + at, hi.data, sizeof(double) * n);
        const gpu::Handle h = dev_alloc(n);
        ctx.upload(h, block.p + at, n, xfer);
        xfer_busy = true;
        factors[b].push_back(h);
        r.st.h2d_bytes += 8.0 * n;
        at += n;
      }
  r.st.gpu_stage_s = since(pass1);
  spdlog::debug(
      "executor: {} kB of GPU inputs staged in {:.1f} ms (pinned block {:.1f} ms, device "
      "tables {:.1f} ms)",
      8 * total / 1024, 1e3 * r.st.gpu_stage_s, 1e3 * pinned_s,
      1e3 * (r.st.gpu_alloc_s - alloc_before));
  log_resources("the GPU inputs staged");
  if (r.opt.time_buckets) {  // staging, queueing and the wait, all of it
    finish_uploads(-1);
    r.st.h2d_seconds = since(pass1);
  }

  // pass 2: the GPU buckets in tree order (children first)
  for (int b = 0; b < nb; ++b) {
    if (r.dev[b] != Device::gpu) continue;
    const double begin = since(gpu_t0);
    wait0 = wait1 = begin;
    const Bucket& bk = buckets[b];
    std::vector<gpu::DeviceInput> in;
    used = factors[b];
    std::vector<std::pair<std::size_t, int>> folds;  // (factor input, child index)
    for (std::size_t k = 0; k < r.fin[b].size(); ++k) {
      const int fc = k < r.fold[b].size() ? r.fold[b][k] : -1;
      if (fc < 0)
        in.push_back({factors[b][k], r.fin[b][k].scope});
      else
        folds.emplace_back(k, fc);
    }
    std::vector<gpu::Handle> child_handle;  // [child index] its table on the device
    const std::vector<gpu::Handle> factor_handle = factors[b];
    factors[b].clear();
    int s = -1;  // the first GPU child's stream; the others' are waited for
    for (int c : bk.children) {
      if (r.dev[c] == Device::gpu) {
        in.push_back({out[c], buckets[c].output_vars()});
        child_handle.push_back(out[c]);
        used.push_back(out[c]);
        out[c] = -1;
        if (s < 0)
          s = stream_of[c];
        else if (stream_of[c] != s)
          ctx.stream_wait(s, stream_of[c]);
        continue;
      }
      // a CPU child: wait for it, then upload its table and free the host copy
      const double* src;
      {
        const auto tw = clock_type::now();
        std::unique_lock lock(r.sh.m);
        r.sh.cv.wait(lock, [&] { return r.sh.abort || r.sh.ready[c]; });
        r.st.gpu_child_wait_s += since(tw);
        if (r.sh.abort) return;
        src = r.sh.host[c];
      }
      const gpu::Handle h = stage_upload(src, bucket_shape(r.plan, c).output_size());
      {
        std::lock_guard lock(r.sh.m);
        r.sh.owned[c].reset();
        r.sh.host[c] = nullptr;
      }
      in.push_back({h, buckets[c].output_vars()});
      child_handle.push_back(h);
      used.push_back(h);
    }
    {  // its kernel plan, built beside the run: by this thread if nobody has started it
      const auto tw = clock_type::now();
      r.prepare(b);
      const double waited = since(tw);
      r.st.gpu_plan_wait_s += waited;
      if (waited > 0.002)
        spdlog::debug("executor: bucket {} waited {:.1f} ms for its kernel plan, {:.3f} s into "
                      "the GPU thread",
                      b, 1e3 * waited, since(gpu_t0));
    }
    finish_uploads(b);  // the kernel reads what was just uploaded
    const BucketShape shape = bucket_shape(r.plan, b);
    const std::int64_t n_out = shape.output_size();
    if (s < 0) s = compute_streams[next_stream++ % compute_streams.size()];
    stream_of[b] = s;
    for (const auto& [k, c] : folds)  // small factors added into their children's tables
      fold_into(ctx, shape, child_handle.at(c), buckets[bk.children[c]].output_vars(),
                factor_handle[k], r.fin[b][k].scope, s);
    const gpu::Handle o = dev_alloc(n_out);
    if (r.opt.time_buckets) ctx.synchronize(s);
    const int m0 = timed ? ctx.mark(s) : -1;
    const auto t0 = clock_type::now();
    ctx.run_bucket(shape, in, o, s);
    const double launched = since(t0);
    r.st.gpu_launch_s += launched;
    if (timed) {
      const double at = since(gpu_t0);
      timeline.push_back({b, s, m0, ctx.mark(s), begin, wait0, wait1, at - launched, at});
    }
    if (r.opt.time_buckets) {
      ctx.synchronize(s);
      r.st.kernel_seconds[b] = since(t0);
    }
    for (gpu::Handle h : used) dev_release(h);  // safe: reused only after the kernel read them
    used.clear();
    take_back();
    if (!r.to_host(b)) {
      out[b] = o;
      continue;
    }
    double* p = pool.take(n_out);
    const auto t1 = clock_type::now();
    ctx.download(o, p, n_out, s);
    ctx.synchronize(s);
    r.st.gpu_download_s += since(t1);
    if (r.opt.time_buckets) r.st.d2h_seconds += since(t1);
    dev_release(o);
    r.st.d2h_bytes += 8.0 * n_out;
    {
      std::lock_guard lock(r.sh.m);
      r.sh.publish(b, p);
    }
    r.sh.cv.notify_all();
  }
  if (timed) write_timeline(r.opt.timeline_path, timeline, ctx.mark_seconds());
}

}  // namespace

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

double run_scheduled(const Plan& plan, std::span<const Device> assignment, gpu::Context* ctx,
                     const ExecOptions& opt, ExecStats* stats) {
  const auto t0 = clock_type::now();
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  if (static_cast<int>(assignment.size()) != nb)
    throw std::invalid_argument("the assignment has " + std::to_string(assignment.size()) +
                                " entries for " + std::to_string(nb) + " buckets");
  std::vector<Device> dev(assignment.begin(), assignment.end());
  ExecStats st;
  if (opt.time_buckets) st.kernel_seconds.assign(nb, 0.0);

  // pass 0: where buckets really run. No device: everything on the CPU; a bucket no GPU kernel
  // takes: on the CPU. Both logged.
  int wanted_gpu = 0;
  for (Device d : dev) wanted_gpu += d == Device::gpu;
  if (!ctx && wanted_gpu > 0) {
    st.fallback = "no GPU: all " + std::to_string(nb) + " buckets run on the CPU";
    spdlog::warn(
        "the schedule puts {} bucket(s) on the GPU, but there is none: running every "
        "bucket on the CPU",
        wanted_gpu);
    dev.assign(nb, Device::cpu);
  }
  st.fallback_reason.assign(nb, {});
  auto to_cpu = [&](int b, const std::string& why) {
    spdlog::info("bucket {} runs on the CPU: {}", b, why);
    st.fallback_reason[b] = why;
    st.fallback +=
        (st.fallback.empty() ? "" : "; ") + std::string("bucket ") + std::to_string(b) + ": " + why;
    dev[b] = Device::cpu;
  };
  // GPU buckets: their factor inputs as the kernels take them, and whether a kernel takes them
  // (the layout check alone: choose() would also build the kernel's tables, which run_bucket
  // builds once per shape anyway)
  std::vector<std::vector<gpu::HostInput>> fin(nb);
  std::vector<std::vector<int>> fold(nb);  // [GPU bucket][factor input] child it folds into
  std::vector<std::vector<std::vector<int>>> kernel_scopes(nb);  // as run_bucket will see them
  std::vector<std::vector<double>> owned;                        // products merge_inputs made
  for (int b = 0; b < nb && ctx; ++b) {
    if (dev[b] != Device::gpu) continue;
    const BucketShape shape = bucket_shape(plan, b);
    const MergedInputs m = merged_inputs(plan, b, shape, owned);
    if (m.inputs.size() != buckets[b].factors.size()) {
      ++st.merged_buckets;
      spdlog::debug("bucket {}: {} factor inputs multiplied into {} for the GPU kernel", b,
                    buckets[b].factors.size(), m.inputs.size());
    }
    const std::string why = gpu::why_no_kernel(shape, m.scopes);
    if (!why.empty()) {
      to_cpu(b, "no GPU kernel takes it: " + why);
      continue;
    }
    fin[b] = m.inputs;
    fold[b] = m.fold_child;
    kernel_scopes[b] = m.scopes;
  }
  // ExecOptions::shapes_path: the GPU buckets of >= 2^20 states as bucket_bench --shape specs
  if (!opt.shapes_path.empty() && ctx) {
    std::ofstream f(opt.shapes_path);
    for (int b = 0; b < nb; ++b) {
      if (dev[b] != Device::gpu) continue;
      const BucketShape shape = bucket_shape(plan, b);
      const double states = static_cast<double>(shape.output_size()) * shape.marg_size();
      if (states < 1048576.0) continue;
      f << "# bucket " << b << ": 2^" << std::log2(states) << " states, output 2^"
        << std::log2(static_cast<double>(shape.output_size())) << "\n"
        << gpu::bucket_spec(shape, kernel_scopes[b]) << "\n";
    }
  }
  // The live device-memory budget, in tree order: every GPU bucket's factor inputs are uploaded
  // at the start; a bucket then needs its output and its CPU children's tables next to the GPU
  // outputs still waiting for their parents. A bucket that would not fit runs on the CPU.
  if (ctx) {
    const double budget =
        opt.device_budget_bytes > 0 ? opt.device_budget_bytes : 0.9 * ctx->free_bytes();
    auto bytes = [](const std::vector<gpu::HostInput>& v) {
      double s = 0;
      for (const gpu::HostInput& h : v) s += 8.0 * static_cast<double>(h.size);
      return s;
    };
    double live = 0;
    for (int b = 0; b < nb; ++b)
      if (dev[b] == Device::gpu) live += bytes(fin[b]);
    std::vector<double> out_bytes(nb);
    for (int b = 0; b < nb; ++b)
      out_bytes[b] = 8.0 * static_cast<double>(bucket_shape(plan, b).output_size());
    for (int b = 0; b < nb; ++b) {
      if (dev[b] != Device::gpu) continue;
      double need = out_bytes[b], gpu_children = 0;
      for (int c : buckets[b].children)
        (dev[c] == Device::gpu ? gpu_children : need) += out_bytes[c];
      if (live + need > budget) {
        const double mib = 1024.0 * 1024.0;
        const std::string why = "needs " + std::to_string(std::lround(need / mib)) +
                                " MiB of GPU memory with " + std::to_string(std::lround(live / mib)) +
                                " MiB in use and " + std::to_string(std::lround(budget / mib)) +
                                " MiB usable";
        if (opt.over_budget_throws) throw DeviceMemoryError("bucket " + std::to_string(b) + " " + why);
        to_cpu(b, why);
        live -= bytes(fin[b]);
        fin[b].clear();
        continue;
      }
      live += out_bytes[b] - gpu_children - bytes(fin[b]);
    }
  }
  for (Device d : dev) (d == Device::gpu ? st.gpu_buckets : st.cpu_buckets)++;
  log_resources("the executor's GPU inputs merged");
  // The kernels' launch plans, built on every thread (largest buckets first), their tables
  // queued for upload: built one at a time inside run_bucket they were most of a GPU run's
  // time. They are built beside
  // the run: the GPU thread starts on its first buckets at once and, at a bucket whose plan
  // nobody has started, builds it itself (else waits for it). With time_buckets they are all
  // built before the run (calibration times kernels alone).
  Shared sh(plan.tree, dev);
  std::vector<std::pair<double, int>> order;
  if (ctx && st.gpu_buckets > 0)
    for (int b = 0; b < nb; ++b)
      if (dev[b] == Device::gpu) {
        const BucketShape shape = bucket_shape(plan, b);
        order.emplace_back(
            -static_cast<double>(shape.output_size()) * static_cast<double>(shape.marg_size()), b);
      }
  std::sort(order.begin(), order.end());
  const int upload_stream = ctx && ctx->num_streams() > 1 ? 1 : 0;
  Preparation prep(nb);
  const std::function<void(int)> prepare = [&](int b) {
    prep.build(b, [&] { ctx->prepare(bucket_shape(plan, b), kernel_scopes[b], upload_stream); });
  };
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  auto prepare_all = [&] {
    const auto tp = clock_type::now();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
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
  Run r{plan, dev, opt, sh, st, fin, fold, prepare};
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
    std::rethrow_exception(sh.error);
  }
  log_resources("the executor's buckets done");
  if (ctx)
    spdlog::debug(
        "executor: {:.3f} s (the GPU thread {:.1f} to {:.1f} ms); kernel plans prepared in "
        "{:.3f} s (the GPU thread waited {:.3f} s for them); CPU thread {} buckets: kernels "
        "{:.3f} s, waiting {:.3f} s; GPU "
        "thread {} buckets: staging {:.3f} s, run_bucket (host) {:.3f} s, allocations {:.3f} "
        "s, waiting for CPU children {:.3f} s and uploads {:.3f} s, downloads {:.3f} s; the "
        "context holds {} of host memory for kernel plans and spent {:.3f} s building them",
        since(t0), 1e3 * gpu_from, 1e3 * gpu_to, st.gpu_prepare_s, st.gpu_plan_wait_s,
        st.cpu_buckets, st.cpu_kernel_s, st.cpu_wait_s, st.gpu_buckets,
        st.gpu_stage_s, st.gpu_launch_s, st.gpu_alloc_s, st.gpu_child_wait_s, st.gpu_upload_wait_s,
        st.gpu_download_s, human_bytes(ctx->own_host_bytes()), ctx->own_setup_seconds());
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

namespace kinfer::sched {

namespace {

// |gpu - cpu| for ln values: equal infinities agree, NaN never does.
double difference(double gpu, double cpu) {
  if (std::isnan(gpu) || std::isnan(cpu)) return INFINITY;
  if (std::isinf(gpu) || std::isinf(cpu)) return gpu == cpu ? 0.0 : INFINITY;
  return std::abs(gpu - cpu);
}

// Runs the bucket the CPU just computed on the GPU too, from the same input tables.
void check_bucket(const Plan& plan, gpu::Context& ctx, int b, const BucketShape& shape,
                  std::span<const InputTable> in, const double* cpu_out, CheckReport& r) {
  std::vector<std::vector<double>> owned;
  const MergedInputs m = merged_inputs(plan, b, shape, owned);
  const std::string why = gpu::why_no_kernel(shape, m.scopes);
  if (!why.empty()) {
    spdlog::debug("check: bucket {} has no GPU kernel: {}", b, why);
    ++r.buckets_without_kernel;
    return;
  }
  // `in`: the factors, then the children's outputs (as the CPU read them)
  const std::size_t n_factors = plan.tree.buckets[b].factors.size();
  std::vector<gpu::DeviceInput> din;
  auto upload = [&](const double* data, std::int64_t n, const std::vector<int>& scope) {
    const gpu::Handle h = ctx.alloc(n);
    ctx.upload(h, data, n, 0);
    din.push_back({h, scope});
  };
  struct Release {
    gpu::Context& ctx;
    std::vector<gpu::DeviceInput>& din;
    gpu::Handle out = -1;
    std::vector<gpu::Handle> extra;
    ~Release() {
      try {
        ctx.synchronize(0);
        for (const auto& d : din) ctx.release(d.table);
        for (gpu::Handle h : extra) ctx.release(h);
        if (out >= 0) ctx.release(out);
      } catch (...) {  // a destructor must not throw; the first error is what matters
      }
    }
  } release{ctx, din, -1, {}};
  std::vector<gpu::DeviceInput> folded;  // factor inputs the device adds into a child's table
  std::vector<int> folded_child;
  for (std::size_t k = 0; k < m.inputs.size(); ++k) {
    const gpu::HostInput& h = m.inputs[k];
    upload(h.data, h.size, h.scope);
    if (m.fold_child[k] >= 0) {
      folded.push_back(din.back());
      folded_child.push_back(m.fold_child[k]);
      din.pop_back();
      release.extra.push_back(folded.back().table);
    }
  }
  const std::size_t first_child = din.size();
  std::vector<std::int64_t> st(shape.vars.size());
  for (std::size_t k = n_factors; k < in.size(); ++k)
    upload(in[k].data, input_strides(shape, in[k].scope, st.data()), in[k].scope);
  for (std::size_t j = 0; j < folded.size(); ++j) {
    const gpu::DeviceInput& child = din.at(first_child + folded_child[j]);
    fold_into(ctx, shape, child.table, child.scope, folded[j].table, folded[j].scope, 0);
  }
  const std::int64_t n_out = shape.output_size();
  release.out = ctx.alloc(n_out);
  ctx.run_bucket(shape, din, release.out, 0);
  std::vector<double> gpu_out(n_out);
  ctx.download(release.out, gpu_out.data(), n_out, 0);
  ctx.synchronize(0);
  double worst_abs = 0, worst_rel = 0;
  for (std::int64_t i = 0; i < n_out; ++i) {
    const double d = difference(gpu_out[i], cpu_out[i]);
    worst_abs = std::max(worst_abs, d);
    const double scale = std::isfinite(cpu_out[i]) ? std::max(1.0, std::abs(cpu_out[i])) : 1.0;
    worst_rel = std::max(worst_rel, d / scale);
  }
  spdlog::debug("check: bucket {} ({} outputs): largest difference {:.3g} ({:.3g} relative)", b,
                n_out, worst_abs, worst_rel);
  ++r.buckets;
  r.bucket_rel_diff[b] = worst_rel;
  r.max_abs_diff = std::max(r.max_abs_diff, worst_abs);
  if (r.worst_bucket < 0 || worst_rel > r.max_rel_diff) {
    r.max_rel_diff = worst_rel;
    r.worst_bucket = b;
  }
  if (!(worst_rel <= r.tolerance)) {
    if (r.first_failed_bucket < 0) r.first_failed_bucket = b;
    r.passed = false;
  }
}

}  // namespace

double run_checked(const Plan& plan, gpu::Context& ctx, int threads, CheckReport& report,
                   double tolerance) {
  report = CheckReport{};
  report.tolerance = tolerance;
  report.bucket_rel_diff.assign(plan.tree.buckets.size(), NAN);
  RunOptions ro;
  ro.threads = threads;
  ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                        const double* out) { check_bucket(plan, ctx, b, shape, in, out, report); };
  return run_plan(plan, ro);
}

}  // namespace kinfer::sched
