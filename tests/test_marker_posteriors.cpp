// [linkage] Multipoint genotype probabilities by the inheritance chain (linkage/marker_posteriors
// .hpp) against ratios of likelihoods by the independent Lander-Green enumeration of
// tests/test_linkage_support.hpp (inheritance vectors and founder alleles summed by brute force,
// no code shared with the chain):
//   P(G_i = g | data) = L(data with i typed g at the marker) / L(data), i untyped there;
//   P(observed | others) = L(data) / L(data without i's genotype at the marker), i typed.
#include <catch2/catch.hpp>
#include <random>
#include <sstream>

#include <omp.h>

#include "engine/plan.hpp"
#include "io/linkage.hpp"
#include "linkage/marker_posteriors.hpp"
#include "test_linkage_support.hpp"

using namespace kinfer;
using namespace kinfer::linkage_test;

namespace {

struct Member {
  int fa, mo, sex;  // parents: indices into the family, -1 for a founder
};

// Genotypes simulated along `markers` markers (2 and 3 alleles alternating, thetas 0.02-0.2)
// for a fixed family, each person typed at a marker with probability 0.6.
std::pair<LocusFile, PedigreeFile> simulate(std::mt19937& rng, const std::vector<Member>& fam,
                                            bool x_linked, int markers) {
  std::uniform_real_distribution<double> U(0, 1);
  std::ostringstream dat;
  dat << markers << " 0 " << (x_linked ? 1 : 0) << " 5\n0 0.0 0.0 0\n";
  for (int k = 1; k <= markers; ++k) dat << k << (k == markers ? '\n' : ' ');
  std::vector<std::vector<double>> freq;
  for (int k = 0; k < markers; ++k) freq.push_back(write_random_marker(dat, rng, k % 2 ? 3 : 2));
  std::vector<double> theta;
  dat << "0 0\n";
  for (int k = 1; k < markers; ++k) {
    theta.push_back(0.02 + 0.18 * U(rng));
    dat << theta.back() << ' ';
  }
  dat << "\n1 0.1 0.5\n";
  LocusFile lf = io::parse_locus_file("mp.dat", dat.str());
  auto draw = [&](int k) {
    double u = U(rng), c = 0;
    for (std::size_t a = 0; a < freq[k].size(); ++a)
      if ((c += freq[k][a]) >= u) return static_cast<int>(a) + 1;
    return static_cast<int>(freq[k].size());
  };
  std::vector<std::vector<std::array<int, 2>>> g(fam.size(),
                                                 std::vector<std::array<int, 2>>(markers));
  for (std::size_t i = 0; i < fam.size(); ++i) {
    const Member& p = fam[i];
    int sp = rng() % 2, sm = rng() % 2;
    for (int k = 0; k < markers; ++k) {
      if (p.fa < 0) {
        g[i][k] = {draw(k), draw(k)};
        continue;
      }
      if (k > 0 && U(rng) < theta[k - 1]) sp ^= 1;
      if (k > 0 && U(rng) < theta[k - 1]) sm ^= 1;
      g[i][k][0] = x_linked ? g[p.fa][k][1] : g[p.fa][k][sp];
      g[i][k][1] = g[p.mo][k][sm];
    }
  }
  std::ostringstream ped;
  for (std::size_t i = 0; i < fam.size(); ++i) {
    const Member& p = fam[i];
    ped << "1 " << i + 1 << ' ' << p.fa + 1 << ' ' << p.mo + 1 << ' ' << p.sex;
    for (int k = 0; k < markers; ++k) {
      if (U(rng) < 0.4)
        ped << " 0 0";
      else if (x_linked && p.sex == 1)
        ped << ' ' << g[i][k][1] << ' ' << g[i][k][1];
      else
        ped << ' ' << g[i][k][0] << ' ' << g[i][k][1];
    }
    ped << '\n';
  }
  return {lf, io::parse_pedigree_file("mp.ped", ped.str(), lf)};
}

// Every posterior and error check of `mp` against the enumeration's likelihood ratios.
void check_against_enumeration(const LocusFile& lf, const Pedigree& ped,
                               const MultipointGenotypes& mp) {
  std::vector<int> chain;
  for (int k = 0; k < lf.n_loci(); ++k) chain.push_back(lf.map_order[k]);
  REQUIRE(mp.markers == chain);
  auto lnl = [&](const Pedigree& p) {
    return lander_green(p, lf, chain, lf.male_theta, lf.female_theta);
  };
  const double all = lnl(ped);
  REQUIRE(std::isfinite(all));
  CHECK(mp.ln_likelihood == Approx(all).margin(1e-9));
  Pedigree q = ped;
  int typed = 0, untyped = 0;
  for (std::size_t j = 0; j < chain.size(); ++j) {
    const int k = chain[j];
    for (std::size_t i = 0; i < ped.people.size(); ++i) {
      INFO("marker " << k << " person " << ped.people[i].id);
      const bool hemi = lf.sex_linked && ped.people[i].sex == 1;
      const MultipointGenotypes::Cell& cell = mp.cell[j][i];
      Phenotype& ph = q.people[i].pheno[k];
      const Phenotype was = ph;
      if (was.a1 != 0) {
        ++typed;
        ph = {0, 0};
        CHECK(cell.p_given_others == Approx(std::exp(all - lnl(q))).margin(1e-10));
        REQUIRE(cell.posterior.size() == 1);
        CHECK(cell.posterior[0].second == 1.0);
      } else {
        ++untyped;
        CHECK(std::isnan(cell.p_given_others));
        double total = 0;
        for (int b = 1; b <= lf.loci[k].n_alleles; ++b)
          for (int a = hemi ? b : 1; a <= b; ++a) {
            ph = {a, b};
            const double p = std::exp(lnl(q) - all);
            total += p;
            double got = 0;
            for (auto [g, x] : cell.posterior)
              if (g == (hemi ? UnorderedGenotype{0, b} : UnorderedGenotype{a, b})) got = x;
            CHECK(got == Approx(p).margin(1e-10));
          }
        CHECK(total == Approx(1.0).margin(1e-10));
      }
      ph = was;
    }
  }
  CHECK(typed > 0);
  CHECK(untyped > 0);
}

// Person `i` untyped at every locus (a leaf so treated has nothing observed about it or below
// it: the chain drops it and the cavities give its genotypes).
void untype(Pedigree& ped, int i) {
  for (Phenotype& ph : ped.people[i].pheno) ph = Phenotype{0, 0};
}

const std::vector<Member> kNuclear = {{-1, -1, 1}, {-1, -1, 2}, {0, 1, 1}, {0, 1, 2}, {0, 1, 2}};
// Grandparents, their son and daughter-in-law, three grandchildren.
const std::vector<Member> kThreeGenerations = {{-1, -1, 1}, {-1, -1, 2}, {0, 1, 1}, {-1, -1, 2},
                                               {2, 3, 1},   {2, 3, 2},   {2, 3, 2}};
// A first-cousin marriage (a loop) and its child.
const std::vector<Member> kCousins = {{-1, -1, 1}, {-1, -1, 2}, {0, 1, 1}, {0, 1, 2}, {-1, -1, 2},
                                      {-1, -1, 1}, {2, 4, 1},   {5, 3, 2}, {6, 7, 2}};

}  // namespace

TEST_CASE("MarkerPosteriors.MatchEnumeratedLikelihoodRatios", "[linkage]") {
  std::mt19937 rng(7);
  // The enumeration costs 2^meioses x alleles^founder alleles per locus: the loop once, on
  // three markers.
  for (const auto* fam : {&kNuclear, &kThreeGenerations, &kCousins})
    for (bool x : {false, true})
      for (int rep = 0; rep < (fam == &kCousins ? 1 : 2); ++rep) {
        INFO("family of " << fam->size() << (x ? ", sex-linked" : "") << ", rep " << rep);
        auto [lf, pf] = simulate(rng, *fam, x, fam == &kCousins ? 3 : 4);
        Pedigree ped = pf.pedigrees[0];
        if (rep == 0) untype(ped, static_cast<int>(fam->size()) - 1);
        const MultipointGenotypes mp =
            multipoint_genotypes(ped, lf, marker_chain_map(lf), MultipointOptions{});
        CHECK(mp.left_out.empty());
        CHECK(mp.cavity_markers == static_cast<long>(mp.markers.size()));
        check_against_enumeration(lf, ped, mp);
      }
}

// Every posterior and every P(observed | others) of `a` and `b` the same.
void check_same(const Pedigree& ped, const MultipointGenotypes& a, const MultipointGenotypes& b) {
  REQUIRE(a.markers == b.markers);
  CHECK(a.ln_likelihood == Approx(b.ln_likelihood).epsilon(1e-12));
  for (std::size_t k = 0; k < a.markers.size(); ++k)
    for (std::size_t i = 0; i < ped.people.size(); ++i) {
      INFO("marker " << a.markers[k] << " person " << ped.people[i].id);
      const MultipointGenotypes::Cell &ca = a.cell[k][i], &cb = b.cell[k][i];
      CHECK(std::isnan(ca.p_given_others) == std::isnan(cb.p_given_others));
      if (!std::isnan(cb.p_given_others))
        CHECK(ca.p_given_others == Approx(cb.p_given_others).epsilon(1e-10));
      REQUIRE(ca.posterior.size() == cb.posterior.size());
      for (std::size_t g = 0; g < cb.posterior.size(); ++g) {
        CHECK(ca.posterior[g].first == cb.posterior[g].first);
        CHECK(ca.posterior[g].second == Approx(cb.posterior[g].second).epsilon(1e-10));
      }
    }
}

TEST_CASE("MarkerPosteriors.CavitiesMatchOneEmissionPerCandidate", "[linkage]") {
  // The two paths on larger families than the enumeration reaches (the per-candidate path is
  // the one checked against the enumeration above with everything on the other path), and both
  // under memory limits: a roomy one (the walk bounded, the cavities fit) and a tight one (on
  // the 13-person family here, the cavities do not fit: everyone back in the chain, one
  // emission per candidate).
  std::mt19937 rng(11);
  const std::vector<Member> big = {{-1, -1, 1}, {-1, -1, 2}, {0, 1, 1},  {-1, -1, 2}, {0, 1, 2},
                                   {-1, -1, 1}, {2, 3, 1},   {2, 3, 2},  {5, 4, 2},   {5, 4, 1},
                                   {6, 8, 2},   {9, 7, 1},   {11, 10, 2}};
  for (const auto* fam : {&kCousins, &big})
    for (bool x : {false, true}) {
      INFO("family of " << fam->size() << (x ? ", sex-linked" : ""));
      auto [lf, pf] = simulate(rng, *fam, x, 6);
      Pedigree ped = pf.pedigrees[0];
      if (fam == &big) untype(ped, 11), untype(ped, 12);  // a dropped child of a dropped parent
      MultipointOptions one, each;
      each.cavities = false;
      const MultipointGenotypes a = multipoint_genotypes(ped, lf, marker_chain_map(lf), one);
      const MultipointGenotypes b = multipoint_genotypes(ped, lf, marker_chain_map(lf), each);
      CHECK(a.cavity_markers == static_cast<long>(a.markers.size()));
      CHECK(b.cavity_markers == 0);
      if (fam == &big) CHECK(a.bits == b.bits - (x ? 2 : 4));  // the chain without the two
      check_same(ped, a, b);
      for (double mib : {1.0, 16.0}) {
        INFO("--max-memory: the process and " << mib << " MiB");
        MultipointOptions bounded;
        bounded.max_memory_bytes = process_bytes(omp_get_max_threads()) + (32 + mib) * 1048576;
        check_same(ped, multipoint_genotypes(ped, lf, marker_chain_map(lf), bounded), b);
      }
    }
}
