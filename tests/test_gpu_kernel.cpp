// Cross-backend test: buckets on the GPU against the CPU kernel, output poisoned (NaN) before
// every run. Random buckets in the ranges of paper 000 section 7.2.2, large summed ranges (the
// split path), every bucket of the shared UAI networks, and those networks end to end on the
// GPU against REFERENCES.tsv. Without a usable GPU the program exits 77 (meson: SKIP).
//
// Tolerances (stated, per output value v, both backends in the log domain):
//   double: |gpu - cpu| <= 1e-11 * max(1, |v|)  (same exp polynomial; only summation order
//           differs, so the difference is a few ulps of the accumulated sums)
//   float:  |gpu - cpu| <= 2e-5 * max(1, |v|)   (inputs rounded to float, ex2.approx)
// Scale the number of random buckets with KINFER_GPU_TEST_SCALE (default 1; e.g. 0.05 under
// compute-sanitizer).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include <unistd.h>

#include "engine/plan.hpp"
#include "gpu/detail/nvml_list.hpp"
#include "gpu/device_api.hpp"
#include "gpu/host_run.hpp"
#include "gpu/policy.hpp"
#include "gpu/random_bucket.hpp"
#include "io/uai.hpp"
#include "scheduler/profile.hpp"
#include "scheduler/runner.hpp"
#include "tests/support.hpp"

using namespace kinfer;
using namespace kinfer::gpu;
using kinfer::test::data_dir;
using kinfer::test::uai_network_path;
namespace fs = std::filesystem;

namespace {

gpu::Context& context() {
  static std::unique_ptr<gpu::Context> ctx = gpu::Context::create();
  return *ctx;
}

double scale() {
  const char* s = std::getenv("KINFER_GPU_TEST_SCALE");
  return s ? std::atof(s) : 1.0;
}

struct Compare {
  double worst = 0;    // largest |gpu - cpu| / max(1, |cpu|)
  long unwritten = 0;  // NaN left in the output (poison)
  long inf_mismatch = 0;
};

Compare compare(const std::vector<double>& gpu, const std::vector<double>& cpu) {
  Compare c;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(gpu[i])) {
      ++c.unwritten;
    } else if (std::isinf(gpu[i]) || std::isinf(cpu[i])) {
      c.inf_mismatch += gpu[i] != cpu[i];
    } else {
      c.worst = std::max(c.worst, std::abs(gpu[i] - cpu[i]) / std::max(1.0, std::abs(cpu[i])));
    }
  }
  return c;
}

std::vector<double> cpu_result(const BucketShape& shape, std::span<const InputTable> in) {
  std::vector<double> out(shape.output_size());
  sum_product_log(shape, in, out.data());
  return out;
}

// Returns the plan's tile (0 when the variant declined the bucket).
int check_bucket(const RandomBucket& b, Variant v, Precision prec, double tol, Compare* total,
                 gpu::Context& ctx = context()) {
  const auto in = b.inputs();
  const std::vector<double> cpu = cpu_result(b.shape, in);
  HostRunOptions opt;
  opt.variant = v;
  opt.precision = prec;
  HostRunResult r;
  try {
    r = run_host_bucket(ctx, b.shape, in, opt);
  } catch (const std::invalid_argument&) {
    REQUIRE(v == Variant::cached);  // only the cached variant may decline a bucket
    return 0;
  }
  const Compare c = compare(r.out, cpu);
  INFO(to_string(r.choice.variant)
       << " " << (prec == Precision::f64 ? "f64" : "f32") << ": " << b.shape.output_size()
       << " outputs x " << b.shape.marg_size() << " summed, " << b.scopes.size()
       << " inputs, lanes " << r.choice.lanes << ", splits " << r.choice.splits << ", pages/block "
       << r.choice.pages_per_block << ", tile " << r.choice.tile);
  REQUIRE(c.unwritten == 0);
  REQUIRE(c.inf_mismatch == 0);
  REQUIRE(c.worst <= tol);
  total->worst = std::max(total->worst, c.worst);
  return r.choice.tile;
}

}  // namespace

int main(int argc, char** argv) {
  const DeviceInfo info = probe();
  if (!info.available) {
    std::printf("SKIP: no GPU: %s\n", info.why_not.c_str());
    return 77;
  }
  std::printf("GPU: %s\n", info.name.c_str());
  return Catch::Session().run(argc, argv);
}

// The GPU list read through NVML (no driver start) is the runtime's: the same devices in the same
// order, and memory within 1% (a plan's device budget is 90% of it: the rest is headroom).
TEST_CASE("GpuKernel.NvmlListMatchesRuntime", "[gpu]") {
  const auto listed = kinfer::gpu::detail::list_by_nvml(0);
  INFO("NVML (libnvidia-ml.so.1) must list the devices on a machine with the NVIDIA driver");
  REQUIRE(listed.has_value());
  const DeviceInfo runtime = kinfer::gpu::detail::probe_runtime();
  REQUIRE(runtime.available);
  REQUIRE(listed->count == runtime.count);
  REQUIRE(listed->devices.size() == runtime.devices.size());
  for (std::size_t d = 0; d < runtime.devices.size(); ++d) {
    const double a = listed->devices[d].memory_bytes, b = runtime.devices[d].memory_bytes;
    std::printf("GPU %zu: NVML %s %.0f bytes, runtime %s %.0f bytes (%+.3f%%)\n", d,
                listed->devices[d].name.c_str(), a, runtime.devices[d].name.c_str(), b,
                100 * (a - b) / b);
    CHECK(listed->devices[d].name == runtime.devices[d].name);
    CHECK(std::abs(a - b) <= 0.01 * b);
  }
}

TEST_CASE("GpuKernel.RandomBucketsMatchCpu", "[gpu]") {
  std::mt19937_64 rng(2024);
  RandomBucketOptions o;  // paper 000 section 7.2.2 ranges
  o.max_log2_states = 20;
  const int n = std::max(20, static_cast<int>(3000 * scale()));
  Compare f64, f32;
  for (int i = 0; i < n; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    INFO("random bucket " << i);
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::cached, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64);
    if (i % 3 == 0) check_bucket(b, Variant::automatic, Precision::f32, 2e-5, &f32);
  }
  std::printf("random buckets: %d, largest relative difference f64 %.3g, f32 %.3g\n", n, f64.worst,
              f32.worst);
}

TEST_CASE("GpuKernel.LargeSummedRangesMatchCpu", "[gpu]") {
  // few outputs and up to millions of summed configurations: lanes, splits and their combine
  std::mt19937_64 rng(77);
  RandomBucketOptions o;
  o.min_log2_states = 14;
  o.max_log2_states = 23;
  o.min_marg = 1000;
  o.max_marg = 4000000;
  o.max_functions = 6;
  const int n = std::max(5, static_cast<int>(150 * scale()));
  Compare f64;
  for (int i = 0; i < n; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    INFO("large-sum bucket " << i);
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::cached, Precision::f64, 1e-11, &f64);
  }
  std::printf("large-sum buckets: %d, largest relative difference %.3g\n", n, f64.worst);
}

TEST_CASE("GpuKernel.ManyInputsMatchCpu", "[gpu]") {
  // 9-16 inputs varying with the summed variables (kernels padded to 12/16 with a zero table)
  // and up to 60 inputs in all
  std::mt19937_64 rng(91);
  RandomBucketOptions o;
  o.min_log2_states = 8;
  o.max_log2_states = 18;
  o.min_functions = 10;
  o.max_card = 3;
  const int n = std::max(10, static_cast<int>(200 * scale()));
  Compare f64;
  int over8 = 0, tested = 0;
  for (int i = 0; i < n; ++i) {
    o.max_functions = i % 3 == 0 ? 50 : 18;
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    INFO("many-input bucket " << i << ": " << lay.n_in << " inputs, " << lay.nf << " varying");
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64);
    if (i % 4 == 0) check_bucket(b, Variant::automatic, Precision::f32, 2e-5, &f64);
    over8 += lay.nf > 8;
    ++tested;
  }
  std::printf(
      "many-input buckets: %d (%d with more than 8 varying), largest relative difference %.3g\n",
      tested, over8, f64.worst);
  CHECK(over8 > 0);
}

TEST_CASE("GpuKernel.KernelVariantsMatchCpu", "[gpu]") {
  // the planner options of DeviceLimits besides the default (direct inputs, lanes 4:64): the
  // offset table for every input, and other lanes per output (lanes_floor:lane_terms 32:16 is
  // the rule before device call 4, 1:256 gives few lanes, run-time G included)
  struct Setting {
    const char* name;
    gpu::PlannerOptions planner;
  };
  const Setting variants[] = {
      {"direct off", [](DeviceLimits& l) { l.direct = false; }},
      {"lanes 32:16", [](DeviceLimits& l) { l.lanes_floor = 32, l.lane_terms = 16; }},
      {"lanes 1:256", [](DeviceLimits& l) { l.lanes_floor = 1, l.lane_terms = 256; }},
      // no tiles (the default tiles 2+ varying inputs)
      {"tiles off", [](DeviceLimits& l) { l.tiles = false; }},
      // tiles of 2, 1+ inputs, outputs even where the device idles
      {"tiles forced", [](DeviceLimits& l) { l.tile_fill = false, l.tile_min_nf = 1; }},
      // one-lane plans (M <= 16, <= 3 varying) in the general plain kernel, not the one compiled
      // for one lane
      {"lean off", [](DeviceLimits& l) { l.lean = false; }},
      // every one-lane plan two outputs per thread
      {"lean two from 1", [](DeviceLimits& l) { l.lean_two_min_items = 1; }},
      // one-lane plans in the plain kernel compiled for one lane, not the short-sum kernel
      {"lean chunks off", [](DeviceLimits& l) { l.lean_chunks = false; }},
      // outputs reordered for the largest input in every plan
      {"reuse order everywhere",
       [](DeviceLimits& l) { l.reuse_min_bytes = 1, l.reuse_near = 1, l.reuse_over_rest = 0; }},
      // every plain plan's page offsets filled by the device
      {"device fill from 1 byte", [](DeviceLimits& l) { l.device_fill_bytes = 1; }}};
  int direct = 0, buckets = 0, tiled = 0, lean = 0, two = 0, k9 = 0, k9_tiled = 0;
  for (const Setting& v : variants) {
    const std::unique_ptr<gpu::Context> ctx = gpu::Context::create(0, v.planner);
    std::mt19937_64 rng(4242);
    const int n = std::max(24, static_cast<int>(600 * scale()));
    Compare f64;
    for (int i = 0; i < n; ++i) {
      RandomBucketOptions o;
      if (i % 3 == 2) {  // few outputs, large sums: lanes, splits, the chunk remainders
        o.min_log2_states = 14;
        o.max_log2_states = 22;
        o.min_marg = 100;
        o.max_marg = 1000000;
        o.max_functions = 6;
      } else {
        o.max_log2_states = 20;
      }
      const RandomBucket b = random_bucket(rng, o);
      INFO(v.name << ", bucket " << i);
      tiled += check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64, *ctx) > 1;
      check_bucket(b, Variant::cached, Precision::f64, 1e-11, &f64, *ctx);
      check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64, *ctx);
      if (i % 4 == 0) check_bucket(b, Variant::automatic, Precision::f32, 2e-5, &f64, *ctx);
      const BucketLayout lay = describe(b.shape, b.scopes);
      if (lay.unsupported.empty()) {
        const LaunchPlan plain = make_launch_plan(lay, Variant::plain, DeviceLimits{});
        direct += plain.direct_mask != 0;
        lean += plain.lean;  // on by default
        // the short-sum kernel takes them by default (1-3 varying inputs, rows of 4 or 8 columns)
        k9 += plain.lean_chunks;
        DeviceLimits every;  // two outputs per thread from one item on, as the setting above
        every.lean_two_min_items = 1;
        two += make_launch_plan(lay, Variant::plain, every).outs == 2;
        DeviceLimits forced;  // as "tiles forced": the short-sum kernel's tile on small plans too
        forced.tile_fill = false;
        forced.tile_min_nf = 1;
        k9_tiled += make_launch_plan(lay, Variant::plain, forced).short_sum_tile;
      }
      ++buckets;
    }
    std::printf("%s: %d buckets, largest relative difference %.3g\n", v.name, n, f64.worst);
  }
  std::printf(
      "kernel variants: %d of %d buckets have direct inputs (default limits), %d plain plans "
      "tiled, %d one-lane plans (%d in the short-sum kernel), %d of them with two outputs per "
      "thread when "
      "forced, %d with the short-sum kernel's tile of two outputs when tiles are forced\n",
      direct, buckets, tiled, lean, k9, two, k9_tiled);
  CHECK(direct > 0);
  CHECK(tiled > 0);
  CHECK(lean > 0);
  CHECK(k9 > 0);
  CHECK(two > 0);
}

TEST_CASE("GpuKernel.ShortSumTileMatchesCpu", "[gpu]") {
  // The short-sum kernel's tile of two outputs (one-lane plans, terms compiled in, direct inputs, a
  // binary output variable some varying input lacks) on random small buckets of binary and ternary
  // variables, with tiles forced (tiles where the device would idle too), in the plain variant
  // and as the selector runs them.
  const auto force_tiles = [](DeviceLimits& l) { l.tile_fill = false, l.tile_min_nf = 1; };
  const std::unique_ptr<gpu::Context> ctx = gpu::Context::create(0, force_tiles);
  DeviceLimits forced;
  force_tiles(forced);
  std::mt19937_64 rng(4711);
  const int want = std::max(6, static_cast<int>(60 * scale()));
  int tiled = 0, two_dep = 0;
  Compare f64;
  for (int draws = 0; draws < 20000 && tiled < want; ++draws) {
    RandomBucketOptions o;
    o.max_log2_states = 18;
    o.max_card = 3;
    o.min_functions = 2;
    o.max_functions = 4;
    o.max_marg = 8;
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, forced);
    if (!p.short_sum_tile) continue;
    INFO("draw " << draws << ": " << p.nf << " varying, " << p.tile_dep << " holding the tile, M "
                 << p.M);
    REQUIRE(check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64, *ctx) == 2);
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64, *ctx);
    ++tiled;
    two_dep += p.tile_dep == 2;
  }
  std::printf(
      "the short-sum kernel's tile: %d buckets (%d with two inputs holding the tile variable), "
      "largest "
      "relative difference %.3g\n",
      tiled, two_dep, f64.worst);
  CHECK(tiled == want);
  CHECK(two_dep > 0);
}

TEST_CASE("GpuKernel.ShortSumCasesMatchCpu", "[gpu]") {
  // The short-sum kernel's four compiled families (every varying input direct or not, output rows
  // of 4 or 8 columns) each on several random one-lane buckets (up to 7 inputs, 2-16 summed
  // configurations), in the plain variant and as the selector runs them.
  std::mt19937_64 rng(909);
  int fam[2][2] = {{0, 0}, {0, 0}};
  const int want = std::max(4, static_cast<int>(40 * scale()));
  Compare f64;
  for (int draws = 0; draws < 5000; ++draws) {
    RandomBucketOptions o;
    o.max_log2_states = 16;
    o.max_marg = 16;
    o.max_functions = 7;
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, DeviceLimits{});
    if (!p.lean_chunks) continue;
    int& n = fam[p.direct_mask == (1u << p.nf) - 1][p.nip == 8];
    if (n >= want) continue;
    INFO("draw " << draws << ": " << p.nf << " varying, direct mask " << p.direct_mask << ", rows of "
                 << p.nip << ", M " << p.M);
    check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64);
    ++n;
    if (fam[0][0] >= want && fam[0][1] >= want && fam[1][0] >= want && fam[1][1] >= want) break;
  }
  std::printf(
      "short-sum kernel: mixed/4 %d, mixed/8 %d, direct/4 %d, direct/8 %d buckets, largest "
      "relative difference %.3g\n",
      fam[0][0], fam[0][1], fam[1][0], fam[1][1], f64.worst);
  CHECK(fam[0][0] == want);
  CHECK(fam[0][1] == want);
  CHECK(fam[1][0] == want);
  CHECK(fam[1][1] == want);
}

TEST_CASE("GpuKernel.ShortSumFixedTermsMatchCpu", "[gpu]") {
  // The short-sum kernel compiled for 2, 3, 4, 6 or 8 terms (the knockout: one exp per losing
  // term), every varying input direct or not (not: M = 4, 6, 8 only; 2 or 3 terms are one summed
  // variable, held last), rows of 4 or 8, on random one-lane buckets with many -inf entries
  // (outputs whose terms are all -inf, or all but one), in the plain variant and as the selector
  // runs them.
  std::mt19937_64 rng(2311);
  const auto& terms = kLeanFixedTerms;
  constexpr int n_terms = static_cast<int>(std::size(kLeanFixedTerms));
  int fam[n_terms][2][2] = {};  // [terms][all direct][rows of 8]
  const int want = std::max(3, static_cast<int>(12 * scale()));
  Compare f64;
  long inf_outputs = 0;
  auto done = [&] {
    for (int m = 0; m < n_terms; ++m)
      for (int d = terms[m] <= 3; d < 2; ++d)
        for (int n : fam[m][d])
          if (n < want) return false;
    return true;
  };
  for (int draws = 0; draws < 60000 && !done(); ++draws) {
    RandomBucketOptions o;
    o.max_log2_states = 16;
    o.min_marg = 2;
    o.max_marg = 8;
    o.max_functions = 7;
    o.zero_fraction = draws % 2 ? 0.3 : 0.03;
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, DeviceLimits{});
    if (!p.lean_fixed_terms) continue;
    const int m = static_cast<int>(std::find(terms, terms + n_terms, p.Mi) - terms);
    REQUIRE(m < n_terms);
    int& n = fam[m][p.direct_mask == (1u << p.nf) - 1][p.nip == 8];
    if (n >= want) continue;
    INFO("draw " << draws << ": " << p.nf << " varying, direct mask " << p.direct_mask << ", M "
                 << p.M << ", rows of " << p.nip);
    check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64);
    for (double v : cpu_result(b.shape, b.inputs())) inf_outputs += std::isinf(v);
    ++n;
  }
  std::printf(
      "short-sum kernel, fixed terms (want %d a family; M = 2, 3, 4, 6, 8 x mixed/4, mixed/8, "
      "direct/4, direct/8):",
      want);
  for (auto& m : fam) std::printf(" [%d %d %d %d]", m[0][0], m[0][1], m[1][0], m[1][1]);
  std::printf(" (%ld outputs -inf), largest relative difference %.3g\n", inf_outputs, f64.worst);
  CHECK(done());
  CHECK(inf_outputs > 0);
}

TEST_CASE("GpuKernel.MaxProductMatchesCpu", "[gpu]") {
  // Max-product buckets (BucketShape::maximise, the MPE's upward pass) through every kernel
  // family: random buckets as in the tests above (general, large summed ranges with splits, few
  // summed configurations for the short-sum kernel and its fixed terms, tiles forced), with
  // -inf entries, against the CPU's max_product_log, in every variant.
  const auto force_tiles = [](DeviceLimits& l) { l.tile_fill = false, l.tile_min_nf = 1; };
  const std::unique_ptr<gpu::Context> tiles = gpu::Context::create(0, force_tiles);
  std::mt19937_64 rng(6151);
  const int n = std::max(40, static_cast<int>(600 * scale()));
  Compare f64;
  int split = 0, fixed_terms = 0, chunks = 0, tiled = 0, cached = 0, inf_outputs = 0;
  for (int i = 0; i < n; ++i) {
    RandomBucketOptions o;
    switch (i % 4) {
      case 0:
        o.max_log2_states = 20;
        break;
      case 1:  // few outputs, long sums: lanes and splits
        o.min_log2_states = 14;
        o.max_log2_states = 22;
        o.min_marg = 1000;
        o.max_marg = 2000000;
        o.max_functions = 6;
        break;
      default:  // short sums: the short-sum kernel, its fixed terms and tiles
        o.max_log2_states = 16;
        o.max_card = 3;
        o.min_marg = 2;
        o.max_marg = 8;
        o.max_functions = 7;
        break;
    }
    o.zero_fraction = i % 2 ? 0.3 : 0.03;
    RandomBucket b = random_bucket(rng, o);
    b.shape.maximise = true;
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, DeviceLimits{});
    split += p.splits > 1;
    fixed_terms += p.lean_fixed_terms;
    chunks += p.lean_chunks;
    INFO("max-product bucket " << i << ": " << b.shape.output_size() << " outputs x "
                               << b.shape.marg_size());
    check_bucket(b, Variant::automatic, Precision::f64, 1e-12, &f64);
    check_bucket(b, Variant::plain, Precision::f64, 1e-12, &f64);
    cached += check_bucket(b, Variant::cached, Precision::f64, 1e-12, &f64) != 0;
    if (i % 4 >= 2) tiled += check_bucket(b, Variant::plain, Precision::f64, 1e-12, &f64, *tiles) == 2;
    for (double v : cpu_result(b.shape, b.inputs())) inf_outputs += std::isinf(v);
  }
  std::printf(
      "max-product buckets: %d (%d split, %d short-sum fixed terms, %d short-sum chunks, %d tiled, "
      "%d cached; %d outputs -inf), largest relative difference %.3g\n",
      n, split, fixed_terms, chunks, tiled, cached, inf_outputs, f64.worst);
  CHECK(split > 0);
  CHECK(fixed_terms > 0);
  CHECK(chunks > 0);
  CHECK(tiled > 0);
  CHECK(inf_outputs > 0);
}

TEST_CASE("GpuKernel.NothingVariesWithTheSumMatchesCpu", "[gpu]") {
  // no input holds a summed variable (the plain kernel's NF = 0 case: every term is the
  // constant part, counted): outputs over vars 0-2, vars 3-4 summed (6 and 40 values), inputs
  // over output variables only, some entries -inf
  std::mt19937_64 rng(7);
  for (const int outs : {1, 3}) {
    RandomBucket b;
    b.shape.vars = {0, 1, 2, 3, 4};
    b.shape.card = {outs, 5, 3, 6, 40};
    b.shape.n_marg = 2;
    b.scopes = {{0, 1}, {1, 2}, {2}};
    for (const auto& sc : b.scopes) {
      std::int64_t n = 1;
      for (int v : sc) n *= b.shape.card[v];
      std::vector<double> d(n);
      for (auto& x : d)
        x = rng() % 10 == 0 ? -INFINITY : std::uniform_real_distribution<double>(-30, 5)(rng);
      b.data.push_back(std::move(d));
    }
    Compare f64;
    INFO("outputs " << b.shape.output_size());
    check_bucket(b, Variant::plain, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::automatic, Precision::f64, 1e-11, &f64);
    check_bucket(b, Variant::automatic, Precision::f32, 2e-5, &f64);
    std::printf("no input varies with the sum (%lld outputs): largest relative difference %.3g\n",
                static_cast<long long>(b.shape.output_size()), f64.worst);
  }
}

TEST_CASE("GpuKernel.FoldPermuteDivideMatchHost", "[gpu]") {
  // Context::fold, permute and divide against a loop over the child's entries, some entries -inf
  // on both sides; exact (one add or subtract per entry). Even rounds: up to 14 variables of 1-5
  // values, a random subset in the factor (the others stride 0), runs of them in the child's
  // order, rotated or shuffled. Odd rounds, transposes (the tiled kernel): the child's last
  // variable and another, j, of 17-70 values each, j the factor's last. Rounds from 60 on, as the
  // marginals' downward pass lays inputs out (short dimensions, the factor's innermost ones far
  // from the child's last): 12-20 variables of two values (two of three, some rounds), the factor's
  // order the child's shuffled or rotated, some variables left out of the factor in the even ones;
  // from 90 on, 16-23 such variables, the factor's order the child's cut into runs of 1-9
  // variables put in a random order (long merged dimensions that the set-of-dimensions tiles
  // split, and low dimensions many).
  std::mt19937_64 rng(20261201);
  gpu::Context& ctx = context();
  const auto values = [&](int lo, int n) { return lo + static_cast<int>(rng() % n); };
  for (int round = 0; round < 120; ++round) {
    const bool runs = round >= 90;
    const bool layout = round >= 60;
    const bool transpose = !layout && round % 2 == 1;
    const int nv = runs        ? values(16, 8)
                   : layout    ? values(12, 9)
                   : transpose ? values(2, 4)
                               : values(1, 14);
    std::vector<int> card(nv);
    for (int& c : card) c = layout ? 2 : values(1, 5);
    if (layout && round % 3 == 0) card[rng() % nv] = 3, card[rng() % nv] = 3;
    const int j = transpose ? static_cast<int>(rng() % (nv - 1)) : -1;
    if (transpose) card[nv - 1] = values(17, 54), card[j] = values(17, 54);
    std::vector<int> fvars;
    for (int v = 0; v < nv; ++v)
      if (v == j || (transpose && v == nv - 1) || (layout && round % 2 == 1) || rng() % 4 != 0)
        fvars.push_back(v);
    if (runs) {
      std::vector<std::vector<int>> cut;
      for (std::size_t k = 0; k < fvars.size(); k += cut.back().size())
        cut.emplace_back(fvars.begin() + k,
                         fvars.begin() + std::min<std::size_t>(fvars.size(), k + values(1, 9)));
      std::shuffle(cut.begin(), cut.end(), rng);
      fvars.clear();
      for (const auto& r : cut) fvars.insert(fvars.end(), r.begin(), r.end());
    } else if (layout && round % 4 < 2)
      std::shuffle(fvars.begin(), fvars.end(), rng);
    else if (layout && fvars.size() >= 2)
      std::rotate(fvars.begin(), fvars.begin() + 1 + rng() % (fvars.size() - 1), fvars.end());
    else if (rng() % 2)
      std::rotate(fvars.begin(), fvars.begin() + (fvars.empty() ? 0 : rng() % fvars.size()),
                  fvars.end());
    if (!layout && rng() % 3 == 0) std::shuffle(fvars.begin(), fvars.end(), rng);
    if (transpose) {
      fvars.erase(std::find(fvars.begin(), fvars.end(), j));
      fvars.push_back(j);
    }
    std::vector<std::int64_t> stride(nv, 0);
    std::int64_t fsize = 1;
    for (std::size_t k = fvars.size(); k-- > 0;) stride[fvars[k]] = fsize, fsize *= card[fvars[k]];
    std::int64_t n = 1;
    for (int c : card) n *= c;
    const auto random_table = [&](std::int64_t size) {
      std::vector<double> t(size);
      for (double& x : t)
        x = rng() % 8 == 0 ? -INFINITY : std::uniform_real_distribution<double>(-40, 3)(rng);
      return t;
    };
    const std::vector<double> child = random_table(n), factor = random_table(fsize);
    const gpu::Handle hc = ctx.alloc(n), hf = ctx.alloc(fsize);
    ctx.upload(hf, factor.data(), fsize, 0);
    for (int mode = 0; mode < 3; ++mode) {
      INFO("round " << round << ", " << nv << " variables, mode " << mode);
      ctx.upload(hc, child.data(), n, 0);
      if (mode == 0) ctx.fold(hc, card, stride, hf, 0);
      if (mode == 1) ctx.permute(hc, card, stride, hf, 0);
      if (mode == 2) ctx.divide(hc, card, stride, hf, 0);
      std::vector<double> got(n);
      ctx.download(hc, got.data(), n, 0);
      ctx.synchronize(0);
      long wrong = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t rest = i, at = 0;
        for (int v = nv; v-- > 0;) at += (rest % card[v]) * stride[v], rest /= card[v];
        const double x = factor[at];
        const double want = mode == 0        ? child[i] + x
                            : mode == 1      ? x
                            : x == -INFINITY ? -INFINITY
                                             : child[i] - x;
        wrong += !(got[i] == want || (std::isnan(got[i]) && std::isnan(want)));
      }
      CHECK(wrong == 0);
    }
    ctx.release(hc);
    ctx.release(hf);
  }
}

TEST_CASE("GpuKernel.OutputsBeyond2to31MatchCpu", "[gpu][large]") {
  // 2^31 outputs (16 GiB of doubles): every output index past 32 bits written and right.
  // Needs ~20 GiB of device memory and ~56 GiB of host memory; skipped otherwise.
  const double host_bytes =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (context().free_bytes() < 20e9 || host_bytes < 64e9 || std::getenv("KINFER_GPU_SKIP_LARGE")) {
    WARN("skipped: needs 20 GB of device memory and 64 GB of host memory");
    return;
  }
  BucketShape sh;
  for (int i = 0; i < 32; ++i) {
    sh.vars.push_back(i);
    sh.card.push_back(2);
  }
  sh.n_marg = 1;  // var 31 (2 values) summed; 2^31 outputs
  std::vector<int> a, b, c = {0, 30};
  for (int i = 0; i < 16; ++i) a.push_back(i);
  for (int i = 15; i < 31; ++i) b.push_back(i);
  a.push_back(31);
  b.push_back(31);
  std::mt19937_64 rng(95);
  std::uniform_real_distribution<double> u(-6, 0);
  std::vector<std::vector<double>> data(3);
  const std::vector<std::vector<int>> scopes = {a, b, c};
  for (int f = 0; f < 3; ++f) {
    data[f].resize(std::size_t{1} << scopes[f].size());
    for (auto& x : data[f]) x = u(rng);
  }
  const std::vector<InputTable> in = {
      {data[0].data(), a}, {data[1].data(), b}, {data[2].data(), c}};
  std::vector<double> cpu = cpu_result(sh, in);
  HostRunOptions opt;
  const HostRunResult r = run_host_bucket(context(), sh, in, opt);
  REQUIRE(r.out.size() == cpu.size());
  const Compare cmp = compare(r.out, cpu);
  std::printf("2^31 outputs: plain tile %d, largest relative difference %.3g, unwritten %ld\n",
              r.choice.tile, cmp.worst, cmp.unwritten);
  REQUIRE(cmp.unwritten == 0);
  REQUIRE(cmp.inf_mismatch == 0);
  REQUIRE(cmp.worst <= 1e-11);
}

TEST_CASE("GpuKernel.UaiNetworksMatchCpuAndReferences", "[gpu]") {
  // Every bucket on both backends, then the whole plan on the GPU against REFERENCES.tsv
  // (half a unit of the printed last digit). KINFER_GPU_NETWORKS narrows the list.
  std::vector<std::string> names = {
      "Alchemy_11",         "CSP_12",          "DBN_11",        "Grids_11",
      "ObjectDetection_74", "Pedigree_11",     "Pedigree_12",   "Pedigree_13",
      "Promedus_24",        "Segmentation_12", "grid10x10.f10", "pedigree1",
      "linkage_14",         "linkage_16",      "linkage_21",    "linkage_24"};
  if (const char* only = std::getenv("KINFER_GPU_NETWORKS")) {
    names.clear();
    std::istringstream s(only);
    for (std::string n; std::getline(s, n, ',');) names.push_back(n);
  }
  const auto refs = kinfer::test::read_references();
  int networks = 0;
  for (const std::string& name : names) {
    const fs::path path = uai_network_path(name);
    if (path.empty() || !refs.count(name)) {
      WARN(name << ": not in " << (data_dir() / "uai").string() << "; skipped");
      continue;
    }
    DYNAMIC_SECTION(name) {
      const io::NetworkWithEvidence r = io::read_network_and_evidence(path.string());
      PlanOptions po;
      po.order.time_budget = 2;
      const Plan plan = make_plan(r.net, r.ev, po);
      if (!plan.model.impossible.empty()) continue;
      Compare all;
      int buckets = 0;
      RunOptions ro;
      ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                            const double* out) {
        HostRunOptions opt;
        HostRunResult r;
        try {
          r = run_host_bucket(context(), shape, in, opt);
        } catch (const std::invalid_argument&) {
          return;  // no GPU kernel for it: the executor runs it on the CPU
        }
        const std::vector<double> cpu(out, out + shape.output_size());
        const Compare c = compare(r.out, cpu);
        INFO(name << " bucket " << b << " (" << to_string(r.choice.variant) << ")");
        REQUIRE(c.unwritten == 0);
        REQUIRE(c.inf_mismatch == 0);
        REQUIRE(c.worst <= 1e-11);
        all.worst = std::max(all.worst, c.worst);
        ++buckets;
      };
      const double ln_cpu = run_plan(plan, ro);
      // Every placement policy through the one executor (scheduler/runner.hpp) on this GPU; the
      // shipped H200 profile gives greedy and comm-aware their predictions (any profile does
      // for correctness). gpu-only is the answer compared with the reference below.
      const sched::Profile prof =
          sched::load_profile((data_dir() / "profiles" / "h200.json").string(), false);
      double ln_gpu = NAN;
      sched::RunResult rep;
      for (const sched::Policy pol :
           {sched::Policy::cpu_only, sched::Policy::greedy, sched::Policy::comm_aware,
            sched::Policy::whole_plan, sched::Policy::gpu_only}) {
        sched::RunRequest req;
        req.device = sched::DeviceChoice::gpu;
        req.policy = pol;
        sched::Runner runner(req, &context(), prof);
        rep = runner.run(plan);
        INFO(name << " policy " << sched::to_string(pol));
        CHECK(std::abs(rep.ln_pr - ln_cpu) <= 1e-9 * std::max(1.0, std::abs(ln_cpu)));
        CHECK(rep.policy == sched::to_string(pol));
        if (pol == sched::Policy::cpu_only) CHECK(rep.ln_pr == ln_cpu);  // bit for bit
        ln_gpu = rep.ln_pr;
      }
      // check mode on the real device: passes
      sched::RunRequest creq;
      creq.check = true;
      sched::Runner checker(creq, &context());
      const sched::RunResult cr = checker.run(plan);
      REQUIRE(cr.check);
      CHECK(cr.check->passed);
      CHECK(cr.ln_pr == ln_cpu);
      const double log10_gpu = ln_gpu / std::log(10.0);
      const std::string& ref = refs.at(name);
      const auto dot = ref.find('.');
      const double tol =
          0.5 *
          std::pow(10.0, -(dot == std::string::npos ? 0 : static_cast<int>(ref.size() - dot - 1)));
      std::printf(
          "%-20s %4d buckets, largest bucket difference %.3g; log10 P(e) gpu %.10g cpu %.10g "
          "reference %s; gpu-only: %d GPU buckets (%d merged), %d CPU; check %.3g relative\n",
          name.c_str(), buckets, all.worst, log10_gpu, ln_cpu / std::log(10.0), ref.c_str(),
          rep.gpu_buckets, rep.merged_buckets, rep.cpu_buckets, cr.check->max_rel_diff);
      CHECK(std::abs(ln_gpu - ln_cpu) <= 1e-9 * std::max(1.0, std::abs(ln_cpu)));
      CHECK(std::abs(log10_gpu - std::stod(ref)) <= tol);
      ++networks;
    }
  }
  CHECK(networks > 0);
}
