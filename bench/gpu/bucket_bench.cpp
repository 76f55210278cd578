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
//   bucket_bench --network linkage_14.uai --plans --out plans.tsv   (no GPU: the launch plans)
//   bucket_bench --network linkage_17.uai --merge --out l17.tsv  (also each bucket as the
//                                       executor merges its small factor inputs: NAME+merge)
//   bucket_bench --network pedigree50.uai --print-shapes 6 --max-memory 60e9 --out shapes.txt
//                                      (no GPU, nothing run: the largest buckets of the plan pe
//                                       would condition, as --shape specs)
//   bucket_bench --shape 'SPEC' --out s.tsv   (one bucket of that shape, random inputs; SPEC as
//                                       gpu/random_bucket.hpp's BucketSpec: CARDS/N_MARG/INPUT...)
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/condition.hpp"
#include "engine/plan.hpp"
#include "gpu/host_run.hpp"
#include "gpu/merge_inputs.hpp"
#include "gpu/policy.hpp"
#include "gpu/random_bucket.hpp"
#include "io/uai.hpp"

using namespace kinfer;
using namespace kinfer::gpu;

namespace {

struct Options {
  bool ceilings = false;
  bool plans = false;
  bool no_f32 = false;
  bool merge = false;
  int cpu_runs = 3;
  std::vector<std::string> configs;
  int random = 0;
  std::string network, out;
  double min_log2 = 12, max_log2 = 28;
  int threads = 0;
  int repeats = 7;
  std::uint64_t seed = 1;
  std::vector<std::string> shapes;
  int print_shapes = 0;
  double max_memory = 0;
  double order_time = 5;
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

// The options of the benchmark's random bucket i: two families, the paper's 2-32 summed
// configurations, and the larger sums of real linkage buckets (up to 4096).
RandomBucketOptions random_options(const Options& o, int i) {
  RandomBucketOptions ro;
  ro.min_log2_states = o.min_log2;
  ro.max_log2_states = o.max_log2;
  ro.zero_fraction = 0.01;
  if (i % 3 == 2) {
    ro.min_marg = 33;
    ro.max_marg = 4096;
  }
  return ro;
}

// The planner options of a --config's KEY=VAL pairs (DeviceLimits' fields, gpu/policy.hpp):
//   direct=0|1  tiles=0|1|force  lanes=FLOOR:TERMS  lean=0|1  lean_two=ITEMS (0: off)
//   lean_chunks=0|1  lean_tiles=0|1  reuse_order=BYTES[:NEAR[:OVER]] (0: off)  mid_rows=N
//   split_terms=N  device_fill=BYTES (0: on the host)
// Throws std::invalid_argument for an unknown key or a malformed value.
PlannerOptions planner_options(const std::vector<std::pair<std::string, std::string>>& kv) {
  const DeviceLimits defaults;
  std::vector<std::function<void(DeviceLimits&)>> steps;
  for (const auto& [key, val] : kv) {
    const char* v = val.c_str();
    auto bad = [&] { return std::invalid_argument("--config: bad value " + key + "=" + val); };
    auto flag = [&](bool DeviceLimits::*field) {
      if (val != "0" && val != "1") throw bad();
      steps.push_back([field, on = val == "1"](DeviceLimits& l) { l.*field = on; });
    };
    auto count = [&](std::int64_t DeviceLimits::*field, std::int64_t least) {
      long long n = 0;
      if (std::sscanf(v, "%lld", &n) != 1 || n < least) throw bad();
      steps.push_back([field, n](DeviceLimits& l) { l.*field = n; });
    };
    if (key == "direct") {
      flag(&DeviceLimits::direct);
    } else if (key == "tiles") {
      if (val == "force")
        steps.push_back(
            [](DeviceLimits& l) { l.tiles = true, l.tile_fill = false, l.tile_min_nf = 1; });
      else
        flag(&DeviceLimits::tiles);
    } else if (key == "lanes") {
      int lo = 0, terms = 0;
      if (std::sscanf(v, "%d:%d", &lo, &terms) != 2 || lo < 1 || lo > 32 || terms < 1) throw bad();
      steps.push_back([lo, terms](DeviceLimits& l) { l.lanes_floor = lo, l.lane_terms = terms; });
    } else if (key == "lean") {
      flag(&DeviceLimits::lean);
    } else if (key == "lean_two") {
      count(&DeviceLimits::lean_two_min_items, 0);
    } else if (key == "lean_chunks") {
      flag(&DeviceLimits::lean_chunks);
    } else if (key == "lean_tiles") {
      flag(&DeviceLimits::lean_tiles);
    } else if (key == "reuse_order") {
      double bytes = 0, over = defaults.reuse_over_rest;
      long long near = defaults.reuse_near;
      const int n = std::sscanf(v, "%lf:%lld:%lf", &bytes, &near, &over);
      if (n < 1 || bytes < 0 || near < 1 || over < 0) throw bad();
      steps.push_back([=](DeviceLimits& l) {
        l.reuse_min_bytes = bytes, l.reuse_near = near, l.reuse_over_rest = over;
      });
    } else if (key == "mid_rows") {
      count(&DeviceLimits::mid_rows_max, 1);
    } else if (key == "split_terms") {
      count(&DeviceLimits::split_min_terms, 1);
    } else if (key == "device_fill") {
      double bytes = -1;
      if (std::sscanf(v, "%lf", &bytes) != 1 || bytes < 0) throw bad();
      steps.push_back([bytes](DeviceLimits& l) { l.device_fill_bytes = bytes; });
    } else {
      throw std::invalid_argument("--config: unknown planner option '" + key + "'");
    }
  }
  return [steps](DeviceLimits& l) {
    for (const auto& step : steps) step(l);
  };
}

// One kernel configuration: a Context made with its planner options, with its own TSV.
struct Config {
  std::string name;
  std::unique_ptr<Context> ctx;
  std::ofstream tsv;
};

// The selector's inputs for a bucket (host plans under default limits on `sms` SMs): the plain
// kernel's lanes, and the cached plan's reuse, resident and launch threads and hit fraction.
std::string plan_features(const BucketShape& shape, std::span<const InputTable> in, int sms) {
  std::vector<std::vector<int>> scopes;
  for (const auto& t : in) scopes.push_back(t.scope);
  const BucketLayout lay = describe(shape, scopes);
  DeviceLimits lim;
  lim.sm_count = sms;
  char buf[256];
  if (!lay.unsupported.empty()) return "nan\tnan\tnan\tnan\tnan\tnan";
  const LaunchPlan p = make_launch_plan(lay, Variant::plain, lim);
  double reuse = NAN, resident = NAN, launch = NAN, hit = NAN, in_mb = 0;
  for (int s = 0; s < lay.nf; ++s) in_mb += 8e-6 * static_cast<double>(lay.in_size[s]);
  try {
    const LaunchPlan c = make_launch_plan(lay, Variant::cached, lim);
    reuse = c.min_reuse;
    resident = c.resident_threads;
    launch = c.launch_threads;
    hit = c.hit_fraction;
  } catch (const std::invalid_argument&) {
  }
  std::snprintf(buf, sizeof buf, "%d\t%g\t%g\t%g\t%g\t%g", 1 << p.lanes_log2, reuse, resident,
                launch, hit, in_mb);
  return buf;
}

// The N largest buckets (by state space) of the plan pe would make for the network under
// --max-memory (conditioned when it does not fit), as --shape specs, without running anything.
int print_shapes(const Options& o) {
  const io::NetworkWithEvidence r = io::read_network_and_evidence(o.network);
  PlanOptions po;
  po.order.time_budget = o.order_time;
  po.max_memory_bytes = o.max_memory;
  po.order_cache_dir = "none";
  const ConditionedPlan cp = make_conditioned_plan(r.net, r.ev, po);
  const Plan& plan = cp.plan;
  std::ofstream out(o.out);
  out << "# " << o.network << ": order 2^" << plan.order.stats.log2_total_state << " states, "
      << cp.cond.slices << " slice(s)\n";
  std::vector<int> idx(plan.tree.buckets.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) {
    return plan.tree.buckets[a].log2_states > plan.tree.buckets[b].log2_states;
  });
  for (int k = 0; k < o.print_shapes && k < static_cast<int>(idx.size()); ++k) {
    const int b = idx[k];
    const BucketShape shape = bucket_shape(plan, b);
    std::vector<std::vector<int>> scopes;
    const Bucket& bk = plan.tree.buckets[b];
    for (int f : bk.factors) scopes.push_back(plan.input_scope[f]);
    for (int c : bk.children) scopes.push_back(plan.tree.buckets[c].output_vars());
    out << "# bucket " << b << ": 2^" << bk.log2_states << " states, output 2^" << bk.log2_output
        << "\n" << bucket_spec(shape, scopes) << "\n";
  }
  return 0;
}

class Bench {
 public:
  Bench(std::vector<Config>& cfgs, const Options& o, const Ceilings& c)
      : cfgs_(cfgs), o_(o), c_(c) {
    for (auto& cf : cfgs_)
      cf.tsv << "source\tbucket\tn_out\tM\tn_in\tnf\tlog2_states\tgflop\tmin_mb\tchoice\thit\t"
                "t_cpu_ms\tt_plain_ms\tt_cached_ms\tt_auto_ms\tt_f32_ms\troof_ms\tgflops_auto\t"
                "gbps_auto\troof_frac_auto\tspeedup_cpu\tmax_rel_diff\tf32_rel_diff\troof2_ms\t"
                "p_lanes\tc_reuse\tc_resident\tc_launch\tc_hit\tvarying_in_mb\twhy\n";
    std::printf("%-6s %-14s %5s %9s %7s %2s %6s %8s %-6s %9s %9s %9s %9s %9s %7s %7s %8s\n",
                "config", "source", "b", "outputs", "M", "in", "log2st", "GFLOP", "choice",
                "cpu_ms", "plain_ms", "cached_ms", "auto_ms", "f32_ms", "roof%", "x_cpu", "diff");
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
    // CPU: the OpenMP kernel, median of up to cpu_runs runs (1 when a run takes over a second)
    std::vector<double> cpu(shape.output_size());
    std::vector<double> t_cpu;
    for (int r = 0; r < std::max(1, o_.cpu_runs); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      sum_product_log(shape, in, cpu.data(), o_.threads);
      t_cpu.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (t_cpu.back() > 1000) break;
    }
    if (cpu_given) cpu = *cpu_given;
    const double tc = median(t_cpu);
    std::vector<std::vector<int>> scopes;
    for (const auto& t : in) scopes.push_back(t.scope);
    const std::string features = plan_features(shape, in, c_.sm_count);
    for (auto& cf : cfgs_) {
      HostRunOptions opt;
      opt.repeats = o_.repeats;
      auto run = [&](Variant v, Precision p, HostRunResult& r) {
        opt.variant = v;
        opt.precision = p;
        try {
          r = run_host_bucket(*cf.ctx, shape, in, opt);
          return true;
        } catch (const std::invalid_argument&) {
          return false;
        }
      };
      HostRunResult plain, cached, autom, f32;
      run(Variant::plain, Precision::f64, plain);
      const bool has_cached = run(Variant::cached, Precision::f64, cached);
      run(Variant::automatic, Precision::f64, autom);
      if (!o_.no_f32) run(Variant::automatic, Precision::f32, f32);
      const KernelChoice k = cf.ctx->choose(shape, scopes);
      int nf = k.varying_inputs;
      const double rate = c_.elem_rate_f64[std::clamp(nf, 1, 8)];
      const double roof_ms = 1e3 * std::max(min_bytes / c_.bandwidth, states / rate);
      const double rate2 = c_.elem_rate_chunked_f64[std::clamp(nf, 1, 8)];
      const double roof2_ms = 1e3 * std::max(min_bytes / c_.bandwidth, states / rate2);
      const double t_auto = autom.ms_median;
      // the largest difference to the CPU over every double variant that ran
      double diff = std::max(rel_diff(autom.out, cpu), rel_diff(plain.out, cpu));
      if (has_cached) diff = std::max(diff, rel_diff(cached.out, cpu));
      const double diff32 = o_.no_f32 ? NAN : rel_diff(f32.out, cpu);
      std::string why = "plain tile " + std::to_string(plain.choice.tile) + "; " + k.why;
      std::replace(why.begin(), why.end(), '\t', ' ');
      cf.tsv << source << '\t' << id << '\t' << shape.output_size() << '\t' << shape.marg_size()
             << '\t' << in.size() << '\t' << nf << '\t' << std::log2(states) << '\t' << flop / 1e9
             << '\t' << min_bytes / 1e6 << '\t' << to_string(k.variant) << '\t' << k.hit_fraction
             << '\t' << tc << '\t' << plain.ms_median << '\t'
             << (has_cached ? cached.ms_median : NAN) << '\t' << t_auto << '\t'
             << (o_.no_f32 ? NAN : f32.ms_median) << '\t' << roof_ms << '\t'
             << flop / (t_auto * 1e6) << '\t' << min_bytes / (t_auto * 1e6) << '\t'
             << roof_ms / t_auto << '\t' << tc / t_auto << '\t' << diff << '\t' << diff32 << '\t'
             << roof2_ms << '\t' << features << '\t' << why << '\n';
      cf.tsv.flush();
      std::printf(
          "%-6s %-14s %5d %9lld %7lld %2zu %6.1f %8.3f %-6s %9.3f %9.4f %9.4f %9.4f %9.4f %6.1f%% "
          "%7.1f %8.1e\n",
          cf.name.c_str(), source.c_str(), id, static_cast<long long>(shape.output_size()),
          static_cast<long long>(shape.marg_size()), in.size(), std::log2(states), flop / 1e9,
          to_string(k.variant), tc, plain.ms_median, has_cached ? cached.ms_median : NAN, t_auto,
          f32.ms_median, 100 * roof_ms / t_auto, tc / t_auto, diff);
      std::fflush(stdout);
    }
  }

 private:
  std::vector<Config>& cfgs_;
  const Options& o_;
  const Ceilings& c_;
};

// Whether the planner enumerates this layout's outputs in another order (gpu::reuse_order).
bool reordered(const BucketLayout& lay) {
  return reuse_order(lay, DeviceLimits{}).stride != lay.stride;
}

// The plain kernel's launch plan of every bucket of a network (default device limits): where
// its loads come from, without a device.
int print_plans(const Options& o) {
  if (!o.shapes.empty()) {  // the --shape specs: the plan the selector makes for each
    std::ofstream tsv(o.out);
    tsv << "shape\tn_out\tM\tn_in\tvariant\tnf\tMi\tMh\tlanes\tsplits\tblocks\tdirect\tlean\t"
           "kernel9\tfixed_terms\ttile\tshared_bytes\treordered\tbuild_ms\n";
    for (std::size_t i = 0; i < o.shapes.size(); ++i) {
      const BucketSpec s = parse_bucket_spec(o.shapes[i]);
      const BucketLayout lay = describe(s.shape, s.scopes);
      tsv << i << '\t' << lay.n_out << '\t' << lay.M << '\t' << lay.n_in << '\t';
      if (!lay.unsupported.empty()) {
        tsv << "unsupported: " << lay.unsupported << '\n';
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      const LaunchPlan p = make_launch_plan(lay, Variant::automatic, DeviceLimits{});
      const double ms =
          1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      tsv << to_string(p.variant) << '\t' << p.nf << '\t' << p.Mi << '\t' << p.Mh << '\t'
          << (1 << p.lanes_log2) << '\t' << p.splits << '\t' << p.blocks << '\t'
          << __builtin_popcount(p.direct_mask) << '\t' << p.lean << '\t' << p.lean_chunks << '\t'
          << p.lean_fixed_terms << '\t' << p.tile << '\t' << p.shared_bytes << '\t'
          << reordered(lay) << '\t' << ms << '\n';
    }
    return 0;
  }
  if (o.random > 0) {  // the random buckets of --random N --seed S (as the benchmark draws them)
    std::ofstream tsv(o.out);
    tsv << "source\tbucket\tn_out\tM\tn_in\tp_lanes\tc_reuse\tc_resident\tc_launch\tc_hit\t"
           "varying_in_mb\tnf\tMi\tdirect\tkernel9\tfixed_terms\n";
    std::mt19937_64 rng(o.seed);
    for (int i = 0; i < o.random; ++i) {
      const RandomBucket b = random_bucket(rng, random_options(o, i));
      tsv << (i % 3 == 2 ? "random-bigM" : "random") << '\t' << i << '\t' << b.shape.output_size()
          << '\t' << b.shape.marg_size() << '\t' << b.scopes.size() << '\t'
          << plan_features(b.shape, b.inputs(), 132) << '\t';
      const BucketLayout lay = describe(b.shape, b.scopes);
      if (!lay.unsupported.empty()) {
        tsv << "\t\t\t\t\n";
        continue;
      }
      const LaunchPlan p = make_launch_plan(lay, Variant::plain, DeviceLimits{});
      tsv << p.nf << '\t' << p.Mi << '\t' << p.direct_mask << '\t' << p.lean_chunks << '\t'
          << p.lean_fixed_terms << '\n';
    }
    return 0;
  }
  const io::NetworkWithEvidence r = io::read_network_and_evidence(o.network);
  PlanOptions po;
  po.order.time_budget = 5;
  const Plan plan = make_plan(r.net, r.ev, po);
  std::ofstream tsv(o.out);
  tsv << "bucket\tlog2_states\tn_out\tM\tn_in\tnf\tMi\tMh\tlanes\tsplits\tblocks\tdirect\t"
         "summed_cards\tinput_summed_vars\tp_lanes\tc_reuse\tc_resident\tc_launch\tc_hit\t"
         "varying_in_mb\tauto_variant\tauto_build_ms\tauto_table_mb\ttile\tinput_sizes\tn_in_merged\t"
         "reordered\n";
  RunOptions ro;
  ro.threads = o.threads;
  ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                        const double*) {
    const double states = static_cast<double>(shape.output_size()) * shape.marg_size();
    if (std::log2(states) < o.min_log2) return;
    std::vector<std::vector<int>> scopes;
    for (const auto& t : in) scopes.push_back(t.scope);
    const BucketLayout lay = describe(shape, scopes);
    if (!lay.unsupported.empty()) return;
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, DeviceLimits{});
    std::string cards, held;
    for (std::size_t i = lay.k; i < lay.card.size(); ++i)
      cards += std::to_string(lay.card[i]) + ",";
    for (int f = 0; f < lay.nf;
         ++f) {  // per varying input: which summed vars (0 = lowest) it holds
      held += "[";
      for (std::size_t i = lay.card.size(); i-- > static_cast<std::size_t>(lay.k);)
        if (lay.stride[f][i] != 0) held += std::to_string(lay.card.size() - 1 - i) + " ";
      held += "]";
    }
    tsv << b << '\t' << std::log2(states) << '\t' << lay.n_out << '\t' << lay.M << '\t' << lay.n_in
        << '\t' << lay.nf << '\t' << p.Mi << '\t' << p.Mh << '\t' << (1 << p.lanes_log2) << '\t'
        << p.splits << '\t' << p.blocks << '\t' << __builtin_popcount(p.direct_mask) << '\t'
        << cards << '\t' << held << '\t' << plan_features(shape, in, 132);
    // what the executor's Context::prepare builds for it: the selector's plan, its host time
    const auto t0 = std::chrono::steady_clock::now();
    const LaunchPlan a = make_launch_plan(lay, Variant::automatic, DeviceLimits{});
    const double ms =
        1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tsv << '\t' << to_string(a.variant) << '\t' << ms << '\t' << a.table_bytes() / 1e6;
    // the plain plan with tiles (tiles=1): R, outputs (o) or summed (s), and how
    // many varying inputs load twice
    DeviceLimits tl;
    tl.tiles = true;
    const LaunchPlan t = make_launch_plan(lay, Variant::plain, tl);
    tsv << '\t' << t.tile << (t.tile > 1 ? (t.tile_summed ? "s:" : "o:") : ":") << t.tile_dep << "/"
        << lay.nf << '\t';
    // each input's entries (log2; f: a factor, c: a child's output) and the kernel inputs
    // after gpu::merge_plan
    std::vector<std::int64_t> st(shape.vars.size());
    const std::size_t nfac = plan.tree.buckets[b].factors.size();
    std::vector<std::vector<int>> fs, cs;
    for (std::size_t i = 0; i < in.size(); ++i) {
      tsv << (i < nfac ? "f" : "c") << std::log2(double(input_strides(shape, in[i].scope, st.data())))
          << ",";
      (i < nfac ? fs : cs).push_back(in[i].scope);
    }
    const MergePlan mp = merge_plan(shape, fs, cs, true);
    tsv << '\t' << mp.scopes.size() + cs.size();
    tsv << '\t' << reordered(lay);
    tsv << '\n';
  };
  run_plan(plan, ro);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"per-bucket GPU kernel benchmark"};
  app.add_flag("--ceilings", o.ceilings, "measure and print the device's ceilings only");
  app.add_flag("--no-f32", o.no_f32, "skip the float runs");
  app.add_flag("--merge", o.merge,
               "network buckets: also time each bucket whose factor inputs the executor merges "
               "(gpu/merge_inputs.hpp), as it merges them (source NAME+merge)");
  app.add_option("--cpu-runs", o.cpu_runs, "timed CPU runs per bucket (median; default 3)");
  app.add_option(
      "--config", o.configs,
      "NAME[:KEY=VAL,...]: a kernel configuration (a Context made with those planner "
      "options: direct=0|1, tiles=0|1|force, lanes=FLOOR:TERMS, lean=0|1, "
      "lean_two=ITEMS, lean_chunks=0|1, lean_tiles=0|1, reuse_order=BYTES[:NEAR[:OVER]], "
      "mid_rows=N, split_terms=N, device_fill=BYTES); each writes DIR/NAME_FILE for "
      "--out DIR/FILE. Repeatable; default: one, kinfer's defaults");
  app.add_flag("--plans", o.plans, "print the plain kernel's launch plan per bucket (no GPU)");
  app.add_option("--random", o.random, "number of random buckets");
  app.add_option("--network", o.network, "UAI network: every bucket of its plan");
  app.add_option("--out", o.out, "TSV output file")->required();
  app.add_option("--min-log2", o.min_log2, "smallest bucket (log2 states)");
  app.add_option("--max-log2", o.max_log2, "largest random bucket (log2 states)");
  app.add_option("--threads", o.threads, "CPU threads (default: all)");
  app.add_option("--repeats", o.repeats, "timed GPU runs per variant (median)");
  app.add_option("--seed", o.seed, "random seed");
  app.add_option("--shape", o.shapes,
                 "CARDS/N_MARG/INPUT/...: a bucket of this shape with random inputs "
                 "(repeatable; --print-shapes writes them)");
  app.add_option("--print-shapes", o.print_shapes,
                 "with --network: the N largest buckets of its (conditioned) plan as --shape "
                 "specs, to --out (no GPU, nothing run)");
  app.add_option("--max-memory", o.max_memory, "--print-shapes: the memory limit, bytes");
  app.add_option("--order-time", o.order_time,
                 "--network: most work of the order search, nominal core-seconds (default 5)");
  CLI11_PARSE(app, argc, argv);
  if (o.plans) return print_plans(o);
  if (o.print_shapes > 0) return print_shapes(o);
  for (const std::string& spec : o.shapes) {  // a malformed spec is said before any device work
    try {
      parse_bucket_spec(spec);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "bucket_bench: %s\n", e.what());
      return 2;
    }
  }
  const DeviceInfo info = probe();
  if (!info.available) {
    std::fprintf(stderr, "no GPU: %s\n", info.why_not.c_str());
    return 77;
  }
  // the configurations: a Context each, with its planner options
  std::vector<Config> cfgs;
  if (o.configs.empty()) o.configs.push_back("");
  for (const std::string& spec : o.configs) {
    Config cf;
    const auto colon = spec.find(':');
    cf.name = spec.substr(0, colon);
    std::vector<std::pair<std::string, std::string>> vars;
    for (std::size_t p = colon; p != std::string::npos && p + 1 < spec.size();) {
      const auto next = spec.find(',', p + 1);
      const std::string kv = spec.substr(p + 1, next == std::string::npos ? next : next - p - 1);
      const auto eq = kv.find('=');
      if (eq != std::string::npos) vars.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
      p = next;
    }
    try {
      cf.ctx = Context::create(0, planner_options(vars));
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "bucket_bench: %s\n", e.what());
      return 2;
    }
    std::string path = o.out;
    if (!cf.name.empty()) {
      const auto slash = path.find_last_of('/');
      const std::size_t at = slash == std::string::npos ? 0 : slash + 1;
      path.insert(at, cf.name + "_");
    }
    cf.tsv.open(path);
    cfgs.push_back(std::move(cf));
  }
  const Ceilings c = measure_ceilings(*cfgs.front().ctx);
  std::printf("# %s: %d SMs, L2 %.0f MB, copy bandwidth %.0f GB/s, CPU threads %d\n",
              info.name.c_str(), c.sm_count, c.l2_bytes / 1e6, c.bandwidth / 1e9,
              o.threads > 0 ? o.threads : omp_get_max_threads());
  std::printf(
      "# element rate of the kernels' arithmetic (G terms/s):\n"
      "#  nf   f64     f32  chunked f64\n");
  for (int nf = 1; nf <= 8; ++nf)
    std::printf("#  %d %7.1f %7.1f %12.1f\n", nf, c.elem_rate_f64[nf] / 1e9,
                c.elem_rate_f32[nf] / 1e9, c.elem_rate_chunked_f64[nf] / 1e9);
  if (o.ceilings) {
    std::ofstream f(o.out);
    f << "device\tsm\tl2_bytes\tbandwidth_bytes_per_s\tnf\telem_rate_f64\telem_rate_f32\t"
         "elem_rate_chunked_f64\n";
    for (int nf = 1; nf <= 8; ++nf)
      f << info.name << '\t' << c.sm_count << '\t' << c.l2_bytes << '\t' << c.bandwidth << '\t'
        << nf << '\t' << c.elem_rate_f64[nf] << '\t' << c.elem_rate_f32[nf] << '\t'
        << c.elem_rate_chunked_f64[nf] << '\n';
    return 0;
  }
  Bench bench(cfgs, o, c);
  if (o.random > 0) {
    std::mt19937_64 rng(o.seed);
    for (int i = 0; i < o.random; ++i) {
      const bool big = i % 3 == 2;
      const RandomBucket b = random_bucket(rng, random_options(o, i));
      const auto in = b.inputs();
      bench.bucket(big ? "random-bigM" : "random", i, b.shape, in, nullptr);
    }
  }
  for (std::size_t i = 0; i < o.shapes.size(); ++i) {
    const RandomBucket b = spec_bucket(o.shapes[i], o.seed + i);
    const auto in = b.inputs();
    bench.bucket("shape", static_cast<int>(i), b.shape, in, nullptr);
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
      if (!o.merge) return;
      // the same bucket with its factor inputs as the executor merges them (gpu/merge_inputs)
      const std::size_t nfac = plan.tree.buckets[b].factors.size();
      std::vector<HostInput> factors;
      std::vector<std::vector<int>> children;
      std::vector<std::int64_t> st(shape.vars.size());
      for (std::size_t i = 0; i < in.size(); ++i)
        if (i < nfac)
          factors.push_back({in[i].data, input_strides(shape, in[i].scope, st.data()), in[i].scope});
        else
          children.push_back(in[i].scope);
      std::vector<std::vector<double>> owned;
      const std::vector<HostInput> merged = merge_inputs(shape, factors, children, owned, true);
      if (merged.size() == factors.size()) return;
      std::vector<InputTable> min;
      for (const HostInput& h : merged) min.push_back({h.data, h.scope});
      for (std::size_t i = nfac; i < in.size(); ++i) min.push_back(in[i]);
      bench.bucket(name + "+merge", b, shape, min, &cpu);
    };
    run_plan(plan, ro);
  }
  return 0;
}
