#include "scheduler/calibrate.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/util.hpp"
#include "gpu/policy.hpp"
#include "scheduler/executor.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/staging.hpp"

namespace kinfer::sched {

namespace {

using clock_type = std::chrono::steady_clock;

int draw_card(std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  return u < 0.70 ? 2 : u < 0.78 ? 3 : u < 0.95 ? 4 : 6;  // linkage: binary, alleles, genotypes
}

// A random subset of 0..nv-1 (kept in bucket order) with each position taken w.p. `p`.
std::vector<int> subset(std::mt19937_64& rng, int nv, double p) {
  std::vector<int> s;
  std::bernoulli_distribution take(p);
  for (int i = 0; i < nv; ++i)
    if (take(rng)) s.push_back(i);
  return s;
}

// Log values in [-5, 0): never zeros (a kernel's speed must not depend on skipping them). A
// small xorshift generator: the large tables of the GPU sweep would take seconds otherwise.
void fill(SweepBucket& b, std::mt19937_64& rng) {
  b.data.clear();
  std::uint64_t x = rng() | 1;
  for (const auto& sc : b.scopes) {
    std::int64_t n = 1;
    for (int v : sc) {
      const auto it = std::find(b.shape.vars.begin(), b.shape.vars.end(), v);
      n *= b.shape.card[it - b.shape.vars.begin()];
    }
    std::vector<double> d(n);
    for (double& y : d) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      y = -5.0 * static_cast<double>(x >> 11) * 0x1.0p-53;
    }
    b.data.push_back(std::move(d));
  }
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown CPU";
}

// log2 sizes drawn in rounds that each cover [lo, hi] evenly, so a budget cut short still
// leaves the whole range sampled.
class Strata {
 public:
  Strata(double lo, double hi, std::uint64_t seed) : lo_(lo), hi_(hi), rng_(seed) {}
  double next() {
    if (pending_.empty()) {
      constexpr int k = 8;
      for (int i = 0; i < k; ++i)
        pending_.push_back(lo_ + (hi_ - lo_) *
                                     (i + std::uniform_real_distribution<double>(0, 1)(rng_)) / k);
      std::shuffle(pending_.begin(), pending_.end(), rng_);
    }
    const double x = pending_.back();
    pending_.pop_back();
    return x;
  }

 private:
  double lo_, hi_;
  std::mt19937_64 rng_;
  std::vector<double> pending_;
};

}  // namespace

std::vector<InputTable> SweepBucket::inputs() const {
  std::vector<InputTable> in;
  for (std::size_t i = 0; i < scopes.size(); ++i) in.push_back({data[i].data(), scopes[i]});
  return in;
}

SweepBucket sweep_bucket(std::mt19937_64& rng, double log2_states, double max_log2_input) {
  SweepBucket b;
  double l = 0;
  while (b.shape.card.empty() || l < log2_states - 0.5) {
    int c = draw_card(rng);
    if (!b.shape.card.empty() && l + std::log2(c) > log2_states + 0.5) c = 2;
    b.shape.card.push_back(c);
    l += std::log2(c);
  }
  const int nv = static_cast<int>(b.shape.card.size());
  for (int i = 0; i < nv; ++i) b.shape.vars.push_back(i);
  std::uniform_real_distribution<double> u(0, 1);
  const double kind = u(rng);
  if (kind < 0.1) {
    b.shape.n_marg = nv;  // a root-like bucket: everything summed
  } else if (kind < 0.7) {
    int k = 1;  // usually one or two summed variables
    while (k < nv && u(rng) < 0.45) ++k;
    b.shape.n_marg = std::min(k, nv);
  } else {
    b.shape.n_marg = std::uniform_int_distribution<int>(1, std::min(nv, 12))(rng);
  }
  // Inputs: usually one large message over most variables, sometimes a second one, and small
  // CPT-like tables; every variable in at least one input.
  std::vector<std::vector<int>> pos;
  if (u(rng) < 0.8) pos.push_back(subset(rng, nv, 0.6 + 0.4 * u(rng)));
  if (u(rng) < 0.35) pos.push_back(subset(rng, nv, 0.3 + 0.4 * u(rng)));
  // linkage buckets have few small tables: most often none to two
  const double k = u(rng);
  const int small = k < 0.25   ? 0
                    : k < 0.55 ? 1
                    : k < 0.75 ? 2
                    : k < 0.85 ? 3
                               : std::uniform_int_distribution<int>(4, 8)(rng);
  for (int i = 0; i < small; ++i) {
    const int size = std::uniform_int_distribution<int>(1, std::min(4, nv))(rng);
    std::vector<int> s;
    while (static_cast<int>(s.size()) < size) {
      const int v = std::uniform_int_distribution<int>(0, nv - 1)(rng);
      if (std::find(s.begin(), s.end(), v) == s.end()) s.push_back(v);
    }
    std::sort(s.begin(), s.end());
    pos.push_back(s);
  }
  // cap the size of each input, then cover what no input holds with small tables
  for (auto& s : pos) {
    double size = 0;
    for (int p : s) size += std::log2(b.shape.card[p]);
    while (size > max_log2_input) {
      const int k = std::uniform_int_distribution<int>(0, static_cast<int>(s.size()) - 1)(rng);
      size -= std::log2(b.shape.card[s[k]]);
      s.erase(s.begin() + k);
    }
  }
  std::erase_if(pos, [](const std::vector<int>& s) { return s.empty(); });
  std::vector<char> covered(nv, 0);
  for (const auto& s : pos)
    for (int p : s) covered[p] = 1;
  std::vector<int> extra;
  for (int p = 0; p < nv; ++p)
    if (!covered[p]) {
      extra.push_back(p);
      if (extra.size() == 3) pos.push_back(extra), extra.clear();
    }
  if (!extra.empty()) pos.push_back(extra);
  for (const auto& s : pos) b.scopes.emplace_back(s.begin(), s.end());  // positions are the ids
  fill(b, rng);
  return b;
}

SweepBucket plan_bucket(const Plan& plan, int b, std::mt19937_64& rng) {
  SweepBucket s;
  s.shape = bucket_shape(plan, b);
  s.scopes = bucket_scopes(plan, b);
  fill(s, rng);
  return s;
}

double time_median(const std::function<void()>& run, double min_seconds, int max_reps,
                   double* first) {
  const auto t_first = clock_type::now();
  run();  // warm-up: first-touch pages, caches, the GPU's per-shape tables
  if (first) *first = since(t_first);
  std::vector<double> t;
  double total = 0;
  while (static_cast<int>(t.size()) < max_reps && (t.size() < 1 || total < min_seconds)) {
    const auto t0 = clock_type::now();
    run();
    t.push_back(since(t0));
    total += t.back();
  }
  return median(std::move(t));
}

std::vector<double> time_interleaved(const std::vector<std::function<void()>>& runs,
                                     double budget_seconds, std::vector<double>* first) {
  const std::size_t n = runs.size();
  std::vector<std::vector<double>> t(n);
  double round = 0;
  for (std::size_t i = 0; i < n; ++i) {  // warm-up round
    const auto t0 = clock_type::now();
    runs[i]();
    const double s = since(t0);
    round += s;
    if (first) first->push_back(s);
  }
  // up to 7 timed rounds as the budget allows; at least one
  const int rounds = std::clamp(static_cast<int>(budget_seconds / std::max(round, 1e-9)), 1, 7);
  for (int k = 0; k < rounds; ++k)
    for (std::size_t i = 0; i < n; ++i) {
      const auto t0 = clock_type::now();
      runs[i]();
      t[i].push_back(since(t0));
    }
  std::vector<double> med(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::sort(t[i].begin(), t[i].end());
    med[i] = t[i][t[i].size() / 2];
  }
  return med;
}

std::vector<Sample> measure_cpu(const std::vector<SweepBucket>& buckets, int threads,
                                double budget_seconds) {
  // Each bucket in a loop of its own: interleaving buckets of random sizes predicted the small
  // buckets of real runs 2x too slow (OpenMP workers of the previous large bucket still
  // spinning; docs/performance.md).
  std::vector<Sample> out;
  const auto t0 = clock_type::now();
  for (const SweepBucket& b : buckets) {
    if (since(t0) > budget_seconds && !out.empty()) break;
    const auto in = b.inputs();
    std::vector<double> res(b.shape.output_size());
    out.push_back({bucket_features(b.shape, b.scopes),
                   time_median([&] { sum_product_log(b.shape, in, res.data(), threads); })});
  }
  return out;
}

std::vector<Sample> measure_gpu(const std::vector<SweepBucket>& buckets, gpu::Context& ctx,
                                double budget_seconds, std::vector<double>* first_use) {
  StagingPool pool(ctx);
  std::vector<const SweepBucket*> ok;
  std::vector<std::vector<gpu::DeviceInput>> in;
  std::vector<gpu::Handle> out, handles;
  for (const SweepBucket& b : buckets) {
    // no kernel takes it: the scheduler never puts such a bucket on the GPU
    if (!gpu::describe(b.shape, b.scopes).unsupported.empty()) continue;
    std::vector<gpu::DeviceInput> d;
    for (std::size_t i = 0; i < b.scopes.size(); ++i) {
      const auto n = static_cast<std::int64_t>(b.data[i].size());
      const gpu::Handle h = ctx.alloc(n);
      double* p = pool.take(n);
      std::memcpy(p, b.data[i].data(), 8 * n);
      ctx.upload(h, p, n, 0);
      ctx.synchronize(0);
      pool.give(p);
      d.push_back({h, b.scopes[i]});
      handles.push_back(h);
    }
    out.push_back(ctx.alloc(b.shape.output_size()));
    handles.push_back(out.back());
    in.push_back(std::move(d));
    ok.push_back(&b);
  }
  std::vector<std::function<void()>> runs;
  for (std::size_t i = 0; i < ok.size(); ++i)
    runs.push_back([&, i] {
      ctx.run_bucket(ok[i]->shape, in[i], out[i], 0);
      ctx.synchronize(0);
    });
  std::vector<double> first;
  const std::vector<double> t = time_interleaved(runs, budget_seconds, &first);
  for (gpu::Handle h : handles) ctx.release(h);
  std::vector<Sample> res;
  for (std::size_t i = 0; i < ok.size(); ++i) {
    res.push_back({bucket_features(ok[i]->shape, ok[i]->scopes), t[i]});
    if (first_use) first_use->push_back(std::max(0.0, first[i] - t[i]));
  }
  return res;
}

void measure_transfers(gpu::Context& ctx, TransferModel& h2d, TransferModel& h2d_batch,
                       TransferModel& d2h, TransferModel& pin, double budget_seconds) {
  StagingPool pool(ctx);
  const int xfer = 1 % ctx.num_streams();
  std::vector<std::pair<double, double>> up, batch, down;
  const auto t0 = clock_type::now();
  for (int k = 3; k <= 28 && since(t0) < budget_seconds; ++k) {
    const std::int64_t n = (std::int64_t{1} << k) / 8;
    if (n == 0) continue;
    std::vector<double> host(n, -1.5);
    const gpu::Handle h = ctx.alloc(n);
    // one staged copy, waited for: an intermediate table crossing to the GPU
    up.emplace_back(8.0 * n, time_median(
                                 [&] {
                                   double* p = pool.take(n);
                                   std::memcpy(p, host.data(), 8 * n);
                                   ctx.upload(h, p, n, xfer);
                                   ctx.synchronize(xfer);
                                   pool.give(p);
                                 },
                                 0.02, 9));
    // many copies queued back to back, one wait: the original inputs at the start of a run
    if (k <= 22) {
      constexpr int kBatch = 32;
      std::vector<gpu::Handle> hs;
      for (int i = 0; i < kBatch; ++i) hs.push_back(ctx.alloc(n));
      std::vector<double> block(static_cast<std::size_t>(n) * kBatch, -1.5);
      double* p = pool.take(n * kBatch);
      batch.emplace_back(8.0 * n, time_median(
                                      [&] {
                                        for (int i = 0; i < kBatch; ++i) {
                                          std::memcpy(p + i * n, block.data() + i * n, 8 * n);
                                          ctx.upload(hs[i], p + i * n, n, xfer);
                                        }
                                        ctx.synchronize(xfer);
                                      },
                                      0.02, 9) /
                                      kBatch);
      pool.give(p);
      for (gpu::Handle x : hs) ctx.release(x);
    }
    down.emplace_back(8.0 * n, time_median(
                                   [&] {
                                     double* p = pool.take(n);
                                     ctx.download(h, p, n, 0);
                                     ctx.synchronize(0);
                                     pool.give(p);
                                   },
                                   0.02, 9));
    ctx.release(h);
  }
  // pinning a buffer and freeing it: a download's staging buffer (held to the run's end); sizes
  // above what the context keeps for reuse, so that each one is pinned and freed for real
  std::vector<std::pair<double, double>> pinned;
  for (int k = 25; k <= 27 && since(t0) < 1.5 * budget_seconds; ++k) {
    const std::int64_t n = (std::int64_t{1} << k) / 8;
    pinned.emplace_back(8.0 * n, time_median([&] { ctx.free_host(ctx.alloc_host(n)); }, 0.02, 5));
  }
  h2d = TransferModel::fit(std::move(up));
  h2d_batch = TransferModel::fit(std::move(batch));
  d2h = TransferModel::fit(std::move(down));
  if (!pinned.empty()) pin = TransferModel::fit(std::move(pinned));
}

DispatchCost measure_dispatch(gpu::Context* ctx, int threads, int buckets) {
  // x0 - x1 - ... - xn with random pairwise tables: eliminating along the chain gives one tiny
  // bucket per variable.
  Network net;
  net.kind = "MARKOV";
  net.card.assign(buckets + 1, 2);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> val(0.1, 1.0);
  for (int i = 0; i < buckets; ++i) {
    Factor f;
    f.scope = {i, i + 1};
    for (int k = 0; k < 4; ++k) f.table.push_back(val(rng));
    net.factors.push_back(std::move(f));
  }
  PlanOptions po;
  po.order.heuristic = OrderHeuristic::MinFill;
  const Plan plan = make_plan(net, Evidence{}, po);
  const int nb = static_cast<int>(plan.tree.buckets.size());
  auto extra = [&](Device d) {
    const std::vector<Device> a(nb, d);
    ExecOptions untimed, timed;
    untimed.threads = timed.threads = threads;
    timed.time_buckets = true;
    ExecStats st;
    run_scheduled(plan, a, ctx, untimed, &st);  // warm-up (the GPU builds its kernel tables)
    std::vector<double> t;
    for (int rep = 0; rep < 5; ++rep) {
      run_scheduled(plan, a, ctx, untimed, &st);
      t.push_back(st.seconds);
    }
    std::sort(t.begin(), t.end());
    run_scheduled(plan, a, ctx, timed, &st);
    double kernels = st.h2d_seconds;  // the original inputs' upload is charged separately
    for (double k : st.kernel_seconds) kernels += k;
    return std::max(0.0, (t[t.size() / 2] - kernels) / nb);
  };
  DispatchCost c;
  c.cpu = extra(Device::cpu);
  if (ctx) c.gpu = extra(Device::gpu);
  return c;
}

Profile calibrate(const CalibrateOptions& opt, gpu::Context* ctx, const std::string& gpu_name) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  Profile p;
  p.created = utc_timestamp();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.cpu.threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  p.cpu.name = cpu_name() + " (" + std::to_string(p.cpu.threads) + " threads)";
  const double cpu_share = ctx ? 0.5 : 1.0, gpu_share = 0.4, xfer_share = 0.1;

  // Buckets of the given networks first (at most a third of each budget), then synthetic ones.
  std::mt19937_64 rng(opt.seed);
  std::vector<SweepBucket> real_cpu, real_gpu;
  for (const Plan* plan : opt.networks) {
    const int nb = static_cast<int>(plan->tree.buckets.size());
    // spread over the sizes: sort by state space, take every k-th
    std::vector<int> ids(nb);
    for (int b = 0; b < nb; ++b) ids[b] = b;
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      return plan->tree.buckets[a].log2_states < plan->tree.buckets[b].log2_states;
    });
    const int take = std::min(nb, 40);
    for (int i = 0; i < take; ++i) {
      const int b = ids[static_cast<std::size_t>(i) * nb / take];
      const double l = plan->tree.buckets[b].log2_states;
      if (l <= opt.cpu_max_log2_states) real_cpu.push_back(plan_bucket(*plan, b, rng));
      if (ctx && l <= opt.gpu_max_log2_states) real_gpu.push_back(plan_bucket(*plan, b, rng));
    }
  }
  // Buckets are drawn in batches; on the GPU each bucket of a batch is timed once per round
  // (time_interleaved), as an executor runs it between others.
  constexpr int kBatch = 8;
  say("CPU kernel sweep (" + std::to_string(static_cast<int>(opt.seconds * cpu_share)) + " s)");
  {
    const auto t0 = clock_type::now();
    const double budget = opt.seconds * cpu_share;
    std::vector<Sample> s = measure_cpu(real_cpu, opt.threads, budget / 6);
    Strata strata(0, opt.cpu_max_log2_states, opt.seed + 1);
    std::mt19937_64 r(opt.seed + 1);
    double rate = 0;  // states per second seen so far, to keep each batch within the budget
    while ((since(t0) < budget || s.size() < 30) && since(t0) < 3 * budget) {
      const double left = std::max(budget - since(t0), 0.05);
      std::vector<SweepBucket> batch;
      for (int i = 0; i < kBatch; ++i) {
        double l = strata.next();
        if (rate > 0) l = std::min(l, std::log2(std::max(2.0, rate * left / (4 * kBatch))));
        batch.push_back(sweep_bucket(r, l));
      }
      for (const Sample& x : measure_cpu(batch, opt.threads, 1e9)) {
        rate = std::max(rate, std::exp2(x.f.log2_states) / x.seconds);
        s.push_back(x);
      }
    }
    p.cpu.samples = std::move(s);
    p.cpu.model = RuntimeModel::fit(p.cpu.samples);
  }
  say("executor overhead per bucket");
  const DispatchCost dispatch = measure_dispatch(ctx, opt.threads);
  p.cpu.dispatch = dispatch.cpu;
  if (!ctx) return p;
  p.gpu.dispatch = dispatch.gpu;

  say("GPU kernel sweep (" + std::to_string(static_cast<int>(opt.seconds * gpu_share)) + " s)");
  p.has_gpu = true;
  p.gpu.name = gpu_name;
  p.gpu.memory_bytes = ctx->free_bytes();
  p.gpu_figures = ctx->quick_figures();  // what a profile for a GPU without one is derived by
  {
    const auto t0 = clock_type::now();
    const double budget = opt.seconds * gpu_share;
    std::vector<double> first_use;
    std::vector<Sample> s = measure_gpu(real_gpu, *ctx, budget / 6, &first_use);
    Strata strata(0, opt.gpu_max_log2_states, opt.seed + 2);
    std::mt19937_64 r(opt.seed + 2);
    while ((since(t0) < budget || s.size() < 30) && since(t0) < 3 * budget) {
      std::vector<SweepBucket> batch;
      for (int i = 0; i < kBatch; ++i) batch.push_back(sweep_bucket(r, strata.next(), 26));
      const auto got = measure_gpu(batch, *ctx, 1.0, &first_use);
      s.insert(s.end(), got.begin(), got.end());
    }
    p.gpu.samples = std::move(s);
    p.gpu.model = RuntimeModel::fit(p.gpu.samples);
    p.gpu_kernels = gpu::kKernelGeneration;
    std::sort(first_use.begin(), first_use.end());
    if (!first_use.empty()) p.gpu_first_use = first_use[first_use.size() / 2];
  }
  say("host<->GPU transfers");
  measure_transfers(*ctx, p.h2d, p.h2d_batch, p.d2h, p.pin, opt.seconds * xfer_share);
  return p;
}

}  // namespace kinfer::sched
