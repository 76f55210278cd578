#pragma once
// An independent Lander-Green likelihood for dense maps in the tests: inheritance vectors over
// every meiosis (2^meioses, no founder-phase lumping, no pruning), each locus's emission by
// brute force over the founder alleles (computed once per locus and reused), Haldane
// transitions meiosis by meiosis, the forward algorithm. Shares no code with kinfer's
// linkage/inheritance.cpp; only for small pedigrees (<= ~12 meioses, few founders).
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "linkage/model.hpp"

namespace kinfer::linkage_test {

class LanderGreenReference {
 public:
  LanderGreenReference(const linkage::Pedigree& ped, const linkage::LocusFile& lf)
      : ped_(ped), lf_(lf) {
    const int np = static_cast<int>(ped.people.size());
    const bool x = lf.sex_linked;
    for (int i = 0; i < np; ++i)
      if (!ped.people[i].founder()) {
        if (!x) meioses_.push_back({i, 0});
        meioses_.push_back({i, 1});
      }
    fa_.assign(np, {-1, -1});
    for (int i = 0; i < np; ++i)
      if (ped.people[i].founder()) {
        if (!(x && ped.people[i].sex == 1)) fa_[i][0] = nf_++;
        fa_[i][1] = nf_++;
      }
    std::vector<int> state(np, 0);
    std::function<void(int)> visit = [&](int i) {
      if (state[i]) return;
      state[i] = 1;
      if (!ped.people[i].founder()) visit(ped.people[i].father), visit(ped.people[i].mother);
      order_.push_back(i);
    };
    for (int i = 0; i < np; ++i) visit(i);
  }

  int meioses() const { return static_cast<int>(meioses_.size()); }

  // ln L over `chain` (input loci in map order) with thetas per interval.
  double ln_l(const std::vector<int>& chain, const std::vector<double>& male,
              const std::vector<double>& female) {
    const int M = meioses();
    const std::size_t V = std::size_t(1) << M;
    std::vector<double> alpha(V, 1.0 / static_cast<double>(V));
    double log_scale = 0;
    for (std::size_t k = 0; k < chain.size(); ++k) {
      if (k > 0)
        for (int m = 0; m < M; ++m) {
          const double t = (meioses_[m].second == 0 ? male : female)[k - 1];
          const std::size_t bit = std::size_t(1) << m;
          for (std::size_t v = 0; v < V; ++v)
            if (!(v & bit)) {
              const double a = alpha[v], b = alpha[v | bit];
              alpha[v] = (1 - t) * a + t * b;
              alpha[v | bit] = t * a + (1 - t) * b;
            }
        }
      const std::vector<double>& e = emission(chain[k]);
      double s = 0;
      for (std::size_t v = 0; v < V; ++v) s += alpha[v] *= e[v];
      if (s <= 0) return -INFINITY;
      for (double& a : alpha) a /= s;
      log_scale += std::log(s);
    }
    return log_scale;
  }

 private:
  const std::vector<double>& emission(int locus) {
    auto it = emit_.find(locus);
    if (it != emit_.end()) return it->second;
    using namespace linkage;
    const int np = static_cast<int>(ped_.people.size());
    const bool x = lf_.sex_linked;
    const Locus& L = lf_.loci[locus];
    const int n = L.n_alleles;
    const std::size_t V = std::size_t(1) << meioses();
    std::vector<double> out(V, 0);
    std::size_t combos = 1;
    for (int f = 0; f < nf_; ++f) combos *= n;
    std::vector<std::array<int, 2>> mbit(np, {-1, -1});
    for (int b = 0; b < meioses(); ++b) mbit[meioses_[b].first][meioses_[b].second] = b;
    std::vector<int> val(nf_);
    for (std::size_t v = 0; v < V; ++v) {
      // Gene flow: which founder allele each person carries on each side.
      std::vector<std::array<int, 2>> src(np, {-1, -1});
      for (int i : order_) {
        const Person& p = ped_.people[i];
        if (p.founder()) {
          src[i] = fa_[i];
          continue;
        }
        src[i][1] = src[p.mother][(v >> mbit[i][1]) & 1];
        src[i][0] = x ? (p.sex == 1 ? -1 : src[p.father][1]) : src[p.father][(v >> mbit[i][0]) & 1];
      }
      double total = 0;
      for (std::size_t c = 0; c < combos; ++c) {
        std::size_t r = c;
        double w = 1;
        for (int f = 0; f < nf_; ++f) {
          val[f] = static_cast<int>(r % n);
          r /= n;
          w *= L.freq[val[f]];
        }
        for (int i = 0; i < np && w > 0; ++i) {
          const Person& p = ped_.people[i];
          const Phenotype& ph = p.pheno[locus];
          if (ph.a1 == 0) continue;
          const bool hemi = x && p.sex == 1;
          const int a = hemi ? -1 : val[src[i][0]], b = val[src[i][1]];
          if (L.type == LocusType::Affection) {
            const double pen = hemi ? L.male_penetrance[ph.a2 - 1][b]
                                    : L.penetrance[ph.a2 - 1][genotype_index(a + 1, b + 1, n)];
            w *= ph.a1 == 2 ? pen : 1 - pen;
          } else if (hemi) {
            w *= b + 1 == ph.a1 ? 1 : 0;
          } else {
            w *= ((a + 1 == ph.a1 && b + 1 == ph.a2) || (a + 1 == ph.a2 && b + 1 == ph.a1)) ? 1 : 0;
          }
        }
        total += w;
      }
      out[v] = total;
    }
    return emit_[locus] = std::move(out);
  }

  const linkage::Pedigree& ped_;
  const linkage::LocusFile& lf_;
  std::vector<std::pair<int, int>> meioses_;  // (child, side 0 paternal / 1 maternal)
  std::vector<std::array<int, 2>> fa_;        // founder allele index per person and side
  int nf_ = 0;
  std::vector<int> order_;  // parents first
  std::map<int, std::vector<double>> emit_;
};

}  // namespace kinfer::linkage_test
