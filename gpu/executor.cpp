#include "gpu/executor.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace kinfer::gpu {

namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

std::vector<std::vector<int>> bucket_scopes(const Plan& plan, int b) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<std::vector<int>> sc;
  for (int f : bk.factors) sc.push_back(plan.input_scope[f]);
  for (int c : bk.children) sc.push_back(plan.tree.buckets[c].output_vars());
  return sc;
}

}  // namespace

double run_plan_gpu(const Plan& plan, Context& ctx, const RunOptions& opt,
                    DeviceRunReport* report, const DeviceRunOptions& dev) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  DeviceRunReport rep;
  if (nb == 0) return plan.model.log_constant();

  // pass 1: where each bucket runs. A bucket goes to the CPU when it is small and none of its
  // inputs is on the GPU, when no kernel takes it, or when the tables it needs on the device
  // (its output, its factors, children computed on the CPU) would not fit next to the tables
  // still alive there.
  std::vector<char> on_gpu(nb, 0);
  std::vector<std::int64_t> out_size(nb);
  const double budget = 0.9 * ctx.free_bytes();
  double live = 0;  // bytes of GPU-resident child tables waiting for their parents
  for (int b = 0; b < nb; ++b) {
    const BucketShape shape = bucket_shape(plan, b);
    out_size[b] = shape.output_size();
    bool child_on_gpu = false;
    for (int c : buckets[b].children) child_on_gpu = child_on_gpu || on_gpu[c];
    if (!child_on_gpu && std::exp2(buckets[b].log2_states) < dev.min_gpu_states) {
      ++rep.small_on_cpu;
      continue;  // small, and nothing of it on the device yet: the CPU is quicker
    }
    const auto scopes = bucket_scopes(plan, b);
    std::string why;
    try {
      const KernelChoice k = ctx.choose(shape, scopes);
      spdlog::debug("bucket {}: {} kernel, {} outputs x {} summed: {}", b, to_string(k.variant),
                    out_size[b], shape.marg_size(), k.why);
    } catch (const std::invalid_argument& e) {
      why = std::string("no GPU kernel takes it: ") + e.what();
    }
    double need = 8.0 * static_cast<double>(out_size[b]);
    for (int f : buckets[b].factors) need += 8.0 * static_cast<double>(plan.input_data[f].size());
    double children_on_gpu = 0;
    for (int c : buckets[b].children)
      (on_gpu[c] ? children_on_gpu : need) += 8.0 * static_cast<double>(out_size[c]);
    if (why.empty() && live + need > budget)
      why = "needs " + std::to_string(static_cast<long>(mib(need))) + " MiB of GPU memory with " +
            std::to_string(static_cast<long>(mib(live))) + " MiB in use and " +
            std::to_string(static_cast<long>(mib(budget))) + " MiB usable";
    live -= children_on_gpu;
    if (why.empty()) {
      on_gpu[b] = 1;
      live += 8.0 * static_cast<double>(out_size[b]);
    } else {
      spdlog::info("bucket {} runs on the CPU: {}", b, why);
      rep.on_cpu.emplace_back(b, why);
    }
  }

  // pass 2: stage the GPU buckets' factors in pinned memory, so uploads are asynchronous
  std::vector<std::int64_t> staged_at(plan.input_data.size(), -1);
  std::int64_t staged = 0;
  for (int b = 0; b < nb; ++b)
    if (on_gpu[b])
      for (int f : buckets[b].factors) {
        staged_at[f] = staged;
        staged += static_cast<std::int64_t>(plan.input_data[f].size());
      }
  double* pinned = staged ? ctx.alloc_host(staged) : nullptr;
  std::vector<double*> host_buffers;  // pinned buffers to free once everything is done
  struct Cleanup {
    Context& ctx;
    double*& pinned;
    std::vector<double*>& bufs;
    ~Cleanup() {
      try {
        for (int s = 0; s < ctx.num_streams(); ++s) ctx.synchronize(s);
        if (pinned) ctx.free_host(pinned);
        for (double* p : bufs) ctx.free_host(p);
      } catch (...) {  // a destructor must not throw; the original error is what matters
      }
    }
  } cleanup{ctx, pinned, host_buffers};
  for (std::size_t f = 0; f < plan.input_data.size(); ++f)
    if (staged_at[f] >= 0)
      std::memcpy(pinned + staged_at[f], plan.input_data[f].data(), 8 * plan.input_data[f].size());

  // pass 3: run in tree order. A GPU bucket continues on its first GPU child's stream (no wait
  // for that chain) and waits for the other children's streams; leaves take streams in turn.
  std::vector<Handle> dev_out(nb, -1);
  std::vector<int> stream_of(nb, 0);
  std::vector<std::vector<double>> host_out(nb);
  int next_stream = 0;
  for (int b = 0; b < nb; ++b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, b);
    if (on_gpu[b]) {
      int s = -1;
      for (int c : bk.children)
        if (on_gpu[c]) {
          if (s < 0)
            s = stream_of[c];
          else
            ctx.stream_wait(s, stream_of[c]);
        }
      if (s < 0) s = next_stream++ % ctx.num_streams();
      stream_of[b] = s;
      std::vector<DeviceInput> in;
      std::vector<Handle> temp;
      for (int f : bk.factors) {
        const auto n = static_cast<std::int64_t>(plan.input_data[f].size());
        const Handle h = ctx.alloc(n);
        ctx.upload(h, pinned + staged_at[f], n, s);
        in.push_back({h, plan.input_scope[f]});
        temp.push_back(h);
      }
      for (int c : bk.children) {
        if (on_gpu[c]) {
          in.push_back({dev_out[c], buckets[c].output_vars()});
          temp.push_back(dev_out[c]);
        } else {
          const std::int64_t n = out_size[c];
          double* p = ctx.alloc_host(n);
          host_buffers.push_back(p);
          std::memcpy(p, host_out[c].data(), 8 * n);
          host_out[c].clear();
          host_out[c].shrink_to_fit();
          const Handle h = ctx.alloc(n);
          ctx.upload(h, p, n, s);
          in.push_back({h, buckets[c].output_vars()});
          temp.push_back(h);
        }
      }
      dev_out[b] = ctx.alloc(out_size[b]);
      const KernelChoice k = ctx.run_bucket(shape, in, dev_out[b], s, Variant::automatic);
      (k.variant == Variant::cached ? rep.cached_buckets : rep.plain_buckets)++;
      ++rep.gpu_buckets;
      for (Handle h : temp) ctx.release(h);  // reused only after the kernel has read them
    } else {
      std::vector<InputTable> in;
      for (int f : bk.factors) in.push_back({plan.input_data[f].data(), plan.input_scope[f]});
      for (int c : bk.children) {
        if (on_gpu[c]) {
          host_out[c].resize(out_size[c]);
          double* p = ctx.alloc_host(out_size[c]);
          host_buffers.push_back(p);
          ctx.download(dev_out[c], p, out_size[c], stream_of[c]);
          ctx.synchronize(stream_of[c]);
          std::memcpy(host_out[c].data(), p, 8 * out_size[c]);
          ctx.release(dev_out[c]);
          dev_out[c] = -1;
        }
        in.push_back({host_out[c].data(), buckets[c].output_vars()});
      }
      host_out[b].resize(out_size[b]);
      sum_product_log(shape, in, host_out[b].data(), opt.threads);
      if (opt.after_bucket) opt.after_bucket(b, shape, in, host_out[b].data());
      for (int c : bk.children) {
        host_out[c].clear();
        host_out[c].shrink_to_fit();
      }
      ++rep.cpu_buckets;
    }
  }
  const int root = nb - 1;
  double root_value;
  if (on_gpu[root]) {
    double* p = ctx.alloc_host(1);
    host_buffers.push_back(p);
    ctx.download(dev_out[root], p, 1, stream_of[root]);
    ctx.synchronize(stream_of[root]);
    root_value = p[0];
    ctx.release(dev_out[root]);
  } else {
    root_value = host_out[root][0];
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (report) *report = rep;
  return root_value + plan.model.log_constant();
}

}  // namespace kinfer::gpu
