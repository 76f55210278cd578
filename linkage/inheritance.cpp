#include "linkage/inheritance.hpp"

#include <algorithm>
#include <array>
#include <cmath>
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
  std::vector<int> digit(nu, 0);
  std::vector<long> idx(nf + 1, 0);
  while (true) {
    double p = 1;
    for (int f = 0; f < nf && p != 0; ++f) p *= fs[f]->t[idx[f]];
    out.t[idx[nf]] += p;
    int j = nu - 1;
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
  if (bits_ > 40) throw std::logic_error("InheritanceModel: too many bits");
  if (founder_phase)
    for (int q = 0; q < np; ++q)
      if (ped.people[q].founder() && !child_meioses_[q].empty()) {
        long mask = 0;
        for (int m : child_meioses_[q])
          if (meiosis_[m].bit >= 0) mask |= 1L << (bits_ - 1 - meiosis_[m].bit);
        if (mask) groups_.push_back({mask, ped.people[q].sex == 1 && !sex_linked});
      }
}

double InheritanceModel::emission(int l, std::vector<double>& table) const {
  const PedigreeLocus& L = *loci_.at(l);
  const int np = static_cast<int>(ped_.people.size());
  const int n = L.n_alleles;
  // Variables: the state bits first (ids 0..bits-1, so that a table over all of them is the
  // state vector), then the allele variables of the kept people.
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
      tabs.push_back(make_tab({pa, ma, m.bit, c}, card, [&](const std::vector<int>& x) {
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
    Tab t = multiply_sum(in, best, card);
    pool.push_back(std::move(t));
    alive.push_back(1);
  }
  // What is left reads only state bits: multiply the tables, smallest unions first, then
  // spread over every bit.
  std::vector<Tab> rest;
  double scale = 0;
  for (std::size_t f = 0; f < pool.size(); ++f) {
    if (!alive[f]) continue;
    if (pool[f].vars.empty()) {
      const double c = pool[f].t[0];
      if (c <= 0) {
        table.assign(std::size_t(1) << bits_, 0.0);
        return kNegInf;
      }
      scale += std::log(c);
      continue;
    }
    rest.push_back(std::move(pool[f]));
  }
  // Merge the small tables among themselves while that stays well below the state vector;
  // the rest are multiplied into it one pass each.
  const std::size_t N = std::size_t(1) << bits_;
  while (rest.size() > 1) {
    std::size_t bi = 0, bj = 1;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < rest.size(); ++i)
      for (std::size_t j = i + 1; j < rest.size(); ++j) {
        std::vector<int> u = rest[i].vars;
        u.insert(u.end(), rest[j].vars.begin(), rest[j].vars.end());
        std::sort(u.begin(), u.end());
        const double size = std::exp2(std::unique(u.begin(), u.end()) - u.begin());
        if (size < best) best = size, bi = i, bj = j;
      }
    if (best > static_cast<double>(N) / 16 && best < static_cast<double>(N)) break;
    Tab t = multiply_sum({&rest[bi], &rest[bj]}, -1, card);
    rest.erase(rest.begin() + bj);
    rest[bi] = std::move(t);
  }
  if (rest.size() == 1 && rest.front().vars.size() == static_cast<std::size_t>(bits_)) {
    table = std::move(rest.front().t);
  } else {
    table.assign(N, 1.0);
    for (const Tab& f : rest) {
      // The table index of a state: its bits at the table's variables, the lowest variable
      // (highest state position) most significant.
      std::vector<long> pos;
      for (int b : f.vars) pos.push_back(bits_ - 1 - b);
      const int k = static_cast<int>(pos.size());
      const double* ft = f.t.data();
      double* out = table.data();
#pragma omp parallel for schedule(static) if (N > 65536)
      for (long st = 0; st < static_cast<long>(N); ++st) {
        long idx = 0;
        for (int i = 0; i < k; ++i) idx = (idx << 1) | ((st >> pos[i]) & 1);
        out[st] *= ft[idx];
      }
    }
  }
  const double mx = *std::max_element(table.begin(), table.end());
  if (mx <= 0) return kNegInf;
  for (double& x : table) x /= mx;
  return scale + std::log(mx);
}

void InheritanceModel::transition(std::vector<double>& v, double male, double female) const {
  const long N = static_cast<long>(v.size());
  // Per state bit position (mask 1 << pos): the recombination fraction of its meiosis.
  std::vector<double> theta(bits_, 0);
  for (const Meiosis& m : meiosis_)
    if (m.bit >= 0) theta[bits_ - 1 - m.bit] = m.side == 0 ? male : female;
  // The low positions inside blocks that stay in the cache (one pass over memory for all of
  // them), then the high positions two at a time (radix 4: half the passes).
  const int low_bits = std::min(bits_, 12);
  const long chunk = 1L << low_bits;
#pragma omp parallel for schedule(static) if (N > 65536)
  for (long base = 0; base < N; base += chunk) {
    double* x = v.data() + base;
    for (int pos = 0; pos < low_bits; ++pos) {
      const double t = theta[pos], c = 1 - t;
      const long mask = 1L << pos;
      for (long i = 0; i < chunk; i += 2 * mask)
        for (long j = i; j < i + mask; ++j) {
          const double a = x[j], b = x[j + mask];
          x[j] = c * a + t * b;
          x[j + mask] = t * a + c * b;
        }
    }
  }
  for (int pos = low_bits; pos < bits_; pos += 2) {
    if (pos + 1 == bits_) {
      const double t = theta[pos], c = 1 - t;
      const long mask = 1L << pos;
#pragma omp parallel for schedule(static) if (N > 65536)
      for (long k = 0; k < N / 2; ++k) {
        const long j = ((k & ~(mask - 1)) << 1) | (k & (mask - 1));
        const double a = v[j], b = v[j | mask];
        v[j] = c * a + t * b;
        v[j | mask] = t * a + c * b;
      }
      break;
    }
    const double tp = theta[pos], cp = 1 - tp, tq = theta[pos + 1], cq = 1 - tq;
    const long mp = 1L << pos, mq = mp << 1, low = mp - 1;
#pragma omp parallel for schedule(static) if (N > 65536)
    for (long k = 0; k < N / 4; ++k) {
      const long j = ((k & ~low) << 2) | (k & low);
      const double a = v[j], b = v[j | mp], c = v[j | mq], d = v[j | mp | mq];
      const double a1 = cp * a + tp * b, b1 = tp * a + cp * b;
      const double c1 = cp * c + tp * d, d1 = tp * c + cp * d;
      v[j] = cq * a1 + tq * c1;
      v[j | mq] = tq * a1 + cq * c1;
      v[j | mp] = cq * b1 + tq * d1;
      v[j | mp | mq] = tq * b1 + cq * d1;
    }
  }
  // Founder groups: the next locus may have either phase of the founder. All groups in one
  // pass: the states one set of group flips apart (2^groups of them) are read once, mixed in
  // registers and written back (one pass per group when there are too many groups).
  const int G = static_cast<int>(groups_.size());
  if (G == 0) return;
  std::vector<double> tg(G);
  for (int i = 0; i < G; ++i) tg[i] = groups_[i].male ? male : female;
  if (G > 10) {
    for (int i = 0; i < G; ++i) {
      const double t = tg[i], c = 1 - t;
      const long mask = groups_[i].mask, low_bit = mask & -mask;
#pragma omp parallel for schedule(static) if (N > 65536)
      for (long w = 0; w < N; ++w) {
        if (w & low_bit) continue;
        const long x = w ^ mask;
        const double a = v[w], b = v[x];
        v[w] = c * a + t * b;
        v[x] = t * a + c * b;
      }
    }
    return;
  }
  const int O = 1 << G;
  std::vector<long> off(O, 0);
  long lows = 0;
  for (int i = 0; i < G; ++i) lows |= groups_[i].mask & -groups_[i].mask;
  for (int o = 1; o < O; ++o) {
    const int i = __builtin_ctz(o);
    off[o] = off[o & (o - 1)] ^ groups_[i].mask;
  }
#pragma omp parallel if (N > 65536)
  {
    std::vector<double> buf(O);
#pragma omp for schedule(static)
    for (long w = 0; w < N; ++w) {
      if (w & lows) continue;
      for (int o = 0; o < O; ++o) buf[o] = v[w ^ off[o]];
      for (int i = 0; i < G; ++i) {
        const double t = tg[i], c = 1 - t;
        const int bit = 1 << i;
        for (int o = 0; o < O; ++o)
          if (!(o & bit)) {
            const double a = buf[o], b = buf[o | bit];
            buf[o] = c * a + t * b;
            buf[o | bit] = t * a + c * b;
          }
      }
      for (int o = 0; o < O; ++o) v[w ^ off[o]] = buf[o];
    }
  }
}

namespace {
// Scales v to a maximum of 1; returns the ln of the factor taken out (-inf if v is all 0).
double normalize(std::vector<double>& v) {
  double mx = 0;
  for (double x : v) mx = std::max(mx, x);
  if (mx <= 0) return kNegInf;
  const double r = 1 / mx;
  for (double& x : v) x *= r;
  return std::log(mx);
}
double log_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s > 0 ? std::log(s) : kNegInf;
}
}  // namespace

std::vector<double> InheritanceModel::location_scores(const std::vector<int>& markers,
                                                      const std::vector<double>& male,
                                                      const std::vector<double>& female, int trait,
                                                      const std::vector<Point>& points,
                                                      double* markers_only) {
  const int M = static_cast<int>(markers.size());
  const std::size_t N = std::size_t(1) << bits_;
  const double ln_prior = -bits_ * std::log(2.0);  // each class of vectors: 2^-bits
  std::vector<double> et;
  const double et_scale = emission(trait, et);
  // Which intervals have points: the forward pass stops there.
  std::vector<std::vector<int>> at(M + 1);  // at[left + 1]: the points after marker `left`
  for (std::size_t p = 0; p < points.size(); ++p) {
    const int l = points[p].left;
    if (l < -1 || l >= M) throw std::logic_error("location_scores: point outside the map");
    at[l + 1].push_back(static_cast<int>(p));
  }
  // Backward pass: beta_k = E_k * K_k(beta_k+1), ln scale kept beside. Kept at checkpoints
  // every `block` markers; the forward pass rebuilds one block at a time from them, so memory
  // holds about 2 sqrt(M) vectors.
  const int block = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(M)))));
  std::vector<std::vector<double>> check((M + block - 1) / block);
  std::vector<double> check_scale(check.size(), 0);
  // Each marker's emission is needed three times (backward, block rebuild, forward): kept
  // when they all fit in 1 GiB, else recomputed.
  const bool keep = static_cast<double>(M) * N * 8 <= 1024.0 * 1024 * 1024;
  std::vector<std::vector<double>> kept(keep ? M : 0);
  std::vector<double> kept_scale(keep ? M : 0, 0);
  std::vector<double> e;
  auto emit = [&](int k, std::vector<double>& out) -> double {
    if (!keep) return emission(markers[k], out);
    if (kept[k].empty()) kept_scale[k] = emission(markers[k], kept[k]);
    out = kept[k];
    return kept_scale[k];
  };
  auto step_back = [&](int k, std::vector<double>& beta, double& s) {
    // beta holds beta_{k+1} (or nothing for k = M - 1); turns it into beta_k.
    const double es = emit(k, e);
    if (k == M - 1) {
      beta = e;
      s = es;
    } else {
      transition(beta, male[k], female[k]);
      for (std::size_t i = 0; i < N; ++i) beta[i] *= e[i];
      s += es;
    }
    s += normalize(beta);
  };
  {
    std::vector<double> beta;
    double s = 0;
    for (int k = M - 1; k >= 0; --k) {
      step_back(k, beta, s);
      if (k % block == 0) check[k / block] = beta, check_scale[k / block] = s;
    }
  }
  // The block holding beta_k for k in [b * block, (b + 1) * block).
  int have_block = -1;
  std::vector<std::vector<double>> betas;
  std::vector<double> beta_scale;
  auto beta_at = [&](int k, const std::vector<double>*& v, double& s) {
    const int b = k / block;
    if (b != have_block) {
      const int lo = b * block, hi = std::min(M, lo + block);
      betas.assign(hi - lo, {});
      beta_scale.assign(hi - lo, 0);
      betas[0] = check[b];
      beta_scale[0] = check_scale[b];
      if (hi - lo > 1) {
        std::vector<double> beta;
        double bs = 0;
        if (hi < M) beta = check[b + 1], bs = check_scale[b + 1];
        for (int j = hi - 1; j > lo; --j) {
          step_back(j, beta, bs);
          betas[j - lo] = beta;
          beta_scale[j - lo] = bs;
        }
      }
      have_block = b;
    }
    v = &betas[k - b * block];
    s = beta_scale[k - b * block];
  };
  std::vector<double> out(points.size(), kNegInf);
  std::vector<double> a, b;
  auto score = [&](const std::vector<double>* alpha, double as, const std::vector<double>* beta,
                   double bs, const Point& pt) {
    // sum_w [K_left alpha](w) E_T(w) [K_right beta](w)
    if (alpha) {
      a = *alpha;
      transition(a, pt.male_left, pt.female_left);
    } else {
      a.assign(N, 1.0);
    }
    if (beta) {
      b = *beta;
      transition(b, pt.male_right, pt.female_right);
    } else {
      b.assign(N, 1.0);
    }
    double s = 0;
    for (std::size_t i = 0; i < N; ++i) s += a[i] * et[i] * b[i];
    return s > 0 ? std::log(s) + as + bs + et_scale : kNegInf;
  };
  // Forward pass: alpha_k = E_k * K_{k-1}(alpha_k-1), alpha_0 = prior * E_0.
  std::vector<double> alpha;
  double as = ln_prior;
  for (int k = -1; k < M; ++k) {
    if (k >= 0) {
      const double es = emit(k, e);
      if (k == 0) {
        alpha = e;
      } else {
        transition(alpha, male[k - 1], female[k - 1]);
        for (std::size_t i = 0; i < N; ++i) alpha[i] *= e[i];
      }
      as += es + normalize(alpha);
    }
    for (int p : at[k + 1]) {
      const std::vector<double>* beta = nullptr;
      double bs = 0;
      if (k + 1 < M) beta_at(k + 1, beta, bs);
      out[p] = score(k >= 0 ? &alpha : nullptr, k >= 0 ? as : ln_prior, beta, bs, points[p]);
    }
  }
  if (markers_only) *markers_only = M > 0 ? as + log_sum(alpha) : 0.0;
  return out;
}

}  // namespace kinfer::linkage
