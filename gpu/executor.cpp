#include "gpu/executor.hpp"

#include "gpu/policy.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace kinfer::gpu {

namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

// A bucket's input factor as the GPU path feeds it: the plan's table, or a product of several
// (merged below, owned by the run).
struct HostInput {
  const double* data;
  std::int64_t size;
  std::vector<int> scope;  // a subsequence of the bucket's vars
};

// The product of two inputs over the union of their scopes, in the bucket's variable order:
// the CPU kernel on the bucket restricted to that union, with nothing summed.
std::vector<double> product_table(const BucketShape& shape, const HostInput& a, const HostInput& b,
                                  std::vector<int>& scope) {
  BucketShape sub;
  for (std::size_t i = 0; i < shape.vars.size(); ++i) {
    const int v = shape.vars[i];
    if (std::find(a.scope.begin(), a.scope.end(), v) != a.scope.end() ||
        std::find(b.scope.begin(), b.scope.end(), v) != b.scope.end())
      sub.vars.push_back(v), sub.card.push_back(shape.card[i]);
  }
  const InputTable in[] = {{a.data, a.scope}, {b.data, b.scope}};
  std::vector<double> out(sub.output_size());
  sum_product_log(sub, in, out.data(), 1);
  scope = sub.vars;
  return out;
}

// The GPU kernels take at most kMaxVarying inputs that vary with the summed variables and
// kMaxInputs in all. A bucket over those limits (many selector chains meeting in one bucket)
// gets its smallest factor inputs multiplied together on the host, as long as the products
// stay small (2^20 entries), instead of running on the CPU. Exact: only the grouping changes.
std::vector<HostInput> fit_inputs(const Plan& plan, int b, const BucketShape& shape,
                                  std::vector<std::vector<double>>& owned) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<HostInput> in;
  for (int f : bk.factors)
    in.push_back({plan.input_data[f].data(), static_cast<std::int64_t>(plan.input_data[f].size()),
                  plan.input_scope[f]});
  const std::vector<int> summed(shape.vars.end() - shape.n_marg, shape.vars.end());
  auto varies = [&](const std::vector<int>& sc) {
    for (int v : sc)
      if (std::find(summed.begin(), summed.end(), v) != summed.end()) return true;
    return false;
  };
  int child_varying = 0;
  for (int c : bk.children) child_varying += varies(plan.tree.buckets[c].output_vars());
  const int n_children = static_cast<int>(bk.children.size());
  while (true) {
    int varying = child_varying;
    for (const HostInput& h : in) varying += varies(h.scope);
    const bool over_varying = varying > kMaxVarying;
    if (!over_varying && static_cast<int>(in.size()) + n_children <= kMaxInputs) break;
    // The pair (both varying when that is the excess) with the smallest product.
    int bi = -1, bj = -1;
    double best = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      for (std::size_t j = i + 1; j < in.size(); ++j) {
        if (over_varying && (!varies(in[i].scope) || !varies(in[j].scope))) continue;
        double entries = 1;
        for (std::size_t v = 0; v < shape.vars.size(); ++v) {
          const int x = shape.vars[v];
          if (std::find(in[i].scope.begin(), in[i].scope.end(), x) != in[i].scope.end() ||
              std::find(in[j].scope.begin(), in[j].scope.end(), x) != in[j].scope.end())
            entries *= shape.card[v];
        }
        if (entries <= double(1 << 20) && (bi < 0 || entries < best))
          bi = i, bj = j, best = entries;
      }
    if (bi < 0) break;  // nothing small enough to merge: the selector says why
    std::vector<int> scope;
    owned.push_back(product_table(shape, in[bi], in[bj], scope));
    in[bi] = {owned.back().data(), static_cast<std::int64_t>(owned.back().size()), scope};
    in.erase(in.begin() + bj);
  }
  return in;
}

}  // namespace

double run_plan_gpu(const Plan& plan, Context& ctx, const RunOptions& opt, DeviceRunReport* report,
                    const DeviceRunOptions& dev) {
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
  std::vector<std::vector<HostInput>> fin(nb);  // GPU buckets' factor inputs (fit_inputs)
  std::vector<std::vector<double>> owned;       // the products fit_inputs made
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
    fin[b] = fit_inputs(plan, b, shape, owned);
    std::vector<std::vector<int>> scopes;
    for (const HostInput& h : fin[b]) scopes.push_back(h.scope);
    for (int c : buckets[b].children) scopes.push_back(buckets[c].output_vars());
    if (fin[b].size() != buckets[b].factors.size())
      spdlog::debug("bucket {}: {} factor inputs multiplied into {} for the GPU kernel", b,
                    buckets[b].factors.size(), fin[b].size());
    std::string why;
    try {
      const KernelChoice k = ctx.choose(shape, scopes);
      spdlog::debug("bucket {}: {} kernel, {} outputs x {} summed: {}", b, to_string(k.variant),
                    out_size[b], shape.marg_size(), k.why);
    } catch (const std::invalid_argument& e) {
      why = std::string("no GPU kernel takes it: ") + e.what();
    }
    double need = 8.0 * static_cast<double>(out_size[b]);
    for (const HostInput& h : fin[b]) need += 8.0 * static_cast<double>(h.size);
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
  std::vector<std::vector<std::int64_t>> staged_at(nb);
  std::int64_t staged = 0;
  for (int b = 0; b < nb; ++b)
    if (on_gpu[b])
      for (const HostInput& h : fin[b]) {
        staged_at[b].push_back(staged);
        staged += h.size;
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
  for (int b = 0; b < nb; ++b)
    for (std::size_t k = 0; k < staged_at[b].size(); ++k)
      std::memcpy(pinned + staged_at[b][k], fin[b][k].data, 8 * fin[b][k].size);

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
      for (std::size_t k = 0; k < fin[b].size(); ++k) {
        const std::int64_t n = fin[b][k].size;
        const Handle h = ctx.alloc(n);
        ctx.upload(h, pinned + staged_at[b][k], n, s);
        in.push_back({h, fin[b][k].scope});
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
