#include "scheduler/calibrate.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>

#include "scheduler/plan_costs.hpp"
#include "scheduler/staging.hpp"

namespace kinfer::sched {

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

constexpr double kMaxLog2Input = 24;  // 128 MiB per input table during the sweep

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

void fill(SweepBucket& b, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> val(-5, 0);
  b.data.clear();
  for (const auto& sc : b.scopes) {
    std::int64_t n = 1;
    for (int v : sc) {
      const auto it = std::find(b.shape.vars.begin(), b.shape.vars.end(), v);
      n *= b.shape.card[it - b.shape.vars.begin()];
    }
    std::vector<double> d(n);
    for (double& x : d) x = val(rng);
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

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
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
        pending_.push_back(lo_ + (hi_ - lo_) * (i + std::uniform_real_distribution<double>(0, 1)(rng_)) / k);
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

SweepBucket sweep_bucket(std::mt19937_64& rng, double log2_states) {
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
  if (u(rng) < 0.1) {
    b.shape.n_marg = nv;  // a root-like bucket: everything summed
  } else {
    int k = 1;
    while (k < nv && u(rng) < 0.45) ++k;
    b.shape.n_marg = std::min(k, nv);
  }
  // Inputs: usually one large message over most variables, sometimes a second one, and small
  // CPT-like tables; every variable in at least one input.
  std::vector<std::vector<int>> pos;
  if (u(rng) < 0.8) pos.push_back(subset(rng, nv, 0.6 + 0.4 * u(rng)));
  if (u(rng) < 0.35) pos.push_back(subset(rng, nv, 0.3 + 0.4 * u(rng)));
  const int small = std::uniform_int_distribution<int>(0, 8)(rng);
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
    while (size > kMaxLog2Input) {
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
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<Sample> measure_cpu(const std::vector<SweepBucket>& buckets, int threads,
                                double budget_seconds) {
  std::vector<Sample> out;
  const auto t0 = clock_type::now();
  for (const SweepBucket& b : buckets) {
    if (since(t0) > budget_seconds) break;
    const auto in = b.inputs();
    std::vector<double> res(b.shape.output_size());
    Sample s;
    s.f = bucket_features(b.shape, b.scopes);
    s.seconds = time_median([&] { sum_product_log(b.shape, in, res.data(), threads); });
    out.push_back(s);
  }
  return out;
}

std::vector<Sample> measure_gpu(const std::vector<SweepBucket>& buckets, gpu::Context& ctx,
                                double budget_seconds, std::vector<double>* first_use) {
  std::vector<Sample> out;
  const auto t0 = clock_type::now();
  StagingPool pool(ctx);
  for (const SweepBucket& b : buckets) {
    if (since(t0) > budget_seconds) break;
    try {
      ctx.choose(b.shape, b.scopes);
    } catch (const std::invalid_argument&) {
      continue;  // no kernel takes it: the scheduler never puts such a bucket on the GPU
    }
    std::vector<gpu::DeviceInput> in;
    std::vector<gpu::Handle> handles;
    for (std::size_t i = 0; i < b.scopes.size(); ++i) {
      const auto n = static_cast<std::int64_t>(b.data[i].size());
      const gpu::Handle h = ctx.alloc(n);
      double* p = pool.take(n);
      std::memcpy(p, b.data[i].data(), 8 * n);
      ctx.upload(h, p, n, 0);
      ctx.synchronize(0);
      pool.give(p);
      in.push_back({h, b.scopes[i]});
      handles.push_back(h);
    }
    const gpu::Handle o = ctx.alloc(b.shape.output_size());
    handles.push_back(o);
    Sample s;
    s.f = bucket_features(b.shape, b.scopes);
    double first = 0;
    s.seconds = time_median([&] {
      ctx.run_bucket(b.shape, in, o, 0);
      ctx.synchronize(0);
    }, 0.05, 7, &first);
    if (first_use) first_use->push_back(std::max(0.0, first - s.seconds));
    for (gpu::Handle h : handles) ctx.release(h);
    out.push_back(s);
  }
  return out;
}

void measure_transfers(gpu::Context& ctx, TransferModel& h2d, TransferModel& d2h,
                       double budget_seconds) {
  StagingPool pool(ctx);
  std::vector<std::pair<double, double>> up, down;
  const auto t0 = clock_type::now();
  for (int k = 3; k <= 28 && since(t0) < budget_seconds; ++k) {
    const std::int64_t n = (std::int64_t{1} << k) / 8;
    if (n == 0) continue;
    std::vector<double> host(n, -1.5);
    const gpu::Handle h = ctx.alloc(n);
    up.emplace_back(8.0 * n, time_median([&] {
                      double* p = pool.take(n);
                      std::memcpy(p, host.data(), 8 * n);
                      ctx.upload(h, p, n, 1 % ctx.num_streams());
                      ctx.synchronize(1 % ctx.num_streams());
                      pool.give(p);
                    }, 0.02, 9));
    down.emplace_back(8.0 * n, time_median([&] {
                        double* p = pool.take(n);
                        ctx.download(h, p, n, 0);
                        ctx.synchronize(0);
                        pool.give(p);
                      }, 0.02, 9));
    ctx.release(h);
  }
  h2d = TransferModel::fit(std::move(up));
  d2h = TransferModel::fit(std::move(down));
}

Profile calibrate(const CalibrateOptions& opt, gpu::Context* ctx, const std::string& gpu_name) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  Profile p;
  p.created = today();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.cpu.threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  p.cpu.name = cpu_name() + " (" + std::to_string(p.cpu.threads) + " threads)";
  const double cpu_share = ctx ? 0.5 : 1.0, gpu_share = 0.4, xfer_share = 0.1;

  // Buckets of the given networks first (capped at a third of the sweep), then synthetic ones.
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
  say("CPU kernel sweep (" + std::to_string(static_cast<int>(opt.seconds * cpu_share)) + " s)");
  {
    // Draw buckets lazily so a short budget never generates tables it will not time.
    const auto t0 = clock_type::now();
    const double budget = opt.seconds * cpu_share;
    std::vector<Sample> s = measure_cpu(real_cpu, opt.threads, budget / 3);
    Strata strata(0, opt.cpu_max_log2_states, opt.seed + 1);
    std::mt19937_64 r(opt.seed + 1);
    double rate = 0;  // states per second seen so far, to keep the next bucket within budget
    while ((since(t0) < budget || s.size() < 30) && since(t0) < 3 * budget) {
      double l = strata.next();
      const double left = std::max(budget - since(t0), 0.05);
      if (rate > 0) l = std::min(l, std::log2(std::max(2.0, rate * left / 8)));
      const auto one = measure_cpu({sweep_bucket(r, l)}, opt.threads, 1e9);
      rate = std::max(rate, std::exp2(one[0].f.log2_states) / one[0].seconds);
      s.push_back(one[0]);
    }
    p.cpu.samples = std::move(s);
    p.cpu.model = RuntimeModel::fit(p.cpu.samples);
  }
  if (!ctx) return p;

  say("GPU kernel sweep (" + std::to_string(static_cast<int>(opt.seconds * gpu_share)) + " s)");
  p.has_gpu = true;
  p.gpu.name = gpu_name;
  p.gpu.memory_bytes = ctx->free_bytes();
  {
    const auto t0 = clock_type::now();
    const double budget = opt.seconds * gpu_share;
    std::vector<double> first_use;
    std::vector<Sample> s = measure_gpu(real_gpu, *ctx, budget / 3, &first_use);
    Strata strata(0, opt.gpu_max_log2_states, opt.seed + 2);
    std::mt19937_64 r(opt.seed + 2);
    while ((since(t0) < budget || s.size() < 30) && since(t0) < 3 * budget) {
      const auto one = measure_gpu({sweep_bucket(r, strata.next())}, *ctx, 1e9, &first_use);
      s.insert(s.end(), one.begin(), one.end());
    }
    p.gpu.samples = std::move(s);
    p.gpu.model = RuntimeModel::fit(p.gpu.samples);
    std::sort(first_use.begin(), first_use.end());
    if (!first_use.empty()) p.gpu_first_use = first_use[first_use.size() / 2];
  }
  say("host<->GPU transfers");
  measure_transfers(*ctx, p.h2d, p.d2h, opt.seconds * xfer_share);
  return p;
}

}  // namespace kinfer::sched
