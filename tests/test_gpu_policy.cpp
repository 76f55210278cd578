// The CPU half of the GPU kernel, checked without a GPU: the policy tables (page and summed
// splits, cache segments, transposed cache layout, refetch table, splits and their combine),
// walked on the host exactly as the kernels walk them, must reproduce the brute-force bucket.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "gpu/policy.hpp"
#include "gpu/random_bucket.hpp"

using namespace kinfer;
using namespace kinfer::gpu;

namespace {

// Same -inf, else within 1e-10 relative: the emulator and the reference are both double.
double max_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  }
  return worst;
}

std::vector<double> reference(const RandomBucket& b) {
  std::vector<double> out(b.shape.output_size());
  const auto in = b.inputs();
  sum_product_log_reference(b.shape, in, out.data());
  return out;
}

std::vector<double> emulated(const RandomBucket& b, Variant v, const DeviceLimits& lim,
                             LaunchPlan* keep = nullptr) {
  const BucketLayout lay = describe(b.shape, b.scopes);
  const LaunchPlan p = make_launch_plan(lay, v, lim);
  std::vector<double> out(b.shape.output_size(), NAN);
  const auto in = b.inputs();
  emulate(p, lay, in, out.data());
  if (keep) *keep = p;
  return out;
}

}  // namespace

TEST_CASE("GpuPolicy.FastDivMatchesDivision", "[gpu]") {
  std::mt19937_64 rng(7);
  for (std::uint32_t d :
       {1u, 2u, 3u, 5u, 7u, 10u, 96u, 1000u, 4095u, 65537u, 1u << 20, 2147483647u}) {
    const FastDiv fd(d);
    for (int i = 0; i < 20000; ++i) {
      const std::uint32_t n = static_cast<std::uint32_t>(rng() % 2147483648u);
      REQUIRE(fd.div(n) == n / d);
    }
    REQUIRE(fd.div(2147483647u) == 2147483647u / d);
    REQUIRE(fd.div(0) == 0);
  }
}

TEST_CASE("GpuPolicy.PlainTablesReproduceBucket", "[gpu]") {
  std::mt19937_64 rng(11);
  RandomBucketOptions o;
  o.max_log2_states = 13;
  for (int i = 0; i < 300; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size());
    REQUIRE(max_error(emulated(b, Variant::plain, DeviceLimits{}), reference(b)) < 1e-10);
  }
}

TEST_CASE("GpuPolicy.PlainSplitsLargeSums", "[gpu]") {
  // few outputs, tens of thousands of summed configurations: lanes, inner/outer summed
  // tables and splits combined through partial pairs
  std::mt19937_64 rng(12);
  RandomBucketOptions o;
  o.min_log2_states = 12;
  o.max_log2_states = 16;
  o.max_marg = 30000;
  o.min_marg = 3000;
  DeviceLimits small;
  small.sm_count = 4;
  int split_seen = 0;
  for (int i = 0; i < 40; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    LaunchPlan p;
    INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size());
    REQUIRE(max_error(emulated(b, Variant::plain, small, &p), reference(b)) < 1e-10);
    split_seen += p.splits > 1 && p.Mh > 1 && p.lanes_log2 > 0;
  }
  REQUIRE(split_seen > 5);
}

TEST_CASE("GpuPolicy.CachedTablesReproduceBucket", "[gpu]") {
  std::mt19937_64 rng(13);
  RandomBucketOptions o;
  o.max_log2_states = 13;
  // a small device: few SMs so blocks walk several pages (refetch table in use), and little
  // shared memory so the knapsack leaves some inputs in global memory
  DeviceLimits tight;
  tight.sm_count = 2;
  tight.shared_per_block = 1200;
  tight.shared_per_sm = 2200;
  tight.block_overhead = 1024;
  int tested = 0, partial = 0, multi_page = 0;
  for (int i = 0; i < 400; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    std::string why;
    const BucketLayout lay = describe(b.shape, b.scopes);
    for (const DeviceLimits& lim : {DeviceLimits{}, tight}) {
      if (!cached_possible(lay, lim, 8, why)) continue;
      LaunchPlan p;
      std::vector<double> out;
      try {
        out = emulated(b, Variant::cached, lim, &p);
      } catch (const std::invalid_argument&) {
        continue;  // nothing fits this device's shared memory
      }
      INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size()
                     << ", " << p.n_pages << " pages of " << p.P << ", " << p.pages_per_block
                     << " per block, mask " << p.cached_mask);
      REQUIRE(max_error(out, reference(b)) < 1e-10);
      ++tested;
      partial += p.cached_mask != (1u << p.nf) - 1;
      multi_page += p.pages_per_block > 1;
    }
  }
  REQUIRE(tested > 300);
  REQUIRE(partial > 3);
  REQUIRE(multi_page > 10);
}

TEST_CASE("GpuPolicy.KnapsackPrefersLongLivedSmallSegments", "[gpu]") {
  // f0(a, b, s) changes every page; f1(a, s) is shared by the |b| pages below it; with room
  // for only one segment, f1 (longer lifetime, same size per page) is the one to cache.
  BucketShape sh;
  sh.vars = {0, 1, 2};
  sh.card = {64, 64, 32};
  sh.n_marg = 1;
  std::vector<std::vector<int>> scopes = {{0, 1, 2}, {0, 2}};
  const BucketLayout lay = describe(sh, scopes);
  DeviceLimits lim;
  // budget = shared_per_sm - 1 KiB reserve - the 512-byte sum table = 364 bytes: one segment
  lim.shared_per_sm = 1900;
  lim.shared_per_block = 1900;
  lim.block_overhead = 1024;
  const LaunchPlan p = make_launch_plan(lay, Variant::cached, lim);
  CHECK(p.cached_mask == 2u);
  // f1's segment is refetched only when `a` changes
  int refetch_f1 = 0;
  for (auto bits : p.refetch) refetch_f1 += bits >> 1 & 1;
  CHECK(refetch_f1 == 64);
}

TEST_CASE("GpuPolicy.SelectorExplainsEveryChoice", "[gpu]") {
  std::mt19937_64 rng(17);
  RandomBucketOptions o;
  o.max_log2_states = 22;
  int cached = 0, plain = 0;
  for (int i = 0; i < 200; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    Selection s;
    const LaunchPlan p =
        make_launch_plan(describe(b.shape, b.scopes), Variant::automatic, DeviceLimits{}, 8, &s);
    CHECK(!s.why.empty());
    CHECK(p.variant == s.variant);
    (s.variant == Variant::cached ? cached : plain)++;
  }
  CHECK(cached > 0);
  CHECK(plain > 0);
  // two summed configurations, each staged value used once: plain, and the reason says so
  BucketShape sh;
  sh.vars = {0, 1};
  sh.card = {1000, 2};
  sh.n_marg = 1;
  std::vector<std::vector<int>> scopes = {{0, 1}, {1}};
  Selection s;
  make_launch_plan(describe(sh, scopes), Variant::automatic, DeviceLimits{}, 8, &s);
  CHECK(s.variant == Variant::plain);
  CHECK(s.why.find("used only 1 times") != std::string::npos);
}

TEST_CASE("GpuPolicy.UnsupportedBucketsSayWhy", "[gpu]") {
  BucketShape sh;
  sh.vars = {0, 1};
  sh.card = {2, 2};
  sh.n_marg = 1;
  std::vector<std::vector<int>> scopes(17, std::vector<int>{0, 1});
  const BucketLayout lay = describe(sh, scopes);
  REQUIRE(lay.unsupported.find("17 inputs") != std::string::npos);
  REQUIRE_THROWS_AS(make_launch_plan(lay, Variant::automatic, DeviceLimits{}),
                    std::invalid_argument);
}
