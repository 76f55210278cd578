// The plain variant's planner: the tile, the reuse order of the outputs, and the launch (pages,
// summed blocks, lanes, splits, the one-lane kernels).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "gpu/detail/planner.hpp"
#include "gpu/policy.hpp"

namespace kinfer::gpu {

using namespace detail;

namespace {

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
  // A one-lane plan (the short-sum kernel) takes a tile of two outputs only: an output variable of
  // two values, terms compiled in (checked again once the plan is made: direct inputs), and at
  // least one varying input without the variable (the loads the tile shares)
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

namespace detail {

namespace {

// The kernel's slots of a plain plan: the varying inputs, padding slots (the zero table) up to
// the kernel's template case, then the constant inputs; the tables have one more column, the
// output offset. Returns the layout in that slot order (its stride[nf + nc] is the output's).
BucketLayout plain_slots(const BucketLayout& lay, LaunchPlan& p) {
  p.variant = Variant::plain;
  p.nf_inputs = lay.nf;
  p.nf = kernel_nf(lay.nf);
  p.nc = lay.n_in - lay.nf;
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
  return L;
}

// Takes the tile tc into p: the varying slots holding a tile variable go first (the kernel loads
// those per configuration, the rest once), the tile's variables drop out of L's index space
// (cardinality 1), and each configuration's offsets go to tile_off and tile_all. Returns the
// summed configurations per item.
std::int64_t apply_tile(const BucketLayout& lay, const TileChoice& tc, BucketLayout& L,
                        LaunchPlan& p) {
  const int slots = p.nf + p.nc;
  if (tc.R > 1) {
    // a stable partition of [0, nf)
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
  return M;
}

// The page (outputs decomposed through two tables), of at most kPlainPageMax outputs unless
// that would leave more than 2^20 pages.
void plan_plain_pages(const BucketLayout& lay, const BucketLayout& L, const DeviceLimits& lim,
                      bool with_tables, LaunchPlan& p) {
  p.page_vars = 0;
  std::int64_t P = 1;
  while (p.page_vars < lay.k && (P * L.card[lay.k - p.page_vars - 1] <= kPlainPageMax ||
                                 p.n_items / P > (std::int64_t{1} << 20)))
    P *= L.card[lay.k - ++p.page_vars];
  if (with_tables) {
    fill_output_tables(L, p, p.nf + p.nc + 1, lim.device_fill_bytes);
  } else {
    std::int64_t n = 1;
    for (int i = 0; i < lay.k; ++i) n *= L.card[i];
    p.P = P;
    p.n_pages = n / P;
  }
}

// The summed range of M configurations in three levels: the inner block (its table in shared
// memory, one row per configuration), then the outer block in two tables, the middle one (just
// above the inner block) of at most mid_rows_max rows, the top one of the rest. Inputs whose
// inner offsets are mi itself skip the table (direct_mask).
void plan_summed_blocks(const BucketLayout& lay, const BucketLayout& L, const DeviceLimits& lim,
                        std::int64_t M, bool with_tables, LaunchPlan& p) {
  const int nv = nv_of(lay);
  const std::int64_t mi_max = p.nfp == 4 ? 2048 : p.nfp == 8 ? 1024 : 512;
  int inner_first = nv;
  p.Mi = 1;
  while (inner_first > lay.k && (p.Mi * L.card[inner_first - 1] <= mi_max || inner_first == nv)) {
    --inner_first;
    p.Mi *= L.card[inner_first];
  }
  p.Mh = M / p.Mi;
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
  for (int f = 0; f < p.nf && lim.direct && with_tables; ++f) {
    bool direct = true;
    for (std::int64_t mi = 0; mi < p.Mi && direct; ++mi) direct = p.sum_lo[mi * p.nfp + f] == mi;
    if (direct) p.direct_mask |= 1u << f;
  }
  if (p.shared_bytes > lim.shared_per_block)
    throw std::invalid_argument("the lowest summed variable has too many values for the kernel");
}

// Lanes per output and splits of the summed range so the device fills up (two waves of
// threads), each lane keeping at least split_min_terms terms.
void plan_lanes_and_splits(const DeviceLimits& lim, std::int64_t M, LaunchPlan& p) {
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
}

// Which one-lane kernel takes p, if any: lean (one lane, the whole sum in the inner block:
// Mh = 1 and one split, as the short-sum kernel assumes); lean_chunks, the short-sum kernel
// (1-3 varying inputs, rows of 4 or 8 columns, the page-local output index and the row offsets
// in 32 bits); its term count compiled in; its tile of two outputs.
void plan_one_lane(const DeviceLimits& lim, LaunchPlan& p) {
  p.lean = lean_shape(lim, p.M, p.nf) && p.lanes_log2 == 0 &&
           (p.tile == 1 || (p.tile == 2 && !p.tile_summed)) && p.Mh == 1 && p.splits == 1;
  p.lean_chunks = p.lean && lim.lean_chunks && p.nf >= 1 && p.nip <= 8 &&
                  p.P * p.nip < (std::int64_t{1} << 31) &&
                  p.n_pages * p.nip < (std::int64_t{1} << 32);
  p.lean_fixed_terms = p.lean_chunks && lean_fixed_terms_compiled(p.Mi);
  if (p.tile == 2 && lean_shape(lim, p.M, p.nf))
    p.short_sum_tile = p.lean_fixed_terms && p.direct_mask == (1u << p.nf) - 1 && p.tile_dep >= 1 &&
                       p.tile_dep < p.nf;
}

}  // namespace

// Plain variant: global loads through L1/L2, any shape the layout supports; the outputs are
// enumerated in reuse_order's order.
LaunchPlan plain_launch_plan(const BucketLayout& lay0, const DeviceLimits& lim, bool with_tables) {
  const BucketLayout lay = reuse_order(lay0, lim);
  LaunchPlan p;
  BucketLayout L = plain_slots(lay, p);
  const std::int64_t M = apply_tile(lay, choose_tile(L, p.nf, p.nfp, lim), L, p);
  plan_plain_pages(lay, L, lim, with_tables, p);
  plan_summed_blocks(lay, L, lim, M, with_tables, p);
  plan_lanes_and_splits(lim, M, p);
  plan_one_lane(lim, p);
  if (p.tile == 2 && lean_shape(lim, p.M, p.nf) && !p.short_sum_tile) {
    // a one-lane tile runs in the short-sum kernel alone; where that does not take it, untiled
    DeviceLimits untiled = lim;
    untiled.lean_tiles = false;
    return plain_launch_plan(lay0, untiled, with_tables);
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

}  // namespace detail

}  // namespace kinfer::gpu
