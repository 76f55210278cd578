// The cached variant's planner: which input segments a page stages in shared memory (the
// greedy knapsack of paper 000 section 5.1.4), the page, the block shape, and the tables that
// tell each page what to restage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/detail/planner.hpp"
#include "gpu/policy.hpp"

namespace kinfer::gpu {

using namespace detail;

namespace {

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

// Threads of a cached block whose page has P outputs of G lanes: a multiple of 32, 32-256.
int cached_threads(std::int64_t P, std::int64_t G) {
  return static_cast<int>(std::min<std::int64_t>(
      256, std::max<std::int64_t>(
               32, round_up(static_cast<int>(std::min<std::int64_t>(P * G, 1 << 20)), 32))));
}

// The page: budgets of a quarter, a half or all of an SM's shared memory; the page with the most
// loads served from shared memory wins, then the one with the most resident threads, then the
// larger page (more reuse across its outputs). `sum_table`: bytes of the summed table.
CacheCandidate best_cache_page(const BucketLayout& lay, const DeviceLimits& lim, int eb,
                               std::int64_t G, int sum_table) {
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
      const int threads = cached_threads(P, G);
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
  return best;
}

// The selector's measures of a plan without tables: min_reuse (and div_mf), counted from the page
// structure, equal to what fill_cached_tables gives. Segment f is fetched on a page where its
// offset changes or a block starts. Pages count the output digits above the page, the last
// fastest; f's offset changes exactly where the carry reaches its lowest digit with a nonzero
// stride and more than one value (row-major strides: a change of a digit f depends on always
// moves the offset), i.e. on the multiples of L = the product of the cardinalities of the digits
// below that one.
void estimate_reuse(const BucketLayout& lay, LaunchPlan& p) {
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
}

// The summed table, cache_lo and the refetch bits per page; min_reuse from them. Cached inputs
// are read as cache[s * pitch + lo]; others from global memory.
void fill_cached_tables(const BucketLayout& lay, LaunchPlan& p) {
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
}

}  // namespace

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
  const CacheCandidate best = best_cache_page(lay, lim, eb, G, sum_table);
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
  // shared memory: the segments, then the sum table (16-byte aligned)
  p.seg_off.assign(lay.nf, 0);
  int off = 0;
  for (int f = 0; f < lay.nf; ++f)
    if (p.cached_mask >> f & 1) {
      p.seg_off[f] = off;
      off += static_cast<int>(lay.m_f[f] * p.pitch[f]);
    }
  p.sum_table_offset = round_up(off * eb, 16);
  p.shared_bytes = p.sum_table_offset + sum_table;
  // block shape; pages per block as long as the device still gets two waves of blocks
  p.threads = cached_threads(p.P, G);
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
    estimate_reuse(lay, p);
    return p;
  }
  fill_cached_tables(lay, p);
  return p;
}

}  // namespace kinfer::gpu
