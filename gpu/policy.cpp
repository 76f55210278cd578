#include "gpu/policy.hpp"

#include <spdlog/spdlog.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace kinfer::gpu {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr std::int64_t kMaxIndex = (std::int64_t{1} << 31) - 1;  // 32-bit thread/item indices
constexpr std::int64_t kPlainPageMax = 1024;                     // outputs per out_lo table (plain)
constexpr std::int64_t kCachedPageMax = 4096;  // outputs one block may own (cached)
constexpr int kPlainThreads = 256;

int round_up(int x, int m) { return (x + m - 1) / m * m; }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Largest power of two <= 32 that leaves each lane at least `per_lane` summed configurations.
int lanes_log2_for(std::int64_t m, std::int64_t per_lane) {
  int l = 0;
  while (l < 5 && (m >> (l + 1)) >= per_lane) ++l;
  return l;
}

// The plain kernel's lanes per output: the most (up to 32) that leave each lane at least 16
// configurations of the inner block `mi` (the chunks of four), reduced while a lane would sum
// fewer than lim.lane_terms configurations of the whole sum `m` (the per-output work: divisions,
// the lane merge, the store), but not below lim.lanes_floor by that reduction.
int plain_lanes_log2(std::int64_t mi, std::int64_t m, const DeviceLimits& lim) {
  const int l = lanes_log2_for(mi, 16);
  int floor_log2 = 0;
  while (floor_log2 < 5 && (2 << floor_log2) <= lim.lanes_floor) ++floor_log2;
  return std::max(std::min(l, floor_log2),
                  std::min(l, lanes_log2_for(m, std::max(1, lim.lane_terms))));
}

// Whether kernel 7 (the one-lane plain kernel) takes a plain plan of M summed configurations and
// nf varying inputs: the planner then leaves it untiled.
bool lean_shape(const DeviceLimits& lim, std::int64_t M, int nf) {
  return lim.lean && M <= kLeanMaxTerms && nf <= kLeanMaxVarying;
}

// A table of `n` zeros; one of several MB in transparent huge pages where the kernel offers
// them on request (madvise), so that its first touch takes one fault per 2 MB instead of one per
// 4 kB: on the H100 machine's host a fresh 25 MB table of linkage_11 took 35 ms to build among
// 16 threads faulting at once, 6 ms on a quiet one (docs/performance.md).
template <class Int>
void zeroed_table(std::vector<Int>& table, std::size_t n) {
  table.clear();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (n * sizeof(Int) >= 2 * kHuge) {
    table.shrink_to_fit();
    table.reserve(n);  // allocated, not yet touched
    const auto begin = reinterpret_cast<std::uintptr_t>(table.data());
    const std::uintptr_t a = (begin + kHuge - 1) & ~(kHuge - 1);
    const std::uintptr_t e = (begin + n * sizeof(Int)) & ~(kHuge - 1);
    if (e > a) madvise(reinterpret_cast<void*>(a), e - a, MADV_HUGEPAGE);  // a hint: ignore errors
  }
#endif
  table.assign(n, 0);
}

// Odometer fill: table[row][slot] = sum over vars[first, last) of digit * stride[slot][var],
// rows in mixed-radix order (last var fastest). Throws when a value does not fit Int.
// Large tables: the rows of the innermost variables (a block of at most kBlockRows rows) are
// filled once, and every block after it is that block plus its outer variables' offsets (a
// vectorised add), the odometer stepping once per block: linkage_11's 25 MB table of page
// offsets took ~11 ms of odometer alone.
template <class Int>
void fill_offsets(const BucketLayout& lay, int first, int last, int slots, int width,
                  std::vector<Int>& table) {
  std::int64_t rows = 1;
  for (int i = first; i < last; ++i) rows *= lay.card[i];
  zeroed_table(table, static_cast<std::size_t>(rows * width));
  std::int64_t top = 0;
  for (int s = 0; s < slots; ++s) {
    std::int64_t m = 0;
    for (int i = first; i < last; ++i) m += (lay.card[i] - 1) * lay.stride[s][i];
    top = std::max(top, m);
  }
  if (top > static_cast<std::int64_t>(std::numeric_limits<Int>::max()))
    throw std::invalid_argument("offsets of the bucket's tables exceed " +
                                std::to_string(8 * sizeof(Int)) + " bits");
  // the odometer over vars [lo, hi): row r of `out` (rows of `width`) for r in [0, n)
  auto odometer = [&](int lo, int hi, std::int64_t n, Int* out) {
    std::vector<int> digit(lay.card.size(), 0);
    std::vector<std::int64_t> cur(slots, 0);
    for (std::int64_t r = 0; r < n; ++r) {
      for (int s = 0; s < slots; ++s) out[r * width + s] = static_cast<Int>(cur[s]);
      for (int i = hi - 1; i >= lo; --i) {
        for (int s = 0; s < slots; ++s) cur[s] += lay.stride[s][i];
        if (++digit[i] < lay.card[i]) break;
        for (int s = 0; s < slots; ++s) cur[s] -= lay.stride[s][i] * digit[i];
        digit[i] = 0;
      }
    }
  };
  constexpr std::int64_t kBlockRows = 4096;
  int split = last;  // vars [split, last) form the inner block
  std::int64_t block = 1;
  while (split > first && block * lay.card[split - 1] <= kBlockRows) block *= lay.card[--split];
  if (split == first || block < 64) {  // small, or no inner block worth replicating
    odometer(first, last, rows, table.data());
    return;
  }
  odometer(split, last, block, table.data());
  const std::int64_t outer = rows / block;
  std::vector<Int> base(static_cast<std::size_t>(outer * width), 0);
  odometer(first, split, outer, base.data());
  const std::int64_t len = block * width;
  const Int* in = table.data();
  for (std::int64_t o = 1; o < outer; ++o) {
    Int* out = table.data() + o * len;
    const Int* b = base.data() + o * width;
    for (std::int64_t r = 0; r < len; r += width)
      for (int s = 0; s < width; ++s) out[r + s] = in[r + s] + b[s];
  }
}

// Whether a plain plan's page-offset table (n_pages rows of nip) is filled by the device
// (DeviceLimits::device_fill_bytes; 0: never) rather than built on the host.
bool device_fills_pages(double device_fill, std::int64_t n_pages, int nip) {
  return device_fill > 0 && 8.0 * static_cast<double>(n_pages) * nip >= device_fill &&
         n_pages <= kMaxIndex;
}

// Output split shared by both variants: page = the lowest `page_vars` output variables.
// `cols`: table columns (the plain kernel adds the output offset as a last column).
// `device_fill`: out_hi of at least that many bytes described for the device to fill (0: never).
void fill_output_tables(const BucketLayout& lay, LaunchPlan& p, int cols, double device_fill = 0) {
  const int first = lay.k - p.page_vars;
  p.P = 1;
  for (int i = first; i < lay.k; ++i) p.P *= lay.card[i];
  std::int64_t n = 1;
  for (int i = 0; i < lay.k; ++i) n *= lay.card[i];
  p.n_pages = n / p.P;
  fill_offsets(lay, first, lay.k, cols, p.nip, p.out_lo);
  p.out_hi_fill = {};
  if (device_fills_pages(device_fill, p.n_pages, p.nip)) {
    p.out_hi.clear();
    p.out_hi.shrink_to_fit();
    p.out_hi_fill.rows = p.n_pages;
    p.out_hi_fill.card.assign(lay.card.begin(), lay.card.begin() + first);
    p.out_hi_fill.stride.assign(static_cast<std::size_t>(first) * p.nip, 0);
    for (int i = 0; i < first; ++i)
      for (int s = 0; s < cols; ++s) p.out_hi_fill.stride[i * p.nip + s] = lay.stride[s][i];
  } else {
    fill_offsets(lay, 0, first, cols, p.nip, p.out_hi);
  }
  p.div_P = FastDiv64(static_cast<std::uint32_t>(p.P));
}

int nv_of(const BucketLayout& lay) { return static_cast<int>(lay.card.size()); }

// Kernel template cases for the number of varying inputs: 0-8, then 12 and 16 (padded).
int kernel_nf(int nf) { return nf <= 8 ? nf : nf <= 12 ? 12 : 16; }

// Loads per term per output of the plain kernel's inner loop: the offset row (16-byte loads)
// and one load per varying input, shared over the tile by the inputs without its variables.
double loads_per_term(int nfp, int nf, int tile, const std::vector<char>& dep) {
  double l = nfp / 4.0;
  for (int f = 0; f < nf; ++f) l += dep[f] ? tile : 1;
  return l / tile;
}

struct TileChoice {
  std::vector<int> vars;
  int R = 1;
  bool summed = false;
  double loads = 0;
};

// The tile that saves the most loads: one output or summed variable of 2 or 4 values, or two
// binary ones. Summed tiles leave out the lowest summed variable (the lanes' contiguous run);
// output tiles must leave enough threads to fill the device.
TileChoice choose_tile(const BucketLayout& L, int nf, int nfp, const DeviceLimits& lim) {
  const int nv = static_cast<int>(L.card.size());
  TileChoice best;
  std::vector<char> none(nf, 0);
  best.loads = loads_per_term(nfp, nf, 1, none);
  if (!lim.tiles || nf == 0 || nf > kMaxTiledVarying || nf < lim.tile_min_nf) return best;
  const double base = best.loads;
  // A one-lane plan (kernel 9) takes a tile of two outputs only: an output variable of two
  // values, terms compiled in (checked again once the plan is made: direct inputs), and at least
  // one varying input without the variable (the loads the tile shares)
  const bool lean = lean_shape(lim, L.M, nf);
  if (lean && !(lim.lean_tiles && lim.lean_chunks && lean_fixed_terms_compiled(L.M)))
    return best;  // the one-lane kernel, untiled
  const std::int64_t G = lean ? 1 : std::int64_t{1} << lanes_log2_for(L.M, 16);
  const std::int64_t fill = std::int64_t{2} * lim.sm_count * lim.max_threads_per_sm;
  std::vector<std::vector<int>> cands;
  for (int i = 0; i < nv; ++i) {
    if (i == nv - 1 && i >= L.k) continue;
    if (L.card[i] == 2 || L.card[i] == 4) cands.push_back({i});
    if (L.card[i] == 2)
      for (int j = i + 1; j < nv; ++j)
        if (L.card[j] == 2 && (j < nv - 1 || j < L.k) && (i < L.k) == (j < L.k))
          cands.push_back({i, j});
  }
  for (const auto& c : cands) {
    const bool summed = c[0] >= L.k;
    int R = 1;
    for (int i : c) R *= L.card[i];
    if (R > lim.max_tile) continue;
    if (lean && (summed || R != 2)) continue;
    if (summed && L.M / R < 64) continue;
    if (!summed && lim.tile_fill && (L.n_out / R) * G < fill) continue;  // would idle it
    std::vector<char> dep(nf, 0);
    bool fits = true;
    for (int f = 0; f < nf; ++f)
      for (int i : c) {
        dep[f] = dep[f] || L.stride[f][i] != 0;
        fits = fits && (L.card[i] - 1) * L.stride[f][i] <= INT32_MAX / 2;
      }
    if (!fits) continue;
    // 1 to max_tile_dep varying inputs hold the tile variables (none: the configurations would
    // differ in constant inputs only, which no kernel's tile takes)
    const auto nd = std::count(dep.begin(), dep.end(), 1);
    if (nd < 1 || nd > lim.max_tile_dep) continue;
    if (lean && nd >= nf) continue;
    const double l = loads_per_term(nfp, nf, R, dep);
    if (l < best.loads - 1e-9) best = {c, R, summed, l};
  }
  if (best.loads > 0.8 * base) return {{}, 1, false, base};
  return best;
}

}  // namespace

BucketLayout reuse_order(const BucketLayout& lay, const DeviceLimits& lim) {
  if (lim.reuse_min_bytes <= 0 || lay.k < 2 || !lay.unsupported.empty()) return lay;
  int big = -1;
  std::int64_t size = 0;
  for (int s = 0; s < lay.n_in; ++s)
    if (lay.in_size[s] > size) {
      size = lay.in_size[s];
      big = s;
    }
  if (big < 0 || 8.0 * static_cast<double>(size) < lim.reuse_min_bytes) return lay;
  // worth it where that table outweighs the outputs and the other inputs (the writes and their
  // reads lose some of their order)
  double rest = static_cast<double>(lay.n_out);
  for (int s = 0; s < lay.n_in; ++s)
    if (s != big) rest += static_cast<double>(lay.in_size[s]);
  if (static_cast<double>(size) < lim.reuse_over_rest * rest) return lay;
  // the output variables it lacks, from the least significant up, while their product stays
  // within reuse_max_group (a warp's 32 writes then fall in runs of >= 32 / group outputs);
  // those with fewer than reuse_near outputs below them are reused from the cache where they
  // are, and stay
  std::vector<char> moved(lay.k, 0);
  std::int64_t group = 1, below = 1;
  for (int i = lay.k; i-- > 0; below *= lay.card[i]) {
    if (lay.stride[big][i] != 0 || lay.card[i] == 1 || below < lim.reuse_near) continue;
    if (group * lay.card[i] > lim.reuse_max_group) continue;
    moved[i] = 1;
    group *= lay.card[i];
  }
  if (group == 1) return lay;
  const int nv = nv_of(lay);
  std::vector<int> order;  // new position -> old one
  for (int i = 0; i < lay.k; ++i)
    if (!moved[i]) order.push_back(i);
  for (int i = 0; i < lay.k; ++i)
    if (moved[i]) order.push_back(i);
  for (int i = lay.k; i < nv; ++i) order.push_back(i);
  bool same = true;
  for (int j = 0; j < nv; ++j) same = same && order[j] == j;
  if (same) return lay;
  BucketLayout L = lay;
  for (int j = 0; j < nv; ++j) {
    L.card[j] = lay.card[order[j]];
    L.out_stride[j] = lay.out_stride[order[j]];
    for (std::size_t s = 0; s < lay.stride.size(); ++s) L.stride[s][j] = lay.stride[s][order[j]];
  }
  return L;
}

namespace {

// Plain variant: global loads through L1/L2, any shape the layout supports; the outputs are
// enumerated in reuse_order's order.
LaunchPlan plain_launch_plan(const BucketLayout& lay0, const DeviceLimits& lim,
                             bool with_tables = true) {
  const BucketLayout lay = reuse_order(lay0, lim);
  LaunchPlan p;
  p.variant = Variant::plain;
  p.nf_inputs = lay.nf;
  p.nf = kernel_nf(lay.nf);
  p.nc = lay.n_in - lay.nf;
  // the kernel's layout: padding slots (zero table) after the varying inputs, then the
  // constant ones, then the output column
  BucketLayout L = lay;
  const int nv = nv_of(lay);
  const int pad = p.nf - lay.nf;
  p.slot_input = lay.slot_input;
  p.slot_input.insert(p.slot_input.begin() + lay.nf, pad, -1);
  L.stride.insert(L.stride.begin() + lay.nf, pad, std::vector<std::int64_t>(nv, 0));
  L.stride.push_back(lay.out_stride);
  const int slots = p.nf + p.nc;
  p.nip = std::max(4, round_up(slots + 1, 4));
  p.nfp = std::max(4, round_up(p.nf, 4));
  p.n_out = lay.n_out;
  p.M = lay.M;
  // pass 0: the tile; its variables drop out of the index space (cardinality 1)
  const TileChoice tc = choose_tile(L, p.nf, p.nfp, lim);
  if (tc.R > 1) {
    // the varying slots holding a tile variable go first (the kernel loads those per
    // configuration, the rest once): a stable partition of [0, nf)
    std::vector<int> perm(p.nf);
    std::iota(perm.begin(), perm.end(), 0);
    auto holds = [&](int f) {
      for (int i : tc.vars)
        if (L.stride[f][i] != 0) return true;
      return false;
    };
    p.tile_dep =
        static_cast<int>(std::stable_partition(perm.begin(), perm.end(), holds) - perm.begin());
    std::vector<int> si(p.slot_input);
    std::vector<std::vector<std::int64_t>> st(L.stride);
    for (int f = 0; f < p.nf; ++f) {
      p.slot_input[f] = si[perm[f]];
      L.stride[f] = st[perm[f]];
    }
  }
  p.tile = tc.R;
  p.tile_summed = tc.summed;
  p.tile_vars = tc.vars;
  for (int i : tc.vars) L.card[i] = 1;
  p.n_items = tc.summed ? lay.n_out : lay.n_out / tc.R;
  const std::int64_t M = tc.summed ? lay.M / tc.R : lay.M;
  p.tile_off.assign(static_cast<std::size_t>(p.tile * p.nfp), 0);
  p.tile_all.assign(static_cast<std::size_t>(p.tile * p.nip), 0);
  for (int r = 0; r < p.tile; ++r) {
    int rest = r;
    for (std::size_t j = tc.vars.size(); j-- > 0;) {
      const int i = tc.vars[j], d = rest % lay.card[i];
      rest /= lay.card[i];
      for (int s = 0; s <= slots; ++s) p.tile_all[r * p.nip + s] += d * L.stride[s][i];
    }
    for (int f = 0; f < p.nf; ++f)
      p.tile_off[r * p.nfp + f] = static_cast<std::int32_t>(p.tile_all[r * p.nip + f]);
  }
  // pass 1: the page (outputs decomposed through two tables), with at most 2^20 pages
  p.page_vars = 0;
  std::int64_t P = 1;
  while (p.page_vars < lay.k && (P * L.card[lay.k - p.page_vars - 1] <= kPlainPageMax ||
                                 p.n_items / P > (std::int64_t{1} << 20)))
    P *= L.card[lay.k - ++p.page_vars];
  if (with_tables) {
    fill_output_tables(L, p, slots + 1, lim.device_fill_bytes);
  } else {
    std::int64_t n = 1;
    for (int i = 0; i < lay.k; ++i) n *= L.card[i];
    p.P = P;
    p.n_pages = n / P;
  }
  // pass 2: inner summed block, its table in shared memory (one row per configuration)
  const std::int64_t mi_max = p.nfp == 4 ? 2048 : p.nfp == 8 ? 1024 : 512;
  int inner_first = nv;
  p.Mi = 1;
  while (inner_first > lay.k && (p.Mi * L.card[inner_first - 1] <= mi_max || inner_first == nv)) {
    --inner_first;
    p.Mi *= L.card[inner_first];
  }
  p.Mh = M / p.Mi;
  // the outer summed block in two levels: the middle one (just above the inner block) of at
  // most mid_rows_max rows, the top one of the rest
  int mid_first = inner_first;
  p.Mh2 = 1;
  while (mid_first > lay.k && p.Mh2 * L.card[mid_first - 1] <= lim.mid_rows_max)
    p.Mh2 *= L.card[--mid_first];
  if (with_tables) {
    fill_offsets(L, inner_first, nv, p.nf, p.nfp, p.sum_lo);
    fill_offsets(L, mid_first, inner_first, p.nf, p.nfp, p.sum_mid);
    fill_offsets(L, lay.k, mid_first, p.nf, p.nfp, p.sum_hi);
  }
  p.shared_bytes = static_cast<int>(p.Mi * p.nfp * 4);
  // inputs whose inner offsets are mi itself skip the table
  for (int f = 0; f < p.nf && lim.direct && with_tables; ++f) {
    bool direct = true;
    for (std::int64_t mi = 0; mi < p.Mi && direct; ++mi) direct = p.sum_lo[mi * p.nfp + f] == mi;
    if (direct) p.direct_mask |= 1u << f;
  }
  if (p.shared_bytes > lim.shared_per_block)
    throw std::invalid_argument("the lowest summed variable has too many values for the kernel");
  // pass 3: lanes per output and splits of the summed range so the device fills up
  p.lanes_log2 = plain_lanes_log2(std::min(p.Mi, M), M, lim);
  std::int64_t G = std::int64_t{1} << p.lanes_log2;
  const std::int64_t target = std::int64_t{lim.sm_count} * lim.max_threads_per_sm * 2;
  std::int64_t S = 1;
  if (p.n_items * G < target && p.Mh > 1) {
    S = std::min({p.Mh, ceil_div(target, p.n_items * G),
                  std::max<std::int64_t>(1, M / (G * lim.split_min_terms))});
    S = std::max<std::int64_t>(S, 1);
  }
  p.mh_per_split = ceil_div(p.Mh, S);
  p.splits = static_cast<int>(ceil_div(p.Mh, p.mh_per_split));
  p.threads = kPlainThreads;
  while (p.lanes_log2 > 0 && ceil_div(p.n_items * p.splits * G, p.threads) > kMaxIndex) {
    --p.lanes_log2;
    G >>= 1;
  }
  p.blocks = ceil_div(p.n_items * p.splits * G, p.threads);
  if (p.blocks > kMaxIndex)
    throw std::invalid_argument("bucket has too many outputs for one launch");
  // (one lane, the whole sum in the inner block: Mh = 1 and one split, as kernel 9 assumes)
  p.lean = lean_shape(lim, p.M, p.nf) && p.lanes_log2 == 0 &&
           (p.tile == 1 || (p.tile == 2 && !p.tile_summed)) && p.Mh == 1 && p.splits == 1;
  // kernel 9 takes 1-3 varying inputs and rows of 4 or 8 columns, and computes the page-local
  // output index and the row offsets in 32 bits
  p.lean_chunks = p.lean && lim.lean_chunks && p.nf >= 1 && p.nip <= 8 &&
                  p.P * p.nip < (std::int64_t{1} << 31) &&
                  p.n_pages * p.nip < (std::int64_t{1} << 32);
  p.lean_fixed_terms = p.lean_chunks && lean_fixed_terms_compiled(p.Mi);
  if (p.tile == 2 && lean_shape(lim, p.M, p.nf)) {
    // a one-lane tile runs in kernel 9 alone; where kernel 9 does not take it, plan untiled
    p.lean9_tile = p.lean_fixed_terms && p.direct_mask == (1u << p.nf) - 1 &&
                   p.tile_dep >= 1 && p.tile_dep < p.nf;
    if (!p.lean9_tile) {
      DeviceLimits untiled = lim;
      untiled.lean_tiles = false;
      return plain_launch_plan(lay0, untiled, with_tables);
    }
  }
  if (p.lean && p.tile == 1 && lim.lean_two_min_items > 0 &&
      p.n_items * p.splits >= lim.lean_two_min_items) {
    p.outs = 2;
    p.blocks = ceil_div(ceil_div(p.n_items * p.splits, std::int64_t{2}), p.threads);
  }
  p.div_items = FastDiv64(static_cast<std::uint32_t>(std::min<std::int64_t>(p.n_items, 1)));
  if (p.n_items < (std::int64_t{1} << 32))
    p.div_items = FastDiv64(static_cast<std::uint32_t>(p.n_items));
  else if (p.splits > 1)
    throw std::logic_error("split plain launch with 2^32 or more outputs");
  return p;
}

struct CacheCandidate {
  bool ok = false;
  int page_vars = 0;
  std::int64_t P = 1;
  std::uint32_t mask = 0;
  std::vector<int> seg_size, pitch;
  int seg_bytes = 0;
  double hit = 0;
  std::int64_t n_pages = 1;
};

// Greedy knapsack of paper 000 section 5.1.4: value lifetime_f / size_f, largest first.
CacheCandidate plan_page(const BucketLayout& lay, int page_vars, int budget, int eb) {
  CacheCandidate c;
  c.page_vars = page_vars;
  const int first = lay.k - page_vars;
  for (int i = first; i < lay.k; ++i) c.P *= lay.card[i];
  c.n_pages = lay.n_out / c.P;
  struct Item {
    int f;
    double value;
    int bytes;
  };
  std::vector<Item> items;
  c.seg_size.assign(lay.nf, 0);
  c.pitch.assign(lay.nf, 1);
  for (int f = 0; f < lay.nf; ++f) {
    std::int64_t lo = 1;
    for (int i = first; i < lay.k; ++i)
      if (lay.stride[f][i] != 0) lo *= lay.card[i];
    const std::int64_t pitch = lo | 1;  // odd row length: strided staging writes miss no bank
    const std::int64_t bytes = lay.m_f[f] * pitch * eb;
    c.seg_size[f] = static_cast<int>(std::min<std::int64_t>(lo * lay.m_f[f], INT32_MAX));
    c.pitch[f] = static_cast<int>(std::min<std::int64_t>(pitch, INT32_MAX));
    // lifetime: pages in a row that share f's segment (page-tag digits below f's lowest)
    double life = 1;
    for (int i = first - 1; i >= 0 && lay.stride[f][i] == 0; --i) life *= lay.card[i];
    if (bytes <= budget)
      items.push_back({f, life / static_cast<double>(bytes), static_cast<int>(bytes)});
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.value > b.value; });
  int used = 0, n_cached = 0;
  for (const Item& it : items)
    if (used + it.bytes <= budget) {
      used += it.bytes;
      c.mask |= 1u << it.f;
      ++n_cached;
    }
  c.seg_bytes = used;
  c.hit = lay.nf ? static_cast<double>(n_cached) / lay.nf : 0;
  c.ok = n_cached > 0;
  return c;
}

}  // namespace

FastDiv64::FastDiv64(std::uint32_t divisor) : d(divisor) {
  if (divisor == 0) throw std::invalid_argument("FastDiv64 by zero");
  while ((std::uint64_t{1} << shift) < divisor) ++shift;
  // mul = floor(2^64 * (2^shift - d) / d) + 1 (< 2^64)
  using u128 = unsigned __int128;
  mul =
      static_cast<std::uint64_t>(((u128{1} << 64) * ((u128{1} << shift) - divisor)) / divisor + 1);
}

FastDiv::FastDiv(std::uint32_t divisor) : d(divisor) {
  if (divisor == 0) throw std::invalid_argument("FastDiv by zero");
  shift = 0;
  while ((std::uint64_t{1} << shift) < divisor) ++shift;
  // mul = floor(2^32 * (2^shift - d) / d) + 1
  mul = static_cast<std::uint32_t>(
      ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - divisor)) / divisor + 1);
}

const char* to_string(Variant v) {
  switch (v) {
    case Variant::automatic:
      return "automatic";
    case Variant::cached:
      return "cached";
    case Variant::plain:
      return "plain";
  }
  return "?";
}

std::vector<std::int64_t> host_out_hi(const LaunchPlan& p) {
  const LaunchPlan::OffsetFill& f = p.out_hi_fill;
  if (f.rows == 0) return p.out_hi;
  // each row's digits by division (the device kernel's way; fill_offsets steps an odometer)
  std::vector<std::int64_t> t(static_cast<std::size_t>(f.rows * p.nip), 0);
  const int nv = static_cast<int>(f.card.size());
  for (std::int64_t r = 0; r < f.rows; ++r) {
    std::int64_t rest = r;
    for (int v = nv - 1; v >= 0; --v) {
      const std::int64_t d = rest % f.card[v];
      rest /= f.card[v];
      for (int s = 0; s < p.nip; ++s) t[r * p.nip + s] += d * f.stride[v * p.nip + s];
    }
  }
  return t;
}

double LaunchPlan::table_bytes() const {
  double b = 0;
  for_each_device_table(*this, [&](const auto& t) { b += sizeof(t[0]) * t.size(); });
  return b;
}

BucketLayout describe(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  BucketLayout lay;
  const int nv = static_cast<int>(shape.vars.size());
  lay.card = shape.card;
  lay.k = nv - shape.n_marg;
  lay.n_in = static_cast<int>(scopes.size());
  lay.n_out = shape.output_size();
  lay.M = shape.marg_size();
  std::vector<std::vector<std::int64_t>> st(scopes.size(), std::vector<std::int64_t>(nv, 0));
  std::vector<std::int64_t> size(scopes.size(), 1);
  for (std::size_t f = 0; f < scopes.size(); ++f)
    size[f] = input_strides(shape, scopes[f], st[f].data());
  std::vector<int> varying, constant;
  for (std::size_t f = 0; f < scopes.size(); ++f) {
    bool v = false;
    for (int i = lay.k; i < nv; ++i) v |= st[f][i] != 0;
    (v ? varying : constant).push_back(static_cast<int>(f));
  }
  lay.nf = static_cast<int>(varying.size());
  lay.slot_input = varying;
  lay.slot_input.insert(lay.slot_input.end(), constant.begin(), constant.end());
  for (int f : lay.slot_input) {
    lay.stride.push_back(st[f]);
    lay.in_size.push_back(size[f]);
  }
  for (int s = 0; s < lay.nf; ++s) {
    std::int64_t m = 1;
    for (int i = lay.k; i < nv; ++i)
      if (lay.stride[s][i] != 0) m *= lay.card[i];
    lay.m_f.push_back(m);
  }
  lay.out_stride.assign(nv, 0);
  for (std::int64_t i = lay.k - 1, so = 1; i >= 0; --i) {
    lay.out_stride[i] = so;
    so *= lay.card[i];
  }
  std::ostringstream why;
  if (lay.n_in > kMaxInputs)
    why << lay.n_in << " inputs (the GPU kernels take at most " << kMaxInputs << ")";
  else if (lay.nf > kMaxVarying)
    why << lay.nf << " inputs vary with the summed variables (the GPU kernels take at most "
        << kMaxVarying << ")";
  lay.unsupported = why.str();
  return lay;
}

bool cached_possible(const BucketLayout& lay, const DeviceLimits& lim, int /*eb*/,
                     std::string& why) {
  if (lay.nf == 0) {
    why = "no input varies with the summed variables: nothing to cache";
    return false;
  }
  if (lay.nf > kMaxCachedVarying) {
    why = std::to_string(lay.nf) +
          " inputs vary with the summed variables (the cached kernel takes " +
          std::to_string(kMaxCachedVarying) + ")";
    return false;
  }
  const std::int64_t sum_table = lay.M * std::max(4, round_up(lay.nf, 4)) * 4;
  if (sum_table > lim.shared_per_block / 2) {
    why = "the summed range (" + std::to_string(lay.M) +
          " configurations) needs a table too large for shared memory";
    return false;
  }
  return true;
}

LaunchPlan cached_launch_plan(const BucketLayout& lay, const DeviceLimits& lim, int eb,
                              bool with_tables) {
  std::string why;
  if (!cached_possible(lay, lim, eb, why)) throw std::invalid_argument(why);
  LaunchPlan p;
  p.variant = Variant::cached;
  p.nf = lay.nf;
  p.nf_inputs = lay.nf;
  p.slot_input = lay.slot_input;
  p.n_items = lay.n_out;
  p.nc = lay.n_in - lay.nf;
  p.nip = std::max(4, round_up(lay.n_in, 4));
  p.nfp = std::max(4, round_up(lay.nf, 4));
  p.n_out = lay.n_out;
  p.M = lay.M;
  p.Mi = lay.M;
  p.Mh = 1;
  p.lanes_log2 = lanes_log2_for(lay.M, 16);
  const std::int64_t G = std::int64_t{1} << p.lanes_log2;
  const int sum_table = static_cast<int>(lay.M * p.nfp * 4);
  // pass 1: pick the page. Budgets: a quarter, a half or all of an SM's shared memory; the
  // page with the most loads served from shared memory wins, then the one with the most
  // resident threads, then the larger page (more reuse across its outputs).
  CacheCandidate best;
  double best_occ = 0;
  for (int share : {4, 2, 1}) {
    const int budget =
        std::min(lim.shared_per_block, lim.shared_per_sm / share - lim.block_overhead) - sum_table;
    if (budget <= 0) continue;
    std::int64_t P = 1;
    for (int pv = 0; pv <= lay.k; ++pv) {
      if (pv > 0) P *= lay.card[lay.k - pv];
      if (P > kCachedPageMax) break;
      const std::int64_t n_pages = lay.n_out / P;
      if (n_pages > (std::int64_t{1} << 20)) continue;  // page tables of at most 2^20 rows
      // keep enough blocks for the device unless the bucket is small anyway
      if (pv > 0 && n_pages < 2 * lim.sm_count && P * G > 32) break;
      CacheCandidate c = plan_page(lay, pv, budget, eb);
      if (!c.ok) continue;
      const int threads = static_cast<int>(std::min<std::int64_t>(
          256, std::max<std::int64_t>(
                   32, round_up(static_cast<int>(std::min<std::int64_t>(P * G, 1 << 20)), 32))));
      const int smem = c.seg_bytes + sum_table;
      const int by_smem = lim.shared_per_sm / (smem + lim.block_overhead);
      const int by_threads = lim.max_threads_per_sm / threads;
      // useful resident threads: idle lanes of a too-large block do not count
      const double occ = static_cast<double>(std::min({by_smem, by_threads, 32})) *
                         static_cast<double>(std::min<std::int64_t>(P * G, threads));
      const bool better = !best.ok || c.hit > best.hit + 1e-9 ||
                          (std::abs(c.hit - best.hit) < 1e-9 &&
                           (std::min(occ, 1024.0) > std::min(best_occ, 1024.0) ||
                            (std::min(occ, 1024.0) == std::min(best_occ, 1024.0) && c.P > best.P)));
      if (better) {
        best = c;
        best_occ = occ;
      }
    }
  }
  if (!best.ok) throw std::invalid_argument("no input segment fits in shared memory");
  p.page_vars = best.page_vars;
  if (with_tables) {
    fill_output_tables(lay, p, lay.n_in);
  } else {
    p.P = best.P;
    p.n_pages = best.n_pages;
    p.div_P = FastDiv64(static_cast<std::uint32_t>(p.P));
  }
  p.cached_mask = best.mask;
  p.seg_size = best.seg_size;
  p.pitch = best.pitch;
  p.hit_fraction = best.hit;
  // pass 2: shared memory layout: segments, then the sum table (16-byte aligned)
  p.seg_off.assign(lay.nf, 0);
  int off = 0;
  for (int f = 0; f < lay.nf; ++f)
    if (p.cached_mask >> f & 1) {
      p.seg_off[f] = off;
      off += static_cast<int>(lay.m_f[f] * p.pitch[f]);
    }
  p.sum_table_offset = round_up(off * eb, 16);
  p.shared_bytes = p.sum_table_offset + sum_table;
  // pass 3: block shape; pages per block as long as the device still gets two waves of blocks
  p.threads = static_cast<int>(std::min<std::int64_t>(
      256, std::max<std::int64_t>(
               32, round_up(static_cast<int>(std::min<std::int64_t>(p.P * G, 1 << 20)), 32))));
  const int per_sm =
      std::max(1, std::min({lim.shared_per_sm / (p.shared_bytes + lim.block_overhead),
                            lim.max_threads_per_sm / p.threads, 32}));
  const std::int64_t want_blocks = std::int64_t{2} * lim.sm_count * per_sm;
  p.pages_per_block = static_cast<int>(std::clamp<std::int64_t>(p.n_pages / want_blocks, 1, 64));
  p.blocks = ceil_div(p.n_pages, p.pages_per_block);
  const double useful = static_cast<double>(std::min<std::int64_t>(p.P * G, p.threads));
  p.resident_threads = per_sm * useful;
  p.launch_threads = static_cast<double>(p.blocks) * useful;
  if (!with_tables) {
    // The selector's measures alone. Segment f is fetched on a page where its offset changes
    // or a block starts. Pages count the output digits above the page, the last fastest; f's
    // offset changes exactly where the carry reaches its lowest digit with a nonzero stride and
    // more than one value (row-major strides: a change of a digit f depends on always moves the
    // offset), i.e. on
    // the multiples of L = the product of the cardinalities of the digits below that one.
    const int first = lay.k - p.page_vars;
    const std::int64_t n = p.n_pages, ppb = p.pages_per_block;
    auto multiples = [n](std::int64_t x) { return ceil_div(n, x); };  // of x in [0, n)
    p.min_reuse = std::numeric_limits<double>::infinity();
    for (int f = 0; f < lay.nf; ++f) {
      if (!(p.cached_mask >> f & 1)) {
        p.div_mf.push_back(FastDiv(1));
        continue;
      }
      p.div_mf.push_back(FastDiv(static_cast<std::uint32_t>(lay.m_f[f])));
      std::int64_t L = 1;
      for (int i = first - 1; i >= 0 && (lay.stride[f][i] == 0 || lay.card[i] == 1); --i)
        L *= lay.card[i];  // a digit of cardinality 1 never changes
      const std::int64_t both = std::lcm(L, ppb);
      const double fetches = static_cast<double>(multiples(L) + multiples(ppb) - multiples(both));
      const double uses = static_cast<double>(lay.n_out) * lay.M;
      p.min_reuse = std::min(p.min_reuse, uses / (fetches * p.seg_size[f]));
    }
    return p;
  }
  // pass 4: tables. Cached inputs are read as cache[s * pitch + lo]; others from global memory.
  std::vector<std::int32_t> sidx;
  fill_offsets(lay, lay.k, nv_of(lay), lay.nf, p.nfp, sidx);
  p.sum_lo = sidx;
  for (std::int64_t m = 0; m < lay.M; ++m)
    for (int f = 0; f < lay.nf; ++f)
      if (p.cached_mask >> f & 1) p.sum_lo[m * p.nfp + f] = sidx[m * p.nfp + f] * p.pitch[f];
  p.sum_hi.assign(p.nfp, 0);
  p.cache_lo.assign(static_cast<std::size_t>(p.P * p.nfp), 0);
  for (std::int64_t ol = 0; ol < p.P; ++ol)
    for (int f = 0; f < lay.nf; ++f) {
      const std::int32_t g = p.out_lo[ol * p.nip + f];
      p.cache_lo[ol * p.nfp + f] =
          (p.cached_mask >> f & 1) ? g / static_cast<std::int32_t>(lay.m_f[f]) : g;
    }
  p.refetch.assign(p.n_pages, 0);
  std::vector<double> fetches(lay.nf, 0);
  for (std::int64_t pg = 0; pg < p.n_pages; ++pg) {
    std::uint32_t bits = 0;
    for (int f = 0; f < lay.nf; ++f)
      if (pg == 0 || p.out_hi[pg * p.nip + f] != p.out_hi[(pg - 1) * p.nip + f]) bits |= 1u << f;
    p.refetch[pg] = bits & p.cached_mask;
    const bool block_start = pg % p.pages_per_block == 0;
    for (int f = 0; f < lay.nf; ++f)
      if ((p.cached_mask >> f & 1) && (block_start || (bits >> f & 1))) fetches[f] += 1;
  }
  p.min_reuse = std::numeric_limits<double>::infinity();
  for (int f = 0; f < lay.nf; ++f)
    if (p.cached_mask >> f & 1) {
      p.div_mf.push_back(FastDiv(static_cast<std::uint32_t>(lay.m_f[f])));
      const double uses = static_cast<double>(lay.n_out) * lay.M;
      p.min_reuse = std::min(p.min_reuse, uses / (fetches[f] * p.seg_size[f]));
    } else {
      p.div_mf.push_back(FastDiv(1));
    }
  return p;
}

// The selector. Its thresholds come from bucket_bench measurements (docs/performance.md): the
// software cache pays when the staged data is reused enough to amortize staging and barriers.
namespace {

// make_launch_plan; without tables: the same choice and launch shape, none of the tables.
LaunchPlan select_launch_plan(const BucketLayout& lay, Variant want, const DeviceLimits& lim,
                              int eb, Selection* sel, bool tables) {
  if (!lay.unsupported.empty()) throw std::invalid_argument(lay.unsupported);
  Selection s;
  LaunchPlan p;
  if (want == Variant::plain) {
    p = plain_launch_plan(lay, lim, tables);
    s = {Variant::plain, "plain requested"};
  } else if (want == Variant::cached) {
    p = cached_launch_plan(lay, lim, eb, tables);
    s = {Variant::cached, "cached requested"};
  } else {
    std::string why;
    std::ostringstream w;
    // 4 or more lanes per output in the plain kernel (its inner summed block of 64+ terms): the
    // plain kernel, tiled or not, was as fast or faster than the cache on every such bucket of
    // device calls 5-6 (kernel 5, nvidia-h100-x1: 0.58-1.04x of the cached time over 129
    // linkage and random buckets); the cached kernel's thresholds below were
    // fitted before the plain kernel's chunks, direct inputs and tiles.
    LaunchPlan shape;  // the plain launch's shape (no tables); none: the cache decides
    try {
      shape = plain_launch_plan(lay, lim, false);
    } catch (const std::invalid_argument&) {
    }
    const int plain_lanes = shape.lanes_log2;
    // Kernel 9 (the one-lane kernel of its own: 1-3 varying inputs, output rows of <= 8 columns)
    // ran linkage buckets of M = 2, 8 and 12 1.25-1.6x faster than the cached kernel the rule
    // below chose for them, and one of M = 16 1.44x slower (H100): it takes one-lane buckets of
    // up to kLean9MaxTerms terms.
    const bool kernel9 = eb == 8 && shape.lean_chunks && lay.M <= kLean9MaxTerms;
    if (plain_lanes >= 2) {
      p = tables ? plain_launch_plan(lay, lim, true) : std::move(shape);
      w << (1 << plain_lanes) << " lanes per output in the plain kernel";
      s = {Variant::plain, w.str()};
    } else if (kernel9) {
      p = tables ? plain_launch_plan(lay, lim, true) : std::move(shape);
      w << "one lane per output, M = " << lay.M << " <= " << kLean9MaxTerms << ": kernel 9";
      if (p.lean_fixed_terms) w << " (" << p.Mi << " terms compiled in)";
      if (p.lean9_tile) w << ", two outputs a thread sharing the loads of inputs without var "
                          << p.tile_vars.front();
      s = {Variant::plain, w.str()};
    } else if (!cached_possible(lay, lim, eb, why)) {
      p = plain_launch_plan(lay, lim, tables);
      s = {Variant::plain, why};
    } else {
      LaunchPlan c;  // the selector's measures only: its tables are built if it wins
      try {
        c = cached_launch_plan(lay, lim, eb, false);
      } catch (const std::invalid_argument& e) {
        p = plain_launch_plan(lay, lim, tables);
        if (sel) *sel = {Variant::plain, e.what()};
        return p;
      }
      // Thresholds from bucket_bench on an H200: the cache lost on
      // every bucket whose staged values were used fewer than 3 times, whose blocks left an
      // SM with fewer than 512 working threads (large segments, tiny pages), or whose launch
      // could not fill the device; with reuse 3-4 it won only at near-full occupancy.
      constexpr double kMinReuse = 3, kGoodReuse = 5;
      constexpr double kMinResident = 512, kFullResident = 1536;
      const double fill = static_cast<double>(lim.sm_count) * kMinResident;
      // One lane per output (M < 32): the plain kernel's warps read 32 runs M values apart,
      // while staging reads them coalesced, so the cache wins even when a staged value is used
      // once, as long as the varying inputs are small next to the terms (reused through L2).
      // Measured on the H100: linkage buckets of M = 8-16 with 0.06-1.0 input bytes per term
      // 1.4-1.5x faster cached; random buckets of M = 18-24 with 4 and 19 bytes per term 1.3x and
      // 2.4x slower cached. The threshold is 1 since kernels 6-7 (random buckets of 1.2-1.5 bytes
      // per term ran 2x slower cached).
      constexpr double kOneLaneBytesPerTerm = 1;
      double in_bytes = 0;
      for (int f = 0; f < lay.nf; ++f) in_bytes += static_cast<double>(lay.in_size[f]) * eb;
      const double terms = static_cast<double>(lay.n_out) * static_cast<double>(lay.M);
      const int lanes_log2 = plain_lanes_log2(lay.M, lay.M, lim);
      const bool one_lane = lanes_log2 == 0;
      if (one_lane && in_bytes < kOneLaneBytesPerTerm * terms &&
          c.resident_threads >= kMinResident && c.launch_threads >= fill) {
        w << "one lane per output in the plain kernel, inputs " << in_bytes / terms
          << " bytes per term: staging coalesces the reads, " << c.resident_threads
          << " threads per SM";
        if (sel) *sel = {Variant::cached, w.str()};
        return cached_launch_plan(lay, lim, eb, tables);
      }
      // Two lanes per output (M = 32-63) have no rule of their own but the general one below: a
      // rule sending them to the cache at a lower reuse helped the benchmark's buckets but
      // slowed the largest bucket of linkage_17's own order 1.5x.
      if (c.min_reuse < kMinReuse) {
        w << "staged values would be used only " << c.min_reuse << " times (< " << kMinReuse << ")";
      } else if (c.resident_threads < kMinResident) {
        w << "the cache leaves " << c.resident_threads << " working threads per SM (< "
          << kMinResident << "): segments too large for the page";
      } else if (c.launch_threads < fill) {
        w << "the cached launch has " << c.launch_threads << " working threads, too few to fill "
          << lim.sm_count << " SMs";
      } else if (c.min_reuse < kGoodReuse && c.resident_threads < kFullResident) {
        w << "staged values used " << c.min_reuse << " times at " << c.resident_threads
          << " threads per SM: not enough to pay for staging";
      }
      if (!w.str().empty()) {
        c = LaunchPlan{};  // its tables go before the plain plan's are built (peak memory)
        p = plain_launch_plan(lay, lim, tables);
        s = {Variant::plain, w.str()};
      } else {
        w << c.hit_fraction * 100 << "% of loads from shared memory, staged values used "
          << c.min_reuse << "+ times, " << c.resident_threads << " threads per SM";
        c = LaunchPlan{};
        p = cached_launch_plan(lay, lim, eb, tables);
        s = {Variant::cached, w.str()};
      }
    }
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
    b += 8.0 * pages * p.nip;  // out_hi, unless the device fills it
  if (p.variant == Variant::cached)                  // sum_lo [M], sum_hi, cache_lo, refetch
    b += 4.0 * static_cast<double>(p.M) * p.nfp + 8.0 * p.nfp + 4.0 * P * p.nfp + 4.0 * pages;
  else  // sum_lo [Mi], sum_hi [Mh / Mh2], sum_mid [Mh2]
    b += 4.0 * static_cast<double>(p.Mi) * p.nfp +
         8.0 * static_cast<double>(p.Mh / p.Mh2 + p.Mh2) * p.nfp;
  return b;
}

void log_plan_prepared(const LaunchPlan& p, double table_bytes, double build_ms, double wait_ms,
                       double upload_ms) {
  spdlog::debug(
      "kernel plan of {} outputs x {} terms ({}, {} varying inputs, Mi {}, Mh {} = {} x {}): "
      "built in {:.1f} ms, {:.1f} MB of tables, lock waited {:.1f} ms, uploaded in {:.1f} ms",
      p.n_out, p.M, to_string(p.variant), p.nf_inputs, p.Mi, p.Mh, p.Mh / p.Mh2, p.Mh2, build_ms,
      table_bytes / 1e6, wait_ms, upload_ms);
}

KernelChoice summarize(const LaunchPlan& p, const Selection& s) {
  KernelChoice k;
  k.variant = p.variant;
  k.why = s.why;
  k.threads = p.threads;
  k.lanes = 1 << p.lanes_log2;
  k.splits = p.splits;
  k.pages_per_block = p.pages_per_block;
  k.blocks = p.blocks;
  k.page_outputs = p.P;
  k.varying_inputs = p.nf_inputs;
  k.tile = p.tile;
  k.cached_inputs = __builtin_popcount(p.cached_mask);
  k.shared_bytes = p.shared_bytes;
  k.hit_fraction = p.hit_fraction;
  return k;
}

// ---- host emulation of the kernels' table walk ----

namespace {

struct HostLse {
  double mx = kNegInf, acc = 0;
  void add(double x) {
    if (x == kNegInf) return;
    if (x > mx) {
      acc = acc * std::exp(mx - x) + 1;
      mx = x;
    } else {
      acc += std::exp(x - mx);
    }
  }
  void merge(const HostLse& o) {
    if (o.mx == kNegInf) return;
    if (o.mx > mx) {
      acc = acc * std::exp(mx - o.mx) + o.acc;
      mx = o.mx;
    } else {
      acc += o.acc * std::exp(o.mx - mx);
    }
  }
  double value() const { return mx == kNegInf ? kNegInf : mx + std::log(acc); }
};

}  // namespace

void emulate(const LaunchPlan& p, const BucketLayout& lay, std::span<const InputTable> inputs,
             double* out) {
  const std::vector<std::int64_t> out_hi = host_out_hi(p);  // the device may fill its own
  static const double zero = 0;
  const int slots = p.nf + p.nc;
  std::vector<const double*> in(slots);
  for (int s = 0; s < slots; ++s)
    in[s] = p.slot_input[s] < 0 ? &zero : inputs[p.slot_input[s]].data;
  const int G = 1 << p.lanes_log2;
  const int nf = p.nf;
  auto const_part = [&](std::int64_t page, std::int64_t ol) {
    double c = 0;
    for (int s = nf; s < slots; ++s)
      c += in[s][out_hi[page * p.nip + s] + p.out_lo[ol * p.nip + s]];
    return c;
  };
  if (p.variant == Variant::plain) {
    std::vector<HostLse> part(static_cast<std::size_t>(p.n_out) * p.splits);
    const int R = p.tile;
    for (std::int64_t item = 0; item < p.n_items * p.splits; ++item) {
      const std::int64_t sp = p.splits == 1 ? 0 : static_cast<std::int64_t>(p.div_items.div(item));
      const std::int64_t o = item - sp * p.n_items;
      const std::int64_t page = p.div_P.div(o), ol = o - page * p.P;
      std::vector<std::int64_t> base(slots + 1);
      for (int s = 0; s <= slots; ++s)
        base[s] = out_hi[page * p.nip + s] + p.out_lo[ol * p.nip + s];
      std::vector<HostLse> acc(R);
      for (int r = 0; r < R; ++r) {
        double c = 0;
        for (int s = nf; s < slots; ++s) c += in[s][base[s] + p.tile_all[r * p.nip + s]];
        for (int g = 0; g < G; ++g) {
          HostLse l;
          const std::int64_t mh_end = std::min(p.Mh, (sp + 1) * p.mh_per_split);
          for (std::int64_t mh = sp * p.mh_per_split; mh < mh_end; ++mh) {
            const std::int64_t mt = mh / p.Mh2, mm = mh % p.Mh2;
            for (std::int64_t mi = g; mi < p.Mi; mi += G) {
              double x = c;
              for (int f = 0; f < nf; ++f) {
                // kernel 2 reads a direct input at mi itself, without the table
                const std::int64_t lo = (p.direct_mask >> f & 1) ? mi : p.sum_lo[mi * p.nfp + f];
                x += in[f][base[f] + p.sum_hi[mt * p.nfp + f] + p.sum_mid[mm * p.nfp + f] + lo +
                           p.tile_off[r * p.nfp + f]];
              }
              l.add(x);
            }
          }
          acc[r].merge(l);
        }
      }
      if (p.tile_summed) {
        for (int r = 1; r < R; ++r) acc[0].merge(acc[r]);
        part[sp * p.n_out + base[slots]] = acc[0];
      } else {
        for (int r = 0; r < R; ++r)
          part[sp * p.n_out + base[slots] + p.tile_all[r * p.nip + slots]] = acc[r];
      }
    }
    for (std::int64_t o = 0; o < p.n_out; ++o) {
      HostLse t;
      for (int sp = 0; sp < p.splits; ++sp) t.merge(part[sp * p.n_out + o]);
      out[o] = t.value();
    }
    return;
  }
  // cached: blocks walk pages_per_block pages, restaging only the segments the policy marks
  std::size_t cache_elems = 0;
  for (int f = 0; f < nf; ++f)
    if (p.cached_mask >> f & 1) cache_elems += lay.m_f[f] * p.pitch[f];
  std::vector<double> cache(cache_elems, std::nan(""));
  for (std::int64_t b = 0; b < p.blocks; ++b) {
    const std::int64_t first = b * p.pages_per_block;
    const std::int64_t last = std::min(p.n_pages, first + p.pages_per_block);
    std::fill(cache.begin(), cache.end(), std::nan(""));  // a new block sees garbage
    for (std::int64_t page = first; page < last; ++page) {
      const std::uint32_t bits = page == first ? p.cached_mask : p.refetch[page];
      for (int f = 0; f < nf; ++f) {
        if (!(bits >> f & 1)) continue;
        const double* src = in[f] + out_hi[page * p.nip + f];
        for (int e = 0; e < p.seg_size[f]; ++e) {
          const int lo = static_cast<int>(p.div_mf[f].div(e));
          const int s = e - lo * static_cast<int>(lay.m_f[f]);
          cache.at(p.seg_off[f] + s * p.pitch[f] + lo) = src[e];
        }
      }
      for (std::int64_t ol = 0; ol < p.P; ++ol) {
        const double c = const_part(page, ol);
        HostLse total;
        for (int g = 0; g < G; ++g) {
          HostLse l;
          for (std::int64_t m = g; m < p.M; m += G) {
            double x = c;
            for (int f = 0; f < nf; ++f) {
              const std::int32_t t = p.sum_lo[m * p.nfp + f];
              if (p.cached_mask >> f & 1)
                x += cache.at(p.seg_off[f] + p.cache_lo[ol * p.nfp + f] + t);
              else
                x += in[f][out_hi[page * p.nip + f] + p.cache_lo[ol * p.nfp + f] + t];
            }
            l.add(x);
          }
          total.merge(l);
        }
        out[page * p.P + ol] = total.value();
      }
    }
  }
}

}  // namespace kinfer::gpu
