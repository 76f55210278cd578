#include "engine/belief_sums.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "engine/blocks.hpp"
#include "engine/kernel_math.hpp"

namespace kinfer::detail {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// belief_sums takes a bucket of at most this many configurations in one plain pass.
constexpr std::int64_t kSmallBelief = 4096;

// belief_sums adds each thread's blocks up for the targets over a block's variables only where
// they have at least this many sets of those variables (each set costs a class's sums of every
// block otherwise; the add costs a block's entries).
constexpr std::size_t kBlockOnlySets = 4;

// The most configurations of a group of targets (their block variables').
constexpr std::int64_t kGroupMax = kBlock / 8;

// The downward pass's threads: each keeps its own sums onto the children and variables
// (posterior_peak_bytes counts omp_get_max_threads() of them).
int downward_threads(int threads) { return std::min(thread_count(threads), omp_get_max_threads()); }

}  // namespace

void belief_sums(const BucketShape& full, std::span<const InputTable> inputs, double ln_total,
                 const std::vector<std::vector<int>>& targets, const std::vector<LnTable*>& out,
                 int threads, const std::vector<char>& divide,
                 const CombinedInputs* combined_before) {
  const auto divides = [&](std::size_t t) { return !divide.empty() && divide[t]; };
  const auto divided = [](double ln_sum, double by) {
    return by == kNegInf ? kNegInf : ln_sum - by;
  };
  // Entry i of a target's table o from its linear sum x (divided by o's entry where `div`).
  const auto write = [&](LnTable& o, bool div, std::int64_t i, double x) {
    const double ln_sum = x > 0 ? ln_total + std::log(x) : kNegInf;
    o[i] = div ? divided(ln_sum, o[i]) : ln_sum;
  };
  // Targets over the same variables (children whose outputs cover the same ones) are summed
  // once and copied.
  {
    std::vector<std::vector<int>> distinct;
    std::vector<std::size_t> which(targets.size());  // each target's distinct one
    for (std::size_t t = 0; t < targets.size(); ++t) {
      which[t] = static_cast<std::size_t>(std::find(distinct.begin(), distinct.end(), targets[t]) -
                                          distinct.begin());
      if (which[t] == distinct.size()) distinct.push_back(targets[t]);
    }
    if (distinct.size() < targets.size()) {
      std::vector<LnTable> sums(distinct.size());
      std::vector<LnTable*> to;
      for (LnTable& d : sums) to.push_back(&d);
      belief_sums(full, inputs, ln_total, distinct, to, threads, {}, combined_before);
      // Each sum is moved to the last target that takes it undivided, after the others' copies.
      std::vector<std::size_t> moved_to(distinct.size(), targets.size());
      for (std::size_t t = 0; t < targets.size(); ++t)
        if (!divides(t)) moved_to[which[t]] = t;
      for (std::size_t t = 0; t < targets.size(); ++t) {
        const LnTable& from = sums[which[t]];
        LnTable& o = *out[t];
        if (!divides(t)) {
          if (moved_to[which[t]] != t) o = from;
          continue;
        }
        const auto n = static_cast<std::int64_t>(from.size());
        in_parts(n, pass_threads(static_cast<double>(n), 1, threads),
                 [&](int, std::int64_t lo, std::int64_t hi) {
                   for (std::int64_t i = lo; i < hi; ++i) o[i] = divided(from[i], o[i]);
                 });
      }
      for (std::size_t d = 0; d < distinct.size(); ++d)
        if (moved_to[d] < targets.size()) *out[moved_to[d]] = std::move(sums[d]);
      return;
    }
  }
  // A small bucket in one plain pass: its beliefs into one buffer, then added onto each target
  // through the target's offset of each configuration. The blocks, groups and threads below
  // cost more to set up than such a bucket costs to sum (most buckets of a pedigree's network
  // are small).
  std::int64_t states = 1;
  for (int c : full.card) states *= c;
  if (states <= kSmallBelief) {
    std::vector<double> belief = plain_products(full, inputs), sum;
    std::vector<std::int64_t> st(full.vars.size()), off(states);
    for (double& x : belief) x = std::exp(x - ln_total);
    for (std::size_t t = 0; t < targets.size(); ++t) {
      std::fill(st.begin(), st.end(), 0);
      const std::int64_t n = input_strides(full, targets[t], st.data());
      block_offsets(full, st.data(), 0, off.data());
      sum.assign(n, 0.0);
      for (std::int64_t k = 0; k < states; ++k) sum[off[k]] += belief[k];
      LnTable& o = *out[t];
      const bool div = divides(t);
      if (!div) o.resize(n);
      for (std::int64_t i = 0; i < n; ++i) write(o, div, i, sum[i]);
    }
    return;
  }
  // Many small inputs (a bucket of a Markov network, or with hundreds of small children) are
  // multiplied together first, as the upward kernel does: its tables where it kept them.
  CombinedInputs own;
  std::vector<InputTable> combined;
  if (combined_before && !combined_before->empty())
    combined = combined_before->over(inputs), inputs = combined;
  else if (combine_small_inputs(full, inputs, own))
    combined = own.over(inputs), inputs = combined;
  const Blocks bl(full, inputs);
  const int nv = static_cast<int>(full.vars.size());
  const std::size_t n_t = targets.size();
  // Per target: its strides, its size, its block variables (in_block) and their strides among
  // its local configurations (lst: the configurations of those variables, the last fastest,
  // n_local of them), and `at[l]`, the offset in the target of local configuration l. A block
  // is summed onto a target's local configurations, so that the target sees n_local adds a
  // block. Targets with few local configurations (most are one eliminated variable) are summed
  // in groups: a block is summed once onto the local configurations of a group's variables,
  // then onto each member from those: each of the group's configurations gathers its entries
  // and sums them (loads and adds; adding each entry onto its configuration in turn makes an
  // add wait for the previous one where consecutive entries fall on one configuration).
  std::vector<std::vector<std::int64_t>> st(n_t, std::vector<std::int64_t>(nv, 0));
  std::vector<std::int64_t> size(n_t), n_local(n_t);
  std::vector<std::vector<std::int64_t>> at(n_t), lst(n_t, std::vector<std::int64_t>(nv, 0));
  std::vector<std::vector<char>> in_block(n_t, std::vector<char>(nv, 0));
  for (std::size_t t = 0; t < n_t; ++t) {
    size[t] = input_strides(full, targets[t], st[t].data());
    n_local[t] = 1;
    for (int j = nv - 1; j >= bl.first; --j)
      if (st[t][j] != 0) lst[t][j] = n_local[t], n_local[t] *= full.card[j], in_block[t][j] = 1;
    // at[t]: the offsets of the local configurations (the target's block variables, the last
    // fastest) in the target.
    BucketShape own;
    std::vector<std::int64_t> own_st;
    for (int j = bl.first; j < nv; ++j)
      if (in_block[t][j])
        own.vars.push_back(full.vars[j]), own.card.push_back(full.card[j]),
            own_st.push_back(st[t][j]);
    at[t].resize(n_local[t]);
    block_offsets(own, own_st.data(), 0, at[t].data());
  }
  struct Group {
    std::vector<char> vars;           // the block variables of its members
    std::int64_t n = 1;               // their configurations
    std::vector<std::int64_t> index;  // [block entry]: its configuration
    // The block's entries by configuration: each configuration has the same number of entries
    // (the block is a product of domains), those of configuration c at [c * per, (c + 1) * per).
    std::vector<std::int64_t> by_config;
    std::int64_t per = 1;
    std::vector<int> members;  // targets
    // Members with the same block variables have the same sums of a block: each such class
    // (its members' positions) summed once and added onto each.
    std::vector<std::vector<std::size_t>> classes;
    std::vector<std::vector<std::int64_t>> to;  // [class][configuration]: the local one
    // [class]: where its members have one block variable, its stride among the group's
    // configurations (the sums are then column sums, which vectorise); 0 otherwise
    std::vector<std::int64_t> one_var_stride;
  };
  // Targets over block variables only take the same entries from every block: where several
  // sets of block variables are among them (each would be a class's sums every block), each
  // thread adds its blocks up instead (one contiguous add a block) and those targets are summed
  // from that total once, after the pass.
  std::vector<char> block_only(n_t, 0);
  if (bl.count > 1) {
    std::set<std::vector<char>> sets;
    for (std::size_t t = 0; t < n_t; ++t) {
      block_only[t] = std::all_of(st[t].begin(), st[t].begin() + bl.first,
                                  [](std::int64_t x) { return x == 0; });
      if (block_only[t]) sets.insert(in_block[t]);
    }
    if (sets.size() < kBlockOnlySets) std::fill(block_only.begin(), block_only.end(), 0);
  }
  const bool add_blocks = std::find(block_only.begin(), block_only.end(), 1) != block_only.end();
  // A target with more local configurations than a group takes, whose entries a block reaches
  // in runs (it ends with the block's last variables, or lacks them), takes the block a run at a
  // time, straight onto its entries (`large`); so does one with as many local configurations as
  // the block has entries (each entry its own). Any other is a group of its own: each of its
  // local configurations gathers its entries and sums them.
  std::vector<std::optional<BlockReads>> onto(n_t);
  {
    const std::span<const int> block_card(full.card.data() + bl.first, nv - bl.first);
    for (std::size_t t = 0; t < n_t; ++t) {
      if (n_local[t] <= kGroupMax) continue;
      std::vector<std::int64_t> off(bl.size);  // each block entry's offset in the target
      bl.offsets(st[t].data(), off.data());
      BlockReads reads(std::move(off), block_card);
      if (reads.in_runs() || n_local[t] == bl.size) onto[t].emplace(std::move(reads));
    }
  }
  // Targets with few local configurations in groups (make_groups), the others `large` (or a group
  // of their own, above): during the pass those not block_only, after it the block_only ones
  // (summed from the blocks' total as from one block).
  std::vector<int> large, large_after;
  const auto make_groups = [&](bool after) {
    std::vector<Group> groups;
    for (std::size_t t = 0; t < n_t; ++t) {
      if (static_cast<bool>(block_only[t]) != after) continue;
      if (onto[t]) {
        (after ? large_after : large).push_back(static_cast<int>(t));
        continue;
      }
      if (n_local[t] > kGroupMax) {  // no other target fits with it
        groups.push_back(
            Group{in_block[t], n_local[t], {}, {}, 1, {static_cast<int>(t)}, {}, {}, {}});
        continue;
      }
      auto union_size = [&](const std::vector<char>& vars) {
        std::int64_t n = 1;
        for (int j = bl.first; j < nv; ++j)
          if (vars[j] || in_block[t][j]) n *= full.card[j];
        return n;
      };
      Group* g = nullptr;
      for (Group& h : groups)
        if (union_size(h.vars) <= kGroupMax) {
          g = &h;
          break;
        }
      if (!g)
        g = &groups.emplace_back(Group{std::vector<char>(nv, 0), 1, {}, {}, 1, {}, {}, {}, {}});
      g->n = union_size(g->vars);
      for (int j = 0; j < nv; ++j) g->vars[j] |= in_block[t][j];
      g->members.push_back(static_cast<int>(t));
    }
    for (Group& g : groups) {
      std::vector<std::int64_t> gst(nv, 0);
      std::int64_t n = 1;
      for (int j = nv - 1; j >= bl.first; --j)
        if (g.vars[j]) gst[j] = n, n *= full.card[j];
      g.index.resize(bl.size);
      bl.offsets(gst.data(), g.index.data());
      g.per = bl.size / g.n;
      g.by_config.resize(bl.size);
      {
        std::vector<std::int64_t> filled(g.n, 0);
        for (std::int64_t k = 0; k < bl.size; ++k) {
          const std::int64_t c = g.index[k];
          g.by_config[c * g.per + filled[c]++] = k;
        }
      }
      // The group's configurations (its variables, the last fastest) in a class's local terms.
      BucketShape over;
      for (int j = bl.first; j < nv; ++j)
        if (g.vars[j]) over.vars.push_back(full.vars[j]), over.card.push_back(full.card[j]);
      std::map<std::vector<char>, std::size_t> class_at;
      for (std::size_t m = 0; m < g.members.size(); ++m) {
        const int t = g.members[m];
        const auto [it, added] = class_at.try_emplace(in_block[t], g.classes.size());
        if (added) {
          g.classes.emplace_back();
          std::vector<std::int64_t> local_st;
          int n_vars = 0, var = 0;
          for (int j = bl.first; j < nv; ++j)
            if (g.vars[j]) local_st.push_back(lst[t][j]);
          for (int j = bl.first; j < nv; ++j)
            if (in_block[t][j]) ++n_vars, var = j;
          g.to.emplace_back(g.n);
          block_offsets(over, local_st.data(), 0, g.to.back().data());
          g.one_var_stride.push_back(n_vars == 1 ? gst[var] : 0);
        }
        g.classes[it->second].push_back(m);
      }
    }
    return groups;
  };
  const std::vector<Group> groups = make_groups(false), groups_after = make_groups(true);
  std::int64_t group_n = 0;  // the most configurations of a group: a class's sums, its columns
  for (const auto* gs : {&groups, &groups_after})
    for (const Group& g : *gs) group_n = std::max(group_n, g.n);
  // A block's entries x summed onto the groups' classes (sums: a block's worth, member: 2 *
  // group_n), each class's sums z given to each member t: flush(t, z).
  const auto sum_groups = [&](const std::vector<Group>& gs, const double* x, double* sums,
                              double* member, auto&& flush) {
    for (const Group& g : gs) {
      double* y = sums;
      const std::int64_t per = g.per;
      for (std::int64_t c = 0; c < g.n; ++c) {
        const std::int64_t* e = g.by_config.data() + c * per;
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (std::int64_t r = 0; r < per; ++r) acc += x[e[r]];
        y[c] = acc;
      }
      for (std::size_t ci = 0; ci < g.classes.size(); ++ci) {
        const std::vector<std::size_t>& cls = g.classes[ci];
        const int t = g.members[cls.front()];
        double* z = member;
        const std::int64_t nl = n_local[t], stride = g.one_var_stride[ci];
        if (nl == g.n) {  // the members have the group's variables: y is their sums
          for (std::size_t k : cls) flush(g.members[k], y);
          continue;
        }
        if (nl == 1) {  // the member has no block variable: the block's total
          double total = 0;
#pragma omp simd reduction(+ : total)
          for (std::int64_t i = 0; i < g.n; ++i) total += y[i];
          z[0] = total;
        } else if (stride > 0) {  // y as rows of nl * stride columns, summed by column
          const std::int64_t w = nl * stride;
          double* col = z + group_n;
          std::fill(col, col + w, 0.0);
          for (std::int64_t i0 = 0; i0 < g.n; i0 += w) {
#pragma omp simd
            for (std::int64_t r = 0; r < w; ++r) col[r] += y[i0 + r];
          }
          for (std::int64_t v = 0; v < nl; ++v) {
            double sv = 0;
            for (std::int64_t r = 0; r < stride; ++r) sv += col[v * stride + r];
            z[v] = sv;
          }
        } else {
          std::fill(z, z + nl, 0.0);
          const std::int64_t* to = g.to[ci].data();
          for (std::int64_t i = 0; i < g.n; ++i) z[to[i]] += y[i];
        }
        for (std::size_t k : cls) flush(g.members[k], z);
      }
    }
  };
  // The blocks are dealt to the threads by the configurations of some of the variables above
  // the blocks (`deal`): a target that has all of them is written by the threads directly, no
  // two threads adding onto the same entries. Each other target gets a copy per thread, zeroed
  // and added up at the end: at most as many threads as keep those copies within kCopyRatio
  // times the bucket's entries. `deal` is chosen to copy the fewest entries: the bucket's first
  // variables (as many as give each thread a configuration), or those of a target's variables
  // above the blocks that most of the other targets' entries have too (up to 4 configurations
  // a thread, for balance).
  constexpr double kCopyRatio = 8;
  const double entries = static_cast<double>(bl.size) * static_cast<double>(bl.count);
  const int nt0 =
      std::min(pass_threads(entries, inputs.size(), threads), downward_threads(threads));
  std::vector<char> deal(bl.first, 0);
  double copied = 1;
  const auto has_all = [&](std::size_t t, const std::vector<char>& vars) {
    for (int j = 0; j < bl.first; ++j)
      if (vars[j] && st[t][j] == 0) return false;
    return true;
  };
  {
    const auto copies_of = [&](const std::vector<char>& vars) {
      double n = 1;
      for (std::size_t t = 0; t < n_t; ++t)
        if (!block_only[t] && !has_all(t, vars)) n += static_cast<double>(size[t]);
      return n;
    };
    for (std::size_t t = 0; t < n_t; ++t)  // none dealt
      if (!block_only[t]) copied += static_cast<double>(size[t]);
    const auto consider = [&](const std::vector<char>& vars, std::int64_t configurations) {
      if (configurations < nt0) return;
      const double c = copies_of(vars);
      if (c < copied) copied = c, deal = vars;
    };
    if (nt0 > 1) {
      std::vector<char> vars(bl.first, 0);
      std::int64_t n = 1;
      for (int j = 0; j < bl.first && n < nt0; ++j) vars[j] = 1, n *= full.card[j];
      consider(vars, n);
      // Each variable above the blocks weighed by the entries of the targets that have it.
      std::vector<double> weight(bl.first, 0);
      for (std::size_t t = 0; t < n_t; ++t)
        for (int j = 0; j < bl.first; ++j)
          if (st[t][j] != 0) weight[j] += static_cast<double>(size[t]);
      for (std::size_t a = 0; a < n_t; ++a) {
        std::vector<int> mine;
        for (int j = 0; j < bl.first; ++j)
          if (st[a][j] != 0) mine.push_back(j);
        std::stable_sort(mine.begin(), mine.end(),
                         [&](int x, int y) { return weight[x] > weight[y]; });
        std::fill(vars.begin(), vars.end(), 0);
        n = 1;
        for (std::size_t k = 0; k < mine.size() && n < 4 * nt0; ++k)
          vars[mine[k]] = 1, n *= full.card[mine[k]];
        consider(vars, n);
      }
    }
  }
  const bool dealt = std::find(deal.begin(), deal.end(), 1) != deal.end();
  std::vector<char> direct(n_t, 0);
  for (std::size_t t = 0; t < n_t && dealt; ++t) direct[t] = !block_only[t] && has_all(t, deal);
  const int nt =
      std::max(1, std::min(nt0, static_cast<int>(std::min(1e6, kCopyRatio * entries / copied))));
  if (entries >= (1 << 24) && spdlog::should_log(spdlog::level::debug)) {
    std::string what;
    for (std::size_t t = 0; t < n_t; ++t)
      if (size[t] > 1024)
        what += fmt::format(" 2^{:.1f}{}", std::log2(static_cast<double>(size[t])),
                            direct[t] ? " direct" : "");
    spdlog::debug("belief sums: 2^{:.1f} entries, {} threads of {}, {} targets, copied{}",
                  std::log2(entries), nt, nt0, n_t, what);
  }
  std::vector<LnTable> shared(n_t);
  for (std::size_t t = 0; t < n_t; ++t)
    if (direct[t]) {
      shared[t].resize(size[t]);
      in_parts(size[t], nt, [&](int, std::int64_t lo, std::int64_t hi) {
        std::fill(shared[t].begin() + lo, shared[t].begin() + hi, 0.0);
      });
    }
  // Each block's configuration of the `deal` variables (without them, the block itself): the
  // threads take contiguous ranges of those.
  std::int64_t keys = bl.count;
  std::vector<std::int64_t> key;
  if (dealt) {
    std::vector<std::int64_t> kst(bl.first, 0);
    keys = 1;
    for (int j = bl.first - 1; j >= 0; --j)
      if (deal[j]) kst[j] = keys, keys *= full.card[j];
    key.resize(bl.count);
    in_parts(bl.count, nt, [&](int, std::int64_t lo, std::int64_t hi) {
      for (std::int64_t b = lo; b < hi; ++b) key[b] = bl.base(b, kst.data());
    });
  }
  // part[thread][target]: each thread's own sums of the targets written through copies;
  // block_part[thread]: its blocks added up (add_blocks).
  std::vector<std::vector<std::vector<double>>> part(nt);
  std::vector<std::vector<double>> block_part(nt);
  in_parts(keys, nt, [&](int me, std::int64_t k_lo, std::int64_t k_hi) {
    std::vector<std::vector<double>>& mine = part[me];
    mine.resize(n_t);
    std::vector<double*> acc(n_t);
    for (std::size_t t = 0; t < n_t; ++t) {
      if (!direct[t] && !block_only[t]) mine[t].assign(size[t], 0.0);
      acc[t] = direct[t] ? shared[t].data() : mine[t].data();
    }
    if (add_blocks) block_part[me].assign(bl.size, 0.0);
    std::vector<double> buf(bl.size), sums(bl.size), member(2 * group_n);
    // Adds the local sums y of target t for block b to the thread's sums.
    auto flush = [&](std::size_t t, std::int64_t b, const double* y) {
      double* a = acc[t] + bl.base(b, st[t].data());
      const std::int64_t* o = at[t].data();
      for (std::int64_t i = 0; i < n_local[t]; ++i) a[o[i]] += y[i];
    };
    for (std::int64_t b = dealt ? 0 : k_lo; b < (dealt ? bl.count : k_hi); ++b) {
      if (dealt && (key[b] < k_lo || key[b] >= k_hi)) continue;
      bl.products(b, buf.data());
      double* __restrict x = buf.data();
      const double shift = ln_total;  // a local, so that the loop need not reload it
      const std::int64_t n = bl.size;
#pragma omp simd
      for (std::int64_t k = 0; k < n; ++k) {
        const double y = x[k] - shift;
        const double e = exp_np(y);
        x[k] = y < -708.0 ? 0.0 : e;
      }
      if (add_blocks) {
        double* __restrict a = block_part[me].data();
#pragma omp simd
        for (std::int64_t k = 0; k < n; ++k) a[k] += x[k];
      }
      sum_groups(groups, x, sums.data(), member.data(),
                 [&](int t, const double* z) { flush(t, b, z); });
      for (int t : large) onto[t]->scatter_add(x, acc[t] + bl.base(b, st[t].data()));
    }
  });
  // The threads' sums (or the shared ones) to ln, in parallel over each target's entries (a
  // target may be half the bucket, and there are as many copies as threads).
  std::vector<const std::vector<std::vector<double>>*> filled;
  for (const auto& acc : part)
    if (!acc.empty()) filled.push_back(&acc);
  // The block_only targets from the threads' blocks added up (into the first's).
  std::vector<std::vector<double>> from_blocks(n_t);
  if (add_blocks) {
    std::vector<double>* total = nullptr;
    for (std::vector<double>& b : block_part) {
      if (b.empty()) continue;
      if (!total) {
        total = &b;
        continue;
      }
      for (std::int64_t k = 0; k < bl.size; ++k) (*total)[k] += b[k];
    }
    for (std::size_t t = 0; t < n_t; ++t)
      if (block_only[t]) from_blocks[t].assign(size[t], 0.0);
    const auto onto_target = [&](int t, const double* z) {
      for (std::int64_t i = 0; i < n_local[t]; ++i) from_blocks[t][at[t][i]] += z[i];
    };
    std::vector<double> sums(bl.size), member(2 * group_n);
    sum_groups(groups_after, total->data(), sums.data(), member.data(), onto_target);
    for (int t : large_after) onto[t]->scatter_add(total->data(), from_blocks[t].data());
  }
  for (std::size_t t = 0; t < n_t; ++t) {
    LnTable& o = *out[t];
    const bool div = divides(t);
    if (!div) o.resize(size[t]);
    const int rt = pass_threads(static_cast<double>(size[t]), filled.size(), nt);
    in_parts(size[t], rt, [&](int, std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) {
        double x = 0;
        if (direct[t])
          x = shared[t][i];
        else if (block_only[t])
          x = from_blocks[t][i];
        else
          for (const auto* acc : filled) x += (*acc)[t][i];
        write(o, div, i, x);
      }
    });
  }
}

double belief_sums_bytes(const BucketShape& full, const std::vector<std::vector<int>>& targets) {
  const int nv = static_cast<int>(full.vars.size());
  int first = nv;
  double size = 1, count = 1;
  while (first > 0 && size * full.card[first - 1] <= kBlock) size *= full.card[--first];
  for (int j = 0; j < first; ++j) count *= full.card[j];
  // Per target: its strides and local strides, its local offsets (`at`) and, over a block's
  // variables only, its sums from the blocks' total. Per set of block variables (with whether the
  // target has variables above the blocks): a group's configurations and entries by
  // configuration (no two groups share a set) and a class's local map, or for targets with more
  // local configurations than a group takes a block (an allowance). Per such target its block
  // offsets and reads, or the group of its own (three blocks at most). The blocks' deal keys.
  std::set<std::pair<std::vector<char>, bool>> small, large;
  double entries = count;
  for (const std::vector<int>& t : targets) {
    std::vector<char> in_block(nv - first, 0);
    double n_local = 1;
    bool above = false;
    for (int v : t) {
      const int j =
          static_cast<int>(std::find(full.vars.begin(), full.vars.end(), v) - full.vars.begin());
      if (j >= first)
        in_block[j - first] = 1, n_local *= full.card[j];
      else
        above = true;
    }
    entries += 3.0 * nv + 2 * n_local;
    if (n_local > kGroupMax) {
      large.insert({in_block, above});
      entries += 3 * size;
    } else {
      small.insert({in_block, above});
    }
  }
  entries += static_cast<double>(large.size()) * size +
             static_cast<double>(small.size()) * (2 * size + kGroupMax);
  return 8 * entries;
}

}  // namespace kinfer::detail
