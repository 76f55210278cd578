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
#include <stdexcept>

namespace kinfer::linkage {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A table over variables in ascending order, the last varying fastest.
struct Tab {
  std::vector<int> vars;
  std::vector<double> t;
};

// Product of `fs`, with variable `x` summed out (x < 0: none). `card` per variable.
Tab multiply_sum(const std::vector<const Tab*>& fs, int x, const std::vector<int>& card) {
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

}  // namespace

InheritanceModel::InheritanceModel(const Pedigree& ped,
                                   const std::vector<const PedigreeLocus*>& loci, bool sex_linked,
                                   bool founder_phase)
    : ped_(ped), loci_(loci), sex_linked_(sex_linked) {
  const int np = static_cast<int>(ped.people.size());
  // People kept: a phenotype at an analysed locus, or a kept child (people are not in
  // generation order, so iterate to the fixed point).
  keep_.assign(np, 0);
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

EmissionProgram InheritanceModel::program(int l) const {
  const PedigreeLocus& L = *loci_.at(l);
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
  if (bits_ > kMaxBits)
    throw std::length_error("an inheritance vector of " + std::to_string(bits_) +
                            " bits is beyond the chain's " + std::to_string(kMaxBits));
  const double limit = table_limit < 0 ? table_limit_ : table_limit;
  if (limit <= 0) {
    Emission p;
    p.program = program(l);
    if (p.program.n > 0) return p;
  }
  const PedigreeLocus& L = *loci_.at(l);
  const int np = static_cast<int>(ped_.people.size());
  const int n = L.n_alleles;
  // Variables: the state bits first, the bit at state position p as id bits-1-p (a table lists
  // its variables in ascending id, the last fastest: so a table over bits is already in the
  // state's index order, and its factor needs no reordering), then the allele variables of the
  // kept people.
  std::vector<int> card(bits_, 2);
  std::vector<std::vector<int>> dom;  // per allele variable: recoded alleles
  std::vector<std::array<int, 2>> var(np, {-1, -1});
  auto add = [&](const std::vector<int>& d) {
    card.push_back(static_cast<int>(d.size()));
    dom.push_back(d);
    return static_cast<int>(card.size()) - 1;
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
  auto values = [&](int v) -> const std::vector<int>& { return dom[v - bits_]; };
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
  // Sum out the alleles, greedily: the variable whose bucket table is smallest first.
  std::vector<char> alive(tabs.size(), 1);
  std::vector<Tab> pool = std::move(tabs);
  std::vector<char> done(card.size(), 0);
  for (int left = static_cast<int>(card.size()) - bits_; left > 0; --left) {
    int best = -1;
    double best_size = 0;
    for (int v = bits_; v < static_cast<int>(card.size()); ++v) {
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
    if (best_size / card[best] > limit) {
      Emission p;
      p.program = program(l);
      if (p.program.n > 0) return p;
    }
    if (best_size / card[best] > limit)
      throw std::length_error("an emission factor of 2^" +
                              std::to_string(static_cast<int>(std::log2(best_size / card[best]))) +
                              " entries at locus " + std::to_string(l + 1));
    Tab t = multiply_sum(in, best, card);
    pool.push_back(std::move(t));
    alive.push_back(1);
  }
  // What is left reads only state bits: constants go to the scale; small tables are merged
  // while their union stays within 2^12 entries (or adds no variable), so the step reads few.
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
  // Each table to a factor over state positions, numbered from the lowest (pext order), scaled
  // to a maximum of 1. A table's index is already that order: its variables ascend in id, so
  // descend in state position, the last (lowest position) fastest.
  for (Tab& f : rest) {
    EmissionFactor ef;
    for (int v : f.vars) ef.mask |= std::uint64_t(1) << (bits_ - 1 - v);
    double mx = 0;
    for (double y : f.t) mx = std::max(mx, y);
    ef.table = std::move(f.t);
    if (!(mx > 0)) {
      out.zero = true;
      out.factors.clear();
      return out;
    }
    for (double& x : ef.table) x /= mx;
    out.ln_scale += std::log(mx);
    out.factors.push_back(std::move(ef));
  }
  return out;
}

// location_scores's walk along the map on one backend: the emissions computed once (under a
// memory limit in chunks, the largest tables dropped and recomputed when needed), the backward
// pass kept at checkpoints, the betas the points need rebuilt from them (a block at a time when
// there is room), and the forward pass scoring each point.
struct InheritanceModel::Walk {
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  // A locus being computed holds its elimination's intermediate tables too: kScratchTimes its
  // own (measured on c250: 1.5 exceeded --max-memory by 4-7%).
  static constexpr double kScratchTimes = 3;

  Walk(InheritanceModel& model, ChainBackend& backend, const std::vector<int>& markers,
       const std::vector<double>& male, const std::vector<double>& female)
      : m(model),
        B(backend),
        markers(markers),
        male(male),
        female(female),
        M(static_cast<int>(markers.size())),
        vec(8.0 * std::exp2(model.bits_)),
        bounded(model.memory_limit_ > 0),
        em(M),
        kept(M, 1),
        may_drop(backend.forget(nullptr)) {}

  InheritanceModel& m;
  ChainBackend& B;
  const std::vector<int>& markers;
  const std::vector<double>& male;
  const std::vector<double>& female;
  const int M;
  const double vec;    // bytes of one state vector
  const bool bounded;  // under a memory limit (set_memory_limit)

  // The emissions: the trait's, the markers' (`kept` 0: dropped, recomputed into `scratch`).
  double room0 = 0;    // bytes for the tables after the state vectors
  double limit = -1;   // a factor's entries at most (-1: the model's table limit)
  Emission et;
  std::vector<Emission> em;
  std::vector<char> kept;
  double kept_bytes = 0, dropped_max = 0;
  // Only a backend that can forget an emission (the CPU) lets a locus be dropped: the GPU keeps
  // each emission's device copy by its address, which `scratch` reuses.
  const bool may_drop;
  Emission scratch;
  int scratch_k = -1;

  // The vectors: the four working ones, the checkpoints of beta every `every` markers, and the
  // betas of one block of markers (`cached`, block `have_block`).
  int every = 1;
  bool block_cache = false, direct = false;
  int alpha = -1, beta = -1, va = -1, vb = -1;
  std::vector<int> check;
  std::vector<double> check_scale;
  int have_block = -1;
  std::vector<int> cached;
  std::vector<double> cached_scale;

  static double bytes_of(const Emission& e) {
    double b = 0;
    for (const EmissionFactor& f : e.factors) b += 8.0 * static_cast<double>(f.table.size());
    return b;
  }
  std::length_error too_much(double tables) const {
    auto mib = [](double b) { return std::to_string(static_cast<long>(std::ceil(b / 1048576))); };
    return std::length_error("emission tables of " + mib(tables) +
                             " MiB and four state vectors of " + mib(vec) +
                             " MiB exceed the chain's memory, " + mib(m.memory_limit_) + " MiB");
  }

  void compute_emissions(int trait);
  // Drops the largest kept table among loci [a, b) while the tables do not fit; false when
  // nothing is left to drop there.
  bool fit(int a, int b);
  // Locus k's emission: kept, or recomputed (the same tables: emission() is deterministic).
  const Emission* E(int k);
  void count_emissions();
  void plan_checkpoints();
  double timed_step(int v, bool kernel, double ml, double fl, const Emission* e);
  // beta_k = E_k * K_k(beta_k+1) into `dst` from `src` (which holds beta_{k+1}; unchanged when
  // it is another vector).
  void step_back_from(int k, int dst, int src, double& s);
  // beta_k = E_k * K_k(beta_k+1); `v` holds beta_{k+1} (nothing for k = M - 1).
  void step_back(int k, int v, double& s);
  void backward_pass();
  // beta_k into `target` from the first checkpoint at or after k (or from the end of the map).
  void rebuild(int k, int target, double& s);
  // The betas of block b, stepped from the next checkpoint: into vectors of their own (direct)
  // or copied out of `beta`.
  void cache_block_direct(int b);
  void cache_block_copied(int b);
  // beta_k (with its ln scale): the vector that holds it, `beta` or (direct) a cached one.
  int beta_at(int k, double& s);
  // sum_w [K_left alpha](w) E_T(w) [K_right beta](w)
  double score(bool have_alpha, double as, int bv, double bs, const Point& pt);
  std::vector<double> forward_pass(const std::vector<Point>& points, double* markers_only);
  void release_all();
};

void InheritanceModel::Walk::compute_emissions(int trait) {
  // `room0`: bytes for the tables after the state vectors: the block cache's (2 sqrt(M) + 4, the
  // walk's 734 steps on c250) while that is at most half of the memory, else at least four
  // (with fewer checkpoints each point's beta is rebuilt from further away: 16375 steps on c250
  // under 1500M when the tables took all but four). A factor of at most room0 / 8
  // bytes (a locus beyond goes per state on the fly); loci computed in chunks that fit in what
  // is free (the first chunk one locus, then as many as fit at kScratchTimes the largest so far,
  // at most kEmissionChunk), each chunk followed by dropping the largest tables until the kept
  // ones and one dropped locus (recomputed into `scratch` when a step needs it) fit.
  const double vectors_wanted = (2 * std::ceil(std::sqrt(static_cast<double>(M))) + 4) * vec;
  room0 = bounded ? m.memory_limit_ -
                        std::max(4 * vec, std::min(vectors_wanted, m.memory_limit_ / 2))
                  : 0;
  if (bounded && room0 < 0) throw too_much(0);
  limit = bounded ? std::min(m.table_limit_, room0 / 8 / 8) : -1.0;
  et = m.emission(trait, limit);
  kept_bytes = bytes_of(et);
  double largest = 0;  // the largest locus's tables so far
  for (int c0 = 0, chunk = 1; c0 < M; c0 += chunk) {
    if (!bounded)
      chunk = M;
    else if (c0 > 0)
      chunk = static_cast<int>(std::clamp((room0 - kept_bytes - kScratchTimes * dropped_max) /
                                              std::max(kScratchTimes * largest, 1048576.0),
                                          1.0, static_cast<double>(kEmissionChunk)));
    const int c1 = std::min(M, c0 + chunk);
    std::exception_ptr failed;  // the first locus that failed (no exception leaves the loop)
#pragma omp parallel for schedule(dynamic)
    for (int k = c0; k < c1; ++k) {
      try {
        em[k] = m.emission(markers[k], limit);
      } catch (...) {
#pragma omp critical
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    for (int k = c0; k < c1; ++k) {
      kept_bytes += bytes_of(em[k]);
      largest = std::max(largest, bytes_of(em[k]));
    }
    if (bounded && !fit(c0, c1) && !may_drop) throw too_much(kept_bytes);
  }
  if (bounded && !fit(0, M)) throw too_much(kept_bytes + kScratchTimes * dropped_max);
}

bool InheritanceModel::Walk::fit(int a, int b) {
  while (kept_bytes + kScratchTimes * dropped_max > room0) {
    if (!may_drop) return false;
    int worst = -1;
    for (int k = a; k < b; ++k)
      if (kept[k] && bytes_of(em[k]) > 0 && (worst < 0 || bytes_of(em[k]) > bytes_of(em[worst])))
        worst = k;
    if (worst < 0) return false;
    const double w = bytes_of(em[worst]);
    kept_bytes -= w;
    dropped_max = std::max(dropped_max, w);
    kept[worst] = 0;
    em[worst] = Emission{};
  }
  return true;
}

const Emission* InheritanceModel::Walk::E(int k) {
  if (kept[k]) return &em[k];
  if (scratch_k != k) {
    B.forget(&scratch);
    scratch = Emission{};  // its tables go before the next are built
    scratch = m.emission(markers[k], limit);
    scratch_k = k;
    ++m.profile_.recomputed;
  }
  return &scratch;
}

void InheritanceModel::Walk::count_emissions() {
  Profile& p = m.profile_;
  p.dropped = static_cast<long>(std::count(kept.begin(), kept.end(), 0));
  p.programs += et.program.n > 0;
  for (const Emission& e : em) {
    p.factors += static_cast<long>(e.factors.size());
    p.programs += e.program.n > 0;
    p.table_bytes += bytes_of(e);
    const std::uint64_t low = (std::uint64_t(1) << m.layout_.regions[0].second) - 1;
    for (const EmissionFactor& f : e.factors) p.mixed_factors += (f.mask & ~low) != 0;
  }
}

void InheritanceModel::Walk::plan_checkpoints() {
  // Memory: four working vectors (alpha, beta, and the two sides of a point) in fast memory;
  // beta_k kept at checkpoints every `every` markers. With room, the betas of one block of
  // markers are rebuilt once from the next checkpoint and kept (about 2 sqrt(M) vectors in
  // all); without, each beta a point needs is rebuilt from the next checkpoint.
  long fast = B.vectors_fast(), total = B.vectors_total();
  if (bounded) {  // the checkpoints get what the tables leave
    total = std::min(total, static_cast<long>((m.memory_limit_ - kept_bytes -
                                               kScratchTimes * dropped_max) /
                                              vec));
    fast = std::min(fast, total);
  }
  if (fast < 4 || total < 4)
    throw std::runtime_error("the inheritance chain needs four state vectors in memory (" +
                             std::to_string(m.bits_) + " bits)");
  every = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(M)))));
  block_cache = (M + every - 1) / every + every + 4 <= total;
  if (!block_cache) {
    const long room = total - 4;
    every = room > 0 ? std::max(1, static_cast<int>((M + room - 1) / room)) : M + 1;
    if (room <= 0) every = M + 1;  // no checkpoint: every beta rebuilt from the end
  }
  m.profile_.checkpoint_every = every;
  m.profile_.block_cache = block_cache;
  // When the checkpoints and the block all fit in fast memory (the CPU: always), they are read
  // in place: a rebuilt beta is stepped from the next one into its own vector (step_from), and
  // a point reads the cached beta itself; otherwise (a GPU with checkpoints in host memory)
  // each is copied into `beta` first.
  direct = block_cache && static_cast<long>((M + every - 1) / every) + every + 4 <= fast;
  m.profile_.direct = direct;
  alpha = B.alloc(true), beta = B.alloc(true), va = B.alloc(true), vb = B.alloc(true);
  check.assign(every <= M ? (M + every - 1) / every : 0, -1);
  check_scale.assign(check.size(), 0);
}

double InheritanceModel::Walk::timed_step(int v, bool kernel, double ml, double fl,
                                          const Emission* e) {
  const auto t = Clock::now();
  const double s = B.step(v, kernel, ml, fl, e);
  m.profile_.step_s += since(t);
  ++m.profile_.steps;
  return s;
}

void InheritanceModel::Walk::step_back_from(int k, int dst, int src, double& s) {
  if (k == M - 1) {
    B.fill(dst, 1.0);
    s = timed_step(dst, false, 0, 0, E(k));
    return;
  }
  if (dst == src) {
    s += timed_step(dst, true, male[k], female[k], E(k));
    return;
  }
  const auto t = Clock::now();
  s += B.step_from(dst, src, true, male[k], female[k], E(k));
  m.profile_.step_s += since(t);
  ++m.profile_.steps;
}

void InheritanceModel::Walk::step_back(int k, int v, double& s) {
  if (k == M - 1) {
    B.fill(v, 1.0);
    s = timed_step(v, false, 0, 0, E(k));
  } else {
    s += timed_step(v, true, male[k], female[k], E(k));
  }
}

void InheritanceModel::Walk::backward_pass() {
  if (M > 0 && direct) {
    double s = 0;
    int cur = beta;
    for (int k = M - 1; k >= 0; --k) {
      const bool at_check = k % every == 0 && k / every < static_cast<int>(check.size());
      const int dst = at_check ? B.alloc(true) : beta;
      step_back_from(k, dst, cur, s);
      if (at_check) {
        check[k / every] = dst;
        check_scale[k / every] = s;
      }
      cur = dst;
    }
  } else if (M > 0) {
    double s = 0;
    for (int k = M - 1; k >= 0; --k) {
      step_back(k, beta, s);
      if (k % every == 0 && k / every < static_cast<int>(check.size())) {
        const int c = B.alloc(false);
        B.copy(c, beta);
        check[k / every] = c;
        check_scale[k / every] = s;
      }
    }
  }
}

void InheritanceModel::Walk::rebuild(int k, int target, double& s) {
  int from = M;
  const int c = (k + every - 1) / every;
  if (c < static_cast<int>(check.size())) from = c * every;
  if (from < M) {
    B.copy(target, check[from / every]);
    s = check_scale[from / every];
  }
  for (int j = (from < M ? from - 1 : M - 1); j >= k; --j) step_back(j, target, s);
}

void InheritanceModel::Walk::cache_block_direct(int b) {
  const int lo = b * every, hi = std::min(M, lo + every);
  for (int v : cached)
    if (v >= 0) B.release(v);
  cached.assign(hi - lo, -1);
  cached_scale.assign(hi - lo, 0);
  int prev = hi < M ? check[hi / every] : -1;
  double bs = hi < M ? check_scale[hi / every] : 0;
  for (int j = hi - 1; j > lo; --j) {
    const int v = B.alloc(true);
    step_back_from(j, v, prev, bs);
    cached[j - lo] = v;
    cached_scale[j - lo] = bs;
    prev = v;
  }
  have_block = b;
}

void InheritanceModel::Walk::cache_block_copied(int b) {
  const int lo = b * every, hi = std::min(M, lo + every);
  for (int v : cached)
    if (v >= 0) B.release(v);
  cached.assign(hi - lo, -1);
  cached_scale.assign(hi - lo, 0);
  double bs = 0;
  int from = hi;
  if (hi < M) {
    B.copy(beta, check[hi / every]);
    bs = check_scale[hi / every];
  }
  for (int j = from - 1; j >= lo; --j) {
    if (j == lo) {
      cached[0] = -1;  // the checkpoint itself
      break;
    }
    step_back(j, beta, bs);
    cached[j - lo] = B.alloc(false);
    B.copy(cached[j - lo], beta);
    cached_scale[j - lo] = bs;
  }
  have_block = b;
}

int InheritanceModel::Walk::beta_at(int k, double& s) {
  if (!block_cache) {
    rebuild(k, beta, s);
    return beta;
  }
  const int b = k / every;
  if (direct) {
    if (b != have_block) cache_block_direct(b);
    s = k == b * every ? check_scale[b] : cached_scale[k - b * every];
    return k == b * every ? check[b] : cached[k - b * every];
  }
  if (b != have_block) cache_block_copied(b);
  if (k == b * every) {
    B.copy(beta, check[b]);
    s = check_scale[b];
  } else {
    B.copy(beta, cached[k - b * every]);
    s = cached_scale[k - b * every];
  }
  return beta;
}

double InheritanceModel::Walk::score(bool have_alpha, double as, int bv, double bs,
                                     const Point& pt) {
  const bool have_beta = bv >= 0;
  const auto t = Clock::now();
  double s = as + bs;
  // A point at a marker (theta 0 on that side) needs no kernel there.
  // (Thetas below 1e-12, a point at a marker up to rounding, change no digit that matters.)
  const bool kl = have_alpha && (pt.male_left > 1e-12 || pt.female_left > 1e-12);
  const bool kr = have_beta && (pt.male_right > 1e-12 || pt.female_right > 1e-12);
  if (have_alpha && have_beta) {
    s += B.ln_score(alpha, {kl, pt.male_left, pt.female_left}, &et, bv,
                    {kr, pt.male_right, pt.female_right}, va, vb);
    m.profile_.score_steps += kl + kr;
    m.profile_.score_s += since(t);
    return std::isinf(s) ? kNegInf : s;
  }
  if (have_alpha) {
    B.copy(va, alpha);
    if (kl) s += B.step(va, true, pt.male_left, pt.female_left, nullptr);
  } else {
    B.fill(va, 1.0);
  }
  if (have_beta) {
    B.copy(vb, bv);
    if (kr) s += B.step(vb, true, pt.male_right, pt.female_right, nullptr);
  } else {
    B.fill(vb, 1.0);
  }
  m.profile_.score_steps += kl + kr;
  const double d = B.ln_dot(va, &et, vb);
  m.profile_.score_s += since(t);
  return std::isinf(d) || std::isinf(s) ? kNegInf : d + s;
}

std::vector<double> InheritanceModel::Walk::forward_pass(const std::vector<Point>& points,
                                                         double* markers_only) {
  // Which intervals have points: the forward pass stops there.
  std::vector<std::vector<int>> at(M + 1);  // at[left + 1]: the points after marker `left`
  for (std::size_t p = 0; p < points.size(); ++p)
    at[points[p].left + 1].push_back(static_cast<int>(p));
  const double ln_prior = -m.bits_ * std::log(2.0);  // each class of vectors: 2^-bits
  std::vector<double> out(points.size(), kNegInf);
  // alpha_k = E_k * K_{k-1}(alpha_k-1), alpha_0 = prior * E_0.
  double as = ln_prior;
  for (int k = -1; k < M; ++k) {
    if (k == 0) {
      B.fill(alpha, 1.0);
      as += timed_step(alpha, false, 0, 0, E(0));
    } else if (k > 0) {
      as += timed_step(alpha, true, male[k - 1], female[k - 1], E(k));
    }
    if (at[k + 1].empty()) continue;
    double bs = 0;
    const int bv = k + 1 < M ? beta_at(k + 1, bs) : -1;
    for (int p : at[k + 1]) out[p] = score(k >= 0, k >= 0 ? as : ln_prior, bv, bs, points[p]);
  }
  if (markers_only) *markers_only = M > 0 ? as + B.ln_dot(alpha, nullptr, -1) : 0.0;
  return out;
}

void InheritanceModel::Walk::release_all() {
  for (int v : cached)
    if (v >= 0) B.release(v);
  for (int v : check)
    if (v >= 0) B.release(v);
  for (int v : {alpha, beta, va, vb}) B.release(v);
}

std::vector<double> InheritanceModel::location_scores(const std::vector<int>& markers,
                                                      const std::vector<double>& male,
                                                      const std::vector<double>& female, int trait,
                                                      const std::vector<Point>& points,
                                                      double* markers_only, ChainBackend* backend) {
  profile_ = {};
  if (bits_ > kMaxBits)
    throw std::length_error("an inheritance vector of " + std::to_string(bits_) +
                            " bits is beyond the chain's " + std::to_string(kMaxBits));
  std::unique_ptr<ChainBackend> own;
  if (!backend) {
    own = make_cpu_chain(layout_, 0);
    backend = own.get();
  }
  Walk w(*this, *backend, markers, male, female);
  // Every emission once, as factor tables (kept for the whole walk). Under a memory limit, in
  // chunks of loci, each locus's factors limited to its share of what is left for tables after
  // four state vectors (set_memory_limit); beyond it a locus goes per state on the fly.
  const auto t0 = Walk::Clock::now();
  w.compute_emissions(trait);
  w.count_emissions();
  profile_.emission_s = Walk::since(t0);
  for (const Point& pt : points)
    if (pt.left < -1 || pt.left >= w.M)
      throw std::logic_error("location_scores: point outside the map");
  w.plan_checkpoints();
  w.backward_pass();
  std::vector<double> out = w.forward_pass(points, markers_only);
  w.release_all();
  return out;
}

}  // namespace kinfer::linkage
