#pragma once
// Every person's cavity at one marker of the Lander-Green chain in one computation: reverse-mode
// differentiation of the marker's likelihood with respect to each person's phenotype table.
//
// With W(v) = va(v) vb(v) (the other markers' data carried to marker k; linkage/inheritance.hpp
// walk_markers) and the marker's allele network (InheritanceModel::allele_network), the
// likelihood of all the data is S = sum over every variable (state bits and alleles) of W times
// the network's tables. S is linear in each person's phenotype table w_i, so its derivative
// with respect to w_i(a, b), the product of every other table summed onto i's allele variables,
// is P(i's ordered alleles = (a, b), all data but i's phenotype at k). Summed over the pairs of
// one unordered genotype it gives the sums that `kinfer genotypes --multipoint` needs (an
// untyped person's P(G_i = g, all data); a typed person's L without its phenotype). The forward
// pass eliminates the alleles, then the state bits (W among the tables), keeping every table;
// the backward pass sends each step's derivative to its inputs (the product of the step's
// derivative and the other inputs, summed onto that input's variables), a few times the forward
// work in all. Tables are kept scaled to a maximum of 1 with their ln scales, so nothing
// underflows.
//
// The network's allele domains must hold every genotype that some candidate's data allow (a
// typed person's cavity is read on alleles beyond its own phenotype, and its relatives may then
// take genotypes that genotype elimination with it removes): marker_posteriors.cpp gives each
// person the union of the domains that elimination leaves with all the data and with each typed
// person's phenotype removed. The phenotype tables are the phenotypes' own weights.
#include <optional>
#include <vector>

#include "linkage/inheritance.hpp"

namespace kinfer::linkage {

struct PersonCavities {
  double ln_l = 0;  // ln S (-inf when 0)
  // Per person: over the variables of its phenotype table (InheritanceModel::AlleleNetwork
  // person_vars; ascending, the last fastest), the derivative exp(ln_scale) * t; empty `t` for
  // a person not in the network.
  struct Cavity {
    std::vector<int> vars;
    std::vector<double> t;
    double ln_scale = 0;
  };
  std::vector<Cavity> person;
};

// Computes PersonCavities for the markers of one pedigree; keeps the elimination order of each
// shape of network it has seen (the markers of a pedigree share their tables' variables and
// differ at most in the alleles' domains).
class PersonCavitySolver {
 public:
  explicit PersonCavitySolver(int bits) : bits_(bits) {}
  // The bytes run() holds at most for `net`: every forward table and derivative (W included),
  // counted before computing anything.
  double bytes(const InheritanceModel::AlleleNetwork& net);
  // S and every person's cavity for `net` with W(v) = w[v] exp(ln_w) (w: 2^bits entries, state
  // index order; W(v) = a(v) b(v), the vectors on either side of the marker). Uses OpenMP's
  // threads inside each table operation (one inside a parallel region: markers in parallel).
  PersonCavities run(const InheritanceModel::AlleleNetwork& net, std::vector<double> w,
                     double ln_w);
  // A buffer for run's w (its size unset), from the tables this solver keeps between runs.
  std::vector<double> state_buffer() { return spare(std::size_t(1) << bits_); }

  struct Plan {
    std::vector<std::vector<int>> vars;  // per table: the leaves (net's, then W), then outputs
    int leaves = 0;
    struct Step {
      std::vector<int> in;  // tables multiplied
      std::vector<int> x;   // the variables summed out
    };
    std::vector<Step> steps;  // step s's output is table leaves + s
    double entries = 0;       // all tables' entries together
  };

 private:
  const Plan& plan(const InheritanceModel::AlleleNetwork& net);
  // Tables of at least kSpareBytes are reused from one step and marker to the next: a fresh one
  // would cost a page fault per 4 KiB page.
  static constexpr std::size_t kSpareBytes = 1 << 20;
  std::vector<double> spare(const std::vector<int>& vars, const std::vector<int>& card);
  std::vector<double> spare(std::size_t entries);
  void keep_spare(std::vector<double>&& t);
  std::vector<std::vector<double>> spare_;
  int bits_;
  std::vector<std::pair<std::vector<int>, Plan>> plans_;  // by the network's domain sizes
};

}  // namespace kinfer::linkage
