#include "linkage/genotype_cavities.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "engine/task_tree.hpp"

namespace kinfer::linkage {

namespace {

using Table = InheritanceModel::AlleleNetwork::Table;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// Threads for a product of `work` factor reads (or a pass over a table of that many entries):
// one below kParallelWork (waking threads costs more there, and much more on a machine whose
// cores are busy with other work), then a thread per kReadsPerThread, at most the team (more
// spend longer starting and waiting at the end than computing).
constexpr double kParallelWork = 262144.0, kReadsPerThread = 1048576.0;
int threads_for(double work) {
  const double team = omp_get_max_threads();
  if (work < kParallelWork || team < 2) return 1;
  return static_cast<int>(std::clamp(work / kReadsPerThread, 2.0, team));
}

// The product of `ins` summed onto `keep` (ascending; a variable of keep in no input is
// broadcast). The loop's innermost block (at most kInner combinations) is a run of trailing
// variables of the largest table (an input or the output), in that table's order, so that it is
// read or written contiguously; the block's offsets into every other table are listed once.
// Outside the block come keep's other variables, then the summed ones: a parallel split over
// keep's outer variables gives each thread its own outputs, and only when those are too few for
// the threads does each thread sum into its own copy of the output. Sets *max to the output's
// largest entry: where every output entry is written once (nothing summed outside the block),
// as it is written, and the output is not zeroed first; else in a pass at the end.
Table contract(const std::vector<const Table*>& ins, const std::vector<int>& keep,
               const std::vector<int>& card, std::vector<double> buffer, double* max) {
  constexpr long kInner = 4096;
  std::vector<int> all(keep);
  for (const Table* f : ins) all.insert(all.end(), f->vars.begin(), f->vars.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  auto entries = [&](const std::vector<int>& vars) {
    double e = 1;
    for (int v : vars) e *= card[v];
    return e;
  };
  const std::vector<int>* widest = &keep;
  for (const Table* f : ins)
    if (entries(f->vars) > entries(*widest)) widest = &f->vars;
  // The inner block: the widest table's trailing variables; where they are also keep's trailing
  // variables (the output contiguous too) and that run is long enough, only that run.
  std::vector<int> inner_vars;
  {
    long inner = 1;
    for (int j = static_cast<int>(widest->size()) - 1; j >= 0; --j) {
      const int c = card[(*widest)[j]];
      if (inner * c > kInner) break;
      inner *= c;
      inner_vars.insert(inner_vars.begin(), (*widest)[j]);
    }
    long shared = 1;
    int m = 0;
    const int nk = static_cast<int>(keep.size()), ni = static_cast<int>(inner_vars.size());
    while (m < ni && m < nk && inner_vars[ni - 1 - m] == keep[nk - 1 - m])
      shared *= card[keep[nk - 1 - m++]];
    if (m < ni && shared >= 256) inner_vars.erase(inner_vars.begin(), inner_vars.end() - m);
  }
  auto in_inner = [&](int v) {
    return std::find(inner_vars.begin(), inner_vars.end(), v) != inner_vars.end();
  };
  std::vector<int> ord;
  for (int v : keep)
    if (!in_inner(v)) ord.push_back(v);
  const int split_vars = static_cast<int>(ord.size());
  for (int v : all)
    if (!in_inner(v) && !std::binary_search(keep.begin(), keep.end(), v)) ord.push_back(v);
  ord.insert(ord.end(), inner_vars.begin(), inner_vars.end());
  const int n = static_cast<int>(ord.size()), nf = static_cast<int>(ins.size());
  std::vector<int> at(card.size(), -1);
  for (int j = 0; j < n; ++j) at[ord[j]] = j;
  std::vector<std::vector<long>> st(nf + 1, std::vector<long>(n, 0));
  auto fill = [&](const std::vector<int>& vars, std::vector<long>& s) {
    long m = 1;
    for (int j = static_cast<int>(vars.size()) - 1; j >= 0; --j) {
      s[at[vars[j]]] = m;
      m *= card[vars[j]];
    }
  };
  for (int f = 0; f < nf; ++f) fill(ins[f]->vars, st[f]);
  fill(keep, st[nf]);
  Table out;
  out.vars = keep;
  long out_size = 1;
  for (int v : keep) out_size *= card[v];
  out.t = std::move(buffer);
  const int ni = static_cast<int>(inner_vars.size()), no = n - ni;
  long inner = 1, outer = 1, split = 1;
  for (int j = no; j < n; ++j) inner *= card[ord[j]];
  for (int j = 0; j < no; ++j) outer *= card[ord[j]];
  for (int j = 0; j < split_vars; ++j) split *= card[ord[j]];
  const long per_split = outer / split;  // the summed outer combinations of one keep position
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
      for (int q = ni - 1; q >= 0 && ++d[q] == card[ord[no + q]]; --q) d[q] = 0;
    }
    for (int f = 0; f < nf; ++f)
      for (int q = 0; q < ni; ++q)
        if (st[f][no + q] != 0) constant[f] = 0;
  }
  // A table whose inner block is contiguous (offsets 0, 1, ...) is read without its offsets.
  std::vector<char> contiguous(nf + 1, 1);
  for (int f = 0; f <= nf; ++f)
    for (long k = 0; k < inner && contiguous[f]; ++k) contiguous[f] = off[f][k] == k;
  // The inner block's trailing variables that the output lacks: runs of `run` consecutive
  // entries go to one output entry, summed first (a chain of adds onto one entry is slow).
  long run = 1;
  int run_vars = 0;
  for (int q = ni - 1; q >= 0 && st[nf][no + q] == 0; --q) run *= card[ord[no + q]], ++run_vars;
  // Each output entry is one run's sum, written once: no summed variable outside the block,
  // and none in it before the run.
  bool once = per_split == 1;
  for (int q = 0; q < ni - run_vars && once; ++q) once = st[nf][no + q] != 0;
  if (once)
    out.t.resize(out_size);  // a reused buffer's entries are all overwritten
  else
    out.t.assign(out_size, 0.0);
  double mx = 0;
  const double work = static_cast<double>(outer) * static_cast<double>(inner) * (nf + 1);
  const int threads = outer > 1 ? threads_for(work) : 1;
  // Each thread its own keep positions when there are several per thread, else its own copy.
  const bool shared_out = per_split > 1 && split < 4L * threads;
  // p = the inputs' product over the inner block at the inputs' offsets idx.
  auto multiply = [&](std::vector<double>& p, const std::vector<long>& idx) {
    std::fill(p.begin(), p.end(), 1.0);
    for (int f = 0; f < nf; ++f) {
      const double* t = ins[f]->t.data() + idx[f];
      if (constant[f]) {
        const double c = *t;
        for (long k = 0; k < inner; ++k) p[k] *= c;
      } else if (contiguous[f]) {
        double* __restrict q = p.data();
        for (long k = 0; k < inner; ++k) q[k] *= t[k];
      } else {
        const long* of = off[f].data();
        for (long k = 0; k < inner; ++k) p[k] *= t[of[k]];
      }
    }
  };
  // The sum of a run's `run` consecutive products, in eight lanes (a chain of adds onto one
  // entry is slow).
  auto run_sum = [&](const double* q) {
    double acc[8] = {};
    long k = 0;
    for (; k + 8 <= run; k += 8)
      for (int l = 0; l < 8; ++l) acc[l] += q[k + l];
    for (; k < run; ++k) acc[0] += q[k];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  };
#pragma omp parallel num_threads(threads)
  {
    const int T = omp_get_num_threads(), me = omp_get_thread_num();
    const long lo = shared_out ? outer * me / T : split * me / T * per_split;
    const long hi = shared_out ? outer * (me + 1) / T : split * (me + 1) / T * per_split;
    std::vector<double> mine;
    double* y0 = out.t.data();
    if (shared_out && T > 1) {
      mine.assign(out.t.size(), 0.0);
      y0 = mine.data();
    }
    std::vector<double> p(inner);
    double my_max = 0;
    std::vector<int> digit(no, 0);
    std::vector<long> idx(nf + 1, 0);
    long r = lo;
    for (int j = no - 1; j >= 0; --j) {
      const int c = card[ord[j]];
      digit[j] = static_cast<int>(r % c);
      r /= c;
      for (int f = 0; f <= nf; ++f) idx[f] += digit[j] * st[f][j];
    }
    for (long o = lo; o < hi; ++o) {
      bool zero = false;
      for (int f = 0; f < nf && !zero; ++f) zero = constant[f] && ins[f]->t[idx[f]] == 0;
      if (once) {
        // The product (zero where a constant factor is), each run summed onto its entry.
        if (zero)
          std::fill(p.begin(), p.end(), 0.0);
        else
          multiply(p, idx);
        double* y = y0 + idx[nf];
        const long* of = off[nf].data();
        if (contiguous[nf]) {
          for (long k = 0; k < inner; ++k) y[k] = p[k], my_max = std::max(my_max, p[k]);
        } else {
          for (long k0 = 0; k0 < inner; k0 += run) {
            const double v = run_sum(p.data() + k0);
            y[of[k0]] = v;
            my_max = std::max(my_max, v);
          }
        }
      } else if (!zero) {
        multiply(p, idx);
        double* y = y0 + idx[nf];
        const long* of = off[nf].data();
        if (contiguous[nf]) {
          for (long k = 0; k < inner; ++k) y[k] += p[k];
        } else if (run >= 8) {
          for (long k0 = 0; k0 < inner; k0 += run) y[of[k0]] += run_sum(p.data() + k0);
        } else
          for (long k = 0; k < inner; ++k) y[of[k]] += p[k];
      }
      for (int j = no - 1; j >= 0; --j) {
        const int c = card[ord[j]];
        if (++digit[j] < c) {
          for (int f = 0; f <= nf; ++f) idx[f] += st[f][j];
          break;
        }
        digit[j] = 0;
        for (int f = 0; f <= nf; ++f) idx[f] -= st[f][j] * (c - 1);
      }
    }
    if (shared_out && T > 1) {
#pragma omp critical
      for (std::size_t k = 0; k < out.t.size(); ++k) out.t[k] += mine[k];
    }
#pragma omp critical
    mx = std::max(mx, my_max);
  }
  if (!once) {
    const long n = static_cast<long>(out.t.size());
#pragma omp parallel for reduction(max : mx) schedule(static) num_threads(threads_for(n))
    for (long k = 0; k < n; ++k) mx = std::max(mx, out.t[k]);
  }
  *max = mx;
  return out;
}

// Keeps t's maximum mx within [2^-64, 2^64]: when it is outside, scales t by a power of two
// (exactly) to a maximum in [1, 2); returns the ln of the factor taken out (0 for a zero
// table). A step multiplies a handful of tables, so its products stay far from under- and
// overflow; the scaling pass is skipped where it is not needed.
double normalize(std::vector<double>& t, double mx) {
  const long n = static_cast<long>(t.size());
  const int threads = threads_for(static_cast<double>(n));
  if (!(mx > 0)) return 0;
  const int e = std::ilogb(mx);
  if (e >= -64 && e <= 64) return 0;
  const double inv = std::ldexp(1.0, -e);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long k = 0; k < n; ++k) t[k] *= inv;
  return e * std::log(2.0);
}

// The network with its allele variables numbered before the bits (each table's entries
// reordered to match; the bits and the alleles keep their own orders). A table over every bit
// and a few alleles then has the bits last, so that the large steps (an allele summed out of
// such a table, the bits with W) run over long runs of consecutive entries.
InheritanceModel::AlleleNetwork alleles_first(const InheritanceModel::AlleleNetwork& net,
                                              int bits) {
  const int nv = static_cast<int>(net.card.size()), na = nv - bits;
  auto id = [&](int v) { return v < bits ? v + na : v - bits; };
  // restructure orders a table's variables by decreasing rank: the new numbering, ascending.
  std::vector<int> rank(nv);
  for (int v = 0; v < nv; ++v) rank[v] = nv - 1 - id(v);
  InheritanceModel::AlleleNetwork out;
  out.card.resize(nv);
  for (int v = 0; v < nv; ++v) out.card[id(v)] = net.card[v];
  out.tables.reserve(net.tables.size());
  for (const Table& f : net.tables) {
    Table g;
    g.person = f.person;
    g.t = restructure(LogFactor{f.vars, f.t}, net.card, rank, g.vars);
    for (int& v : g.vars) v = id(v);
    out.tables.push_back(std::move(g));
  }
  return out;
}

}  // namespace

const PersonCavitySolver::Plan& PersonCavitySolver::plan(
    const InheritanceModel::AlleleNetwork& net) {
  for (const auto& [card, p] : plans_)
    if (card == net.card && p.leaves == static_cast<int>(net.tables.size()) + 1) return p;
  Plan p;
  for (const Table& t : net.tables) p.vars.push_back(t.vars);
  const int nv = static_cast<int>(net.card.size()), na = nv - bits_;
  std::vector<int> w(bits_);
  std::iota(w.begin(), w.end(), na);
  p.vars.push_back(w);
  p.leaves = static_cast<int>(p.vars.size());
  const std::vector<int>& card = net.card;
  std::vector<char> alive(p.vars.size(), 1), done(nv, 0);
  std::vector<int> stamp(nv, -1);
  int round = 0;
  // The alleles first (given the bits they are independent across loci: what the emission
  // sums), then the bits with W; each time the variable whose product table is smallest.
  for (const auto& [lo, hi] : {std::pair{0, na}, std::pair{na, nv}}) {
    for (;;) {
      int best = -1;
      double best_size = 0;
      for (int v = lo; v < hi; ++v) {
        if (done[v]) continue;
        ++round;
        double size = 1;
        for (std::size_t f = 0; f < p.vars.size(); ++f) {
          if (!alive[f] || !std::binary_search(p.vars[f].begin(), p.vars[f].end(), v)) continue;
          for (int u : p.vars[f])
            if (stamp[u] != round) stamp[u] = round, size *= card[u];
        }
        if (best < 0 || size < best_size) best = v, best_size = size;
      }
      if (best < 0) break;
      done[best] = 1;
      Plan::Step s{{}, {best}};
      std::vector<int> u;
      for (std::size_t f = 0; f < p.vars.size(); ++f)
        if (alive[f] && std::binary_search(p.vars[f].begin(), p.vars[f].end(), best)) {
          s.in.push_back(static_cast<int>(f));
          u.insert(u.end(), p.vars[f].begin(), p.vars[f].end());
          alive[f] = 0;
        }
      if (s.in.empty()) continue;
      std::sort(u.begin(), u.end());
      u.erase(std::unique(u.begin(), u.end()), u.end());
      // Every other variable of this phase that no table outside the step reads is summed in
      // the same pass: the product is read once, and its output (never larger) is all that
      // is stored and differentiated (an allele left alone with the state bits, W's bits).
      for (int v : u) {
        if (v == best || done[v] || v < lo || v >= hi) continue;
        bool elsewhere = false;
        for (std::size_t f = 0; f < p.vars.size() && !elsewhere; ++f)
          elsewhere = alive[f] && std::binary_search(p.vars[f].begin(), p.vars[f].end(), v);
        if (!elsewhere) s.x.push_back(v), done[v] = 1;
      }
      for (int v : s.x) u.erase(std::find(u.begin(), u.end(), v));
      p.steps.push_back(std::move(s));
      p.vars.push_back(std::move(u));
      alive.push_back(1);
    }
  }
  for (const std::vector<int>& vs : p.vars) {
    double e = 1;
    for (int v : vs) e *= card[v];
    p.entries += e;
  }
  plans_.emplace_back(card, std::move(p));
  return plans_.back().second;
}

std::vector<double> PersonCavitySolver::spare(const std::vector<int>& vars,
                                              const std::vector<int>& card) {
  std::size_t n = 1;
  for (int v : vars) n *= card[v];
  return spare(n);
}

std::vector<double> PersonCavitySolver::spare(std::size_t n) {
  // A small table gets a fresh buffer (it would take a large one out of the pool, and the
  // phenotype tables' derivatives leave with the results). Else the smallest kept buffer that
  // holds n entries, else the largest (it grows).
  if (n * sizeof(double) < kSpareBytes) return {};
  int best = -1;
  for (std::size_t i = 0; i < spare_.size(); ++i) {
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const std::size_t c = spare_[i].capacity(), b = spare_[best].capacity();
    const bool better = c >= n ? (b < n || c < b) : (b < n && c > b);
    if (better) best = static_cast<int>(i);
  }
  if (best < 0) return {};
  std::vector<double> out = std::move(spare_[best]);
  spare_.erase(spare_.begin() + best);
  return out;
}

void PersonCavitySolver::keep_spare(std::vector<double>&& t) {
  if (t.capacity() * sizeof(double) >= kSpareBytes) spare_.push_back(std::move(t));
  t = std::vector<double>{};
}

double PersonCavitySolver::bytes(const InheritanceModel::AlleleNetwork& net) {
  return 2 * 8 * plan(alleles_first(net, bits_)).entries;  // the tables and their derivatives
}

PersonCavities PersonCavitySolver::run(const InheritanceModel::AlleleNetwork& given,
                                       std::vector<double> w, double ln_w) {
  const InheritanceModel::AlleleNetwork net = alleles_first(given, bits_);
  const int na = static_cast<int>(net.card.size()) - bits_;
  const Plan& p = plan(net);
  const std::vector<int>& card = net.card;
  const int nt = static_cast<int>(p.vars.size());
  std::vector<Table> tab(nt);
  std::vector<double> s(nt, 0.0);  // the true table is exp(s) * tab
  for (std::size_t f = 0; f < net.tables.size(); ++f) tab[f] = net.tables[f];
  Table& W = tab[p.leaves - 1];
  W.vars = p.vars[p.leaves - 1];
  if (w.size() != std::size_t(1) << bits_)
    throw std::logic_error("PersonCavitySolver: W's size is not the state space's");
  W.t = std::move(w);
  s[p.leaves - 1] = ln_w;
  // Forward: every step's product summed over its variables, scaled.
  std::vector<char> consumed(nt, 0);
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const Plan::Step& st = p.steps[k];
    std::vector<const Table*> in;
    double ls = 0;
    for (int f : st.in) in.push_back(&tab[f]), ls += s[f], consumed[f] = 1;
    const int o = p.leaves + static_cast<int>(k);
    double mx = 0;
    tab[o] = contract(in, p.vars[o], card, spare(p.vars[o], card), &mx);
    s[o] = ls + normalize(tab[o].t, mx);
  }
  // What is left are constants: S is their product, and each one's derivative the product of
  // the others.
  std::vector<int> roots;
  for (int f = 0; f < nt; ++f)
    if (!consumed[f]) roots.push_back(f);
  PersonCavities out;
  out.ln_l = 0;
  for (int r : roots) {
    const double c = tab[r].t.at(0);
    out.ln_l += c > 0 ? s[r] + std::log(c) : kNegInf;
  }
  // Backward: the derivative of S with respect to each table that leads to a phenotype table.
  std::vector<char> needs(nt, 0);
  for (std::size_t f = 0; f < net.tables.size(); ++f) needs[f] = net.tables[f].person >= 0;
  for (std::size_t k = 0; k < p.steps.size(); ++k)
    for (int f : p.steps[k].in)
      if (needs[f]) needs[p.leaves + k] = 1;
  std::vector<Table> grad(nt);
  std::vector<double> g(nt, 0.0);  // the true derivative is exp(g) * grad
  for (int r : roots) {
    if (!needs[r]) continue;
    grad[r].t.assign(1, 1.0);
    for (int q : roots)
      if (q != r) grad[r].t[0] *= tab[q].t[0], g[r] += s[q];
  }
  for (int k = static_cast<int>(p.steps.size()) - 1; k >= 0; --k) {
    const int o = p.leaves + k;
    const std::vector<int>& in = p.steps[k].in;
    if (needs[o]) {
      grad[o].vars = p.vars[o];
      for (std::size_t j = 0; j < in.size(); ++j) {
        if (!needs[in[j]]) continue;
        std::vector<const Table*> fs{&grad[o]};
        double lg = g[o];
        for (std::size_t q = 0; q < in.size(); ++q)
          if (q != j) fs.push_back(&tab[in[q]]), lg += s[in[q]];
        double mx = 0;
        grad[in[j]] = contract(fs, p.vars[in[j]], card, spare(p.vars[in[j]], card), &mx);
        g[in[j]] = lg + normalize(grad[in[j]].t, mx);
      }
    }
    keep_spare(std::move(grad[o].t));
    for (int f : in) keep_spare(std::move(tab[f].t));
  }
  out.person.resize(given.person_vars.size());
  for (std::size_t f = 0; f < net.tables.size(); ++f) {
    const int i = net.tables[f].person;
    if (i < 0) continue;
    // A phenotype table is over alleles only, whose order the renumbering kept.
    for (int v : p.vars[f]) {
      if (v >= na) throw std::logic_error("PersonCavitySolver: a phenotype table over a bit");
      out.person[i].vars.push_back(v + bits_);
    }
    out.person[i].t = std::move(grad[f].t);
    out.person[i].ln_scale = g[f];
  }
  return out;
}

}  // namespace kinfer::linkage
