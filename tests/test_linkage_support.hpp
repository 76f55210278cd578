#pragma once
// Helpers for the linkage tests on top of tests/support.hpp: quick analysis options and an
// independent likelihood (Lander-Green: inheritance vectors summed per locus by brute force,
// then a hidden Markov chain across loci) that shares no code with the network.
#include <array>
#include <cmath>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "linkage/analysis.hpp"
#include "linkage/model.hpp"
#include "tests/support.hpp"

namespace kinfer::linkage_test {

using namespace kinfer::test;
using namespace kinfer::linkage;

// Default analysis options for tests: a quick deterministic order.
inline AnalysisOptions quick_options() {
  AnalysisOptions o;
  o.plan.order.heuristic = OrderHeuristic::MinFill;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Lander-Green reference likelihood (small pedigrees: 2^meioses x alleles^founder-alleles).

struct LgLocus {
  const Locus* locus;
  int input;  // input index (phenotype column)
};

// ln L of pedigree `ped` over loci `chain` (input indices, map order) with thetas per interval.
// One numbered-allele marker of `alleles` alleles with random frequencies (each 0.3 + U(0, 1),
// normalised) written to a LINKAGE locus file in the making (`3 n`, then the frequencies);
// returns the frequencies written.
inline std::vector<double> write_random_marker(std::ostream& dat, std::mt19937& rng, int alleles) {
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> f(alleles);
  double s = 0;
  for (double& x : f) s += x = 0.3 + U(rng);
  dat << "3 " << alleles << '\n';
  for (double& x : f) dat << (x /= s) << ' ';
  dat << '\n';
  return f;
}

inline double lander_green(const Pedigree& ped, const LocusFile& lf, const std::vector<int>& chain,
                           const std::vector<double>& male, const std::vector<double>& female) {
  const int np = static_cast<int>(ped.people.size());
  const bool x = lf.sex_linked;
  // Meioses: (child, side) with side 0 paternal, 1 maternal. Sex-linked: maternal only.
  std::vector<std::pair<int, int>> meioses;
  for (int i = 0; i < np; ++i)
    if (!ped.people[i].founder()) {
      if (!x) meioses.push_back({i, 0});
      meioses.push_back({i, 1});
    }
  const int M = static_cast<int>(meioses.size());
  // Founder alleles: (person, side).
  std::vector<std::array<int, 2>> fa(np, {-1, -1});
  int F = 0;
  for (int i = 0; i < np; ++i)
    if (ped.people[i].founder()) {
      if (!(x && ped.people[i].sex == 1)) fa[i][0] = F++;
      fa[i][1] = F++;
    }
  // Topological order of people (parents first).
  std::vector<int> order, state(np, 0);
  std::function<void(int)> visit = [&](int i) {
    if (state[i]) return;
    state[i] = 1;
    if (!ped.people[i].founder()) {
      visit(ped.people[i].father);
      visit(ped.people[i].mother);
    }
    order.push_back(i);
  };
  for (int i = 0; i < np; ++i) visit(i);

  const std::size_t V = std::size_t(1) << M;
  std::vector<std::vector<double>> emit(chain.size(), std::vector<double>(V, 0));
  for (std::size_t k = 0; k < chain.size(); ++k) {
    const Locus& L = lf.loci[chain[k]];
    const int n = L.n_alleles;
    const int kk = chain[k];
    std::size_t combos = 1;
    for (int f = 0; f < F; ++f) combos *= n;
    std::vector<int> val(F);
    for (std::size_t v = 0; v < V; ++v) {
      // Gene flow: which founder allele each person carries on each side.
      std::vector<std::array<int, 2>> src(np, {-1, -1});
      int bit = 0;
      std::vector<std::array<int, 2>> mbit(np, {-1, -1});
      for (auto [c, side] : meioses) mbit[c][side] = bit++;
      for (int i : order) {
        const Person& p = ped.people[i];
        if (p.founder()) {
          src[i] = fa[i];
          continue;
        }
        const int mom = p.mother, dad = p.father;
        src[i][1] = src[mom][(v >> mbit[i][1]) & 1];
        if (x) {
          src[i][0] = p.sex == 1 ? -1 : src[dad][1];
        } else {
          src[i][0] = src[dad][(v >> mbit[i][0]) & 1];
        }
      }
      double total = 0;
      for (std::size_t c = 0; c < combos; ++c) {
        std::size_t r = c;
        double w = 1;
        for (int f = 0; f < F; ++f) {
          val[f] = static_cast<int>(r % n);
          r /= n;
          w *= L.freq[val[f]];
        }
        for (int i = 0; i < np && w > 0; ++i) {
          const Person& p = ped.people[i];
          const Phenotype& ph = p.pheno[kk];
          const bool hemi = x && p.sex == 1;
          const int a = hemi ? -1 : val[src[i][0]], b = val[src[i][1]];
          if (L.type == LocusType::Affection) {
            if (ph.a1 == 0) continue;
            const double pen = hemi ? L.male_penetrance[ph.a2 - 1][b]
                                    : L.penetrance[ph.a2 - 1][genotype_index(a + 1, b + 1, n)];
            w *= ph.a1 == 2 ? pen : 1 - pen;
          } else if (ph.a1 != 0) {
            if (hemi) {
              w *= (b + 1 == ph.a1) ? 1 : 0;
            } else {
              const bool ok =
                  (a + 1 == ph.a1 && b + 1 == ph.a2) || (a + 1 == ph.a2 && b + 1 == ph.a1);
              w *= ok ? 1 : 0;
            }
          }
        }
        total += w;
      }
      emit[k][v] = total;
    }
  }
  // Forward algorithm across loci; each meiosis recombines independently (Haldane).
  std::vector<double> alpha(V);
  for (std::size_t v = 0; v < V; ++v) alpha[v] = emit[0][v] / static_cast<double>(V);
  for (std::size_t k = 1; k < chain.size(); ++k) {
    std::vector<double> next(V, 0);
    for (std::size_t v = 0; v < V; ++v) {
      if (alpha[v] == 0) continue;
      for (std::size_t u = 0; u < V; ++u) {
        double t = 1;
        for (int m = 0; m < M; ++m) {
          const bool paternal = meioses[m].second == 0;
          const double th = (paternal ? male : female)[k - 1];
          t *= (((v ^ u) >> m) & 1) ? th : 1 - th;
        }
        next[u] += alpha[v] * t;
      }
    }
    for (std::size_t u = 0; u < V; ++u) alpha[u] = next[u] * emit[k][u];
  }
  double L = 0;
  for (double a : alpha) L += a;
  return std::log(L);
}

}  // namespace kinfer::linkage_test
