// The selector: which variant runs a bucket (make_launch_plan with Variant::automatic), and why.
// Its thresholds come from bucket_bench measurements (docs/performance.md): the software cache
// pays when the staged data is reused enough to amortize staging and barriers.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpu/detail/planner.hpp"
#include "gpu/policy.hpp"

namespace kinfer::gpu {

using namespace detail;

namespace {

// Thresholds from bucket_bench on an H200: the cache lost on every bucket whose staged values
// were used fewer than 3 times, whose blocks left an SM with fewer than 512 working threads
// (large segments, tiny pages), or whose launch could not fill the device; with reuse 3-4 it won
// only at near-full occupancy.
constexpr double kMinReuse = 3, kGoodReuse = 5;
constexpr double kMinResident = 512, kFullResident = 1536;

// One lane per output (M < 32): the plain kernel's warps read 32 runs M values apart, while
// staging reads them coalesced, so the cache wins even when a staged value is used once, as long
// as the varying inputs are small next to the terms (reused through L2). Measured on the H100:
// linkage buckets of M = 8-16 with 0.06-1.0 input bytes per term 1.4-1.5x faster cached; random
// buckets of M = 18-24 with 4 and 19 bytes per term 1.3x and 2.4x slower cached, and random
// buckets of 1.2-1.5 bytes per term 2x slower cached: the threshold is 1.
constexpr double kOneLaneBytesPerTerm = 1;

// Whether the one-lane rule above sends the bucket to the cached plan c; `why` says why.
bool one_lane_cache_wins(const BucketLayout& lay, const LaunchPlan& c, const DeviceLimits& lim,
                         int eb, std::string& why) {
  const double fill = static_cast<double>(lim.sm_count) * kMinResident;
  double in_bytes = 0;
  for (int f = 0; f < lay.nf; ++f) in_bytes += static_cast<double>(lay.in_size[f]) * eb;
  const double terms = static_cast<double>(lay.n_out) * static_cast<double>(lay.M);
  const int lanes_log2 = plain_lanes_log2(lay.M, lay.M, lim);
  const bool one_lane = lanes_log2 == 0;
  if (!(one_lane && in_bytes < kOneLaneBytesPerTerm * terms && c.resident_threads >= kMinResident &&
        c.launch_threads >= fill))
    return false;
  std::ostringstream w;
  w << "one lane per output in the plain kernel, inputs " << in_bytes / terms
    << " bytes per term: staging coalesces the reads, " << c.resident_threads << " threads per SM";
  why = w.str();
  return true;
}

// Why the cached plan c (its measures, no tables) loses to the plain kernel; empty: it wins.
// Two lanes per output (M = 32-63) have no rule of their own but this general one: a rule sending
// them to the cache at a lower reuse helped the benchmark's buckets but slowed the largest bucket
// of linkage_17's own order 1.5x.
std::string cached_loses(const LaunchPlan& c, const DeviceLimits& lim) {
  const double fill = static_cast<double>(lim.sm_count) * kMinResident;
  std::ostringstream w;
  if (c.min_reuse < kMinReuse) {
    w << "staged values would be used only " << c.min_reuse << " times (< " << kMinReuse << ")";
  } else if (c.resident_threads < kMinResident) {
    w << "the cache leaves " << c.resident_threads << " working threads per SM (< " << kMinResident
      << "): segments too large for the page";
  } else if (c.launch_threads < fill) {
    w << "the cached launch has " << c.launch_threads << " working threads, too few to fill "
      << lim.sm_count << " SMs";
  } else if (c.min_reuse < kGoodReuse && c.resident_threads < kFullResident) {
    w << "staged values used " << c.min_reuse << " times at " << c.resident_threads
      << " threads per SM: not enough to pay for staging";
  }
  return w.str();
}

// The plain or the cached plan by the cache's measures, where neither the lanes rule nor the
// short-sum kernel decided.
LaunchPlan select_by_cache_measures(const BucketLayout& lay, const DeviceLimits& lim, int eb,
                                    Selection* sel, bool tables) {
  std::string why;
  LaunchPlan p;
  Selection s;
  if (!cached_possible(lay, lim, eb, why)) {
    p = plain_launch_plan(lay, lim, tables);
    if (sel) *sel = {Variant::plain, why};
    return p;
  }
  LaunchPlan c;  // the selector's measures only: its tables are built if it wins
  try {
    c = cached_launch_plan(lay, lim, eb, false);
  } catch (const std::invalid_argument& e) {
    p = plain_launch_plan(lay, lim, tables);
    if (sel) *sel = {Variant::plain, e.what()};
    return p;
  }
  if (one_lane_cache_wins(lay, c, lim, eb, why)) {
    if (sel) *sel = {Variant::cached, why};
    return cached_launch_plan(lay, lim, eb, tables);
  }
  why = cached_loses(c, lim);
  if (!why.empty()) {
    c = LaunchPlan{};  // its tables go before the plain plan's are built (peak memory)
    p = plain_launch_plan(lay, lim, tables);
    s = {Variant::plain, why};
  } else {
    std::ostringstream w;
    w << c.hit_fraction * 100 << "% of loads from shared memory, staged values used " << c.min_reuse
      << "+ times, " << c.resident_threads << " threads per SM";
    c = LaunchPlan{};
    p = cached_launch_plan(lay, lim, eb, tables);
    s = {Variant::cached, w.str()};
  }
  if (sel) *sel = s;
  return p;
}

// Variant::automatic.
LaunchPlan select_automatic(const BucketLayout& lay, const DeviceLimits& lim, int eb,
                            Selection* sel, bool tables) {
  // 4 or more lanes per output in the plain kernel (its inner summed block of 64+ terms): the
  // plain kernel, tiled or not, was as fast as the cache or faster on every such bucket measured
  // on the H100 (0.58-1.04x of the cached time over 129 linkage and random buckets); the cached
  // kernel's thresholds were fitted before the plain kernel had its chunks of four, direct
  // inputs and tiles.
  LaunchPlan shape;  // the plain launch's shape (no tables); none: the cache decides
  try {
    shape = plain_launch_plan(lay, lim, false);
  } catch (const std::invalid_argument&) {
  }
  const int plain_lanes = shape.lanes_log2;
  // The short-sum kernel (1-3 varying inputs, output rows of <= 8 columns) ran linkage buckets of
  // M = 2, 8 and 12 1.25-1.6x faster than the cached kernel the rules below chose for them, and
  // one of M = 16 1.44x slower (H100): it takes one-lane buckets of up to kShortSumMaxTerms terms.
  const bool short_sum = eb == 8 && shape.lean_chunks && lay.M <= kShortSumMaxTerms;
  if (plain_lanes < 2 && !short_sum) return select_by_cache_measures(lay, lim, eb, sel, tables);
  LaunchPlan p = tables ? plain_launch_plan(lay, lim, true) : std::move(shape);
  std::ostringstream w;
  if (plain_lanes >= 2) {
    w << (1 << plain_lanes) << " lanes per output in the plain kernel";
  } else {
    w << "one lane per output, M = " << lay.M << " <= " << kShortSumMaxTerms
      << ": the short-sum kernel";
    if (p.lean_fixed_terms) w << " (" << p.Mi << " terms compiled in)";
    if (p.short_sum_tile)
      w << ", two outputs a thread sharing the loads of inputs without var " << p.tile_vars.front();
  }
  if (sel) *sel = {Variant::plain, w.str()};
  return p;
}

// make_launch_plan; without tables: the same choice and launch shape, none of the tables.
LaunchPlan select_launch_plan(const BucketLayout& lay, Variant want, const DeviceLimits& lim,
                              int eb, Selection* sel, bool tables) {
  if (!lay.unsupported.empty()) throw std::invalid_argument(lay.unsupported);
  if (want == Variant::automatic) return select_automatic(lay, lim, eb, sel, tables);
  LaunchPlan p;
  Selection s;
  if (want == Variant::plain) {
    p = plain_launch_plan(lay, lim, tables);
    s = {Variant::plain, "plain requested"};
  } else {
    p = cached_launch_plan(lay, lim, eb, tables);
    s = {Variant::cached, "cached requested"};
  }
  if (sel) *sel = s;
  return p;
}

}  // namespace

LaunchPlan make_launch_plan(const BucketLayout& lay, Variant want, const DeviceLimits& lim, int eb,
                            Selection* sel) {
  return select_launch_plan(lay, want, lim, eb, sel, true);
}

double launch_table_bytes(const BucketLayout& lay, const DeviceLimits& lim, int eb, Variant want) {
  const LaunchPlan p = select_launch_plan(lay, want, lim, eb, nullptr, false);
  const double P = static_cast<double>(p.P), pages = static_cast<double>(p.n_pages);
  double b = 4.0 * P * p.nip;  // out_lo
  if (p.variant == Variant::cached || !device_fills_pages(lim.device_fill_bytes, p.n_pages, p.nip))
    b += 8.0 * pages * p.nip;        // out_hi, unless the device fills it
  if (p.variant == Variant::cached)  // sum_lo [M], sum_hi, cache_lo, refetch
    b += 4.0 * static_cast<double>(p.M) * p.nfp + 8.0 * p.nfp + 4.0 * P * p.nfp + 4.0 * pages;
  else  // sum_lo [Mi], sum_hi [Mh / Mh2], sum_mid [Mh2]
    b += 4.0 * static_cast<double>(p.Mi) * p.nfp +
         8.0 * static_cast<double>(p.Mh / p.Mh2 + p.Mh2) * p.nfp;
  return b;
}

}  // namespace kinfer::gpu
