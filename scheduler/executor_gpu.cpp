// The executor's GPU management thread (executor_internal.hpp gpu_thread), and the GPU buckets'
// inputs as the kernels take them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "engine/util.hpp"
#include "scheduler/executor_internal.hpp"

namespace kinfer::sched::exec {

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
    if (m.fold_child[k] < 0)
      m.scopes.push_back(m.inputs[k].scope);
    else
      for (int f : mp.groups[k]) m.folded_factors.emplace_back(f, m.fold_child[k]);
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

namespace {

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

struct PinnedBlock;

// The GPU management thread's state and steps: the GPU buckets in tree order, each one's inputs
// gathered (its uploaded factors, its GPU children's tables, its CPU children's uploaded), its
// kernel launched and its output kept for a GPU parent or downloaded for the CPU.
class GpuThread {
 public:
  GpuThread(Run& r, gpu::Context& ctx, StagingPool& pool)
      : r_(r),
        ctx_(ctx),
        pool_(pool),
        nb_(static_cast<int>(r.plan.tree.buckets.size())),
        xfer_(ctx.num_streams() > 1 ? 1 : 0),
        stream_of_(nb_, 0),
        out_(nb_, -1),
        factors_(nb_),
        timed_(!r.opt.timeline_path.empty()) {
    // one transfer stream; the others compute (one stream: it does both)
    for (int s = 0; s < ctx.num_streams(); ++s)
      if (s != xfer_ || ctx.num_streams() == 1) compute_streams_.push_back(s);
    if (timed_) ctx.mark(0);  // time 0 of the marks, at host time 0
  }
  // Device tables still held when the thread leaves early (an error elsewhere): released.
  ~GpuThread() {
    try {
      for (gpu::Handle h : used_) ctx_.release(h);
      for (gpu::Handle h : out_)
        if (h >= 0) ctx_.release(h);
      for (auto& v : factors_)
        for (gpu::Handle h : v) ctx_.release(h);
    } catch (...) {  // a destructor must not throw; the first error is what matters
    }
  }
  GpuThread(const GpuThread&) = delete;
  GpuThread& operator=(const GpuThread&) = delete;

  int transfer_stream() const { return xfer_; }

  // Pass 1: the original inputs of every GPU bucket, staged in one pinned block and queued on
  // the transfer stream now, so that they travel while the CPU works.
  void stage_factor_inputs(PinnedBlock& block);

  // Pass 2, one GPU bucket; false when the run was aborted (an error elsewhere).
  bool run_bucket(int b);

  void write_timeline_if_asked() {
    if (timed_) write_timeline(r_.opt.timeline_path, timeline_, ctx_.mark_seconds());
  }

 private:
  // A GPU bucket's kernel inputs, the factors folded into a child's table instead, and the
  // stream it runs on.
  struct BucketInputs {
    std::vector<gpu::DeviceInput> in;
    std::vector<std::pair<std::size_t, int>> folds;  // (factor input, child index)
    std::vector<gpu::Handle> child_handle;           // [child index] its table on the device
    std::vector<gpu::Handle> factor_handle;
    int stream = -1;  // the first GPU child's stream; the others' are waited for
  };
  // Bucket b's inputs on the device; false when the run was aborted while waiting for a CPU
  // child.
  bool gather_inputs(int b, BucketInputs& bi);
  // Its kernel plan, built beside the run: by this thread if nobody has started it.
  void wait_for_plan(int b);
  // The kernel's launch (after the folds of small factors into their children's tables).
  gpu::Handle launch(int b, const BucketShape& shape, const BucketInputs& bi);
  // Its output downloaded for the CPU (its parent's or the root's) and published.
  void download(int b, gpu::Handle o, std::int64_t n_out, int s);
  // ExecOptions::pass.outputs: a copy of b's output, which stays on the device for its GPU
  // parent, downloaded into the kept tables (waiting for it: a pageable copy).
  void keep_on_host(int b, gpu::Handle o, std::int64_t n_out, int s);

  // The device bytes this run holds at once (ExecStats::device_peak_bytes).
  gpu::Handle dev_alloc(std::int64_t n) {
    const auto ta = clock_type::now();
    const gpu::Handle h = ctx_.alloc(n);
    r_.st.gpu_alloc_s += since(ta);
    held_[h] = 8.0 * static_cast<double>(n);
    live_bytes_ += held_[h];
    r_.st.device_peak_bytes = std::max(r_.st.device_peak_bytes, live_bytes_);
    return h;
  }
  void dev_release(gpu::Handle h) {
    ctx_.release(h);
    live_bytes_ -= held_[h];
    held_.erase(h);
  }
  gpu::Handle stage_upload(const double* src, std::int64_t n) {
    const gpu::Handle h = dev_alloc(n);
    double* p = pool_.take(n);
    std::memcpy(p, src, sizeof(double) * n);
    ctx_.upload(h, p, n, xfer_);
    staged_.push_back(p);
    xfer_busy_ = true;
    r_.st.h2d_bytes += 8.0 * n;
    return h;
  }
  // The uploads queued so far finished (bucket b's kernel reads them); -1: the staging's.
  void finish_uploads(int b);
  // The pinned downloads the CPU thread finished reading, back to the pool.
  void take_back() {
    std::vector<double*> g;
    {
      std::lock_guard lock(r_.sh.m);
      g.swap(r_.sh.give_back);
    }
    for (double* p : g) pool_.give(p);
  }

  Run& r_;
  gpu::Context& ctx_;
  StagingPool& pool_;
  const int nb_;
  const int xfer_;
  std::vector<int> compute_streams_;
  std::vector<int> stream_of_;
  std::size_t next_stream_ = 0;
  std::vector<gpu::Handle> out_;                       // GPU outputs waiting for a GPU parent
  std::vector<std::vector<gpu::Handle>> factors_;      // uploaded original inputs
  std::vector<gpu::Handle> used_;                      // the inputs of the bucket at hand
  std::unordered_map<gpu::Handle, double> held_;
  double live_bytes_ = 0;
  std::vector<double*> staged_;  // pinned buffers read by uploads queued on `xfer_`
  bool xfer_busy_ = false;       // uploads queued on `xfer_` since its last synchronize
  const clock_type::time_point t0_ = clock_type::now();
  // ExecOptions::timeline_path: each GPU bucket's host steps and kernel times
  struct TimelineRow {
    int b, stream, m0, m1;
    double begin, wait0, wait1, launch0, launch1;
  };
  const bool timed_;
  std::vector<TimelineRow> timeline_;
  double begin_ = 0, wait0_ = 0, wait1_ = 0;
};

// The pinned host block of pass 1, freed once no copy reads it.
struct PinnedBlock {
  gpu::Context& ctx;
  int stream;
  double* p = nullptr;
  ~PinnedBlock() {
    if (!p) return;
    try {
      ctx.synchronize(stream);  // no copy may still read it
      ctx.free_host(p);
    } catch (...) {  // a destructor must not throw; the first error is what matters
    }
  }
};

void GpuThread::finish_uploads(int b) {
  if (!xfer_busy_) return;
  xfer_busy_ = false;
  const auto t0 = clock_type::now();
  ctx_.synchronize(xfer_);
  const double waited = since(t0);
  wait1_ = since(t0_);
  wait0_ = wait1_ - waited;
  r_.st.gpu_upload_wait_s += waited;
  if (waited > 0.002)  // where a GPU run waits
    spdlog::debug(
        "executor: bucket {} waited {:.1f} ms for its uploads, {:.3f} s into the "
        "GPU thread",
        b, 1e3 * waited, since(t0_));
  if (r_.opt.time_buckets) r_.st.h2d_seconds += waited;
  for (double* p : staged_) pool_.give(p);
  staged_.clear();
}

void GpuThread::stage_factor_inputs(PinnedBlock& block) {
  const auto pass1 = clock_type::now();
  std::int64_t total = 0;
  for (int b = 0; b < nb_; ++b)
    if (r_.dev[b] == Device::gpu)
      for (const gpu::HostInput& h : r_.fin[b]) total += h.size;
  const auto pinned0 = clock_type::now();
  if (total > 0) block.p = ctx_.alloc_host(total);
  const double pinned_s = since(pinned0);
  const double alloc_before = r_.st.gpu_alloc_s;
  std::int64_t at = 0;
  for (int b = 0; b < nb_; ++b)
    if (r_.dev[b] == Device::gpu)
      for (const gpu::HostInput& hi : r_.fin[b]) {
        const std::int64_t n = hi.size;
        std::memcpy(block.p + at, hi.data, sizeof(double) * n);
        const gpu::Handle h = dev_alloc(n);
        ctx_.upload(h, block.p + at, n, xfer_);
        xfer_busy_ = true;
        factors_[b].push_back(h);
        r_.st.h2d_bytes += 8.0 * n;
        at += n;
      }
  r_.st.gpu_stage_s = since(pass1);
  spdlog::debug(
      "executor: {} kB of GPU inputs staged in {:.1f} ms (pinned block {:.1f} ms, device "
      "tables {:.1f} ms)",
      8 * total / 1024, 1e3 * r_.st.gpu_stage_s, 1e3 * pinned_s,
      1e3 * (r_.st.gpu_alloc_s - alloc_before));
  log_resources("the GPU inputs staged");
  if (r_.opt.time_buckets) {  // staging, queueing and the wait, all of it
    finish_uploads(-1);
    r_.st.h2d_seconds = since(pass1);
  }
}

bool GpuThread::gather_inputs(int b, BucketInputs& bi) {
  const auto& buckets = r_.plan.tree.buckets;
  used_ = factors_[b];
  for (std::size_t k = 0; k < r_.fin[b].size(); ++k) {
    const int fc = k < r_.fold[b].size() ? r_.fold[b][k] : -1;
    if (fc < 0)
      bi.in.push_back({factors_[b][k], r_.fin[b][k].scope});
    else
      bi.folds.emplace_back(k, fc);
  }
  bi.factor_handle = factors_[b];
  factors_[b].clear();
  for (int c : buckets[b].children) {
    if (r_.dev[c] == Device::gpu) {
      bi.in.push_back({out_[c], buckets[c].output_vars()});
      bi.child_handle.push_back(out_[c]);
      if (r_.hold_on_device)
        (*r_.held)[c] = out_[c];  // released with the run's reader (DeviceOutputs)
      else
        used_.push_back(out_[c]);
      out_[c] = -1;
      if (bi.stream < 0)
        bi.stream = stream_of_[c];
      else if (stream_of_[c] != bi.stream)
        ctx_.stream_wait(bi.stream, stream_of_[c]);
      continue;
    }
    // a CPU child: wait for it, then upload its table and free the host copy
    const double* src;
    {
      const auto tw = clock_type::now();
      std::unique_lock lock(r_.sh.m);
      r_.sh.cv.wait(lock, [&] { return r_.sh.abort || r_.sh.ready[c]; });
      r_.st.gpu_child_wait_s += since(tw);
      if (r_.sh.abort) return false;
      src = r_.sh.host[c];
    }
    const gpu::Handle h = stage_upload(src, bucket_shape(r_.plan, c).output_size());
    {
      std::lock_guard lock(r_.sh.m);
      r_.sh.owned[c].reset();
      r_.sh.host[c] = nullptr;
    }
    bi.in.push_back({h, buckets[c].output_vars()});
    bi.child_handle.push_back(h);
    used_.push_back(h);
  }
  return true;
}

void GpuThread::wait_for_plan(int b) {
  const auto tw = clock_type::now();
  r_.prepare(b);
  const double waited = since(tw);
  r_.st.gpu_plan_wait_s += waited;
  if (waited > 0.002)
    spdlog::debug("executor: bucket {} waited {:.1f} ms for its kernel plan, {:.3f} s into "
                  "the GPU thread",
                  b, 1e3 * waited, since(t0_));
}

gpu::Handle GpuThread::launch(int b, const BucketShape& shape, const BucketInputs& bi) {
  const auto& buckets = r_.plan.tree.buckets;
  const int s = bi.stream;
  for (const auto& [k, c] : bi.folds)  // small factors added into their children's tables
    fold_into(ctx_, shape, bi.child_handle.at(c), buckets[buckets[b].children[c]].output_vars(),
              bi.factor_handle[k], r_.fin[b][k].scope, s);
  const gpu::Handle o = dev_alloc(shape.output_size());
  if (r_.opt.time_buckets) ctx_.synchronize(s);
  const int m0 = timed_ ? ctx_.mark(s) : -1;
  const auto t0 = clock_type::now();
  ctx_.run_bucket(shape, bi.in, o, s);
  const double launched = since(t0);
  r_.st.gpu_launch_s += launched;
  if (timed_) {
    const double at = since(t0_);
    timeline_.push_back({b, s, m0, ctx_.mark(s), begin_, wait0_, wait1_, at - launched, at});
  }
  if (r_.opt.time_buckets) {
    ctx_.synchronize(s);
    r_.st.kernel_seconds[b] = since(t0);
  }
  return o;
}

void GpuThread::keep_on_host(int b, gpu::Handle o, std::int64_t n_out, int s) {
  LnTable& kept = (*r_.opt.pass.outputs)[b];
  kept.resize(n_out);
  const auto t1 = clock_type::now();
  ctx_.download(o, kept.data(), n_out, s);
  ctx_.synchronize(s);
  r_.st.gpu_download_s += since(t1);
  r_.st.d2h_bytes += 8.0 * n_out;
}

void GpuThread::download(int b, gpu::Handle o, std::int64_t n_out, int s) {
  double* p = pool_.take(n_out);
  const auto t1 = clock_type::now();
  ctx_.download(o, p, n_out, s);
  ctx_.synchronize(s);
  r_.st.gpu_download_s += since(t1);
  if (r_.opt.time_buckets) r_.st.d2h_seconds += since(t1);
  dev_release(o);
  r_.st.d2h_bytes += 8.0 * n_out;
  if (r_.opt.pass.outputs) (*r_.opt.pass.outputs)[b].assign(p, p + n_out);
  {
    std::lock_guard lock(r_.sh.m);
    r_.sh.publish(b, p);
  }
  r_.sh.cv.notify_all();
}

bool GpuThread::run_bucket(int b) {
  begin_ = since(t0_);
  wait0_ = wait1_ = begin_;
  BucketInputs bi;
  if (!gather_inputs(b, bi)) return false;
  wait_for_plan(b);
  finish_uploads(b);  // the kernel reads what was just uploaded
  const BucketShape shape = bucket_shape(r_.plan, b, r_.opt.pass);
  if (bi.stream < 0) bi.stream = compute_streams_[next_stream_++ % compute_streams_.size()];
  stream_of_[b] = bi.stream;
  const gpu::Handle o = launch(b, shape, bi);
  for (gpu::Handle h : used_) dev_release(h);  // safe: reused only after the kernel read them
  used_.clear();
  take_back();
  if (!r_.to_host(b)) {
    out_[b] = o;
    if (r_.opt.pass.outputs && !r_.hold_on_device)
      keep_on_host(b, o, shape.output_size(), bi.stream);
  } else {
    download(b, o, shape.output_size(), bi.stream);
  }
  return true;
}

}  // namespace

void gpu_thread(Run& r, gpu::Context& ctx, StagingPool& pool) {
  GpuThread g(r, ctx, pool);
  PinnedBlock block{ctx, g.transfer_stream()};
  g.stage_factor_inputs(block);
  // pass 2: the GPU buckets in tree order (children first)
  for (int b = 0; b < static_cast<int>(r.plan.tree.buckets.size()); ++b)
    if (r.dev[b] == Device::gpu && !g.run_bucket(b)) return;
  g.write_timeline_if_asked();
}

}  // namespace kinfer::sched::exec
