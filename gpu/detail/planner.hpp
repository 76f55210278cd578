#pragma once
// What the planner's files share (policy.cpp, plan_tables.cpp, plain_plan.cpp, cached_plan.cpp,
// selector.cpp): launch-shape limits, the lanes rule, and the offset tables' builders. Private
// to gpu/.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu/policy.hpp"

namespace kinfer::gpu::detail {

constexpr std::int64_t kMaxIndex = (std::int64_t{1} << 31) - 1;  // 32-bit thread/item indices
constexpr std::int64_t kPlainPageMax = 1024;                     // outputs per out_lo table (plain)
constexpr std::int64_t kCachedPageMax = 4096;  // outputs one block may own (cached)
constexpr int kPlainThreads = 256;

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline int nv_of(const BucketLayout& lay) { return static_cast<int>(lay.card.size()); }

// Largest power of two <= 32 that leaves each lane at least `per_lane` summed configurations.
inline int lanes_log2_for(std::int64_t m, std::int64_t per_lane) {
  int l = 0;
  while (l < 5 && (m >> (l + 1)) >= per_lane) ++l;
  return l;
}

// The plain kernel's lanes per output: the most (up to 32) that leave each lane at least 16
// configurations of the inner block `mi` (the chunks of four), reduced while a lane would sum
// fewer than lim.lane_terms configurations of the whole sum `m` (the per-output work: divisions,
// the lane merge, the store), but not below lim.lanes_floor by that reduction.
inline int plain_lanes_log2(std::int64_t mi, std::int64_t m, const DeviceLimits& lim) {
  const int l = lanes_log2_for(mi, 16);
  int floor_log2 = 0;
  while (floor_log2 < 5 && (2 << floor_log2) <= lim.lanes_floor) ++floor_log2;
  return std::max(std::min(l, floor_log2),
                  std::min(l, lanes_log2_for(m, std::max(1, lim.lane_terms))));
}

// Whether a one-lane kernel (LaunchPlan::lean) takes a plain plan of M summed configurations and
// nf varying inputs: the planner then leaves it untiled.
inline bool lean_shape(const DeviceLimits& lim, std::int64_t M, int nf) {
  return lim.lean && M <= kLeanMaxTerms && nf <= kLeanMaxVarying;
}

// Odometer fill: table[row][slot] = sum over vars[first, last) of digit * stride[slot][var],
// rows in mixed-radix order (last var fastest), rows of `width` entries (slots and padding).
// Throws when a value does not fit Int (std::int32_t or std::int64_t).
template <class Int>
void fill_offsets(const BucketLayout& lay, int first, int last, int slots, int width,
                  std::vector<Int>& table);

// Whether a plain plan's page-offset table (n_pages rows of nip) is filled by the device
// (DeviceLimits::device_fill_bytes; 0: never) rather than built on the host.
bool device_fills_pages(double device_fill, std::int64_t n_pages, int nip);

// Output split shared by both variants: page = the lowest `page_vars` output variables.
// `cols`: table columns (the plain kernel adds the output offset as a last column).
// `device_fill`: out_hi of at least that many bytes described for the device to fill (0: never).
void fill_output_tables(const BucketLayout& lay, LaunchPlan& p, int cols, double device_fill = 0);

// The plain variant's launch (plain_plan.cpp); without tables: the launch shape only.
LaunchPlan plain_launch_plan(const BucketLayout& lay0, const DeviceLimits& lim,
                             bool with_tables = true);

}  // namespace kinfer::gpu::detail
