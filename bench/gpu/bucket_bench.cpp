// Per-bucket GPU benchmark (paper 000 Fig. 5 / paper 001 Fig. 5): for random buckets and for
// every bucket of given networks, times the software-cache kernel, the plain kernel, the
// selector's choice (double), the selector's choice in float, and the OpenMP CPU kernel on the
// same machine; checks the GPU result against the CPU; prints fixed-width columns and writes a
// TSV. Roofline per bucket: max(compulsory bytes / measured bandwidth, terms / measured
// element rate of the kernels' arithmetic), both ceilings measured on the device first.
//
//   bucket_bench --ceilings --out ceilings.tsv
//   bucket_bench --random 300 --out random.tsv [--max-log2 28] [--threads 16]
//   bucket_bench --network linkage_14.uai --out linkage_14.tsv [--min-log2 12]
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "gpu/host_run.hpp"
#include "gpu/random_bucket.hpp"
#include "io/uai.hpp"

using namespace kinfer;
using namespace kinfer::gpu;

namespace {

struct Options {
  bool ceilings = false;
  int random = 0;
  std::string network, out;
  double min_log2 = 12, max_log2 = 28;
  int threads = 0;
  int repeats = 7;
  std::uint64_t seed = 1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    if (std::isnan(a[i])) return INFINITY;
    w = std::max(w, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  }
  return w;
}

class Bench {
 public:
  Bench(Context& ctx, const Options& o, const Ceilings& c) : ctx_(ctx), o_(o), c_(c), tsv_(o.out) {
    tsv_ << "source\tbucket\tn_out\tM\tn_in\tnf\tlog2_states\tgflop\tmin_mb\tchoice\thit\t"
            "t_cpu_ms\tt_plain_ms\tt_cached_ms\tt_auto_ms\tt_f32_ms\troof_ms\tgflops_auto\t"
            "gbps_auto\troof_frac_auto\tspeedup_cpu\tmax_rel_diff\tf32_rel_diff\twhy\n";
    std::printf("%-14s %5s %9s %7s %2s %6s %8s %-6s %9s %9s %9s %9s %9s %7s %7s %8s\n", "source",
                "b", "outputs", "M", "in", "log2st", "GFLOP", "choice", "cpu_ms", "plain_ms",
                "cached_ms", "auto_ms", "f32_ms", "roof%", "x_cpu", "diff");
  }

  void bucket(const std::string& source, int id, const BucketShape& shape,
              std::span<const InputTable> in, const std::vector<double>* cpu_given) {
    const double states = static_cast<double>(shape.output_size()) * shape.marg_size();
    const double flop = states * (in.size() + 2.0);  // as the engine's estimate counts
    double in_bytes = 0;
    for (const auto& t : in) {
      double n = 1;
      for (int v : t.scope)
        for (std::size_t i = 0; i < shape.vars.size(); ++i)
          if (shape.vars[i] == v) n *= shape.card[i];
      in_bytes += 8 * n;
    }
    const double min_bytes = in_bytes + 8.0 * shape.output_size();
    // CPU: the OpenMP kernel, median of up to 3 runs (1 when a run takes over a second)
    std::vector<double> cpu(shape.output_size());
    std::vector<double> t_cpu;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      sum_product_log(shape, in, cpu.data(), o_.threads);
      t_cpu.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (t_cpu.back() > 1000) break;
    }
    if (cpu_given) cpu = *cpu_given;
    HostRunOptions opt;
    opt.repeats = o_.repeats;
    auto run = [&](Variant v, Precision p, HostRunResult& r) {
      opt.variant = v;
      opt.precision = p;
      try {
        r = run_host_bucket(ctx_, shape, in, opt);
        return true;
      } catch (const std::invalid_argument&) {
        return false;
      }
    };
    HostRunResult plain, cached, autom, f32;
    run(Variant::plain, Precision::f64, plain);
    const bool has_cached = run(Variant::cached, Precision::f64, cached);
    run(Variant::automatic, Precision::f64, autom);
    run(Variant::automatic, Precision::f32, f32);
    std::vector<std::vector<int>> scopes;
    for (const auto& t : in) scopes.push_back(t.scope);
    const KernelChoice k = ctx_.choose(shape, scopes);
    int nf = k.varying_inputs;
    const double rate = c_.elem_rate_f64[std::clamp(nf, 1, 8)];
    const double roof_ms = 1e3 * std::max(min_bytes / c_.bandwidth, states / rate);
    const double t_auto = autom.ms_median;
    const double diff = rel_diff(autom.out, cpu);
    const double diff32 = rel_diff(f32.out, cpu);
    std::string why = k.why;
    std::replace(why.begin(), why.end(), '\t', ' ');
    const double tc = median(t_cpu);
    tsv_ << source << '\t' << id << '\t' << shape.output_size() << '\t' << shape.marg_size() << '\t'
         << in.size() << '\t' << nf << '\t' << std::log2(states) << '\t' << flop / 1e9 << '\t'
         << min_bytes / 1e6 << '\t' << to_string(k.variant) << '\t' << k.hit_fraction << '\t' << tc
         << '\t' << plain.ms_median << '\t' << (has_cached ? cached.ms_median : NAN) << '\t'
         << t_auto << '\t' << f32.ms_median << '\t' << roof_ms << '\t' << flop / (t_auto * 1e6)
         << '\t' << min_bytes / (t_auto * 1e6) << '\t' << roof_ms / t_auto << '\t' << tc / t_auto
         << '\t' << diff << '\t' << diff32 << '\t' << why << '\n';
    tsv_.flush();
    std::printf(
        "%-14s %5d %9lld %7lld %2zu %6.1f %8.3f %-6s %9.3f %9.4f %9.4f %9.4f %9.4f %6.1f%% %7.1f "
        "%8.1e\n",
        source.c_str(), id, static_cast<long long>(shape.output_size()),
        static_cast<long long>(shape.marg_size()), in.size(), std::log2(states), flop / 1e9,
        to_string(k.variant), tc, plain.ms_median, has_cached ? cached.ms_median : NAN, t_auto,
        f32.ms_median, 100 * roof_ms / t_auto, tc / t_auto, diff);
    std::fflush(stdout);
  }

 private:
  Context& ctx_;
  const Options& o_;
  const Ceilings& c_;
  std::ofstream tsv_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"per-bucket GPU kernel benchmark"};
  app.add_flag("--ceilings", o.ceilings, "measure and print the device's ceilings only");
  app.add_option("--random", o.random, "number of random buckets");
  app.add_option("--network", o.network, "UAI network: every bucket of its plan");
  app.add_option("--out", o.out, "TSV output file")->required();
  app.add_option("--min-log2", o.min_log2, "smallest bucket (log2 states)");
  app.add_option("--max-log2", o.max_log2, "largest random bucket (log2 states)");
  app.add_option("--threads", o.threads, "CPU threads (default: all)");
  app.add_option("--repeats", o.repeats, "timed GPU runs per variant (median)");
  app.add_option("--seed", o.seed, "random seed");
  CLI11_PARSE(app, argc, argv);
  const DeviceInfo info = probe();
  if (!info.available) {
    std::fprintf(stderr, "no GPU: %s\n", info.why_not.c_str());
    return 77;
  }
  auto ctx = Context::create();
  const Ceilings c = measure_ceilings(*ctx);
  std::printf("# %s: %d SMs, L2 %.0f MB, copy bandwidth %.0f GB/s, CPU threads %d\n",
              info.name.c_str(), c.sm_count, c.l2_bytes / 1e6, c.bandwidth / 1e9,
              o.threads > 0 ? o.threads : omp_get_max_threads());
  std::printf("# element rate of the kernels' arithmetic (G terms/s):\n#  nf   f64     f32\n");
  for (int nf = 1; nf <= 8; ++nf)
    std::printf("#  %d %7.1f %7.1f\n", nf, c.elem_rate_f64[nf] / 1e9, c.elem_rate_f32[nf] / 1e9);
  if (o.ceilings) {
    std::ofstream f(o.out);
    f << "device\tsm\tl2_bytes\tbandwidth_bytes_per_s\tnf\telem_rate_f64\telem_rate_f32\n";
    for (int nf = 1; nf <= 8; ++nf)
      f << info.name << '\t' << c.sm_count << '\t' << c.l2_bytes << '\t' << c.bandwidth << '\t'
        << nf << '\t' << c.elem_rate_f64[nf] << '\t' << c.elem_rate_f32[nf] << '\n';
    return 0;
  }
  Bench bench(*ctx, o, c);
  if (o.random > 0) {
    std::mt19937_64 rng(o.seed);
    for (int i = 0; i < o.random; ++i) {
      RandomBucketOptions ro;
      ro.min_log2_states = o.min_log2;
      ro.max_log2_states = o.max_log2;
      ro.zero_fraction = 0.01;
      // two families: the paper's 2-32 summed configurations, and the larger sums of real
      // linkage buckets (up to 4096)
      const bool big = i % 3 == 2;
      if (big) {
        ro.min_marg = 33;
        ro.max_marg = 4096;
      }
      const RandomBucket b = random_bucket(rng, ro);
      const auto in = b.inputs();
      bench.bucket(big ? "random-bigM" : "random", i, b.shape, in, nullptr);
    }
  }
  if (!o.network.empty()) {
    const io::NetworkWithEvidence r = io::read_network_and_evidence(o.network);
    PlanOptions po;
    po.order.time_budget = 5;
    const Plan plan = make_plan(r.net, r.ev, po);
    std::string name = o.network.substr(o.network.find_last_of('/') + 1);
    name = name.substr(0, name.find('.'));
    RunOptions ro;
    ro.threads = o.threads;
    ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                          const double* out) {
      const double states = static_cast<double>(shape.output_size()) * shape.marg_size();
      if (std::log2(states) < o.min_log2) return;
      const std::vector<double> cpu(out, out + shape.output_size());
      bench.bucket(name, b, shape, in, &cpu);
    };
    run_plan(plan, ro);
  }
  return 0;
}
