#include "linkage/inheritance.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>

namespace kinfer::linkage {

namespace {

// A table over variables in ascending order, the last varying fastest.
struct Tab {
  std::vector<int> vars;
  std::vector<double> t;
};

// Product of `fs`, with variable `x` summed out (x < 0: none); `max`: maximised out instead
// (the max-product emission of kinfer haplotypes' chain). `card` per variable.
Tab multiply_sum(const std::vector<const Tab*>& fs, int x, const std::vector<int>& card,
                 bool max = false) {
  std::vector<int> u;
  for (const Tab* f : fs) u.insert(u.end(), f->vars.begin(), f->vars.end());
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  const int nu = static_cast<int>(u.size());
  Tab out;
  for (int v : u)
    if (v != x) out.vars.push_back(v);
  long out_size = 1;
  for (int v : out.vars) out_size *= card[v];
  out.t.assign(out_size, 0.0);
  // Strides of every input and of the output over u.
  const int nf = static_cast<int>(fs.size());
  std::vector<std::vector<long>> st(nf + 1, std::vector<long>(nu, 0));
  auto fill = [&](const std::vector<int>& vars, std::vector<long>& s) {
    long m = 1;
    for (int j = static_cast<int>(vars.size()) - 1; j >= 0; --j) {
      const int p = static_cast<int>(std::lower_bound(u.begin(), u.end(), vars[j]) - u.begin());
      s[p] = m;
      m *= card[vars[j]];
    }
  };
  for (int f = 0; f < nf; ++f) fill(fs[f]->vars, st[f]);
  fill(out.vars, st[nf]);
  // The last variables of u (at most 4096 combinations) form an inner block whose offsets into
  // every table are listed once; the odometer then steps over the outer variables only, and each
  // block is a few gathers (same products, same order of the sums as entry by entry).
  int ni = 0;
  long inner = 1;
  while (ni < nu && inner * card[u[nu - 1 - ni]] <= 4096) inner *= card[u[nu - 1 - ni++]];
  const int no = nu - ni;
  std::vector<std::vector<long>> off(nf + 1, std::vector<long>(inner, 0));
  std::vector<char> constant(nf, 1);  // the factor reads no inner variable
  {
    std::vector<int> d(ni, 0);
    for (long k = 0; k < inner; ++k) {
      for (int f = 0; f <= nf; ++f) {
        long o = 0;
        for (int q = 0; q < ni; ++q) o += d[q] * st[f][no + q];
        off[f][k] = o;
      }
      for (int q = ni - 1; q >= 0 && ++d[q] == card[u[no + q]]; --q) d[q] = 0;
    }
    for (int f = 0; f < nf; ++f)
      for (int q = 0; q < ni; ++q)
        if (st[f][no + q] != 0) constant[f] = 0;
  }
  std::vector<double> p(inner);
  std::vector<int> digit(no, 0);
  std::vector<long> idx(nf + 1, 0);
  while (true) {
    bool zero = false;
    for (int f = 0; f < nf && !zero; ++f) zero = constant[f] && fs[f]->t[idx[f]] == 0;
    if (!zero) {
      std::fill(p.begin(), p.end(), 1.0);
      for (int f = 0; f < nf; ++f) {
        const double* t = fs[f]->t.data() + idx[f];
        if (constant[f]) {
          const double c = *t;
          for (long k = 0; k < inner; ++k) p[k] *= c;
        } else {
          const long* o = off[f].data();
          for (long k = 0; k < inner; ++k) p[k] *= t[o[k]];
        }
      }
      double* y = out.t.data() + idx[nf];
      const long* o = off[nf].data();
      if (max)
        for (long k = 0; k < inner; ++k) y[o[k]] = std::max(y[o[k]], p[k]);
      else
        for (long k = 0; k < inner; ++k) y[o[k]] += p[k];
    }
    int j = no - 1;
    for (; j >= 0; --j) {
      const int c = card[u[j]];
      if (++digit[j] < c) {
        for (int f = 0; f <= nf; ++f) idx[f] += st[f][j];
        break;
      }
      digit[j] = 0;
      for (int f = 0; f <= nf; ++f) idx[f] -= st[f][j] * (c - 1);
    }
    if (j < 0) break;
  }
  return out;
}

// big *= small in place, small's variables a subset of big's, every variable binary (the state
// bits): each entry's index into small from two lookup tables (low and high bits of the index).
void multiply_into(Tab& big, const Tab& small) {
  const int nb = static_cast<int>(big.vars.size());
  std::vector<int> at;  // per variable of small: its bit in big's index
  for (int v : small.vars)
    at.push_back(
        nb - 1 -
        static_cast<int>(std::lower_bound(big.vars.begin(), big.vars.end(), v) - big.vars.begin()));
  const int ns = static_cast<int>(at.size()), lo = std::min(nb, 12);
  auto lut = [&](int from, int count) {
    std::vector<std::uint32_t> t(std::size_t(1) << count, 0);
    for (std::size_t i = 0; i < t.size(); ++i)
      for (int k = 0; k < ns; ++k)
        if (at[k] >= from && at[k] < from + count && ((i >> (at[k] - from)) & 1))
          t[i] |= 1u << (ns - 1 - k);
    return t;
  };
  const std::vector<std::uint32_t> tl = lut(0, lo), th = lut(lo, nb - lo);
  const long n = static_cast<long>(big.t.size()), ml = (1L << lo) - 1;
  double* b = big.t.data();
  const double* s = small.t.data();
#pragma omp parallel for schedule(static) if (n > (1L << 18))
  for (long i = 0; i < n; ++i) b[i] *= s[tl[i & ml] | th[i >> lo]];
}

// A table over `vars` (any order, distinct) from a function of their values in that order.
Tab make_tab(std::vector<int> vars, const std::vector<int>& card,
             const std::function<double(const std::vector<int>&)>& f) {
  const int n = static_cast<int>(vars.size());
  std::vector<int> pos(n);
  std::iota(pos.begin(), pos.end(), 0);
  std::sort(pos.begin(), pos.end(), [&](int a, int b) { return vars[a] < vars[b]; });
  Tab t;
  for (int p : pos) t.vars.push_back(vars[p]);
  long size = 1;
  for (int v : vars) size *= card[v];
  t.t.reserve(size);
  std::vector<int> digit(n, 0), val(n, 0);
  for (long i = 0; i < size; ++i) {
    for (int j = 0; j < n; ++j) val[pos[j]] = digit[j];
    t.t.push_back(f(val));
    for (int j = n - 1; j >= 0; --j) {
      if (++digit[j] < card[t.vars[j]]) break;
      digit[j] = 0;
    }
  }
  return t;
}


// Sums the allele variables (ids from `bits` on) out of `pool`, greedily: the variable whose
// bucket table is smallest first; `alive` marks the tables still in use. Stops when a factor of
// more than `limit` entries would be built, returning its entries; none when every allele is
// summed out. `max`: maximised out instead.
std::optional<double> sum_out_alleles(std::vector<Tab>& pool, std::vector<char>& alive,
                                      const std::vector<int>& card, int bits, double limit,
                                      bool max = false) {
  std::vector<char> done(card.size(), 0);
  for (int left = static_cast<int>(card.size()) - bits; left > 0; --left) {
    int best = -1;
    double best_size = 0;
    for (int v = bits; v < static_cast<int>(card.size()); ++v) {
      if (done[v]) continue;
      std::vector<int> u;
      for (std::size_t f = 0; f < pool.size(); ++f)
        if (alive[f] && std::binary_search(pool[f].vars.begin(), pool[f].vars.end(), v))
          u.insert(u.end(), pool[f].vars.begin(), pool[f].vars.end());
      std::sort(u.begin(), u.end());
      u.erase(std::unique(u.begin(), u.end()), u.end());
      double size = 1;
      for (int x : u) size *= card[x];
      if (best < 0 || size < best_size) best = v, best_size = size;
    }
    std::vector<const Tab*> in;
    for (std::size_t f = 0; f < pool.size(); ++f)
      if (alive[f] && std::binary_search(pool[f].vars.begin(), pool[f].vars.end(), best)) {
        in.push_back(&pool[f]);
        alive[f] = 0;
      }
    done[best] = 1;
    if (in.empty()) continue;  // a variable in no table (cannot happen: priors, transmissions)
    if (best_size / card[best] > limit) return best_size / card[best];
    Tab t = multiply_sum(in, best, card, max);
    pool.push_back(std::move(t));
    alive.push_back(1);
  }
  return std::nullopt;
}

// Tables over state bits only, merged while their union stays within 2^12 entries (or adds no
// variable), so that a step reads few.
void merge_small_tables(std::vector<Tab>& rest, const std::vector<int>& card) {
  while (rest.size() > 1) {
    std::size_t bi = 0, bj = 1;
    double best = std::numeric_limits<double>::infinity();
    bool subset = false;
    for (std::size_t i = 0; i < rest.size(); ++i)
      for (std::size_t j = i + 1; j < rest.size(); ++j) {
        std::vector<int> u = rest[i].vars;
        u.insert(u.end(), rest[j].vars.begin(), rest[j].vars.end());
        std::sort(u.begin(), u.end());
        const std::size_t n = std::unique(u.begin(), u.end()) - u.begin();
        const bool sub = n == std::max(rest[i].vars.size(), rest[j].vars.size());
        const double size = std::exp2(static_cast<double>(n));
        if ((sub && !subset) || (sub == subset && size < best)) best = size, bi = i, bj = j;
        subset = subset || sub;
      }
    if (!subset && best > 4096) break;
    if (subset) {  // the smaller one multiplied into the larger in place
      if (rest[bi].vars.size() < rest[bj].vars.size()) std::swap(rest[bi], rest[bj]);
      multiply_into(rest[bi], rest[bj]);
      rest.erase(rest.begin() + bj);
      continue;
    }
    Tab t = multiply_sum({&rest[bi], &rest[bj]}, -1, card);
    rest.erase(rest.begin() + bj);
    rest[bi] = std::move(t);
  }
}

// Each table to a factor of `out` over state positions, numbered from the lowest (pext order),
// scaled to a maximum of 1. A table's index is already that order: its variables ascend in id,
// so descend in state position, the last (lowest position) fastest.
void add_factors(std::vector<Tab>& rest, int bits, Emission& out) {
  for (Tab& f : rest) {
    EmissionFactor ef;
    for (int v : f.vars) ef.mask |= std::uint64_t(1) << (bits - 1 - v);
    double mx = 0;
    for (double y : f.t) mx = std::max(mx, y);
    ef.table = std::move(f.t);
    if (!(mx > 0)) {
      out.zero = true;
      out.factors.clear();
      return;
    }
    for (double& x : ef.table) x /= mx;
    out.ln_scale += std::log(mx);
    out.factors.push_back(std::move(ef));
  }
}

}  // namespace

InheritanceModel::InheritanceModel(const Pedigree& ped,
                                   const std::vector<const PedigreeLocus*>& loci, bool sex_linked,
                                   bool founder_phase, bool keep_everyone)
    : ped_(ped), loci_(loci), sex_linked_(sex_linked) {
  const int np = static_cast<int>(ped.people.size());
  // People kept: a phenotype at an analysed locus, or a kept child (people are not in
  // generation order, so iterate to the fixed point).
  keep_.assign(np, keep_everyone ? 1 : 0);
  for (int i = 0; i < np; ++i)
    for (const PedigreeLocus* L : loci)
      if (ped.people[i].pheno.at(L->locus).a1 != 0) keep_[i] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < np; ++i) {
      const Person& p = ped.people[i];
      if (!keep_[i] || p.founder()) continue;
      for (int q : {p.father, p.mother})
        if (!keep_[q]) keep_[q] = 1, changed = true;
    }
  }
  kept_ = static_cast<int>(std::count(keep_.begin(), keep_.end(), 1));
  child_meioses_.assign(np, {});
  for (int i = 0; i < np; ++i) {
    const Person& p = ped.people[i];
    if (!keep_[i] || p.founder()) continue;
    for (int side = 0; side < 2; ++side) {
      // Sex-linked: a daughter's paternal X is her father's own (no meiosis to choose).
      if (side == 0 && sex_linked) continue;
      const int parent = side == 0 ? p.father : p.mother;
      child_meioses_[parent].push_back(static_cast<int>(meiosis_.size()));
      meiosis_.push_back({i, side, parent, -1});
    }
  }
  // Founder phase: the first meiosis from each founder is fixed at 0.
  std::vector<char> fixed(meiosis_.size(), 0);
  if (founder_phase)
    for (int q = 0; q < np; ++q)
      if (ped.people[q].founder() && !child_meioses_[q].empty()) {
        fixed[child_meioses_[q].front()] = 1;
        ++fixed_;
      }
  for (std::size_t m = 0; m < meiosis_.size(); ++m)
    if (!fixed[m]) meiosis_[m].bit = bits_++;
  // Beyond the chain's ceiling the model only reports its size: the layout stays empty and
  // location_scores refuses, so the caller sends the pedigree to the network.
  if (bits_ > kMaxBits) return;
  // Founder groups: a founder's other children's bits, flipped together.
  struct Item {
    std::vector<int> bits;
    bool female = false;
    bool group = false;
  };
  std::vector<Item> items;
  std::vector<char> grouped(bits_, 0);
  if (founder_phase)
    for (int q = 0; q < np; ++q)
      if (ped.people[q].founder() && !child_meioses_[q].empty()) {
        Item it;
        for (int m : child_meioses_[q])
          if (meiosis_[m].bit >= 0)
            it.bits.push_back(meiosis_[m].bit), grouped[meiosis_[m].bit] = 1;
        it.female = !(ped.people[q].sex == 1 && !sex_linked);
        it.group = true;
        if (!it.bits.empty()) items.push_back(std::move(it));
      }
  // Regions of at most kRegionBits positions (chain.hpp): every group inside one (first fit,
  // largest first), the other bits filling region 0 first (the contiguous, fused pass).
  const int cap = ChainLayout::kRegionBits;
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& x, const Item& y) { return x.bits.size() > y.bits.size(); });
  std::vector<std::vector<int>> region_bits(std::max(1, (bits_ + cap - 1) / cap));
  std::vector<int> group_region(items.size(), -1);
  std::vector<int> spill;  // bits of groups wider than a region
  for (std::size_t i = 0; i < items.size(); ++i) {
    const int n = static_cast<int>(items[i].bits.size());
    if (n > cap) {
      spill.insert(spill.end(), items[i].bits.begin(), items[i].bits.end());
      continue;
    }
    std::size_t r = 0;
    while (r < region_bits.size() && static_cast<int>(region_bits[r].size()) + n > cap) ++r;
    if (r == region_bits.size()) region_bits.emplace_back();
    region_bits[r].insert(region_bits[r].end(), items[i].bits.begin(), items[i].bits.end());
    group_region[i] = static_cast<int>(r);
  }
  for (int b = 0; b < bits_; ++b)
    if (!grouped[b]) spill.push_back(b);
  for (int b : spill) {
    std::size_t r = 0;
    while (r < region_bits.size() && static_cast<int>(region_bits[r].size()) >= cap) ++r;
    if (r == region_bits.size()) region_bits.emplace_back();
    region_bits[r].push_back(b);
  }
  pos_.assign(bits_, -1);
  layout_.bits = bits_;
  layout_.female.assign(bits_, 0);
  std::vector<int> region_index(region_bits.size(), -1);
  int next = 0;
  for (std::size_t r = 0; r < region_bits.size(); ++r) {
    if (region_bits[r].empty() && next > 0) continue;
    region_index[r] = static_cast<int>(layout_.regions.size());
    const int lo = next;
    for (int b : region_bits[r]) pos_[b] = next++;
    layout_.regions.push_back({lo, next});
  }
  for (const Meiosis& m : meiosis_)
    if (m.bit >= 0) layout_.female[pos_[m.bit]] = !(m.side == 0 && !sex_linked);
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::uint64_t mask = 0;
    for (int b : items[i].bits) mask |= std::uint64_t(1) << pos_[b];
    layout_.groups.push_back(
        {mask, items[i].female, group_region[i] >= 0 ? region_index[group_region[i]] : -1});
  }
}

EmissionProgram InheritanceModel::program(const PedigreeLocus& L) const {
  using P = EmissionProgram;
  EmissionProgram out;
  const int np = static_cast<int>(ped_.people.size()), n = L.n_alleles;
  if (n < 1 || n > P::kMaxAlleles || bits_ > kMaxBits) return out;
  // Kept people, parents first.
  std::vector<int> order, at(np, -1);
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < np; ++i) {
      const Person& p = ped_.people[i];
      if (!keep_[i] || at[i] >= 0) continue;
      if (!p.founder() && (at[p.father] < 0 || at[p.mother] < 0)) continue;
      at[i] = static_cast<int>(order.size());
      order.push_back(i);
      changed = true;
    }
  }
  if (order.size() > 64) return out;
  std::vector<std::array<int, 2>> bit_of(np, {-2, -2});  // per child and side: the meiosis's bit
  for (const Meiosis& m : meiosis_) bit_of[m.child][m.side] = m.bit;
  int vertices = 0, edges = 0;
  for (int i : order) {
    const Person& p = ped_.people[i];
    ProgramPerson q{};
    const bool hemi = !L.carries_paternal(p);
    q.hemi = hemi;
    for (int side = 0; side < 2; ++side) {
      if (side == 0 && hemi) {
        q.kind[0] = 3, q.src[0] = q.pos[0] = 0;
      } else if (p.founder()) {
        q.kind[side] = 0, q.src[side] = vertices++, q.pos[side] = 0;
      } else if (side == 0 && L.sex_linked) {  // a daughter's paternal X: her father's own
        q.kind[0] = 2, q.src[0] = at[p.father], q.pos[0] = 1;
      } else {
        const int parent = side == 0 ? p.father : p.mother, bit = bit_of[i][side];
        if (bit == -2) throw std::logic_error("InheritanceModel::program: a meiosis is missing");
        q.src[side] = at[parent];
        if (bit < 0)
          q.kind[side] = 2, q.pos[side] = 0;  // fixed by founder phase: the parent's paternal
        else
          q.kind[side] = 1, q.pos[side] = pos_[bit];
      }
    }
    const std::vector<double>& w = L.weight[i];
    q.weight = -1;
    if (std::any_of(w.begin(), w.end(), [](double y) { return y != 1.0; })) {
      q.weight = static_cast<std::int32_t>(out.weights.size());
      out.weights.insert(out.weights.end(), w.begin(), w.end());
      ++edges;
    }
    out.people.push_back(q);
  }
  if (vertices > P::kMaxVertices || edges > P::kMaxEdges) return EmissionProgram{};
  out.n = n;
  out.vertices = vertices;
  out.freq = L.freq;
  return out;
}

Emission InheritanceModel::emission(int l, double table_limit) const {
  return emission(*loci_.at(l), table_limit);
}

Emission InheritanceModel::emission(const PedigreeLocus& L, double table_limit) const {
  return emission_of(L, table_limit, false);
}

Emission InheritanceModel::max_emission(int l, double table_limit) const {
  return emission_of(*loci_.at(l), table_limit, true);
}

std::vector<InheritanceModel::MeiosisPosition> InheritanceModel::meiosis_positions() const {
  std::vector<MeiosisPosition> out;
  for (const Meiosis& m : meiosis_)
    out.push_back({m.child, m.side, m.parent, m.bit >= 0 ? pos_.at(m.bit) : -1});
  return out;
}

InheritanceModel::AlleleNetwork InheritanceModel::kept_allele_variables(
    const PedigreeLocus& L) const {
  const int np = static_cast<int>(ped_.people.size());
  AlleleNetwork net;
  net.card.assign(bits_, 2);
  net.person_vars.assign(np, {-1, -1});
  auto& var = net.person_vars;
  auto add = [&](const std::vector<int>& d) {
    net.card.push_back(static_cast<int>(d.size()));
    net.values.push_back(d);
    return static_cast<int>(net.card.size()) - 1;
  };
  for (int i = 0; i < np; ++i) {
    if (!keep_[i]) continue;
    const Person& p = ped_.people[i];
    var[i][1] = add(L.dom_m[i]);
    if (L.carries_paternal(p) && (!L.sex_linked || p.founder())) var[i][0] = add(L.dom_p[i]);
  }
  for (int i = 0; i < np; ++i) {
    const Person& p = ped_.people[i];
    if (keep_[i] && L.sex_linked && L.carries_paternal(p) && !p.founder())
      var[i][0] = var[p.father][1];
  }
  return net;
}

Emission InheritanceModel::emission_of(const PedigreeLocus& L, double table_limit,
                                       bool max) const {
  if (bits_ > kMaxBits)
    throw std::length_error("an inheritance vector of " + std::to_string(bits_) +
                            " bits is beyond the chain's " + std::to_string(kMaxBits));
  const double limit = table_limit < 0 ? table_limit_ : table_limit;
  if (limit <= 0 && !max) {
    Emission p;
    p.program = program(L);
    if (p.program.n > 0) return p;
  }
  const int np = static_cast<int>(ped_.people.size());
  const int n = L.n_alleles;
  // Variables: the state bits first, the bit at state position p as id bits-1-p (a table lists
  // its variables in ascending id, the last fastest: so a table over bits is already in the
  // state's index order, and its factor needs no reordering), then the allele variables of the
  // kept people.
  AlleleNetwork net = kept_allele_variables(L);
  const std::vector<int>& card = net.card;
  const std::vector<std::array<int, 2>>& var = net.person_vars;
  auto values = [&](int v) -> const std::vector<int>& { return net.values[v - bits_]; };
  std::vector<Tab> tabs;
  for (int i = 0; i < np; ++i) {
    if (!keep_[i]) continue;
    const Person& p = ped_.people[i];
    const bool hemi = !L.carries_paternal(p);
    if (p.founder())
      for (int side = hemi ? 1 : 0; side < 2; ++side) {
        const int v = var[i][side];
        tabs.push_back(make_tab(
            {v}, card, [&](const std::vector<int>& x) { return L.freq[values(v)[x[0]]]; }));
      }
    const std::vector<double>& w = L.weight[i];
    if (hemi) {
      const int v = var[i][1];
      Tab t = make_tab({v}, card, [&](const std::vector<int>& x) { return w[values(v)[x[0]]]; });
      if (std::any_of(t.t.begin(), t.t.end(), [](double y) { return y != 1.0; }))
        tabs.push_back(std::move(t));
    } else {
      const int a = var[i][0], b = var[i][1];
      Tab t = make_tab({a, b}, card, [&](const std::vector<int>& x) {
        return w[values(a)[x[0]] * n + values(b)[x[1]]];
      });
      if (std::any_of(t.t.begin(), t.t.end(), [](double y) { return y != 1.0; }))
        tabs.push_back(std::move(t));
    }
  }
  // Transmissions: the child's allele is the parent's paternal one when the selector is 0.
  for (const Meiosis& m : meiosis_) {
    const int pa = var[m.parent][0], ma = var[m.parent][1], c = var[m.child][m.side];
    if (pa < 0) throw std::logic_error("a father transmits through a selector at an X locus");
    if (m.bit < 0) {
      tabs.push_back(make_tab({pa, c}, card, [&](const std::vector<int>& x) {
        return values(pa)[x[0]] == values(c)[x[1]] ? 1.0 : 0.0;
      }));
    } else {
      const int sel = bits_ - 1 - pos_[m.bit];
      tabs.push_back(make_tab({pa, ma, sel, c}, card, [&](const std::vector<int>& x) {
        const int from = x[2] == 0 ? values(pa)[x[0]] : values(ma)[x[1]];
        return from == values(c)[x[3]] ? 1.0 : 0.0;
      }));
    }
  }
  // Sum out the alleles; a factor beyond the limit: per state on the fly, else refused.
  std::vector<char> alive(tabs.size(), 1);
  std::vector<Tab> pool = std::move(tabs);
  if (const std::optional<double> over =
          sum_out_alleles(pool, alive, card, bits_, limit, max)) {
    Emission p;
    if (!max) p.program = program(L);  // the per-state program sums: no max-product version
    if (p.program.n > 0) return p;
    throw std::length_error("an emission factor of 2^" +
                            std::to_string(static_cast<int>(std::log2(*over))) +
                            " entries at locus " + std::to_string(L.locus + 1));
  }
  // What is left reads only state bits: constants go to the scale, the tables become factors.
  Emission out;
  std::vector<Tab> rest;
  for (std::size_t f = 0; f < pool.size(); ++f) {
    if (!alive[f]) continue;
    if (pool[f].vars.empty()) {
      const double c = pool[f].t[0];
      if (c <= 0) {
        out.zero = true;
        return out;
      }
      out.ln_scale += std::log(c);
      continue;
    }
    rest.push_back(std::move(pool[f]));
  }
  merge_small_tables(rest, card);
  add_factors(rest, bits_, out);
  return out;
}

InheritanceModel::AlleleNetwork InheritanceModel::allele_network(const PedigreeLocus& L) const {
  if (bits_ > kMaxBits)
    throw std::length_error("an inheritance vector of " + std::to_string(bits_) +
                            " bits is beyond the chain's " + std::to_string(kMaxBits));
  const int np = static_cast<int>(ped_.people.size());
  const int n = L.n_alleles;
  AlleleNetwork net = kept_allele_variables(L);
  std::vector<int>& card = net.card;
  std::vector<std::array<int, 2>>& var = net.person_vars;
  auto add = [&](const std::vector<int>& d) {
    card.push_back(static_cast<int>(d.size()));
    net.values.push_back(d);
    return static_cast<int>(card.size()) - 1;
  };
  // The people the chain drops (no phenotype at its loci, no kept descendant), parents first:
  // nothing about them is observed at any locus, so their selectors at this locus are
  // independent of everything else, each 0 or 1 with probability 1/2 (a local variable, summed
  // here). They are in the network so that they get cavities too.
  std::vector<char> done(keep_.begin(), keep_.end());
  std::vector<int> dropped;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < np; ++i) {
      const Person& p = ped_.people[i];
      if (done[i] || (!p.founder() && (!done[p.father] || !done[p.mother]))) continue;
      var[i][1] = add(L.dom_m[i]);
      if (L.carries_paternal(p))
        var[i][0] = L.sex_linked && !p.founder() ? var[p.father][1] : add(L.dom_p[i]);
      done[i] = 1;
      dropped.push_back(i);
      changed = true;
    }
  }
  auto values = [&](int v) -> const std::vector<int>& { return net.values[v - bits_]; };
  auto push = [&](Tab t, int person) {
    net.tables.push_back({std::move(t.vars), std::move(t.t), person});
  };
  for (int i = 0; i < np; ++i) {
    const Person& p = ped_.people[i];
    const bool hemi = !L.carries_paternal(p);
    if (p.founder())
      for (int side = hemi ? 1 : 0; side < 2; ++side) {
        const int v = var[i][side];
        push(make_tab({v}, card, [&](const std::vector<int>& x) { return L.freq[values(v)[x[0]]]; }),
             -1);
      }
    const std::vector<double>& w = L.weight[i];
    if (hemi) {
      const int v = var[i][1];
      push(make_tab({v}, card, [&](const std::vector<int>& x) { return w[values(v)[x[0]]]; }), i);
    } else {
      const int a = var[i][0], b = var[i][1];
      push(make_tab({a, b}, card,
                    [&](const std::vector<int>& x) {
                      return w[values(a)[x[0]] * n + values(b)[x[1]]];
                    }),
           i);
    }
  }
  // Transmissions: the child's allele is the parent's paternal one when the selector is 0.
  for (const Meiosis& m : meiosis_) {
    const int pa = var[m.parent][0], ma = var[m.parent][1], c = var[m.child][m.side];
    if (pa < 0) throw std::logic_error("a father transmits through a selector at an X locus");
    if (m.bit < 0) {
      push(make_tab({pa, c}, card,
                    [&](const std::vector<int>& x) {
                      return values(pa)[x[0]] == values(c)[x[1]] ? 1.0 : 0.0;
                    }),
           -1);
    } else {
      const int sel = bits_ - 1 - pos_[m.bit];
      push(make_tab({pa, ma, sel, c}, card,
                    [&](const std::vector<int>& x) {
                      const int from = x[2] == 0 ? values(pa)[x[0]] : values(ma)[x[1]];
                      return from == values(c)[x[3]] ? 1.0 : 0.0;
                    }),
           -1);
    }
  }
  for (int i : dropped) {
    const Person& p = ped_.people[i];
    if (p.founder()) continue;
    for (int side = 0; side < 2; ++side) {
      if (side == 0 && (!L.carries_paternal(p) || L.sex_linked)) continue;  // none, or a copy
      const int parent = side == 0 ? p.father : p.mother;
      const int pa = var[parent][0], ma = var[parent][1], c = var[i][side];
      if (pa < 0) throw std::logic_error("a father transmits through a selector at an X locus");
      const int sel = add({0, 1});
      push(make_tab({pa, ma, sel, c}, card,
                    [&](const std::vector<int>& x) {
                      const int from = x[2] == 0 ? values(pa)[x[0]] : values(ma)[x[1]];
                      return from == values(c)[x[3]] ? 0.5 : 0.0;
                    }),
           -1);
    }
  }
  return net;
}

}  // namespace kinfer::linkage
