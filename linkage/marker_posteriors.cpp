#include "linkage/marker_posteriors.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/condition.hpp"
#include "engine/plan.hpp"
#include "engine/posterior.hpp"
#include "linkage/chain.hpp"
#include "linkage/genotype_cavities.hpp"
#include "linkage/inheritance.hpp"
#include "linkage/network.hpp"
#include "linkage/pedigree.hpp"

namespace kinfer::linkage {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// An emission's elimination holds its intermediate tables too: this many times its factors (as
// the walk counts them, location_scores.cpp).
constexpr double kScratchTimes = 3;
constexpr double kFixedReserve = 32.0 * 1024 * 1024;

// One likelihood to compute at a marker: person `person` with phenotype `pheno` there (0/0:
// removed), everyone else as observed.
struct Candidate {
  int person;
  Phenotype pheno;
  UnorderedGenotype genotype;  // the genotype asked about (unused when removed)
  double ln_l = kNegInf;
};

// Every unordered genotype of a locus with `n` alleles (hemizygous: the single alleles).
std::vector<UnorderedGenotype> all_genotypes(int n, bool hemizygous) {
  std::vector<UnorderedGenotype> out;
  for (int b = 1; b <= n; ++b) {
    if (hemizygous) {
      out.push_back({0, b});
      continue;
    }
    for (int a = 1; a <= b; ++a) out.push_back({a, b});
  }
  return out;
}

// The candidates of marker `locus`: per person typed there, the phenotype removed; per person
// untyped there, each genotype.
std::vector<Candidate> candidates_at(const Pedigree& ped, const LocusFile& lf, int locus) {
  std::vector<Candidate> out;
  const Locus& L = lf.loci[locus];
  for (int i = 0; i < static_cast<int>(ped.people.size()); ++i) {
    const Person& p = ped.people[i];
    const bool hemi = lf.sex_linked && p.sex == 1;
    if (p.pheno[locus].a1 != 0) {
      out.push_back({i, Phenotype{0, 0}, {0, 0}});
      continue;
    }
    for (UnorderedGenotype g : all_genotypes(L.n_alleles, hemi))
      out.push_back({i, hemi ? Phenotype{g.second, g.second} : Phenotype{g.first, g.second}, g});
  }
  return out;
}

// ln sum_v va(v) e(v) vb(v) + s for marker `locus` of `ped` as reduced (recoding, genotype
// elimination); -inf when the reduction finds the phenotypes inconsistent.
double ln_likelihood_with(const InheritanceModel& im, const Pedigree& ped, const LocusFile& lf,
                          int locus, double table_limit, Emission& e) {
  Inconsistency err;
  const PedigreeLocus L = reduce_locus(ped, lf, locus, ReductionOptions{}, &err);
  if (err.locus >= 0) return kNegInf;
  e = im.emission(L, table_limit);
  return e.zero ? kNegInf : 0.0;
}

std::uint64_t pext64(std::uint64_t x, std::uint64_t m) {
#ifdef __BMI2__
  return _pext_u64(x, m);
#else
  std::uint64_t r = 0;
  for (int k = 0; m; m &= m - 1, ++k) r |= ((x >> __builtin_ctzll(m)) & 1) << k;
  return r;
#endif
}

std::uint64_t pdep64(std::uint64_t x, std::uint64_t m) {
#ifdef __BMI2__
  return _pdep_u64(x, m);
#else
  std::uint64_t r = 0;
  for (int k = 0; m; m &= m - 1, ++k) r |= ((x >> k) & 1) << __builtin_ctzll(m);
  return r;
#endif
}

// The sums of one marker's candidates against W = va * vb. A candidate's emission shares most
// factors with the marker's own (a phenotype changes only the factors its elimination reaches):
// with U the union of the masks of the factors it does not share,
//   sum_v W(v) e'(v) = sum_u mu(u) prod_{f' not shared} f'(u),
//   mu(u) = sum_{v: v_U = u} W(v) prod_{f shared} f(v),
// one pass over the states per (U, shared factors), kept for the marker's other candidates;
// each candidate then costs 2^|U|. Without host access to the vectors (or with a per-state
// program, or U nearly every bit): the backend's ln_dot.
class CandidateSums {
 public:
  static constexpr int kCached = 4;  // cavity tables kept per marker (the oldest goes first)
  CandidateSums(ChainBackend& B, int va, int vb, double ln_scale, const Emission& ek, int bits)
      : B_(B), va_(va), vb_(vb), s_(ln_scale), ek_(ek), bits_(bits) {
    double fa = 0, fb = 0;
    a_ = B.host_data(va, &fa);
    b_ = B.host_data(vb, &fb);
    s_host_ = s_ + fa + fb;
  }
  double ln_sum(const Emission& e) {
    if (e.zero) return kNegInf;
    if (!a_ || !b_ || e.program.n > 0 || ek_.program.n > 0) return B_.ln_dot(va_, &e, vb_) + s_;
    std::vector<int> shared;
    std::uint64_t U = 0;
    std::vector<const EmissionFactor*> own;
    for (const EmissionFactor& f : e.factors) {
      int same = -1;
      for (std::size_t j = 0; j < ek_.factors.size() && same < 0; ++j)
        if (ek_.factors[j].mask == f.mask && ek_.factors[j].table == f.table)
          same = static_cast<int>(j);
      if (same >= 0) {
        shared.push_back(same);
      } else {
        own.push_back(&f);
        U |= f.mask;
      }
    }
    if (__builtin_popcountll(U) > bits_ - 3) return B_.ln_dot(va_, &e, vb_) + s_;
    const std::vector<double>& mu = cavity(U, shared);
    const long n = 1L << __builtin_popcountll(U);
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (n > 65536)
    for (long u = 0; u < n; ++u) {
      double x = mu[u];
      if (x == 0) continue;
      const std::uint64_t v = pdep64(static_cast<std::uint64_t>(u), U);
      for (const EmissionFactor* f : own) x *= f->table[pext64(v, f->mask)];
      sum += x;
    }
    return sum > 0 ? std::log(sum) + e.ln_scale + s_host_ : kNegInf;
  }

 private:
  const std::vector<double>& cavity(std::uint64_t U, const std::vector<int>& shared) {
    for (const Cavity& c : cache_)
      if (c.U == U && c.shared == shared) return c.mu;
    if (static_cast<int>(cache_.size()) == kCached) cache_.erase(cache_.begin());
    Cavity& c = cache_.emplace_back();
    c.U = U;
    c.shared = shared;
    const long n = 1L << __builtin_popcountll(U), N = 1L << bits_;
    c.mu.assign(n, 0.0);
    std::vector<const EmissionFactor*> fs;
    for (int j : shared) fs.push_back(&ek_.factors[j]);
#pragma omp parallel
    {
      std::vector<double> mine(n, 0.0);
#pragma omp for schedule(static)
      for (long v = 0; v < N; ++v) {
        double x = a_[v] * b_[v];
        if (x == 0) continue;
        for (const EmissionFactor* f : fs)
          x *= f->table[pext64(static_cast<std::uint64_t>(v), f->mask)];
        mine[pext64(static_cast<std::uint64_t>(v), U)] += x;
      }
#pragma omp critical
      for (long u = 0; u < n; ++u) c.mu[u] += mine[u];
    }
    return c.mu;
  }
  struct Cavity {
    std::uint64_t U;
    std::vector<int> shared;
    std::vector<double> mu;
  };
  ChainBackend& B_;
  const int va_, vb_;
  const double s_;
  const Emission& ek_;
  const int bits_;
  const double* a_ = nullptr;
  const double* b_ = nullptr;
  double s_host_ = 0;
  std::vector<Cavity> cache_;
};

double ln_sum(const std::vector<double>& xs) {
  const double mx = *std::max_element(xs.begin(), xs.end());
  if (std::isinf(mx)) return kNegInf;
  double s = 0;
  for (double x : xs) s += std::exp(x - mx);
  return mx + std::log(s);
}

// Marker `locus` reduced for the cavities (linkage/genotype_cavities.hpp). Their derivatives
// are exact when every person's allele domains hold every genotype that some candidate's data
// allow: the union, over the data and the data less each typed person's phenotype, of the
// alleles that genotype elimination leaves (a typed person's cavity reads its own alleles and
// its relatives' beyond what its phenotype allows; an untyped person's genotypes are within
// what the data allow). No allele recoding (every allele keeps its name); the phenotype tables
// are the phenotypes' own weights. `work` is a copy of `ped` (one phenotype changed at a time,
// restored). False when a phenotype is impossible under the locus model (the chain's markers
// never are).
bool cavity_locus(Pedigree& work, const LocusFile& lf, int locus, PedigreeLocus& out) {
  Inconsistency err;
  out = reduce_locus(work, lf, locus, ReductionOptions{false, false, true}, &err);
  if (err.locus >= 0) return false;
  const int np = static_cast<int>(work.people.size()), n = out.n_alleles;
  std::vector<std::vector<char>> p(np, std::vector<char>(n, 0)), m = p;
  auto add = [&](const PedigreeLocus& L) {
    for (int i = 0; i < np; ++i) {
      for (int a : L.dom_p[i]) p[i][a] = 1;
      for (int a : L.dom_m[i]) m[i][a] = 1;
    }
  };
  for (int j = -1; j < np; ++j) {
    Phenotype* ph = j < 0 ? nullptr : &work.people[j].pheno[locus];
    if (ph && ph->a1 == 0) continue;
    const Phenotype was = ph ? *ph : Phenotype{};
    if (ph) *ph = Phenotype{0, 0};
    const PedigreeLocus L = reduce_locus(work, lf, locus, ReductionOptions{false, true, true}, &err);
    if (ph) *ph = was;
    if (err.locus >= 0) return false;
    add(L);
  }
  for (int i = 0; i < np; ++i) {
    out.dom_p[i].clear();
    out.dom_m[i].clear();
    for (int a = 0; a < n; ++a) {
      if (p[i][a]) out.dom_p[i].push_back(a);
      if (m[i][a]) out.dom_m[i].push_back(a);
    }
  }
  return true;
}

// The candidates' ln L from the cavities: a typed person's, the sum of its whole cavity (its
// phenotype removed); an untyped person's genotype, the cavity's entries of that genotype.
void candidates_from_cavities(const InheritanceModel::AlleleNetwork& net, const PedigreeLocus& L,
                              int bits, const PersonCavities& pc, std::vector<Candidate>& cs) {
  for (Candidate& c : cs) {
    const PersonCavities::Cavity& cav = pc.person.at(c.person);
    const std::array<int, 2> pv = net.person_vars.at(c.person);
    const int nv = static_cast<int>(cav.vars.size());
    double sum = 0;
    std::vector<int> digit(nv, 0);
    for (std::size_t e = 0; e < cav.t.size(); ++e) {
      int allele[2] = {-1, -1};  // the entry's paternal and maternal allele (input, 1-based)
      for (int q = 0; q < nv; ++q) {
        const int v = cav.vars[q];
        const int a = L.original.at(net.values.at(v - bits).at(digit[q]));
        allele[v == pv[0] ? 0 : 1] = a;
      }
      const UnorderedGenotype g = allele[0] < 0 ? UnorderedGenotype{0, allele[1]}
                                                : UnorderedGenotype{std::min(allele[0], allele[1]),
                                                                    std::max(allele[0], allele[1])};
      if (c.pheno.a1 == 0 || g == c.genotype) sum += cav.t[e];
      for (int q = nv - 1; q >= 0 && ++digit[q] == net.card[cav.vars[q]]; --q) digit[q] = 0;
    }
    c.ln_l = sum > 0 ? std::log(sum) + cav.ln_scale : kNegInf;
  }
}

// Marker k's cells from its candidates' likelihoods and ln L of all the data (`ln_all`).
void fill_cells(const Pedigree& ped, const LocusFile& lf, int locus, double ln_all,
                const std::vector<Candidate>& cs, std::vector<MultipointGenotypes::Cell>& cells) {
  const int np = static_cast<int>(ped.people.size());
  cells.assign(np, {});
  for (std::size_t c = 0; c < cs.size();) {
    const int i = cs[c].person;
    std::size_t d = c;
    while (d < cs.size() && cs[d].person == i) ++d;
    MultipointGenotypes::Cell& cell = cells[i];
    const Phenotype ph = ped.people[i].pheno[locus];
    if (ph.a1 != 0) {  // typed: the observed genotype, and P(observed | others)
      const bool hemi = lf.sex_linked && ped.people[i].sex == 1;
      const UnorderedGenotype obs =
          hemi ? UnorderedGenotype{0, ph.a1}
               : UnorderedGenotype{std::min(ph.a1, ph.a2), std::max(ph.a1, ph.a2)};
      if (!std::isinf(ln_all)) cell.posterior.push_back({obs, 1.0});
      const double without = cs[c].ln_l;
      if (!std::isinf(without)) cell.p_given_others = std::exp(std::min(0.0, ln_all - without));
    } else if (!std::isinf(ln_all)) {  // untyped: each genotype's share of L
      std::vector<double> ls;
      for (std::size_t e = c; e < d; ++e) ls.push_back(cs[e].ln_l);
      const double total = ln_sum(ls);
      for (std::size_t e = c; e < d; ++e) {
        const double p = std::exp(cs[e].ln_l - total);
        if (p > 0) cell.posterior.push_back({cs[e].genotype, p});
      }
    }
    c = d;
  }
}

}  // namespace

MarkerChainMap marker_chain_map(const LocusFile& lf) {
  MarkerChainMap m;
  double male = 0, female = 0;  // from the last marker to the current map position
  for (int p = 0; p < lf.n_loci(); ++p) {
    const int k = lf.map_order[p];
    if (p > 0 && !m.markers.empty()) {
      male = combine_thetas(male, lf.male_theta[p - 1], lf.map_function);
      female = combine_thetas(female, lf.female_theta[p - 1], lf.map_function);
    }
    if (lf.loci[k].type != LocusType::Numbered) continue;
    if (!m.markers.empty()) {
      m.male.push_back(male);
      m.female.push_back(female);
    }
    m.markers.push_back(k);
    male = female = 0;
  }
  return m;
}

namespace {

// The chain's markers: the consistent ones, reduced (an inconsistent marker would make every
// multipoint likelihood 0: it goes into out.left_out), and the recombination fractions between
// adjacent ones (across a left-out marker: combined); out.markers gets their input indices.
struct ConsistentMarkers {
  std::vector<PedigreeLocus> reduced;
  std::vector<double> male, female;
};
ConsistentMarkers consistent_markers(const Pedigree& ped, const LocusFile& lf,
                                     const MarkerChainMap& map, const ReductionOptions& ro,
                                     MultipointGenotypes& out) {
  ConsistentMarkers cm;
  double ml = 0, fl = 0;
  for (std::size_t j = 0; j < map.markers.size(); ++j) {
    if (j > 0) {
      ml = combine_thetas(ml, map.male[j - 1], lf.map_function);
      fl = combine_thetas(fl, map.female[j - 1], lf.map_function);
    }
    Inconsistency err;
    PedigreeLocus L = reduce_locus(ped, lf, map.markers[j], ro, &err);
    if (err.locus >= 0) {
      out.left_out.push_back(map.markers[j]);
      continue;
    }
    if (!cm.reduced.empty()) cm.male.push_back(ml), cm.female.push_back(fl);
    ml = fl = 0;
    cm.reduced.push_back(std::move(L));
    out.markers.push_back(map.markers[j]);
  }
  return cm;
}

}  // namespace

MultipointGenotypes multipoint_genotypes(const Pedigree& ped, const LocusFile& lf,
                                         const MarkerChainMap& map, const MultipointOptions& opt) {
  MultipointGenotypes out;
  ConsistentMarkers cm = consistent_markers(ped, lf, map, ReductionOptions{}, out);
  std::vector<PedigreeLocus>& reduced = cm.reduced;
  const std::vector<double>& male = cm.male;
  const std::vector<double>& female = cm.female;
  std::vector<const PedigreeLocus*> loci;
  for (const PedigreeLocus& L : reduced) loci.push_back(&L);
  const int M = static_cast<int>(out.markers.size());
  // Memory, besides the walk's (set_memory_limit): per thread one candidate's emission, its
  // elimination's tables limited to `candidate_limit` entries (4 state vectors' entries: the
  // tables over the bits and a few alleles that c250's markers build; halved while that does
  // not fit) and counted kScratchTimes; the sums' cavity tables (at most an eighth of a state
  // vector each: one per thread being summed, CandidateSums::kCached kept); kFixedReserve for
  // the pedigree copies and the results. A candidate beyond the limit goes per state (exact,
  // slower). A marker's cavities may hold what its candidates would, and more (below).
  struct Memory {
    int threads = 1;
    double candidate_limit = 0, walk = 0, cavity_budget = 0;
    bool fits = true;
  };
  auto memory = [&](const InheritanceModel& m) {
    Memory r;
    const double vec = 8.0 * std::exp2(m.bits());
    r.threads = omp_get_max_threads();
    r.candidate_limit = std::min(opt.table_limit, 4 * std::exp2(m.bits()));
    auto per_thread = [&] { return kScratchTimes * 8 * r.candidate_limit + vec / 8; };
    if (opt.max_memory_bytes > 0) {
      const double rest = opt.max_memory_bytes - process_bytes(r.threads) - kFixedReserve -
                          CandidateSums::kCached * vec / 8;
      for (;;) {
        r.threads = omp_get_max_threads();
        while (r.threads > 1 && rest - r.threads * per_thread() < 5 * vec) --r.threads;
        if (rest - r.threads * per_thread() >= 5 * vec || r.candidate_limit <= 4096) break;
        r.candidate_limit /= 2;
      }
      r.walk = rest - r.threads * per_thread();
      r.fits = r.walk >= 5 * vec;
    }
    r.cavity_budget = r.threads * per_thread() + CandidateSums::kCached * vec / 8;
    // Up to one emission factor's worth (opt.table_limit entries) more, taken from the walk
    // where it has more than it needs (half of what is beyond its 5 vectors).
    double more = std::max(0.0, 8 * opt.table_limit - r.cavity_budget);
    if (opt.max_memory_bytes > 0) {
      more = std::min(more, std::max(0.0, (r.walk - 5 * vec) / 2));
      r.walk -= more;
    }
    r.cavity_budget += more;
    return r;
  };
  const int max_bits = std::min(opt.max_bits, InheritanceModel::kMaxBits);
  // The chain keeps only the people kinfer lod's keeps (a phenotype at a marker, or such a
  // descendant) when every marker's candidates come from its cavities, which hold the others
  // too; a marker whose candidates go one by one needs everyone in the chain.
  std::vector<PedigreeLocus> full(M);  // per chain marker: reduced for the cavities
  auto im = std::make_unique<InheritanceModel>(ped, loci, lf.sex_linked, true, false);
  bool all_cavities = opt.cavities && im->bits() <= max_bits &&
                      im->people_kept() < static_cast<int>(ped.people.size());
  double largest_cavities = 0;  // the bytes of the largest marker's cavities (all_cavities)
  if (all_cavities) {
    const Memory mem = memory(*im);
    PersonCavitySolver sizes(im->bits());
    Pedigree work = ped;
    all_cavities = mem.fits;
    for (int k = 0; k < M && all_cavities; ++k) {
      all_cavities = cavity_locus(work, lf, out.markers[k], full[k]);
      if (all_cavities)
        largest_cavities = std::max(largest_cavities, sizes.bytes(im->allele_network(full[k])));
      all_cavities = all_cavities && largest_cavities <= mem.cavity_budget;
    }
  }
  if (!all_cavities) im = std::make_unique<InheritanceModel>(ped, loci, lf.sex_linked, true, true);
  out.bits = im->bits();
  if (im->bits() > max_bits)
    throw std::length_error("pedigree " + ped.id + ": an inheritance vector of " +
                            std::to_string(im->bits()) + " bits, more than the chain's " +
                            std::to_string(max_bits));
  im->set_table_limit(opt.table_limit);
  const Memory mem = memory(*im);
  const int threads = mem.threads;
  const double candidate_limit = mem.candidate_limit, cavity_budget = mem.cavity_budget;
  std::unique_ptr<ChainBackend> backend;
  if (opt.max_memory_bytes > 0) {
    if (!mem.fits)
      throw std::length_error("pedigree " + ped.id + ": the chain's state vectors of " +
                              std::to_string(static_cast<long>(
                                  std::ceil(8.0 * std::exp2(im->bits()) / 1048576))) +
                              " MiB (" + std::to_string(im->bits()) +
                              " bits) and the candidates' emissions do not fit the memory limit");
    im->set_memory_limit(mem.walk);
    backend = make_cpu_chain(im->layout(), mem.walk);
  } else {
    backend = make_cpu_chain(im->layout(), 0);
  }
  // Markers whose cavities are computed side by side, a thread each: one marker's table
  // operations gain little from more threads (on c250, two threads took 0.77 of one's time).
  // When every marker goes by its cavities, as many at once as the cavities' memory holds (a
  // solver keeps at most the bytes of the largest network it ran: W, every table and
  // derivative); else one at a time, as the candidates one by one share that memory.
  const int slots = all_cavities && largest_cavities > 0
                        ? static_cast<int>(std::clamp(std::floor(cavity_budget / largest_cavities),
                                                      1.0, static_cast<double>(threads)))
                        : 1;
  std::vector<PersonCavitySolver> solvers(slots, PersonCavitySolver(im->bits()));
  struct PendingMarker {
    int k;
    InheritanceModel::AlleleNetwork net;
    std::vector<double> w;  // W = a b, from solvers[its place]'s buffers
    double ln_w, ln_all;
    std::vector<Candidate> cs;
  };
  std::vector<PendingMarker> pending;
  auto run_pending = [&] {
    if (pending.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    const int n = static_cast<int>(pending.size());
    auto one = [&](int i) {
      PendingMarker& m = pending[i];
      const PersonCavities pc = solvers[i].run(m.net, std::move(m.w), m.ln_w);
      candidates_from_cavities(m.net, full[m.k], im->bits(), pc, m.cs);
      full[m.k] = PedigreeLocus{};
      fill_cells(ped, lf, out.markers[m.k], m.ln_all, m.cs, out.cell[m.k]);
    };
    if (n == 1) {
      one(0);  // the team inside its table operations
    } else {
      std::exception_ptr failed;
#pragma omp parallel for num_threads(n) schedule(static, 1)
      for (int i = 0; i < n; ++i) {
        try {
          one(i);
        } catch (...) {
#pragma omp critical
          if (!failed) failed = std::current_exception();
        }
      }
      if (failed) std::rethrow_exception(failed);
    }
    out.cavity_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.cavity_markers += n;
    pending.clear();
  };
  out.cell.resize(M);
  std::vector<Pedigree> copies(threads, ped);  // each thread's: one phenotype changed at a time
  out.ln_likelihood = M == 0 ? 0.0 : kNegInf;
  std::vector<int> idx(M);
  std::iota(idx.begin(), idx.end(), 0);
  im->walk_markers(
      idx, male, female,
      [&](int k, ChainBackend& B, int va, int vb, double s, const Emission& ek) {
        const int locus = out.markers[k];
        const bool impossible = std::isinf(s) || std::isnan(s);
        const double ln_all = impossible ? kNegInf : B.ln_dot(va, &ek, vb) + s;
        if (k == 0) out.ln_likelihood = ln_all;
        std::vector<Candidate> cs = candidates_at(ped, lf, locus);
        // Every candidate at once from the marker's cavities, where the vectors are on the host
        // and the cavities' tables fit what the candidates would hold; else one by one.
        double fa = 0, fb = 0;
        const double* a = impossible ? nullptr : B.host_data(va, &fa);
        const double* b = impossible ? nullptr : B.host_data(vb, &fb);
        if (opt.cavities && a && b &&
            (all_cavities || cavity_locus(copies[0], lf, locus, full[k]))) {
          InheritanceModel::AlleleNetwork net = im->allele_network(full[k]);
          if (all_cavities || solvers[0].bytes(net) <= cavity_budget) {
            PersonCavitySolver& solver = solvers[pending.size()];
            std::vector<double> w = solver.state_buffer();
            const long nw = 1L << im->bits();
            w.resize(nw);
#pragma omp parallel for schedule(static) if (nw >= 65536)
            for (long v = 0; v < nw; ++v) w[v] = a[v] * b[v];
            pending.push_back(
                {k, std::move(net), std::move(w), s + fa + fb, ln_all, std::move(cs)});
            if (static_cast<int>(pending.size()) == slots) run_pending();
            return;
          }
        }
        if (all_cavities && !impossible)
          throw std::logic_error("multipoint_genotypes: a marker without its cavities in a chain "
                                 "that drops people");
        CandidateSums sums(B, va, vb, s, ek, im->bits());
        // The candidates' emissions in chunks (one per thread), then their sums in turn (the
        // backend's own threads).
        for (std::size_t c0 = 0; c0 < cs.size() && !impossible; c0 += threads) {
          const std::size_t c1 = std::min(cs.size(), c0 + threads);
          std::vector<Emission> es(c1 - c0);
          std::vector<double> pre(c1 - c0, kNegInf);
          std::exception_ptr failed;
          const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads) schedule(dynamic)
          for (std::size_t c = c0; c < c1; ++c) {
            try {
              Pedigree& mine = copies[omp_get_thread_num()];
              Phenotype& ph = mine.people[cs[c].person].pheno[locus];
              const Phenotype was = ph;
              ph = cs[c].pheno;
              pre[c - c0] = ln_likelihood_with(*im, mine, lf, locus, candidate_limit, es[c - c0]);
              ph = was;
            } catch (...) {
#pragma omp critical
              if (!failed) failed = std::current_exception();
            }
          }
          if (failed) std::rethrow_exception(failed);
          const auto t1 = std::chrono::steady_clock::now();
          out.emission_s += std::chrono::duration<double>(t1 - t0).count();
          for (std::size_t c = c0; c < c1; ++c) {
            if (!std::isinf(pre[c - c0])) cs[c].ln_l = sums.ln_sum(es[c - c0]);
            B.forget(&es[c - c0]);
          }
          out.sum_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
          out.candidates += static_cast<long>(c1 - c0);
        }
        fill_cells(ped, lf, locus, ln_all, cs, out.cell[k]);
      },
      backend.get());
  run_pending();
  out.walk_s = im->profile().emission_s + im->profile().step_s;
  return out;
}

}  // namespace kinfer::linkage

namespace kinfer::linkage {

MultipointGenotypes multipoint_genotypes_network(const Pedigree& ped, const LocusFile& lf,
                                                 const MarkerChainMap& map, const PlanOptions& po) {
  MultipointGenotypes out;
  out.network = true;
  // The chain's markers; no allele recoding, so that every allele keeps its name in the
  // genotypes.
  ReductionOptions ro;
  ro.recode = false;
  const ConsistentMarkers cm = consistent_markers(ped, lf, map, ro, out);
  const std::vector<PedigreeLocus>& reduced = cm.reduced;
  const std::vector<double>& male = cm.male;
  const std::vector<double>& female = cm.female;
  const int M = static_cast<int>(out.markers.size());
  const int np = static_cast<int>(ped.people.size());
  out.cell.assign(M, std::vector<MultipointGenotypes::Cell>(np));
  if (M == 0) return out;
  std::vector<const PedigreeLocus*> loci;
  for (const PedigreeLocus& L : reduced) loci.push_back(&L);
  auto typed = [&](int k, int i) { return ped.people[i].pheno[out.markers[k]].a1 != 0; };

  // ln L of the data as given, and the untyped people's posteriors: the marginals of one
  // unordered-genotype variable per untyped person and marker.
  PedigreeNetwork pn(ped, loci, false, true);
  pn.set_thetas(male, female);
  Network net = pn.network();
  struct Asked {
    int k, i;
    GenotypeVariable g;
  };
  std::vector<Asked> asked;
  for (int k = 0; k < M; ++k)
    for (int i = 0; i < np; ++i)
      if (!typed(k, i)) asked.push_back({k, i, add_genotype_variable(net, pn, k, i, reduced[k])});
  ConditionedPlan cp = make_conditioned_plan(net, pn.evidence(), po);
  net = Network{};
  const Marginals m = compute_marginals(cp);
  out.ln_likelihood = m.ln_pe;
  if (std::isinf(m.ln_pe)) return out;  // the data at all markers together are impossible
  for (const Asked& q : asked) {
    auto& post = out.cell[q.k][q.i].posterior;
    for (std::size_t x = 0; x < q.g.values.size(); ++x)
      if (m.p[q.g.var][x] > 0) post.push_back({q.g.values[x], m.p[q.g.var][x]});
  }

  // Each typed genotype: the likelihood without it, on the same kind of plan as the data's
  // own (PedigreeLikelihood), for P(observed | others) = L / L(without it).
  const double ln_all = PedigreeLikelihood(ped, loci, false, po).ln_likelihood(male, female);
  for (int k = 0; k < M; ++k) {
    const int locus = out.markers[k];
    for (int i = 0; i < np; ++i) {
      if (!typed(k, i)) continue;
      const Person& p = ped.people[i];
      const Phenotype ph = p.pheno[locus];
      const bool hemi = lf.sex_linked && p.sex == 1;
      MultipointGenotypes::Cell& cell = out.cell[k][i];
      cell.posterior.push_back(
          {hemi ? UnorderedGenotype{0, ph.a1}
                : UnorderedGenotype{std::min(ph.a1, ph.a2), std::max(ph.a1, ph.a2)},
           1.0});
      Pedigree without = ped;
      without.people[i].pheno[locus] = {0, 0};
      Inconsistency err;
      const PedigreeLocus Lk = reduce_locus(without, lf, locus, ro, &err);
      if (err.locus >= 0) continue;  // cannot happen: fewer phenotypes
      std::vector<const PedigreeLocus*> loci_without = loci;
      loci_without[k] = &Lk;
      const double ln_without =
          PedigreeLikelihood(without, loci_without, false, po).ln_likelihood(male, female);
      if (!std::isinf(ln_without) && !std::isinf(ln_all))
        cell.p_given_others = std::exp(std::min(0.0, ln_all - ln_without));
    }
  }
  return out;
}

}  // namespace kinfer::linkage
