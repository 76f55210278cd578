// [engine] Multipoint over dense maps by the inheritance-vector chain (linkage/inheritance.hpp)
// against an independent Lander-Green computation (tests/lander_green.hpp), against the
// network, and its founder-phase lumping against the unlumped chain.
#include <catch2/catch.hpp>
#include <random>

#include "engine/errors.hpp"
#include "io/linkage.hpp"
#include "lander_green.hpp"
#include "linkage/chain.hpp"
#include "linkage/inheritance.hpp"
#include "linkage/pedigree.hpp"
#include "test_linkage_support.hpp"

using namespace kinfer;
using namespace kinfer::linkage_test;

namespace {

// A random pedigree (inbreeding and loops likely) with phenotypes simulated along a map of
// `markers` markers (2 and 3 alleles alternating) after an affection locus, partly untyped.
std::pair<LocusFile, PedigreeFile> dense_case(std::mt19937& rng, bool x_linked, int founders,
                                              int kids, int markers) {
  std::uniform_real_distribution<double> U(0, 1);
  const int nl = markers + 1;
  std::ostringstream dat;
  dat << nl << " 0 " << (x_linked ? 1 : 0) << " 5\n0 0.0 0.0 0\n";
  for (int k = 1; k <= nl; ++k) dat << k << (k == nl ? '\n' : ' ');
  dat << "1 2\n0.8 0.2\n1\n0.05 0.7 0.9\n";
  if (x_linked) dat << "0.05 0.9\n";
  std::vector<std::vector<double>> freq{{0.8, 0.2}};
  for (int k = 1; k < nl; ++k) freq.push_back(write_random_marker(dat, rng, k % 2 ? 2 : 3));
  std::vector<double> theta;
  dat << "0 0\n";
  for (int k = 1; k < nl; ++k) {
    theta.push_back(0.005 + 0.08 * U(rng));
    dat << theta.back() << ' ';
  }
  dat << "\n1 0.1 0.5\n";
  LocusFile lf = io::parse_locus_file("dense.dat", dat.str());
  freq.clear();
  for (const Locus& L : lf.loci) freq.push_back(L.freq);  // as parsed

  struct P {
    int fa, mo, sex;
    std::vector<std::array<int, 2>> g;  // per locus: paternal, maternal (1-based)
  };
  std::vector<P> ps;
  auto draw = [&](int k) {
    double u = U(rng), c = 0;
    for (std::size_t a = 0; a < freq[k].size(); ++a)
      if ((c += freq[k][a]) >= u) return static_cast<int>(a) + 1;
    return static_cast<int>(freq[k].size());
  };
  for (int i = 0; i < founders; ++i) {
    P p{-1, -1, i % 2 == 0 ? 1 : 2, std::vector<std::array<int, 2>>(nl)};
    for (int k = 0; k < nl; ++k) p.g[k] = {draw(k), draw(k)};
    ps.push_back(p);
  }
  for (int c = 0; c < kids; ++c) {
    std::vector<int> men, women;
    for (int i = 0; i < static_cast<int>(ps.size()); ++i)
      (ps[i].sex == 1 ? men : women).push_back(i);
    const int fa = men[rng() % men.size()], mo = women[rng() % women.size()];
    P p{fa, mo, static_cast<int>(rng() % 2) + 1, std::vector<std::array<int, 2>>(nl)};
    int sp = rng() % 2, sm = rng() % 2;
    for (int k = 0; k < nl; ++k) {
      if (k > 0 && U(rng) < theta[k - 1]) sp ^= 1;
      if (k > 0 && U(rng) < theta[k - 1]) sm ^= 1;
      p.g[k][0] = x_linked ? (p.sex == 1 ? 0 : ps[fa].g[k][1]) : ps[fa].g[k][sp];
      p.g[k][1] = ps[mo].g[k][sm];
    }
    ps.push_back(p);
  }
  std::ostringstream ped;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const P& p = ps[i];
    ped << "3 " << i + 1 << ' ' << p.fa + 1 << ' ' << p.mo + 1 << ' ' << p.sex;
    const int carriers = (p.g[0][0] == 2) + (p.g[0][1] == 2);
    ped << ' ' << (U(rng) < 0.2 ? 0 : (U(rng) < (carriers ? 0.8 : 0.1) ? 2 : 1)) << ' ';
    const bool typed = U(rng) < 0.75;
    for (int k = 1; k < nl; ++k) {
      if (!typed || U(rng) < 0.05)
        ped << " 0 0";
      else if (x_linked && p.sex == 1)
        ped << ' ' << p.g[k][1] << ' ' << p.g[k][1];
      else
        ped << ' ' << p.g[k][0] << ' ' << p.g[k][1];
    }
    ped << '\n';
  }
  PedigreeFile pf = io::parse_pedigree_file("dense.ped", ped.str(), lf);
  return {lf, pf};
}

// The bits of x at the set bits of m, packed (BMI2's pext, by hand).
std::uint64_t pext(std::uint64_t x, std::uint64_t m) {
  std::uint64_t r = 0;
  for (int k = 0; m; m &= m - 1, ++k) r |= ((x >> __builtin_ctzll(m)) & 1) << k;
  return r;
}

// The chain's transition by definition, on the whole vector: every bit flips with its sex's
// recombination fraction, then every lumped founder group flips its bits together.
void naive_transition(std::vector<double>& v, const ChainLayout& L, double male, double female) {
  const long N = static_cast<long>(v.size());
  for (int p = 0; p < L.bits; ++p) {
    const double t = L.female[p] ? female : male;
    for (long w = 0; w < N; ++w)
      if (!(w & (1L << p))) {
        const double a = v[w], b = v[w | (1L << p)];
        v[w] = (1 - t) * a + t * b, v[w | (1L << p)] = t * a + (1 - t) * b;
      }
  }
  for (const auto& g : L.groups) {
    const double t = L.female[__builtin_ctzll(g.mask)] ? female : male;
    const long m = static_cast<long>(g.mask), low = m & -m;
    for (long w = 0; w < N; ++w)
      if (!(w & low)) {
        const double a = v[w], b = v[w ^ m];
        v[w] = (1 - t) * a + t * b, v[w ^ m] = t * a + (1 - t) * b;
      }
  }
}

std::vector<int> chain_of(const LocusFile& lf, const Evaluation& e) {
  std::vector<int> chain;
  for (const auto& name : e.order)
    for (int k = 0; k < lf.n_loci(); ++k)
      if (lf.loci[k].name == name) chain.push_back(k);
  return chain;
}

}  // namespace

TEST_CASE("LinkageDense.MapPositionsMatchLanderGreen", "[engine]") {
  // 31 to 41 loci, at most 10 meioses; positions before, across and after the map.
  std::mt19937 rng(20261123);
  int loops = 0, lumped = 0;
  for (int t = 0; t < 8; ++t) {
    const bool x = t % 4 == 3;
    auto [lf, pf] = dense_case(rng, x, 3, x ? 5 : 4 + t % 2, 30 + 3 * t % 11);
    loops += pf.pedigrees[0].has_loop;
    INFO("case " << t << (x ? " (X-linked)" : ""));
    AnalysisOptions o = quick_options();
    o.program = Program::Linkmap;
    o.moving_locus = 1;
    o.positions = {-3.0, 0.0, 1.7, 25.0, 60.0, 90.0, 300.0};
    AnalysisResult r;
    try {
      r = analyze(lf, pf, o);
    } catch (const InputError& e) {
      FAIL(e.what());
    }
    REQUIRE(r.evaluations.size() == o.positions.size());
    const bool dense = !r.notes.empty() && r.notes.back().find("inheritance") != std::string::npos;
    CHECK(dense);
    lumped += dense;
    LanderGreenReference lg(pf.pedigrees[0], lf);
    REQUIRE(lg.meioses() <= 10);
    for (const auto& e : r.evaluations) {
      const std::vector<int> chain = chain_of(lf, e);
      REQUIRE(static_cast<int>(chain.size()) == lf.n_loci());
      const double ref = lg.ln_l(chain, e.male, e.female);
      if (std::isinf(ref))
        CHECK(std::isinf(e.ln_l[0]));
      else
        CHECK(e.ln_l[0] == Approx(ref).margin(1e-8));
    }
    // The baseline: trait alone plus the markers alone.
    std::vector<int> markers(lf.map_order.begin() + 1, lf.map_order.end());
    const double base = lg.ln_l({0}, {}, {}) + lg.ln_l(markers, r.baseline.male, r.baseline.female);
    CHECK(r.baseline.ln_l[0] == Approx(base).margin(1e-8));
    // Every emission per state on the fly (--emission-tables 0), against the same reference.
    if (t % 2 == 0 || x) {
      AnalysisOptions f = o;
      f.emission_table_entries = 0;
      const AnalysisResult q = analyze(lf, pf, f);
      REQUIRE(q.evaluations.size() == r.evaluations.size());
      for (const auto& e : q.evaluations) {
        const double ref = lg.ln_l(chain_of(lf, e), e.male, e.female);
        if (std::isinf(ref))
          CHECK(std::isinf(e.ln_l[0]));
        else
          CHECK(e.ln_l[0] == Approx(ref).margin(1e-8));
      }
      CHECK(q.baseline.ln_l[0] == Approx(base).margin(1e-8));
    }
  }
  CHECK(loops > 0);
  CHECK(lumped == 8);
}

TEST_CASE("LinkageDense.FounderPhaseLumpingIsExact", "[engine]") {
  // The lumped chain (one bit less per founder with children) against every meiosis kept.
  std::mt19937 rng(7);
  for (int t = 0; t < 6; ++t) {
    const bool x = t % 3 == 2;
    auto [lf, pf] = dense_case(rng, x, 4, 6, 12);
    const Pedigree& ped = pf.pedigrees[0];
    ReductionOptions ro;
    std::vector<PedigreeLocus> red;
    for (int k = 0; k < lf.n_loci(); ++k) {
      Inconsistency err;
      red.push_back(reduce_locus(ped, lf, k, ro, &err));
    }
    std::vector<const PedigreeLocus*> loci;
    for (int k = 1; k < lf.n_loci(); ++k) loci.push_back(&red[k]);
    loci.push_back(&red[0]);
    InheritanceModel lumped(ped, loci, lf.sex_linked, true), full(ped, loci, lf.sex_linked, false);
    INFO("case " << t << ": " << lumped.bits() << " bits, " << full.bits() << " unlumped");
    CHECK(lumped.founder_phases() > 0);
    CHECK(lumped.bits() == full.bits() - lumped.founder_phases());
    std::vector<int> idx;
    for (int k = 0; k + 1 < lf.n_loci(); ++k) idx.push_back(k);
    std::vector<double> male(lf.male_theta.begin() + 1, lf.male_theta.end());
    std::vector<InheritanceModel::Point> pts;
    for (int left = -1; left < static_cast<int>(idx.size()); left += 3)
      pts.push_back({left, 0.02, 0.03, 0.01, 0.04});
    double m1 = 0, m2 = 0;
    const auto a = lumped.location_scores(idx, male, male, static_cast<int>(idx.size()), pts, &m1);
    const auto b = full.location_scores(idx, male, male, static_cast<int>(idx.size()), pts, &m2);
    CHECK(m1 == Approx(m2).margin(1e-9));
    for (std::size_t i = 0; i < pts.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-9));
  }
}

TEST_CASE("LinkageDense.LargerPedigreesMatchTheNetwork", "[engine]") {
  // 13 to 18 bits (the kernel's cache blocks and its radix-4 passes): the chain against the
  // network (lander_green_bits 0) on a short map the network handles quickly.
  std::mt19937 rng(99);
  int max_bits = 0;
  for (int t = 0; t < 3; ++t) {
    auto [lf, pf] = dense_case(rng, false, 5, 8 + t, 3);
    AnalysisOptions o = quick_options();
    o.program = Program::Linkmap;
    o.moving_locus = 1;
    o.positions = {-2.0, 3.0, 9.0, 40.0};
    AnalysisOptions n = o;
    n.lander_green_bits = 0;
    const AnalysisResult a = analyze(lf, pf, o), b = analyze(lf, pf, n);
    REQUIRE(!a.notes.empty());
    INFO(a.notes.back());
    const std::string& note = a.notes.back();
    const auto at = note.find("up to ");
    REQUIRE(at != std::string::npos);
    max_bits = std::max(max_bits, std::stoi(note.substr(at + 6)));
    CHECK(a.baseline.total_ln_l == Approx(b.baseline.total_ln_l).margin(1e-8));
    for (std::size_t i = 0; i < a.evaluations.size(); ++i)
      CHECK(a.evaluations[i].total_ln_l == Approx(b.evaluations[i].total_ln_l).margin(1e-8));
  }
  CHECK(max_bits > 12);  // past the kernel's in-cache block
}

TEST_CASE("LinkageDense.CpuChainStepMatchesNaiveKernel", "[engine]") {
  // The CPU backend's tiled kernel (regions, passes of at most 6 positions, founder groups inside
  // a region, across passes and across regions) and its factored emissions against the kernel
  // applied butterfly by butterfly over the whole vector and the emission read state by state.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> U(0.05, 1.0), T(0.0, 0.5);
  for (int bits : {5, 13, 16, 19}) {
    ChainLayout L;
    L.bits = bits;
    for (int i = 0; i < bits; ++i) L.female.push_back(rng() % 2);
    for (int a = 0; a < bits; a += ChainLayout::kRegionBits)
      L.regions.push_back({a, std::min(bits, a + ChainLayout::kRegionBits)});
    for (std::size_t r = 0; r < L.regions.size(); ++r)
      for (int p = L.regions[r].first; p + 3 <= L.regions[r].second; p += 4)
        L.groups.push_back({(3ull << p) | (rng() % 2 ? 4ull << p : 0), static_cast<bool>(rng() % 2),
                            static_cast<int>(r)});
    if (bits > 11) L.groups.push_back({(1ull << 2) | (1ull << (bits - 2)), false, -1});
    Emission e;
    for (int f = 0; f < 3; ++f) {
      EmissionFactor ef;
      while (__builtin_popcountll(ef.mask) < 1 + f * 2) ef.mask |= 1ull << (rng() % bits);
      ef.table.resize(std::size_t(1) << __builtin_popcountll(ef.mask));
      for (double& x : ef.table) x = U(rng);
      e.factors.push_back(ef);
    }
    const long N = 1L << bits;
    std::vector<double> ref(N);
    for (double& x : ref) x = U(rng);
    auto cpu = make_cpu_chain(L, 0);
    const int v = cpu->alloc(true);
    cpu->fill(v, 1.0);
    const double s0 = cpu->step(v, false, 0, 0, &e);  // v = e / max
    std::vector<double> naive(N);
    for (long w = 0; w < N; ++w) {
      double y = 1;
      for (const auto& f : e.factors) y *= f.table[pext(w, f.mask)];
      naive[w] = y;
    }
    const double m0 = *std::max_element(naive.begin(), naive.end());
    CHECK(s0 == Approx(std::log(m0)).margin(1e-12));
    for (double& x : naive) x /= m0;
    const double male = T(rng), female = T(rng);
    const double s1 = cpu->step(v, true, male, female, &e);
    // Naive: every bit, every group, over the whole vector; then the emission.
    naive_transition(naive, L, male, female);
    for (long w = 0; w < N; ++w) {
      double y = 1;
      for (const auto& f : e.factors) y *= f.table[pext(w, f.mask)];
      naive[w] *= y;
    }
    const double m1 = *std::max_element(naive.begin(), naive.end());
    INFO(bits << " bits");
    CHECK(s1 == Approx(std::log(m1)).margin(1e-12));
    // Every state checked at once: the sum against random weights (a factor over all bits).
    Emission wts;
    wts.factors.push_back({(N - 1) == 0 ? 0ull : static_cast<std::uint64_t>(N - 1), {}});
    wts.factors[0].table.resize(N);
    for (double& x : wts.factors[0].table) x = U(rng);
    double tot = 0;
    for (long w = 0; w < N; ++w) tot += naive[w] / m1 * wts.factors[0].table[w];
    CHECK(cpu->ln_dot(v, &wts, -1) == Approx(std::log(tot)).margin(1e-10));
    // The fused point score against its composition from copy, step and ln_dot (the default).
    const int w = cpu->alloc(true), s1v = cpu->alloc(true), s2v = cpu->alloc(true);
    cpu->fill(w, 1.0);
    cpu->step(w, true, female, male, &e);
    for (bool kl : {false, true})
      for (bool kr : {false, true}) {
        const ChainBackend::Side l{kl, 0.1, 0.2}, r{kr, 0.3, 0.05};
        const double fused = cpu->ln_score(v, l, &wts, w, r, s1v, s2v);
        const double plain = cpu->ChainBackend::ln_score(v, l, &wts, w, r, s1v, s2v);
        CHECK(fused == Approx(plain).margin(1e-10));
      }
  }
}

TEST_CASE("LinkageDense.CpuChainLanesFoldsAndSlices", "[engine]") {
  // The CPU kernel's special paths against the kernel applied butterfly by butterfly: founder
  // groups whose masks reach the two lowest state bits (every lane permutation, with and
  // without higher bits), one-bit groups (folded into their bit's butterfly), emission factors
  // whose bits in region 0 start at bit 0 (consecutive slices) or not (lookups); and step_from
  // against copy and step.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> U(0.05, 1.0), T(0.0, 0.5);
  const std::vector<std::vector<std::uint64_t>> group_sets = {
      {0x11, 0x122, 0xc, 0x40, 0x280, 0x1000, 0x6000},
      {0x403, 0x4, 0x18, 0x60, 0x2800},
      {0x3, 0x5c, 0x1, 0x800}};
  for (const auto& groups : group_sets) {
    const int bits = 15;
    ChainLayout L;
    L.bits = bits;
    for (int i = 0; i < bits; ++i) L.female.push_back(rng() % 2);
    L.regions = {{0, 11}, {11, bits}};
    for (std::uint64_t m : groups) L.groups.push_back({m, false, m < 0x800 ? 0 : 1});
    Emission e;
    for (std::uint64_t m : {0x7full | 0x6000ull, 0x3ull | 0x800ull, 0xcull, 0x1ull | 0x100ull}) {
      EmissionFactor ef;
      ef.mask = m;
      ef.table.resize(std::size_t(1) << __builtin_popcountll(m));
      for (double& x : ef.table) x = U(rng);
      e.factors.push_back(ef);
    }
    const long N = 1L << bits;
    const double male = T(rng), female = T(rng);
    std::vector<double> v0(N);
    for (double& x : v0) x = U(rng);
    std::vector<double> naive = v0;
    naive_transition(naive, L, male, female);
    for (long w = 0; w < N; ++w)
      for (const auto& f : e.factors) naive[w] *= f.table[pext(w, f.mask)];
    // The CPU backend from v0: loaded through an emission over every bit (a table of v0).
    auto cpu = make_cpu_chain(L, 0);
    Emission load;
    load.factors.push_back({static_cast<std::uint64_t>(N - 1), v0});
    const int v = cpu->alloc(true), w = cpu->alloc(true);
    cpu->fill(v, 1.0);
    const double s0 = cpu->step(v, false, 0, 0, &load);
    const double s1 = cpu->step_from(w, v, true, male, female, &e);
    const double s2 = cpu->step(v, true, male, female, &e);
    const double m1 = *std::max_element(naive.begin(), naive.end());
    INFO("groups " << groups.size() << " first " << groups[0]);
    CHECK(s0 + s1 == Approx(std::log(m1)).margin(1e-12));
    CHECK(s0 + s2 == Approx(std::log(m1)).margin(1e-12));
    // Every state at once: sums against random weights, and v and w against each other.
    Emission wts;
    wts.factors.push_back({static_cast<std::uint64_t>(N - 1), std::vector<double>(N)});
    for (double& x : wts.factors[0].table) x = U(rng);
    double tot = 0, sq = 0;
    for (long k = 0; k < N; ++k) {
      tot += naive[k] / m1 * wts.factors[0].table[k];
      sq += (naive[k] / m1) * (naive[k] / m1);
    }
    CHECK(cpu->ln_dot(v, &wts, -1) == Approx(std::log(tot)).margin(1e-11));
    CHECK(cpu->ln_dot(w, &wts, -1) == Approx(std::log(tot)).margin(1e-11));
    CHECK(cpu->ln_dot(v, nullptr, w) == Approx(std::log(sq)).margin(1e-11));
  }
}

TEST_CASE("LinkageDense.EmissionsOnTheFlyMatchTables", "[engine]") {
  // The emission evaluated per state (founder-allele graph, linkage/emission_program.hpp)
  // against the factor tables at every state of every locus, and the whole walk with every
  // emission on the fly against the walk on tables (inbred, looped and X-linked pedigrees).
  std::mt19937 rng(31);
  int states = 0, programs = 0;
  for (int t = 0; t < 6; ++t) {
    const bool x = t % 3 == 2;
    auto [lf, pf] = dense_case(rng, x, 4, 5 + t, 10);
    const Pedigree& ped = pf.pedigrees[0];
    ReductionOptions ro;
    std::vector<PedigreeLocus> red;
    for (int k = 0; k < lf.n_loci(); ++k) {
      Inconsistency err;
      red.push_back(reduce_locus(ped, lf, k, ro, &err));
    }
    std::vector<const PedigreeLocus*> loci;
    for (int k = 1; k < lf.n_loci(); ++k) loci.push_back(&red[k]);
    loci.push_back(&red[0]);
    InheritanceModel im(ped, loci, lf.sex_linked);
    INFO("case " << t << ": " << im.bits() << " bits" << (x ? ", X-linked" : ""));
    REQUIRE(im.bits() <= 16);
    for (int l = 0; l < static_cast<int>(loci.size()); ++l) {
      const Emission tab = im.emission(l);
      const EmissionProgram prog = im.program(l);
      REQUIRE(prog.n > 0);
      ++programs;
      for (std::uint64_t w = 0; w < (1ull << im.bits()); ++w) {
        double ref = 0;
        if (!tab.zero) {
          ref = std::exp(tab.ln_scale);
          for (const auto& f : tab.factors) {
            std::uint64_t i = 0, m = f.mask;
            for (int k = 0; m; m &= m - 1, ++k) i |= ((w >> __builtin_ctzll(m)) & 1) << k;
            ref *= f.table[i];
          }
        }
        const double v =
            evaluate_program(prog.n, prog.people.data(), static_cast<int>(prog.people.size()),
                             prog.freq.data(), prog.weights.data(), w);
        REQUIRE(v >= 0);
        CHECK(v == Approx(ref).epsilon(1e-11).margin(1e-300));
        ++states;
      }
    }
    std::vector<int> idx;
    for (int k = 0; k + 1 < lf.n_loci(); ++k) idx.push_back(k);
    std::vector<double> male(lf.male_theta.begin() + 1, lf.male_theta.end());
    std::vector<double> female(male.size());
    for (std::size_t i = 0; i < male.size(); ++i) female[i] = std::min(0.5, 1.3 * male[i]);
    std::vector<InheritanceModel::Point> pts;
    for (int left = -1; left < static_cast<int>(idx.size()); left += 2)
      pts.push_back({left, 0.02, 0.03, 0.01, 0.04});
    double m1 = 0, m2 = 0;
    const auto a = im.location_scores(idx, male, female, static_cast<int>(idx.size()), pts, &m1);
    im.set_table_limit(0);
    const auto b = im.location_scores(idx, male, female, static_cast<int>(idx.size()), pts, &m2);
    CHECK(im.profile().programs == static_cast<long>(idx.size()) + 1);
    CHECK(m1 == Approx(m2).margin(1e-9));
    for (std::size_t i = 0; i < pts.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-9));
  }
  CHECK(programs > 50);
  CHECK(states > 1000);
}

TEST_CASE("LinkageDense.EmissionProgramCoreIsEnumerated", "[engine]") {
  // A founder-allele graph with no vertex of degree 2 or less (K4: two founders, four children
  // typed with the four allele combinations) goes to the enumeration; against a brute force
  // over the four founder alleles.
  const int n = 2;
  EmissionProgram g;
  g.n = n;
  g.vertices = 4;
  g.freq = {0.3, 0.7};
  auto add_weight = [&](std::vector<double> w) {
    g.weights.insert(g.weights.end(), w.begin(), w.end());
    return static_cast<std::int32_t>(g.weights.size() - w.size());
  };
  const std::vector<double> wf = {0.2, 0.9, 0.9, 0.5}, wk = {0.1, 0.8, 0.6, 0.3};
  g.people.push_back({{0, 0}, {0, 1}, {0, 0}, add_weight(wf), 0});
  g.people.push_back({{0, 0}, {2, 3}, {0, 0}, add_weight(wf), 0});
  for (int k = 0; k < 4; ++k)  // child k: slots (k & 1) of the father, (k >> 1) of the mother
    g.people.push_back({{2, 2}, {0, 1}, {k & 1, k >> 1}, add_weight(wk), 0});
  double ref = 0;
  for (int a = 0; a < 16; ++a) {
    const int v[4] = {a & 1, (a >> 1) & 1, (a >> 2) & 1, (a >> 3) & 1};
    double p = g.freq[v[0]] * g.freq[v[1]] * g.freq[v[2]] * g.freq[v[3]];
    p *= wf[v[0] * n + v[1]] * wf[v[2] * n + v[3]];
    for (int k = 0; k < 4; ++k) p *= wk[v[k & 1] * n + v[2 + (k >> 1)]];
    ref += p;
  }
  const double got = evaluate_program(n, g.people.data(), 6, g.freq.data(), g.weights.data(), 0);
  CHECK(got == Approx(ref).epsilon(1e-13));

  // A 3-regular graph on 18 founder alleles (a ring and its diameters): a core of 2^18
  // assignments, beyond the enumeration's 2^16: refused (-1), not guessed.
  EmissionProgram h;
  h.n = n;
  h.vertices = 18;
  h.freq = g.freq;
  h.weights = wk;
  for (int f = 0; f < 9; ++f) h.people.push_back({{0, 0}, {2 * f, 2 * f + 1}, {0, 0}, 0, 0});
  auto edge = [&](int u, int v) {  // a child of the founders holding u and v
    h.people.push_back({{2, 2}, {u / 2, v / 2}, {u % 2, v % 2}, 0, 0});
  };
  for (int v = 1; v < 18; v += 2) edge(v, (v + 1) % 18);
  for (int v = 0; v < 9; ++v) edge(v, v + 9);
  CHECK(evaluate_program(n, h.people.data(), static_cast<int>(h.people.size()), h.freq.data(),
                         h.weights.data(), 0) == -1);
}
