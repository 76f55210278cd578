// The CPU half of the GPU kernel, checked without a GPU: the policy tables (page and summed
// splits, cache segments, transposed cache layout, refetch table, splits and their combine),
// walked on the host exactly as the kernels walk them, must reproduce the brute-force bucket.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

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

// A small device: few SMs so blocks walk several pages (refetch table in use), and little shared
// memory so the knapsack leaves some inputs in global memory.
DeviceLimits tight_limits() {
  DeviceLimits tight;
  tight.sm_count = 2;
  tight.shared_per_block = 1200;
  tight.shared_per_sm = 2200;
  tight.block_overhead = 1024;
  tight.mid_rows_max = 4;  // the plain kernel's outer summed block in two levels
  return tight;
}

// fn(i, layout, limits) for `n` random buckets of up to 2^14 states (seeded), each under the
// default limits and tight_limits().
template <class Fn>
void for_each_layout(unsigned seed, int n, Fn fn) {
  std::mt19937_64 rng(seed);
  RandomBucketOptions o;
  o.max_log2_states = 14;
  const DeviceLimits tight = tight_limits();
  for (int i = 0; i < n; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    for (const DeviceLimits& lim : {DeviceLimits{}, tight}) fn(i, lay, lim);
  }
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
  int direct = 0;
  for (int i = 0; i < 300; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size());
    LaunchPlan p;
    REQUIRE(max_error(emulated(b, Variant::plain, DeviceLimits{}, &p), reference(b)) < 1e-10);
    direct += p.direct_mask != 0;
  }
  // the emulator reads direct inputs at mi, as the kernels do: some buckets must have them
  CHECK(direct > 30);
}

TEST_CASE("GpuPolicy.ReuseOrderKeepsEveryOutput", "[gpu]") {
  // pedigree50's bucket 209 (bucket_bench --print-shapes): the 2^30.4-entry input lacks the
  // first output variable (4 values), which goes innermost; the rest keep their order
  const BucketSpec s = parse_bucket_spec(
      "4,6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3/6/1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18/"
      "0,4,13,14,15,16,17,18");
  const BucketLayout lay = describe(s.shape, s.scopes);
  const BucketLayout r = reuse_order(lay, DeviceLimits{});
  REQUIRE(r.k == lay.k);
  CHECK(r.card[lay.k - 1] == 4);
  CHECK(r.out_stride[lay.k - 1] == lay.out_stride[0]);
  for (int i = 1; i < lay.k; ++i) CHECK(r.out_stride[i - 1] == lay.out_stride[i]);
  for (std::size_t i = lay.k; i < lay.card.size(); ++i) CHECK(r.card[i] == lay.card[i]);
  // off, or a table below the threshold: unchanged
  DeviceLimits off;
  off.reuse_min_bytes = 0;
  CHECK(reuse_order(lay, off).stride == lay.stride);
  // random buckets with every plan reordered (threshold 1 byte): the plain tables and kernel
  // 9's plans still give every output its value (emulated against the reference)
  std::mt19937_64 rng(21);
  RandomBucketOptions o;
  o.max_log2_states = 13;
  DeviceLimits all;
  all.reuse_min_bytes = 1;
  all.reuse_near = 1;
  all.reuse_over_rest = 0;
  int moved = 0;
  for (int i = 0; i < 300; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size());
    const BucketLayout bl = describe(b.shape, b.scopes);
    if (!bl.unsupported.empty()) continue;
    moved += reuse_order(bl, all).stride != bl.stride;
    REQUIRE(max_error(emulated(b, Variant::plain, all), reference(b)) < 1e-10);
    REQUIRE(max_error(emulated(b, Variant::automatic, all), reference(b)) < 1e-10);
  }
  CHECK(moved > 30);
}

TEST_CASE("GpuPolicy.LargeOffsetTablesReproduceBucket", "[gpu]") {
  // 3 x 2^21 outputs (6144 pages of 1024: the page-offset table is filled as a block of its
  // inner rows plus each outer row's offsets, or described for the device to fill) and
  // 2^12 x 3 x 2 (the summed tables' too), mixed cardinalities, inputs holding different
  // subsets: every output as the reference has it
  for (const char* spec :
       {"3,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2/1/0,1,2,3,4,5,7,9,11,13,15,17,19,21,22/"
        "0,2,4,6,8,10,12,14,16,18,20,22",
        "2,3,2,2,2,2,2,2,2,2,2,2,2,2,3,2/2/0,1,2,3,4,5,6,7,8,9,10,11,14,15/0,1,2,3,12,13,14,15"}) {
    INFO(spec);
    const BucketSpec sp = parse_bucket_spec(spec);
    const RandomBucket b = spec_bucket(spec, 3);
    for (Variant v : {Variant::plain, Variant::automatic})
      REQUIRE(max_error(emulated(b, v, DeviceLimits{}), reference(b)) < 1e-10);
    REQUIRE(max_error(emulated(b, Variant::plain, tight_limits()), reference(b)) < 1e-10);
    // the page offsets described for the device to fill (every size) give the same outputs,
    // and the host bytes predicted leave them out
    DeviceLimits fill;
    fill.device_fill_bytes = 1;
    const BucketLayout lay = describe(sp.shape, sp.scopes);
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, fill);
    REQUIRE(p.out_hi.empty());
    REQUIRE(p.out_hi_fill.rows == p.n_pages);
    CHECK(launch_table_bytes(lay, fill, 8, Variant::plain) == p.table_bytes());
    REQUIRE(max_error(emulated(b, Variant::plain, fill), reference(b)) < 1e-10);
  }
}

TEST_CASE("GpuPolicy.FastDiv64MatchesDivision", "[gpu]") {
  std::mt19937_64 rng(8);
  for (std::uint32_t d :
       {1u, 2u, 3u, 7u, 96u, 1000u, 4095u, 65537u, 1u << 20, 2147483647u, 4294967295u}) {
    const FastDiv64 fd(d);
    for (int i = 0; i < 20000; ++i) {
      const std::uint64_t n = rng() >> (1 + rng() % 40);  // below 2^63, many magnitudes
      REQUIRE(fd.div(n) == n / d);
    }
    const std::uint64_t top = (std::uint64_t{1} << 63) - 1;
    REQUIRE(fd.div(top) == top / d);
    REQUIRE(fd.div(0) == 0);
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
  small.tiles = true;
  small.max_tile = 4;  // the planner's tiles of 4 too (no kernel takes them)
  small.max_tile_dep = 16;
  small.tile_min_nf = 1;
  small.split_min_terms = 64;  // splits of these sums (the default keeps 1024 terms a lane)
  int split_seen = 0, split_tiles = 0, nested = 0, split_inside = 0;
  for (int i = 0; i < 40; ++i) {
    const RandomBucket b = random_bucket(rng, o);
    LaunchPlan p;
    INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size());
    small.mid_rows_max = DeviceLimits{}.mid_rows_max;
    REQUIRE(max_error(emulated(b, Variant::plain, small, &p), reference(b)) < 1e-10);
    split_seen += p.splits > 1 && p.Mh > 1 && p.lanes_log2 > 0;
    split_tiles += p.splits > 1 && p.tile > 1;
    // again with the outer summed block in two small levels: splits that start inside a middle
    // block walk the kernel's carry from one top row to the next
    small.mid_rows_max = 4;
    REQUIRE(max_error(emulated(b, Variant::plain, small, &p), reference(b)) < 1e-10);
    nested += p.Mh2 > 1 && p.Mh / p.Mh2 > 1;
    split_inside += p.splits > 1 && p.Mh2 > 1 && p.mh_per_split % p.Mh2 != 0;
  }
  REQUIRE(split_seen >= 4);
  REQUIRE(split_tiles >= 1);
  REQUIRE(nested >= 3);
  REQUIRE(split_inside >= 1);
}

TEST_CASE("GpuPolicy.CachedTablesReproduceBucket", "[gpu]") {
  std::mt19937_64 rng(13);
  RandomBucketOptions o;
  o.max_log2_states = 13;
  const DeviceLimits tight = tight_limits();
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
  // (the short-sum kernel takes it first; without the short-sum kernel the cached kernel's reuse
  // rule says why not)
  BucketShape sh;
  sh.vars = {0, 1};
  sh.card = {1000, 2};
  sh.n_marg = 1;
  std::vector<std::vector<int>> scopes = {{0, 1}, {1}};
  Selection s;
  make_launch_plan(describe(sh, scopes), Variant::automatic, DeviceLimits{}, 8, &s);
  CHECK(s.variant == Variant::plain);
  CHECK(s.why.find("short-sum kernel") != std::string::npos);
  DeviceLimits no9;
  no9.lean_chunks = false;
  make_launch_plan(describe(sh, scopes), Variant::automatic, no9, 8, &s);
  CHECK(s.variant == Variant::plain);
  CHECK(s.why.find("used only 1 times") != std::string::npos);
}

TEST_CASE("GpuPolicy.UnsupportedBucketsSayWhy", "[gpu]") {
  BucketShape sh;
  sh.vars = {0, 1};
  sh.card = {2, 2};
  sh.n_marg = 1;
  std::vector<std::vector<int>> scopes(kMaxInputs + 1, std::vector<int>{0});
  const BucketLayout lay = describe(sh, scopes);
  REQUIRE(lay.unsupported.find(std::to_string(kMaxInputs + 1) + " inputs") != std::string::npos);
  std::vector<std::vector<int>> varying(kMaxVarying + 1, std::vector<int>{0, 1});
  REQUIRE(describe(sh, varying).unsupported.find("vary with the summed") != std::string::npos);
  REQUIRE_THROWS_AS(make_launch_plan(lay, Variant::automatic, DeviceLimits{}),
                    std::invalid_argument);
}

TEST_CASE("GpuPolicy.TwoOutputsPerThreadCoverTheItems", "[gpu]") {
  // Two outputs per thread: a one-lane plan of at least lean_two_min_items items gives each thread
  // two outputs a grid-stride apart, so its grid covers half the items, rounded up: every item has
  // a thread (2 x blocks x threads >= items) and the grid has no block too many (the last block's
  // first thread has an item); below the threshold, or with it 0, one output per thread.
  std::mt19937_64 rng(23);
  int two = 0;
  for (int i = 0; i < 300; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 16;
    o.max_marg = 16;  // one-lane sums
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    DeviceLimits lim;
    lim.lean_two_min_items = 1 + static_cast<std::int64_t>(rng() % 4096);
    const LaunchPlan p = make_launch_plan(lay, Variant::plain, lim);
    const std::int64_t items = p.n_items * p.splits;
    INFO("bucket " << i << ": " << items << " items, threshold " << lim.lean_two_min_items);
    if (!p.lean || items < lim.lean_two_min_items) {
      REQUIRE(p.outs == 1);
      continue;
    }
    REQUIRE(p.outs == 2);
    REQUIRE(2 * p.blocks * p.threads >= items);
    REQUIRE((p.blocks - 1) * p.threads * 2 < items);
    lim.lean_two_min_items = 0;
    REQUIRE(make_launch_plan(lay, Variant::plain, lim).outs == 1);
    ++two;
  }
  CHECK(two > 20);
}

TEST_CASE("GpuPolicy.BucketSpecsParseAndSayWhatIsWrong", "[gpu]") {
  // bucket_bench's --shape format: parsed into the shape and scopes it names, written back the
  // same (--print-shapes), data filled per input; malformed specs name the spec and the fault.
  const BucketSpec b = parse_bucket_spec("6,2,3/1/0,2/1,2/");
  REQUIRE(b.shape.card == std::vector<int>{6, 2, 3});
  REQUIRE(b.shape.vars == std::vector<int>{0, 1, 2});
  REQUIRE(b.shape.n_marg == 1);
  REQUIRE(b.scopes == std::vector<std::vector<int>>{{0, 2}, {1, 2}, {}});
  REQUIRE(bucket_spec(b.shape, b.scopes) == "6,2,3/1/0,2/1,2/");
  const RandomBucket r = spec_bucket("6,2,3/1/0,2/1,2/", 7);
  REQUIRE(r.data.size() == 3);
  REQUIRE(r.data[0].size() == 18);
  REQUIRE(r.data[1].size() == 6);
  REQUIRE(r.data[2].size() == 1);
  for (const auto& d : r.data)
    for (double v : d) REQUIRE(v <= 0);
  // a plan's bucket (variables named by id) written as a spec and read back
  std::mt19937_64 rng(3);
  const RandomBucket rb = random_bucket(rng);
  const BucketSpec back = parse_bucket_spec(bucket_spec(rb.shape, rb.scopes));
  REQUIRE(back.shape.card == rb.shape.card);
  REQUIRE(back.shape.n_marg == rb.shape.n_marg);
  REQUIRE(back.scopes.size() == rb.scopes.size());
  const struct {
    const char* spec;
    const char* says;
  } bad[] = {{"6,2,3", "fewer than three"},
             {"6,x,3/1/0", "cardinality 'x'"},
             {"6,0,3/1/0", "cardinality of 0"},
             {"6,2,3/4/0", "4 summed variables of 3"},
             {"6,2,3/-1/0", "summed variables '-1'"},
             {"6,2,3/1/0,3", "names position 3 of 3"},
             {"6,2,3/1/2,0", "not increasing"},
             {"6,2,3/1/0,,2", "variable position ''"}};
  for (const auto& t : bad) {
    INFO(t.spec);
    try {
      parse_bucket_spec(t.spec);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CHECK(what.find(std::string("'") + t.spec + "'") != std::string::npos);
      CHECK(what.find(t.says) != std::string::npos);
    }
  }
}

TEST_CASE("GpuPolicy.ShortSumTakesSmallOneLaneSums", "[gpu]") {
  // The selector gives the short-sum kernel the double one-lane buckets it takes (1-3 varying
  // inputs, output rows of <= 8 columns) of up to kShortSumMaxTerms terms, and its plans there are
  // the plain launch with lean_chunks set; with the short-sum kernel off (lean_chunks false) the
  // other rules decide and no plan has lean_chunks. Float plans never go to it.
  std::mt19937_64 rng(29);
  int taken = 0, cached_before = 0;
  for (int i = 0; i < 400; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 18;
    o.max_marg = 16;
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    DeviceLimits lim;
    lim.sm_count = 2;  // small buckets fill it: the cached kernel's one-lane rule applies
    const LaunchPlan plain = make_launch_plan(lay, Variant::plain, lim);
    const bool eligible = plain.lean_chunks && lay.M <= kShortSumMaxTerms;
    Selection sel;
    const LaunchPlan a = make_launch_plan(lay, Variant::automatic, lim, 8, &sel);
    INFO("bucket " << i << ": M " << lay.M << ", nf " << plain.nf << ", " << sel.why);
    if (eligible) {
      REQUIRE(a.variant == Variant::plain);
      REQUIRE(a.lean_chunks);
      REQUIRE(sel.why.find("short-sum kernel") != std::string::npos);
      ++taken;
      DeviceLimits off = lim;
      off.lean_chunks = false;
      Selection before;
      const LaunchPlan o8 = make_launch_plan(lay, Variant::automatic, off, 8, &before);
      REQUIRE_FALSE(o8.lean_chunks);
      cached_before += o8.variant == Variant::cached;
    } else {
      REQUIRE(sel.why.find("short-sum kernel") == std::string::npos);
    }
    Selection f32;
    make_launch_plan(lay, Variant::automatic, lim, 4, &f32);
    REQUIRE(f32.why.find("short-sum kernel") == std::string::npos);
  }
  CHECK(taken > 20);
  CHECK(cached_before > 0);  // some of them went to the cached kernel's one-lane rule before
}

TEST_CASE("GpuPolicy.PlainTilesReproduceBucket", "[gpu]") {
  // A small device (1 SM of 64 threads) lets output tiles through on small buckets; summed
  // ranges of 64-4096 configurations give summed tiles. Tiled tables walked on the host must
  // reproduce the bucket, with splits too.
  DeviceLimits small;
  small.sm_count = 1;
  small.max_threads_per_sm = 64;
  small.tiles = true;
  small.max_tile = 4;  // the planner's tiles of 4 too (no kernel takes them)
  small.max_tile_dep = 16;
  small.tile_min_nf = 1;
  small.lean = false;  // the one-lane kernel takes the small sums of <= 3 varying inputs untiled
  std::mt19937_64 rng(19);
  int out_tiles = 0, sum_tiles = 0;
  for (int i = 0; i < 400; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 13;
    o.max_card = 4;  // tiles take variables of 2 or 4 values
    if (i % 2) {
      o.min_marg = 64;
      o.max_marg = 4096;
    }
    const RandomBucket b = random_bucket(rng, o);
    LaunchPlan p;
    INFO("bucket " << i << ": " << b.shape.output_size() << " outputs x " << b.shape.marg_size());
    const auto out = emulated(b, Variant::plain, small, &p);
    INFO("tile " << p.tile << (p.tile_summed ? " summed" : " outputs") << ", splits " << p.splits
                 << ", lanes " << (1 << p.lanes_log2));
    REQUIRE(max_error(out, reference(b)) < 1e-10);
    if (p.tile > 1) (p.tile_summed ? sum_tiles : out_tiles)++;
    // the varying slots holding a tile variable come first (the kernel's TD slots)
    for (int f = 0; f < p.nf && p.tile > 1; ++f) {
      bool held = false;
      for (int r = 1; r < p.tile; ++r) held = held || p.tile_off[r * p.nfp + f] != 0;
      REQUIRE(held == (f < p.tile_dep));
    }
  }
  CHECK(out_tiles > 20);
  CHECK(sum_tiles > 50);
}

TEST_CASE("GpuPolicy.KernelTilesReproduceBucket", "[gpu]") {
  // The kernels' tiles: 2 configurations, at most 2 varying inputs holding the tile variable,
  // 2 or more varying inputs (the defaults but the device-fill rule, as the default tiles on
  // a small device). Those slots first, and the host walk reproduces the bucket.
  DeviceLimits small;
  small.sm_count = 1;
  small.max_threads_per_sm = 64;
  small.tiles = true;
  std::mt19937_64 rng(23);
  int tiled = 0, two = 0;
  for (int i = 0; i < 300; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 13;
    o.max_card = 3;
    o.min_functions = 2;
    if (i % 2) {
      o.min_marg = 64;
      o.max_marg = 4096;
    }
    const RandomBucket b = random_bucket(rng, o);
    LaunchPlan p;
    const auto out = emulated(b, Variant::plain, small, &p);
    INFO("bucket " << i << ", tile " << p.tile << ", slots holding it " << p.tile_dep);
    REQUIRE(max_error(out, reference(b)) < 1e-10);
    if (p.tile == 1) continue;
    ++tiled;
    two += p.tile_dep == 2;
    REQUIRE(p.tile == 2);
    REQUIRE(p.nf_inputs >= 2);
    REQUIRE(p.tile_dep >= 1);
    REQUIRE(p.tile_dep <= 2);
    for (int f = 0; f < p.nf; ++f) REQUIRE((p.tile_off[p.nfp + f] != 0) == (f < p.tile_dep));
  }
  CHECK(tiled > 30);
  CHECK(two > 5);
}

TEST_CASE("GpuPolicy.ShortSumTileReproducesBucket", "[gpu]") {
  // The short-sum kernel's tile of two outputs (one-lane plans, terms compiled in, direct inputs,
  // some varying input without the tile variable): a binary output variable, the slots holding it
  // first and fewer than all of them, and the host walk of the tiled plan reproduces the bucket.
  // The device-fill rule off (a small device), as the kernel test's forced tiles.
  DeviceLimits small;
  small.sm_count = 1;
  small.max_threads_per_sm = 64;
  small.tile_fill = false;
  std::mt19937_64 rng(29);
  int tiled = 0, untiled = 0, two_dep = 0;
  for (int i = 0; i < 400; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 14;
    o.max_card = 3;
    o.min_functions = 2;
    o.max_functions = 4;
    o.min_marg = 2;
    o.max_marg = 8;
    const RandomBucket b = random_bucket(rng, o);
    LaunchPlan p;
    const auto out = emulated(b, Variant::plain, small, &p);
    INFO("bucket " << i << ", tile " << p.tile << ", slots holding it " << p.tile_dep);
    REQUIRE(max_error(out, reference(b)) < 1e-10);
    if (!p.lean) continue;
    if (!p.short_sum_tile) {
      untiled += p.lean_fixed_terms;
      REQUIRE(p.tile == 1);
      continue;
    }
    ++tiled;
    two_dep += p.tile_dep == 2;
    REQUIRE(p.tile == 2);
    REQUIRE_FALSE(p.tile_summed);
    REQUIRE(p.lean_fixed_terms);
    REQUIRE(p.outs == 1);
    REQUIRE(p.direct_mask == (1u << p.nf) - 1);
    REQUIRE(p.tile_dep >= 1);
    REQUIRE(p.tile_dep < p.nf);
    REQUIRE(p.tile_vars.size() == 1);
    for (int f = 0; f < p.nf; ++f) REQUIRE((p.tile_off[p.nfp + f] != 0) == (f < p.tile_dep));
  }
  CHECK(tiled > 20);
  CHECK(two_dep > 0);  // two of three varying inputs hold the tile variable
  CHECK(untiled > 5);  // plans where no tile saves a fifth of the loads stay untiled
  // DeviceLimits::lean_tiles false: none
  DeviceLimits off = small;
  off.lean_tiles = false;
  std::mt19937_64 rng2(29);
  for (int i = 0; i < 100; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 14;
    o.max_card = 3;
    o.max_functions = 3;
    o.max_marg = 8;
    const RandomBucket b = random_bucket(rng2, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    if (!lay.unsupported.empty()) continue;
    REQUIRE_FALSE(make_launch_plan(lay, Variant::plain, off).short_sum_tile);
  }
}

TEST_CASE("GpuPolicy.ManyInputsReproduceBucket", "[gpu]") {
  // 9-16 varying inputs (the kernel pads them to 12 or 16 with a zero table) and up to 60
  // inputs in all; beyond that the layout says why.
  std::mt19937_64 rng(23);
  int tested = 0, over8 = 0, over12 = 0, over16_in = 0;
  for (int i = 0; i < 120; ++i) {
    RandomBucketOptions o;
    o.max_log2_states = 11;
    o.min_functions = 10;
    o.max_functions = i % 3 == 0 ? 40 : 18;
    o.max_card = 3;
    const RandomBucket b = random_bucket(rng, o);
    const BucketLayout lay = describe(b.shape, b.scopes);
    INFO("bucket " << i << ": " << lay.n_in << " inputs, " << lay.nf << " varying");
    if (lay.nf > kMaxVarying) {
      CHECK(lay.unsupported.find("vary with the summed") != std::string::npos);
      continue;
    }
    REQUIRE(lay.unsupported.empty());
    REQUIRE(max_error(emulated(b, Variant::automatic, DeviceLimits{}), reference(b)) < 1e-10);
    ++tested;
    over8 += lay.nf > 8;
    over12 += lay.nf > 12;
    over16_in += lay.n_in > 16;
  }
  CHECK(tested > 60);
  CHECK(over8 > 10);
  CHECK(over12 > 3);
  CHECK(over16_in > 5);
}

TEST_CASE("GpuPolicy.OutputsBeyond32BitIndices", "[gpu]") {
  // 2^34 outputs x 8 summed (too large to run here): the plan must exist, its launch fit, and
  // its page tables give every input's offset for outputs anywhere in the 64-bit range.
  BucketShape sh;
  for (int i = 0; i < 37; ++i) {
    sh.vars.push_back(10 + i);
    sh.card.push_back(2);
  }
  sh.n_marg = 3;
  std::vector<std::vector<int>> scopes;
  std::vector<int> all(sh.vars), some;
  for (int i = 0; i < 36; i += 2) some.push_back(sh.vars[i]);
  some.push_back(sh.vars[36]);
  std::vector<int> out_only(sh.vars.begin(), sh.vars.begin() + 34);
  scopes = {all, some, out_only};
  const BucketLayout lay = describe(sh, scopes);
  REQUIRE(lay.unsupported.empty());
  REQUIRE(lay.n_out == std::int64_t{1} << 34);
  Selection sel;
  const LaunchPlan p = make_launch_plan(lay, Variant::automatic, DeviceLimits{}, 8, &sel);
  INFO(sel.why);
  REQUIRE(p.variant == Variant::plain);
  CHECK(p.n_pages <= (std::int64_t{1} << 20));
  CHECK(p.blocks <= INT32_MAX);
  CHECK(p.n_items * p.tile == lay.n_out);
  // its 32 MB page-offset table is the device's to fill: described, expanded here
  REQUIRE(p.out_hi.empty());
  REQUIRE(p.out_hi_fill.rows == p.n_pages);
  const std::vector<std::int64_t> out_hi = host_out_hi(p);
  const int slots = p.nf + p.nc;
  std::mt19937_64 rng(29);
  for (int t = 0; t < 2000; ++t) {
    const std::int64_t o = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(p.n_items));
    const std::int64_t page = static_cast<std::int64_t>(p.div_P.div(o)), ol = o - page * p.P;
    REQUIRE(page < p.n_pages);
    const std::int64_t out_index = out_hi[page * p.nip + slots] + p.out_lo[ol * p.nip + slots];
    REQUIRE(out_index < lay.n_out);
    // the output's digits, then each slot's offset from its strides
    for (int s = 0; s < slots; ++s) {
      if (p.slot_input[s] < 0) continue;
      const int layout_slot = static_cast<int>(
          std::find(lay.slot_input.begin(), lay.slot_input.end(), p.slot_input[s]) -
          lay.slot_input.begin());
      std::int64_t want = 0, rest = out_index;
      for (int i = lay.k - 1; i >= 0; --i) {
        want += (rest % lay.card[i]) * lay.stride[layout_slot][i];
        rest /= lay.card[i];
      }
      REQUIRE(out_hi[page * p.nip + s] + p.out_lo[ol * p.nip + s] == want);
    }
  }
}

// The selector decides on the cached candidate's measures without building its tables: the
// measures must be those the tables give (the refetch walk over every page), bucket by bucket.
TEST_CASE("GpuPolicy.SelectorMeasuresWithoutTablesEqualTheTables", "[gpu]") {
  int compared = 0, multi_page = 0;
  for_each_layout(29, 500, [&](int i, const BucketLayout& lay, const DeviceLimits& lim) {
    std::string why;
    if (!cached_possible(lay, lim, 8, why)) return;
    LaunchPlan with, without;
    try {
      with = cached_launch_plan(lay, lim, 8, true);
    } catch (const std::invalid_argument&) {
      return;
    }
    without = cached_launch_plan(lay, lim, 8, false);
    INFO("bucket " << i << ": " << with.n_pages << " pages of " << with.P << ", "
                   << with.pages_per_block << " per block, mask " << with.cached_mask);
    REQUIRE(without.min_reuse == with.min_reuse);
    REQUIRE(without.resident_threads == with.resident_threads);
    REQUIRE(without.launch_threads == with.launch_threads);
    REQUIRE(without.hit_fraction == with.hit_fraction);
    REQUIRE(without.P == with.P);
    REQUIRE(without.n_pages == with.n_pages);
    REQUIRE(without.cached_mask == with.cached_mask);
    REQUIRE(without.out_hi.empty());
    ++compared;
    multi_page += with.pages_per_block > 1;
  });
  REQUIRE(compared > 300);
  REQUIRE(multi_page > 10);
}

// The accountant's term: the bytes of a plan's tables predicted without building them equal
// the built plan's (plain and cached winners, both device sizes).
TEST_CASE("GpuPolicy.TableBytesPredictedWithoutBuilding", "[gpu]") {
  int compared = 0, cached = 0;
  for_each_layout(41, 400, [&](int i, const BucketLayout& lay, const DeviceLimits& lim) {
    if (!lay.unsupported.empty()) return;
    for (Variant v : {Variant::automatic, Variant::plain, Variant::cached}) {
      LaunchPlan p;
      try {
        p = make_launch_plan(lay, v, lim);
      } catch (const std::invalid_argument&) {
        continue;
      }
      INFO("bucket " << i << ": " << to_string(v) << " -> " << to_string(p.variant));
      REQUIRE(launch_table_bytes(lay, lim, 8, v) == p.table_bytes());
      ++compared;
      cached += p.variant == Variant::cached;
    }
  });
  REQUIRE(compared > 300);
  REQUIRE(cached > 10);
}
