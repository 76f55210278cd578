#pragma once
// The Superlink network of one pedigree over a chain of loci (linkage-model.md section 1),
// built as a kinfer::Network, and its likelihood evaluated many times: the structure, the
// reductions and the elimination order are computed once; a new theta only refills the
// selector tables (engine refill_inputs) before the plan runs.
//
// Variables per person and locus: the paternal and maternal alleles (domains already reduced
// by recoding and genotype elimination, linkage/pedigree.hpp) and, for non-founders, one
// selector per meiosis. A sex-linked male has only a maternal allele; a daughter's paternal
// allele is her father's allele itself (the same variable).
#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "engine/condition.hpp"
#include "engine/model.hpp"
#include "engine/plan.hpp"
#include "linkage/model.hpp"
#include "linkage/pedigree.hpp"

namespace kinfer::linkage {

class PedigreeNetwork {
 public:
  // `chain`: the reduced loci in map order (they must outlive nothing: they are copied from).
  // `kosambi` with exactly three loci models Kosambi interference as FASTLINK does (the
  // recombination in the second interval depends on the first); otherwise the selector
  // chain is Markov (no interference).
  // `joint`: a person whose possible ordered genotypes are no more than one allele variable's
  // values gets one genotype variable instead of two allele variables.
  PedigreeNetwork(const Pedigree& ped, const std::vector<const PedigreeLocus*>& chain, bool kosambi,
                  bool joint = true);

  const Network& network() const { return net_; }
  const Evidence& evidence() const { return ev_; }
  const std::vector<int>& var_locus() const {
    return var_locus_;
  }  // chain position of each variable
  const std::vector<char>& var_selector() const { return var_selector_; }  // 1: a meiosis selector
  int n_intervals() const { return n_loci_ - 1; }

  // Where one person's two alleles at one chain position live: the variables (one joint
  // genotype variable, or the paternal and the maternal allele variables, or the maternal one
  // alone for a sex-linked male) and, for each of their configurations in table order (the
  // first variable most significant), the (paternal, maternal) recoded alleles, 0-based;
  // paternal -1 for a sex-linked male.
  struct Genotype {
    std::vector<int> vars;
    std::vector<std::pair<int, int>> alleles;
  };
  const Genotype& genotype(int locus, int person) const { return genotypes_[locus][person]; }
  // The selector variable of one meiosis at one chain position: `person`'s paternal (side 0)
  // or maternal (side 1) allele's (value 0: the parent's paternal allele, 1: its maternal
  // one); -1 where there is none (founders, and the paternal side at a sex-linked locus,
  // where a daughter's paternal allele is her father's own variable).
  int selector(int locus, int person, int side) const { return selectors_[locus][person][side]; }

  // Writes the selector tables for these recombination fractions (one per interval, male and
  // female) into the network. Returns the indices of the factors that depend on theta.
  const std::vector<int>& set_thetas(const std::vector<double>& male,
                                     const std::vector<double>& female);
  const std::vector<int>& theta_factors() const { return theta_factors_; }

 private:
  struct Transition {
    int factor;
    int interval;  // between chain positions interval and interval + 1
    bool male;
    bool kosambi;  // scope (S0, S1, S2) instead of (S1, S2)
  };
  Network net_;
  Evidence ev_;
  int n_loci_ = 0;
  std::vector<int> var_locus_;
  std::vector<char> var_selector_;
  std::vector<Transition> transitions_;
  std::vector<int> theta_factors_;
  std::vector<std::vector<Genotype>> genotypes_;  // [chain position][person]
  std::vector<std::vector<std::array<int, 2>>> selectors_;  // [chain position][person][side]
};

// One more variable of `net` (a copy of pn.network(), being extended): `person`'s unordered
// genotype at chain position `locus` (reduced as `L`), a deterministic function of that
// person's alleles there, with the factor that ties it to them (it sums to 1, so P(e) is
// unchanged): its marginal is the person's genotype distribution. Its values are unordered
// genotypes as input alleles (L.original; the smaller first, a sex-linked male's (0, a)).
struct GenotypeVariable {
  int var = -1;
  std::vector<std::pair<int, int>> values;
};
GenotypeVariable add_genotype_variable(Network& net, const PedigreeNetwork& pn, int locus,
                                       int person, const PedigreeLocus& L);

// The likelihood of one pedigree over one chain, compiled once.
class PedigreeLikelihood {
 public:
  // `runner` (may be empty: run_plan, slice by slice) evaluates the compiled plan, every slice.
  PedigreeLikelihood(const Pedigree& ped, const std::vector<const PedigreeLocus*>& chain,
                     bool kosambi, const PlanOptions& opt, bool joint = true,
                     std::function<double(ConditionedPlan&)> runner = {});
  // ln L at these thetas: refills the selector tables (when they changed), then runs the plan.
  // (Keeping the outputs of buckets that read no changing theta was tried: with the orders
  // the search finds, 99% of the state space reads the varied theta, so it saved nothing.)
  double ln_likelihood(const std::vector<double>& male, const std::vector<double>& female);
  const Plan& plan() const { return plan_.plan; }
  const ConditionedPlan& conditioned_plan() const { return plan_; }
  const Network& network() const { return net_.network(); }

 private:
  // Where each theta-dependent network factor went in the plan: an index into
  // plan_.model.factors, or (as -1 - i) into plan_.model.constants.
  std::vector<std::pair<int, int>> slots_;  // (network factor, slot)
  void refill();
  PedigreeNetwork net_;
  ConditionedPlan plan_;  // conditioned when its tables do not fit the memory limit
  std::function<double(ConditionedPlan&)> runner_;
  std::vector<double> male_, female_;
  bool have_last_ = false;
  double last_ = 0;
};

// Haldane and Kosambi: the recombination fraction across two adjacent intervals, and the
// second interval's fraction given the first and the total (LINKMAP's interior moves).
double combine_thetas(double a, double b, MapFunction f);
double split_theta(double total, double a, MapFunction f);

}  // namespace kinfer::linkage
