#include "engine/posterior.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include "engine/cpu_kernel.hpp"
#include "engine/kernel_math.hpp"

namespace kinfer {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// Bucket b's inputs: its factors, then its children's outputs (`up`), then `extra`.
std::vector<InputTable> bucket_inputs(const Plan& plan, int b, const std::vector<LnTable>& up,
                                      std::span<const InputTable> extra = {}) {
  const auto& buckets = plan.tree.buckets;
  const Bucket& bk = buckets[b];
  std::vector<InputTable> in;
  for (int f : bk.factors) in.push_back({plan.input_data[f].data(), plan.input_scope[f]});
  for (int c : bk.children) in.push_back({up[c].data(), buckets[c].output_vars()});
  in.insert(in.end(), extra.begin(), extra.end());
  return in;
}

// The configurations of a bucket's variables a block at a time: a block is the configurations
// of the lowest variables (at most kBlock), block t the t-th configuration of the variables
// above them. Each input's offsets within a block are computed once, so a block's products (the
// inputs' ln values summed) are gathers and adds that vectorise, and a block's first entry in
// any table is a few multiplications away from t (no odometer to carry between threads).
constexpr std::int64_t kBlock = 4096;

class Blocks {
 public:
  Blocks(const BucketShape& shape, std::span<const InputTable> inputs)
      : shape_(shape), inputs_(inputs), st_(inputs.size()) {
    const int nv = static_cast<int>(shape.vars.size());
    first = nv;
    while (first > 0 && size * shape.card[first - 1] <= kBlock) size *= shape.card[--first];
    for (int j = 0; j < first; ++j) count *= shape.card[j];
    const std::span<const int> block_card(shape.card.data() + first, nv - first);
    reads_.resize(inputs.size());
    for (std::size_t f = 0; f < inputs.size(); ++f) {
      st_[f].assign(nv, 0);
      input_strides(shape, inputs[f].scope, st_[f].data());
      std::vector<std::int64_t> off(size);
      offsets(st_[f].data(), off.data());
      // An input over the block's variables only is the same in every block: those are summed
      // once (Markov networks put many small factors on a bucket's lowest variables).
      bool varies = false;
      for (int j = 0; j < first; ++j) varies |= st_[f][j] != 0;
      if (varies) {
        varying_.push_back(f);
        reads_[f].emplace(std::move(off), block_card);
        continue;
      }
      if (same_.empty()) same_.assign(size, 0.0);
      for (std::int64_t k = 0; k < size; ++k) same_[k] += inputs[f].data[off[k]];
    }
  }
  int first = 0;           // shape.vars[first..] are a block's variables
  std::int64_t size = 1;   // configurations of a block
  std::int64_t count = 1;  // blocks
  // The offset within a block of each of its entries, in a table of strides `st` (over every
  // variable of the shape; 0 where the table does not vary with it).
  void offsets(const std::int64_t* st, std::int64_t* off) const {
    block_offsets(shape_, st, first, off);
  }
  // The offset of block t's first entry in a table of strides `st`.
  std::int64_t base(std::int64_t t, const std::int64_t* st) const {
    std::int64_t b = 0;
    for (int j = first - 1; j >= 0; --j) {
      b += (t % shape_.card[j]) * st[j];
      t /= shape_.card[j];
    }
    return b;
  }
  // Block t's products into buf[0, size).
  void products(std::int64_t t, double* buf) const {
    if (varying_.empty() || !same_.empty()) {
      if (same_.empty())
        std::fill(buf, buf + size, 0.0);
      else
        std::copy(same_.begin(), same_.end(), buf);
    }
    for (std::size_t i = 0; i < varying_.size(); ++i) {
      const std::size_t f = varying_[i];
      const double* d = inputs_[f].data + base(t, st_[f].data());
      if (i == 0 && same_.empty())
        reads_[f]->add<true>(d, buf);
      else
        reads_[f]->add(d, buf);
    }
  }

 private:
  const BucketShape& shape_;
  std::span<const InputTable> inputs_;
  std::vector<std::vector<std::int64_t>> st_;     // [input][variable]
  std::vector<std::optional<BlockReads>> reads_;  // [input]: how a block reads a varying one
  std::vector<std::size_t> varying_;              // inputs that vary from block to block
  std::vector<double> same_;                      // the sum of the others, per block entry
};

// Threads for a pass over `entries` bucket configurations with `inputs` inputs: one where the
// work is too small to pay for a parallel region (the CPU kernel's threshold).
int pass_threads(double entries, std::size_t inputs, int threads) {
  return entries * static_cast<double>(inputs + 1) < 2e5 ? 1 : thread_count(threads);
}

// body(thread, lo, hi) on `threads` contiguous parts of [0, n).
template <class Body>
void in_parts(std::int64_t n, int threads, Body&& body) {
  if (n < threads) threads = static_cast<int>(std::max<std::int64_t>(n, 1));
  if (threads == 1) {  // no parallel region for one thread (small buckets take several each)
    body(0, 0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int nt = omp_get_num_threads(), me = omp_get_thread_num();
    body(me, n * me / nt, n * (me + 1) / nt);
  }
}

// belief_sums takes a bucket of at most this many configurations in one plain pass.
constexpr std::int64_t kSmallBelief = 4096;

// belief_sums adds each thread's blocks up for the targets over a block's variables only where
// they have at least this many sets of those variables (each set costs a class's sums of every
// block otherwise; the add costs a block's entries).
constexpr std::size_t kBlockOnlySets = 4;

// A child output this much smaller than its bucket (log2) gives the bucket's eliminated
// variables in it their marginals at a small share of the pass over the bucket.
constexpr double kSmallChildLog2 = 4;

// The downward pass's threads: each keeps its own sums onto the children and variables
// (posterior_peak_bytes counts omp_get_max_threads() of them).
int downward_threads(int threads) { return std::min(thread_count(threads), omp_get_max_threads()); }

// ln of the sums of exp(belief) onto each of `targets` (each a subsequence of full.vars), where
// the belief is the product of `inputs` over every variable of `full`, in one pass that never
// stores the belief (but for a bucket of at most kSmallBelief configurations): a block's
// products are shifted by `ln_total` (the belief's total, which no entry exceeds), taken to the
// linear domain and added onto every target. An entry below
// e^-708 of the total is taken as 0 (a probability no double holds next to 1), so a target
// entry whose terms all are comes out as -inf. Where divide[t] is set, out[t] holds on entry a
// table over target t, and the sums are divided by it in place (its -inf entries stay -inf): a
// child's message written over the child's own output, which it replaces.
void belief_sums(const BucketShape& full, std::span<const InputTable> inputs, double ln_total,
                 const std::vector<std::vector<int>>& targets, const std::vector<LnTable*>& out,
                 int threads, const std::vector<char>& divide = {},
                 const CombinedInputs* combined_before = nullptr) {
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
    const int nv = static_cast<int>(full.vars.size());
    std::vector<std::int64_t> st(nv), off(states);
    std::vector<double> belief(states, 0.0), sum;
    for (const InputTable& in : inputs) {
      std::fill(st.begin(), st.end(), 0);  // input_strides sets the scope's variables only
      input_strides(full, in.scope, st.data());
      block_offsets(full, st.data(), 0, off.data());
      for (std::int64_t k = 0; k < states; ++k) belief[k] += in.data[off[k]];
    }
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
  // Per target: its strides, its size, and a block's entries in its terms: the index of each
  // entry among the configurations of the block's variables that the target has (n_local of
  // them), and `at[l]`, the offset in the target of local configuration l. A target with as many
  // local configurations as the block has entries takes the block's entries directly; any
  // other sums a block onto its local configurations first, so that it sees n_local adds a
  // block. Targets with few local configurations (most are one eliminated variable) are summed
  // in groups: a block is summed once onto the local configurations of a group's variables,
  // then onto each member from those: each of the group's configurations gathers its entries
  // and sums them (loads and adds; adding each entry onto its configuration in turn makes an
  // add wait for the previous one where consecutive entries fall on one configuration).
  constexpr std::int64_t kGroupMax = kBlock / 8;  // a group's configurations, at most
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
  // Targets with few local configurations in groups (make_groups), the others `large`: during
  // the pass those not block_only, after it the block_only ones (summed from the blocks' total
  // as from one block).
  std::vector<int> large, large_after;
  const auto make_groups = [&](bool after) {
    std::vector<Group> groups;
    for (std::size_t t = 0; t < n_t; ++t) {
      if (static_cast<bool>(block_only[t]) != after) continue;
      if (n_local[t] > kGroupMax) {
        (after ? large_after : large).push_back(static_cast<int>(t));
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
  // local[t]: each block entry's local configuration, for the large targets (shared by those
  // with the same block variables).
  std::map<std::vector<char>, std::vector<std::int64_t>> local_of;
  std::vector<const std::vector<std::int64_t>*> local(n_t);
  for (const std::vector<int>* list : {&large, &large_after})
    for (int t : *list) {
      const auto [it, added] = local_of.try_emplace(in_block[t]);
      if (added) {
        it->second.resize(bl.size);
        bl.offsets(lst[t].data(), it->second.data());
      }
      local[t] = &it->second;
    }
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
  // A large target whose entries a block reaches in runs (it ends with the block's last
  // variables, or lacks them) takes the block a run at a time, straight onto its entries; so does
  // one with as many local configurations as the block has entries (each entry its own).
  std::vector<std::optional<BlockReads>> onto(n_t);
  {
    const std::span<const int> block_card(full.card.data() + bl.first, nv - bl.first);
    for (int t : large) {
      std::vector<std::int64_t> off(bl.size);
      for (std::int64_t k = 0; k < bl.size; ++k) off[k] = at[t][(*local[t])[k]];
      BlockReads reads(std::move(off), block_card);
      if (reads.in_runs() || n_local[t] == bl.size) onto[t].emplace(std::move(reads));
    }
  }
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
      for (int t : large) {
        if (onto[t]) {
          onto[t]->scatter_add(x, acc[t] + bl.base(b, st[t].data()));
          continue;
        }
        const std::int64_t* l = local[t]->data();
        double* y = sums.data();
        std::fill(y, y + n_local[t], 0.0);
        for (std::int64_t k = 0; k < bl.size; ++k) y[l[k]] += x[k];
        flush(t, b, y);
      }
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
    for (int t : large_after) {
      std::fill(sums.begin(), sums.begin() + n_local[t], 0.0);
      const std::int64_t* l = local[t]->data();
      for (std::int64_t k = 0; k < bl.size; ++k) sums[l[k]] += (*total)[k];
      onto_target(t, sums.data());
    }
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

// first_maximum scans at most this many configurations in one plain pass.
constexpr std::int64_t kSmallScan = 256;

// A bucket with its `lead` most significant variables fixed: the rest of the shape, and inputs
// over the rest (the inputs are row-major in the bucket's order, so fixing leading variables is
// an offset into each). fix(l) points the inputs at configuration l of the leading variables.
class LeadingFixed {
 public:
  LeadingFixed(const BucketShape& shape, std::span<const InputTable> inputs, int lead)
      : shape_(shape), inputs_(inputs), lead_(lead), st_(inputs.size()), in_(inputs.size()) {
    const int nv = static_cast<int>(shape.vars.size());
    rest.vars.assign(shape.vars.begin() + lead, shape.vars.end());
    rest.card.assign(shape.card.begin() + lead, shape.card.end());
    for (std::size_t f = 0; f < inputs.size(); ++f) {
      st_[f].assign(nv, 0);
      input_strides(shape, inputs[f].scope, st_[f].data());
      for (int v : inputs[f].scope)
        if (std::find(rest.vars.begin(), rest.vars.end(), v) != rest.vars.end())
          in_[f].scope.push_back(v);
    }
  }
  BucketShape rest;  // n_marg 0
  std::span<const InputTable> fix(std::int64_t l) {
    for (std::size_t f = 0; f < inputs_.size(); ++f)
      in_[f].data = inputs_[f].data ? inputs_[f].data + base(f, l) : nullptr;
    return in_;
  }
  // The offset in input f of its entries at configuration l of the leading variables.
  std::int64_t base(std::size_t f, std::int64_t l) const {
    std::int64_t b = 0;
    for (int j = lead_ - 1; j >= 0; --j) {
      b += (l % shape_.card[j]) * st_[f][j];
      l /= shape_.card[j];
    }
    return b;
  }

 private:
  const BucketShape& shape_;
  std::span<const InputTable> inputs_;
  int lead_;
  std::vector<std::vector<std::int64_t>> st_;
  std::vector<InputTable> in_;
};

// Configurations whose ln values lie within this of the maximum (relative to max(1, |max|)) are
// ties for the traceback: the same maximum computed on another device (other rounding, inputs
// merged in another order) then gives the same assignment.
constexpr double kTieTolerance = 1e-12;

// The ln value within kTieTolerance of a maximum `best`.
double tie_bound(double best) { return best - kTieTolerance * std::max(1.0, std::abs(best)); }

// The index of the first configuration of shape.vars (n_marg is ignored) at which the product
// of `inputs` is largest, up to kTieTolerance; 0 where every product is -inf. Two passes: the
// maximum, then the first configuration within the tolerance of it. With `at_least` (not NaN),
// the first configuration whose product is at least that, -1 where none is: the threads take
// chunks of blocks in index order and stop at the first chunk after one that holds a hit, so
// that the pass ends soon after the first hit rather than at the end of the table.
std::int64_t first_maximum(const BucketShape& shape, std::span<const InputTable> inputs,
                           int threads, double at_least = std::nan("")) {
  // A scan of a few configurations (most buckets of a small network) in one plain pass: each
  // configuration's product, input by input, without blocks or a parallel region.
  if (shape.output_size() <= kSmallScan) {
    const std::int64_t n = shape.output_size();
    std::vector<double> prod(n, 0.0);
    std::vector<std::int64_t> st(shape.vars.size()), off(n);
    for (const InputTable& in : inputs) {
      std::fill(st.begin(), st.end(), 0);
      input_strides(shape, in.scope, st.data());
      block_offsets(shape, st.data(), 0, off.data());
      for (std::int64_t k = 0; k < n; ++k) prod[k] += in.data[off[k]];
    }
    if (std::isnan(at_least)) {
      const double best = *std::max_element(prod.begin(), prod.end());
      if (best == kNegInf) return 0;
      at_least = tie_bound(best);
    }
    for (std::int64_t k = 0; k < n; ++k)
      if (prod[k] >= at_least) return k;
    return -1;
  }
  const Blocks bl(shape, inputs);
  const int nt = pass_threads(static_cast<double>(bl.size) * bl.count, inputs.size(), threads);
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  const auto first_at_least = [&] {
    const std::int64_t chunk = std::max<std::int64_t>(1, bl.count / (64 * nt));
    std::atomic<std::int64_t> next{0}, first{kNone};
#pragma omp parallel num_threads(nt)
    {
      std::vector<double> buf(bl.size);
      for (std::int64_t lo; (lo = next.fetch_add(chunk)) < bl.count;) {
        if (lo * bl.size > first.load(std::memory_order_relaxed)) break;
        const std::int64_t hi = std::min(bl.count, lo + chunk);
        for (std::int64_t b = lo; b < hi; ++b) {
          bl.products(b, buf.data());
          std::int64_t k = 0;
          while (k < bl.size && !(buf[k] >= at_least)) ++k;
          if (k < bl.size) {
            std::int64_t seen = first.load();
            while (b * bl.size + k < seen && !first.compare_exchange_weak(seen, b * bl.size + k)) {
            }
            break;
          }
        }
      }
    }
    const std::int64_t f = first.load();
    return f == kNone ? std::int64_t{-1} : f;
  };
  if (!std::isnan(at_least)) return first_at_least();
  std::vector<double> part_max(nt, kNegInf);
  in_parts(bl.count, nt, [&](int me, std::int64_t lo, std::int64_t hi) {
    std::vector<double> buf(bl.size);
    double m = kNegInf;
    for (std::int64_t b = lo; b < hi; ++b) {
      bl.products(b, buf.data());
#pragma omp simd reduction(max : m)
      for (std::int64_t k = 0; k < bl.size; ++k) m = buf[k] > m ? buf[k] : m;
    }
    part_max[me] = m;
  });
  const double best = *std::max_element(part_max.begin(), part_max.end());
  if (best == kNegInf) return 0;
  at_least = tie_bound(best);
  return first_at_least();
}

// What the traceback copied back of the outputs a device held, for the log.
struct HeldReads {
  double entries = 0, seconds = 0;
  int device_scans = 0;  // scans narrowed down on the device
};

// first_maximum with a device's help where the scan is large or reads much of the outputs the
// device holds (held[i].bucket >= 0: input i is that output's part from held[i].first on,
// DeviceOutputs::maxima): the device computes the maxima of groups of configurations (each
// configuration of the leading variables one group, at most kGroups of them), the first group
// within the tolerance of the largest is fixed, and so on within it until what is left is a
// small scan for the CPU, which copies back what it reads of the held outputs and looks for the
// first configuration within the tolerance of the device's maximum (its own first maximum if
// its rounding puts none there). Without a device, or where it declines, first_maximum alone.
// `known_max` (NaN: not known) is the maximum the upward pass computed for this scan (the
// bucket's output at the fixed values): the scan then looks for the first configuration within
// the tolerance of it in one pass, not the maximum first (a bucket whose output is one number
// scans its whole state space: 2^32 entries in linkage_11).
std::int64_t traceback_argmax(const BucketShape& shape, std::span<const InputTable> inputs,
                              std::vector<DeviceOutputs::HeldPart> held, int threads,
                              DeviceOutputs* device, HeldReads& reads, double known_max) {
  constexpr std::int64_t kGroups = 1 << 16;
  std::vector<std::unique_ptr<LeadingFixed>> levels;  // each fixes leading variables of the last
  const BucketShape* cur = &shape;
  std::span<const InputTable> in = inputs;
  std::int64_t prefix = 0;  // the fixed leading variables' configuration index
  // cur and its levels sum nothing: output_size() is all
  double at_least =
      std::isnan(known_max) || known_max == kNegInf ? std::nan("") : tie_bound(known_max);
  std::vector<std::int64_t> st(shape.vars.size());
  // The entries of held input f over cur's variables (0: a host table).
  const auto held_entries = [&](std::size_t f) -> std::int64_t {
    return held.empty() || held[f].bucket < 0 ? 0 : input_strides(*cur, in[f].scope, st.data());
  };
  const auto held_total = [&] {
    double n = 0;
    for (std::size_t f = 0; f < in.size(); ++f) n += static_cast<double>(held_entries(f));
    return n;
  };
  while (device && cur->vars.size() > 1 &&
         (static_cast<double>(cur->output_size()) * static_cast<double>(in.size()) >
              device->maxima_from() ||
          held_total() > device->held_from())) {
    const int nv = static_cast<int>(cur->vars.size());
    int lead = 0;
    std::int64_t groups = 1;
    while (lead + 1 < nv && groups * cur->card[lead] <= kGroups) groups *= cur->card[lead++];
    if (lead == 0) break;
    BucketShape grouped = *cur;
    grouped.n_marg = nv - lead;
    grouped.maximise = true;
    std::vector<double> group_max(groups);
    if (!device->maxima(grouped, in, held, group_max.data())) break;
    ++reads.device_scans;
    const double best = *std::max_element(group_max.begin(), group_max.end());
    if (best == kNegInf) break;
    if (std::isnan(at_least)) at_least = tie_bound(best);  // the first level's is the maximum
    const auto g =
        std::find_if(group_max.begin(), group_max.end(), [&](double x) { return x >= at_least; });
    if (g == group_max.end()) break;
    levels.push_back(std::make_unique<LeadingFixed>(*cur, in, lead));
    in = levels.back()->fix(g - group_max.begin());
    for (std::size_t f = 0; f < held.size(); ++f)
      held[f].first += levels.back()->base(f, g - group_max.begin());
    cur = &levels.back()->rest;
    prefix = prefix * groups + (g - group_max.begin());
  }
  if (held.empty()) {  // every table on the host
    std::int64_t arg = std::isnan(at_least) ? -1 : first_maximum(*cur, in, threads, at_least);
    if (arg < 0) arg = first_maximum(*cur, in, threads);
    return prefix * cur->output_size() + arg;
  }
  // The parts of the held inputs this scan reads, copied back (each one piece: the fixed leading
  // variables lead every table).
  std::vector<InputTable> scan(in.begin(), in.end());
  std::vector<std::vector<double>> copied(in.size());
  const auto t_read = std::chrono::steady_clock::now();
  for (std::size_t f = 0; f < in.size(); ++f) {
    const std::int64_t n = held_entries(f);
    if (n == 0) continue;
    copied[f].resize(n);
    device->read(held[f].bucket, held[f].first, n, copied[f].data());
    scan[f].data = copied[f].data();
    reads.entries += static_cast<double>(n);
  }
  reads.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_read).count();
  std::int64_t arg = std::isnan(at_least) ? -1 : first_maximum(*cur, scan, threads, at_least);
  if (arg < 0) arg = first_maximum(*cur, scan, threads);
  return prefix * cur->output_size() + arg;
}

// The index of the configuration of `vars` (card from the model, last fastest) at `value`.
std::int64_t config_index(const std::vector<int>& vars, const std::vector<int>& card,
                          const std::vector<int>& value) {
  std::int64_t idx = 0;
  for (int v : vars) idx = idx * card[v] + value[v];
  return idx;
}

void require_inputs_filled(const Plan& plan) {
  if (plan.input_data.size() != plan.model.factors.size())
    throw std::logic_error("posterior: the plan's inputs are not filled");
}

}  // namespace

void max_product_log(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                     int threads) {
  const Blocks bl(shape, inputs);
  const int nv = static_cast<int>(shape.vars.size());
  const std::int64_t n_out = shape.output_size(), n_m = shape.marg_size();
  const int nt = pass_threads(static_cast<double>(bl.size) * bl.count, inputs.size(), threads);
  auto block_max = [&](const double* x, std::int64_t n) {
    double m = kNegInf;
#pragma omp simd reduction(max : m)
    for (std::int64_t k = 0; k < n; ++k) m = x[k] > m ? x[k] : m;
    return m;
  };
  if (bl.first <= nv - shape.n_marg) {  // a block is whole output configurations
    const std::int64_t per_block = bl.size / n_m;
    in_parts(bl.count, nt, [&](int, std::int64_t lo, std::int64_t hi) {
      std::vector<double> buf(bl.size);
      for (std::int64_t b = lo; b < hi; ++b) {
        bl.products(b, buf.data());
        double* o = out + b * per_block;
        const double* x = buf.data();
        if (per_block < 8 || n_m > 64) {
          for (std::int64_t g = 0; g < per_block; ++g) o[g] = block_max(x + g * n_m, n_m);
          continue;
        }
        max_of_runs(x, per_block, n_m, o);  // an output's few terms are too few to vectorise
      }
    });
    return;
  }
  // A block is a part of one output configuration's summed configurations.
  const std::int64_t blocks_per_out = n_m / bl.size;
  if (n_out >= 4 * static_cast<std::int64_t>(nt)) {  // parallel over outputs
    in_parts(n_out, nt, [&](int, std::int64_t lo, std::int64_t hi) {
      std::vector<double> buf(bl.size);
      for (std::int64_t o = lo; o < hi; ++o) {
        double m = kNegInf;
        for (std::int64_t r = 0; r < blocks_per_out; ++r) {
          bl.products(o * blocks_per_out + r, buf.data());
          m = std::max(m, block_max(buf.data(), bl.size));
        }
        out[o] = m;
      }
    });
    return;
  }
  // Few outputs: parallel over blocks, each thread's own maxima, then the maximum of those.
  std::vector<std::vector<double>> part(nt);
  in_parts(bl.count, nt, [&](int me, std::int64_t lo, std::int64_t hi) {
    part[me].assign(n_out, kNegInf);
    std::vector<double> buf(bl.size);
    for (std::int64_t b = lo; b < hi; ++b) {
      bl.products(b, buf.data());
      double& m = part[me][b / blocks_per_out];
      m = std::max(m, block_max(buf.data(), bl.size));
    }
  });
  std::fill(out, out + n_out, kNegInf);
  for (const auto& p : part)
    for (std::size_t o = 0; o < p.size(); ++o) out[o] = std::max(out[o], p[o]);
}

namespace {

// Every bucket's output of the upward pass (maximising when `maximise`), by `upward` or run_plan;
// with `held`, those a device may hold (UpwardPass::on_device) are left there; with `combined`,
// the CPU kernels' combined inputs (UpwardPass::combined).
std::vector<LnTable> upward_pass(const Plan& plan, bool maximise, int threads,
                                 const UpwardRunner& upward,
                                 std::unique_ptr<DeviceOutputs>* held = nullptr,
                                 std::vector<CombinedInputs>* combined = nullptr) {
  std::vector<LnTable> up;
  const UpwardPass pass{maximise, &up, held, combined};
  if (upward) {
    upward(plan, pass);
  } else {
    RunOptions ro;
    ro.threads = threads;
    ro.pass = pass;
    run_plan(plan, ro);
  }
  if (up.size() != plan.tree.buckets.size())
    throw std::logic_error("posterior: the upward pass kept " + std::to_string(up.size()) +
                           " outputs for " + std::to_string(plan.tree.buckets.size()) + " buckets");
  return up;
}

}  // namespace

Marginals compute_marginals(const Plan& plan, int threads, const UpwardRunner& upward) {
  require_inputs_filled(plan);
  const ReducedModel& model = plan.model;
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int n = static_cast<int>(model.orig_card.size());
  Marginals r;
  r.ln_pe = kNegInf;
  if (!model.impossible.empty()) return r;
  // The outputs of GPU buckets may stay on the device, which then runs the downward pass.
  std::unique_ptr<DeviceOutputs> held;
  std::vector<CombinedInputs> combined;  // the upward kernels' products of small inputs
  std::vector<LnTable> up = upward_pass(plan, false, threads, upward, &held, &combined);
  combined.resize(nb);  // an upward runner that does not keep them leaves it empty
  r.ln_pe = up.back()[0] + model.log_constant();
  if (r.ln_pe == kNegInf) return r;

  // Downward: root first; ln P(e', X = x) of each tree variable over its reduced domain (e' the
  // tree's part of the evidence: the same for every x, removed by normalising).
  std::vector<LnTable> down(nb), joint(n);
  down[nb - 1] = {0.0};
  const double ln_tree = up.back()[0];  // every bucket's belief sums to it
  // Bucket b's step on the CPU: its belief (down[b] from above) summed onto each child's output
  // (divided by the child's own) and onto each eliminated variable: from the belief over the
  // smallest child output that has it where that output is small against the bucket (summed
  // after the pass), else in the pass over the bucket.
  const std::function<void(int)> on_host = [&](int b) {
    const Bucket& bk = buckets[b];
    const std::vector<int> out_vars = bk.output_vars();
    const InputTable from_above{down[b].data(), out_vars};
    BucketShape full = bucket_shape(plan, b);
    full.n_marg = 0;
    const auto in = bucket_inputs(plan, b, up, {&from_above, 1});
    std::vector<std::vector<int>> targets;
    std::vector<LnTable*> sums;
    std::vector<char> divide;
    for (int c : bk.children) targets.push_back(buckets[c].output_vars());
    std::vector<std::vector<int>> via_child(bk.children.size());  // eliminated variables
    for (std::size_t k = bk.vars.size() - bk.n_marg; k < bk.vars.size(); ++k) {
      const int v = bk.vars[k];
      int via = -1;
      for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
        const Bucket& c = buckets[bk.children[ci]];
        const std::vector<int> o = c.output_vars();
        if (std::find(o.begin(), o.end(), v) != o.end() &&
            c.log2_output <= bk.log2_states - kSmallChildLog2 &&
            (via < 0 || c.log2_output < buckets[bk.children[via]].log2_output))
          via = static_cast<int>(ci);
      }
      if (via >= 0)
        via_child[via].push_back(v);
      else
        targets.push_back({v});
    }
    // A child's message is written over its output, which the message replaces, unless its
    // eliminated variables' marginals still need the belief over the output (not divided).
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      const int c = bk.children[ci];
      divide.push_back(via_child[ci].empty() ? 1 : 0);
      sums.push_back(divide.back() ? &up[c] : &down[c]);
    }
    for (std::size_t t = bk.children.size(); t < targets.size(); ++t) {
      sums.push_back(&joint[targets[t][0]]);
      divide.push_back(0);
    }
    belief_sums(full, in, ln_tree, targets, sums, threads, divide, &combined[b]);
    combined[b] = {};
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      if (via_child[ci].empty()) continue;
      // The belief over the child's output (its message, not yet divided) is the only input.
      const int c = bk.children[ci];
      BucketShape over;
      over.vars = buckets[c].output_vars();
      for (int v : over.vars) over.card.push_back(model.card[v]);
      const InputTable belief{down[c].data(), over.vars};
      std::vector<std::vector<int>> onto;
      std::vector<LnTable*> to;
      for (int v : via_child[ci]) onto.push_back({v}), to.push_back(&joint[v]);
      belief_sums(over, {&belief, 1}, ln_tree, onto, to, threads);
    }
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      const int c = bk.children[ci];
      if (divide[ci]) {
        down[c] = std::move(up[c]);
        continue;
      }
      const auto size = static_cast<std::int64_t>(down[c].size());
      in_parts(size, pass_threads(static_cast<double>(size), 1, threads),
               [&](int, std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t s = lo; s < hi; ++s)
                   down[c][s] = up[c][s] == kNegInf ? kNegInf : down[c][s] - up[c][s];
               });
    }
    for (int c : bk.children) LnTable().swap(up[c]);
    LnTable().swap(down[b]);
  };
  bool done = false;
  if (held) {
    done = held->downward(plan, up, down, joint, on_host, threads);
    held.reset();
    if (!done) {  // the device ran out of memory on the way: all over on the host
      up = upward_pass(plan, false, threads, upward, nullptr, &combined);
      combined.resize(nb);
      for (auto& t : down) t.clear();
      for (auto& t : joint) t.clear();
      down[nb - 1] = {0.0};
    }
  }
  if (!done) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    std::vector<std::pair<double, int>> slowest;  // (seconds, bucket)
    for (int b = nb - 1; b >= 0; --b) {
      const auto tb = clock::now();
      on_host(b);
      slowest.emplace_back(std::chrono::duration<double>(clock::now() - tb).count(), b);
    }
    if (spdlog::should_log(spdlog::level::debug)) {
      std::sort(slowest.rbegin(), slowest.rend());
      std::string top;
      for (std::size_t i = 0; i < std::min<std::size_t>(slowest.size(), 5); ++i) {
        const int b = slowest[i].second;
        top +=
            fmt::format(" bucket {} {:.1f} ms ({} children, 2^{:.1f} states);", b,
                        1e3 * slowest[i].first, buckets[b].children.size(), buckets[b].log2_states);
      }
      spdlog::debug("downward pass on the host: {:.3f} s; the slowest:{}",
                    std::chrono::duration<double>(clock::now() - t0).count(), top);
    }
  }

  r.p.resize(n);
  for (int v = 0; v < n; ++v) {
    std::vector<double>& p = r.p[v];
    p.assign(model.orig_card[v], 0.0);
    if (model.fixed[v]) {
      p[model.value[v]] = 1.0;
    } else if (joint[v].empty()) {  // a free variable in no factor
      for (int x : model.kept[v]) p[x] = 1.0 / model.kept[v].size();
    } else {
      const double mx = *std::max_element(joint[v].begin(), joint[v].end());
      double z = 0;
      for (double x : joint[v]) z += std::exp(x - mx);
      for (std::size_t x = 0; x < joint[v].size(); ++x)
        p[model.kept[v][x]] = std::exp(joint[v][x] - mx) / z;
    }
  }
  return r;
}

MostProbable compute_mpe(const Plan& plan, int threads, const UpwardRunner& upward) {
  require_inputs_filled(plan);
  const ReducedModel& model = plan.model;
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int n = static_cast<int>(model.orig_card.size());
  MostProbable r;
  r.ln_pr = kNegInf;
  if (!model.impossible.empty()) return r;
  // The outputs of GPU buckets may stay on the device (the traceback then copies back the part
  // of each it needs).
  std::unique_ptr<DeviceOutputs> held;
  std::vector<CombinedInputs> combined;  // the upward kernels' products of small inputs
  const std::vector<LnTable> up = upward_pass(plan, true, threads, upward, &held, &combined);
  combined.resize(nb);
  // A free variable in no factor multiplies P(e) by its number of values but the maximum by 1:
  // the constants without it.
  const double outside = model.log_constant() - model.free_constant;
  r.ln_pr = up.back()[0] + outside;
  if (r.ln_pr == kNegInf) return r;

  // Traceback, root first: values are indices into the reduced domains.
  std::vector<int> value(n, 0);
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  HeldReads reads;
  for (int b = nb - 1; b >= 0; --b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, b);
    // The bucket's inputs: its factors (but those the device added into a child's table it
    // holds), then its children's outputs (no host table for those the device holds).
    std::vector<InputTable> in;
    std::vector<std::pair<int, int>> held_child;  // (position in `in`, child)
    bool any_folded = false;
    {
      std::vector<char> folded(bk.factors.size(), 0);
      if (held)
        for (auto [k, child] : held->folded(b)) folded.at(k) = 1, any_folded = true;
      for (std::size_t k = 0; k < bk.factors.size(); ++k)
        if (!folded[k])
          in.push_back({plan.input_data[bk.factors[k]].data(), plan.input_scope[bk.factors[k]]});
      for (int c : bk.children) {
        if (held && held->holds(c)) held_child.emplace_back(static_cast<int>(in.size()), c);
        in.push_back({up[c].empty() ? nullptr : up[c].data(), buckets[c].output_vars()});
      }
    }
    // Where the upward kernel ran on the host and multiplied many small inputs together, the
    // scan reads its tables (the same inputs: nothing folded or held).
    const bool reuse = !combined[b].empty() && !any_folded && held_child.empty();
    if (reuse) in = combined[b].over(in);
    // The bucket at its output's values (fixed above), maximised over its eliminated variables:
    // the first configuration attaining the maximum. The held children's parts at those values
    // are read where they are.
    LeadingFixed at_output(shape, in, static_cast<int>(bk.vars.size()) - bk.n_marg);
    const std::int64_t l = config_index(bk.output_vars(), model.card, value);
    const auto fixed = at_output.fix(l);
    std::vector<DeviceOutputs::HeldPart> parts;
    if (!held_child.empty()) {
      parts.resize(in.size());
      for (const auto& [p, c] : held_child) parts[p] = {c, at_output.base(p, l)};
    }
    const double known = up[b].empty() ? std::nan("") : up[b][l];
    // Many small inputs on the host are multiplied together first, as the upward kernel does,
    // where the scan is larger than the tables that combining writes (at most 2^14 entries
    // each): a scan of a few configurations is cheaper alone.
    CombinedInputs own;
    const bool combine = !reuse && parts.empty() &&
                         at_output.rest.output_size() >= (std::int64_t{1} << 16) &&
                         combine_small_inputs(at_output.rest, fixed, own);
    std::int64_t arg = traceback_argmax(at_output.rest, combine ? own.over(fixed) : fixed,
                                        std::move(parts), threads, held.get(), reads, known);
    for (std::size_t k = bk.vars.size(); k-- > bk.vars.size() - bk.n_marg;) {
      const int v = bk.vars[k];
      value[v] = static_cast<int>(arg % model.card[v]);
      arg /= model.card[v];
    }
  }
  spdlog::debug(
      "mpe: traceback {:.3f} s; {:.3g} entries of tables held on the device copied in "
      "{:.3f} s; {} scans narrowed down on the device",
      std::chrono::duration<double>(clock::now() - t_start).count(), reads.entries, reads.seconds,
      reads.device_scans);
  r.assignment.resize(n);
  for (int v = 0; v < n; ++v) {
    if (model.fixed[v])
      r.assignment[v] = model.value[v];
    else if (plan.tree.rank[v] >= 0)
      r.assignment[v] = model.kept[v][value[v]];
    else
      r.assignment[v] = model.kept[v].front();  // a free variable in no factor
  }
  return r;
}

namespace {

// The reduced value index of each conditioned variable in slice `s` (the slice index runs over
// cond.vars, last fastest).
std::vector<int> slice_values(const Conditioning& cond, std::int64_t s) {
  std::vector<int> x(cond.vars.size());
  for (std::size_t i = cond.vars.size(); i-- > 0;) {
    x[i] = static_cast<int>(s % cond.card[i]);
    s /= cond.card[i];
  }
  return x;
}

}  // namespace

Marginals compute_marginals(ConditionedPlan& cp, int threads, const UpwardRunner& upward) {
  if (!cp.conditioned()) return compute_marginals(cp.plan, threads, upward);
  const ReducedModel& model = cp.plan.model;
  // Running sums of P(e, X = x) / e^top over the slices, top the largest ln P(e, C = c) so far.
  Marginals r;
  double top = kNegInf;
  for (std::int64_t s = 0; s < cp.cond.slices; ++s) {
    if (!fill_slice(cp, s)) continue;
    Marginals m = compute_marginals(cp.plan, threads, upward);
    if (m.ln_pe == kNegInf) continue;
    const std::vector<int> x = slice_values(cp.cond, s);
    for (std::size_t i = 0; i < x.size(); ++i) {  // C is a point mass within its slice
      const int v = cp.cond.vars[i];
      std::fill(m.p[v].begin(), m.p[v].end(), 0.0);
      m.p[v][model.kept[v][x[i]]] = 1.0;
    }
    if (r.p.empty()) {
      r.p.resize(m.p.size());
      for (std::size_t v = 0; v < m.p.size(); ++v) r.p[v].assign(m.p[v].size(), 0.0);
    }
    if (m.ln_pe > top) {
      const double scale = top == kNegInf ? 0.0 : std::exp(top - m.ln_pe);
      for (auto& p : r.p)
        for (double& y : p) y *= scale;
      top = m.ln_pe;
    }
    const double w = std::exp(m.ln_pe - top);
    for (std::size_t v = 0; v < m.p.size(); ++v)
      for (std::size_t k = 0; k < m.p[v].size(); ++k) r.p[v][k] += w * m.p[v][k];
  }
  if (top == kNegInf) {
    r.ln_pe = kNegInf;
    r.p.clear();
    return r;
  }
  // Every variable's sums add up to the same P(e) / e^top: normalise by one of them.
  double z = 0;
  for (double y : r.p.front()) z += y;
  r.ln_pe = top + std::log(z);
  for (auto& p : r.p)
    for (double& y : p) y /= z;
  return r;
}

MostProbable compute_mpe(ConditionedPlan& cp, int threads, const UpwardRunner& upward) {
  if (!cp.conditioned()) return compute_mpe(cp.plan, threads, upward);
  MostProbable best;
  best.ln_pr = kNegInf;
  for (std::int64_t s = 0; s < cp.cond.slices; ++s) {
    if (!fill_slice(cp, s)) continue;
    MostProbable m = compute_mpe(cp.plan, threads, upward);
    if (!(m.ln_pr > best.ln_pr)) continue;
    const std::vector<int> x = slice_values(cp.cond, s);
    for (std::size_t i = 0; i < x.size(); ++i)
      m.assignment[cp.cond.vars[i]] = cp.plan.model.kept[cp.cond.vars[i]][x[i]];
    best = std::move(m);
  }
  return best;
}

double posterior_peak_bytes(const Plan& plan, bool marginals) {
  const auto& buckets = plan.tree.buckets;
  const double threads = omp_get_max_threads();
  double outputs = 0, combined = 0, pass = 0;
  for (std::size_t bi = 0; bi < buckets.size(); ++bi) {
    const Bucket& b = buckets[bi];
    outputs += 8.0 * std::exp2(b.log2_output);
    // The upward kernel's products of many small inputs, kept for the second pass.
    if (b.factors.size() + b.children.size() > 4) {
      std::vector<InputTable> scopes;
      for (int f : b.factors) scopes.push_back({nullptr, plan.input_scope[f]});
      for (int c : b.children) scopes.push_back({nullptr, buckets[c].output_vars()});
      combined += combined_bytes(bucket_shape(plan, static_cast<int>(bi)), scopes);
    }
    // A pass over the bucket (Blocks): offsets of each input within a block, the sum of the
    // inputs that are the same in every block (the downward pass
    // also the message from above, and per target at most five tables of a block's size: its
    // offsets, local indices, local offsets, its group's configurations and its own from
    // those), and each thread's block of products, local sums, member sums and blocks' total
    // (under four blocks). The downward pass adds each thread's sums of the belief onto the
    // children and the eliminated variables (downward_threads), and their total.
    const double tables =
        b.factors.size() + 2 + b.children.size() + 5.0 * (b.children.size() + b.n_marg);
    double onto = 0;
    for (int c : b.children) onto += 8.0 * std::exp2(buckets[c].log2_output);
    for (std::size_t k = b.vars.size() - b.n_marg; k < b.vars.size(); ++k)
      onto += 8.0 * plan.model.card[b.vars[k]];
    pass = std::max(pass,
                    8.0 * kBlock * (tables + 4 * threads) + (marginals ? (threads + 1) * onto : 0));
  }
  MemoryEstimate m = plan.memory;
  // MPE: the upward pass's threads keep their own maxima where a bucket has fewer than 4 outputs
  // a thread.
  m.intermediate_bytes =
      combined + (marginals ? 2 * outputs + pass : outputs + pass + 32.0 * threads * threads);
  update_peak(m);
  return m.peak_bytes;
}

double ln_joint(const Network& net, std::span<const int> assignment) {
  double s = 0;
  for (const Factor& f : net.factors) {
    std::int64_t idx = 0;
    for (int v : f.scope) idx = idx * net.card[v] + assignment[v];
    s += std::log(f.table[idx]);
  }
  return s;
}

}  // namespace kinfer
