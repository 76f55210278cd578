#include "scheduler/executor.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "gpu/policy.hpp"
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

struct Run {
  const Plan& plan;
  const std::vector<Device>& dev;
  const ExecOptions& opt;
  Shared& sh;
  ExecStats& st;
  int root() const { return static_cast<int>(plan.tree.buckets.size()) - 1; }
  bool to_host(int b) const {  // does b's output have to reach the host?
    const int p = plan.tree.buckets[b].parent;
    return b == root() || dev[p] == Device::cpu;
  }
};

// The CPU execution thread: the ready CPU bucket that comes first in tree order, repeatedly.
void cpu_thread(Run& r) {
  const auto& buckets = r.plan.tree.buckets;
  int left = 0;
  for (Device d : r.dev) left += d == Device::cpu;
  for (; left > 0; --left) {
    std::vector<InputTable> in;
    int b;
    {
      std::unique_lock lock(r.sh.m);
      r.sh.cv.wait(lock, [&] { return r.sh.abort || !r.sh.cpu_ready.empty(); });
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

// The GPU management thread.
void gpu_thread(Run& r, gpu::Context& ctx, StagingPool& pool) {
  const auto& buckets = r.plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int compute = 0, xfer = ctx.num_streams() > 1 ? 1 : 0;
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

  std::vector<double*> staged;  // pinned buffers read by uploads queued on `xfer`
  bool xfer_busy = false;       // uploads queued on `xfer` since its last synchronize
  auto stage_upload = [&](const double* src, std::int64_t n) {
    const gpu::Handle h = ctx.alloc(n);
    double* p = pool.take(n);
    std::memcpy(p, src, sizeof(double) * n);
    ctx.upload(h, p, n, xfer);
    staged.push_back(p);
    xfer_busy = true;
    r.st.h2d_bytes += 8.0 * n;
    return h;
  };
  auto finish_uploads = [&] {
    if (!xfer_busy) return;
    xfer_busy = false;
    const auto t0 = clock_type::now();
    ctx.synchronize(xfer);
    if (r.opt.time_buckets) r.st.h2d_seconds += since(t0);
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
      for (int f : buckets[b].factors)
        total += static_cast<std::int64_t>(r.plan.input_data[f].size());
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
  if (total > 0) block.p = ctx.alloc_host(total);
  std::int64_t at = 0;
  for (int b = 0; b < nb; ++b)
    if (r.dev[b] == Device::gpu)
      for (int f : buckets[b].factors) {
        const auto n = static_cast<std::int64_t>(r.plan.input_data[f].size());
        std::memcpy(block.p + at, r.plan.input_data[f].data(), sizeof(double) * n);
        const gpu::Handle h = ctx.alloc(n);
        ctx.upload(h, block.p + at, n, xfer);
        xfer_busy = true;
        factors[b].push_back(h);
        r.st.h2d_bytes += 8.0 * n;
        at += n;
      }
  if (r.opt.time_buckets) {  // staging, queueing and the wait, all of it
    finish_uploads();
    r.st.h2d_seconds = since(pass1);
  }

  // pass 2: the GPU buckets in tree order (children first)
  for (int b = 0; b < nb; ++b) {
    if (r.dev[b] != Device::gpu) continue;
    const Bucket& bk = buckets[b];
    std::vector<gpu::DeviceInput> in;
    used = factors[b];
    for (std::size_t k = 0; k < bk.factors.size(); ++k)
      in.push_back({factors[b][k], r.plan.input_scope[bk.factors[k]]});
    factors[b].clear();
    for (int c : bk.children) {
      if (r.dev[c] == Device::gpu) {
        in.push_back({out[c], buckets[c].output_vars()});
        used.push_back(out[c]);
        out[c] = -1;
        continue;
      }
      // a CPU child: wait for it, then upload its table and free the host copy
      const double* src;
      {
        std::unique_lock lock(r.sh.m);
        r.sh.cv.wait(lock, [&] { return r.sh.abort || r.sh.ready[c]; });
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
      used.push_back(h);
    }
    finish_uploads();  // the kernel reads what was just uploaded
    const BucketShape shape = bucket_shape(r.plan, b);
    const std::int64_t n_out = shape.output_size();
    const gpu::Handle o = ctx.alloc(n_out);
    if (r.opt.time_buckets) ctx.synchronize(compute);
    const auto t0 = clock_type::now();
    ctx.run_bucket(shape, in, o, compute);
    if (r.opt.time_buckets) {
      ctx.synchronize(compute);
      r.st.kernel_seconds[b] = since(t0);
    }
    for (gpu::Handle h : used) ctx.release(h);  // safe: reused only after the kernel read them
    used.clear();
    take_back();
    if (!r.to_host(b)) {
      out[b] = o;
      continue;
    }
    double* p = pool.take(n_out);
    const auto t1 = clock_type::now();
    ctx.download(o, p, n_out, compute);
    ctx.synchronize(compute);
    if (r.opt.time_buckets) r.st.d2h_seconds += since(t1);
    ctx.release(o);
    r.st.d2h_bytes += 8.0 * n_out;
    {
      std::lock_guard lock(r.sh.m);
      r.sh.publish(b, p);
    }
    r.sh.cv.notify_all();
  }
}

}  // namespace

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
  for (int b = 0; b < nb && ctx; ++b) {
    if (dev[b] != Device::gpu) continue;
    // the layout check alone: choose() would also build the kernel's tables, which run_bucket
    // builds (once per shape) anyway
    const std::string why =
        gpu::describe(bucket_shape(plan, b), bucket_scopes(plan, b)).unsupported;
    if (why.empty()) continue;
    spdlog::info("bucket {} runs on the CPU: no GPU kernel takes it ({})", b, why);
    st.fallback +=
        (st.fallback.empty() ? "" : "; ") + std::string("bucket ") + std::to_string(b) + ": " + why;
    dev[b] = Device::cpu;
  }
  for (Device d : dev) (d == Device::gpu ? st.gpu_buckets : st.cpu_buckets)++;

  Shared sh(plan.tree, dev);
  std::optional<StagingPool> pool;
  if (ctx && st.gpu_buckets > 0) pool.emplace(*ctx);
  Run r{plan, dev, opt, sh, st};
  {
    std::thread gpu;
    if (pool)
      gpu = std::thread([&] {
        try {
          gpu_thread(r, *ctx, *pool);
        } catch (...) {
          sh.fail(std::current_exception());
        }
      });
    try {
      cpu_thread(r);
    } catch (...) {
      sh.fail(std::current_exception());
    }
    if (gpu.joinable()) gpu.join();
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
