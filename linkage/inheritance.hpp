#pragma once
// Multipoint likelihoods over dense marker maps by the inheritance-vector hidden Markov model
// (Lander and Green 1987), as MERLIN computes them: the same network as PedigreeNetwork, but
// eliminated in one fixed order that the general search does not find on long chains:
//   1. per locus, every allele variable is summed out given that locus's selectors (a small
//      variable elimination over the alleles of one locus), leaving the emission: a table over
//      the inheritance vector (one bit per meiosis);
//   2. the selectors are then carried along the map as a Markov chain: each step multiplies in
//      one locus's emission and applies the recombination kernel bit by bit (Haldane: every
//      meiosis recombines independently), bits x 2^bits work per step, linear in the loci.
// The state space per step is the inheritance vector of the people that matter, lumped by
// founder phase:
//   - people with no phenotype at any analysed locus and no such descendant are dropped (their
//     alleles and selectors sum to 1);
//   - founder phase (MERLIN's 2n - f): swapping the two alleles of founder F at one locus, and
//     flipping the selectors of F's children from F at that locus, changes no term (F's allele
//     pair has the symmetric prior p(a) p(b), its phenotype reads the unordered genotype, the
//     children receive the same alleles). So the emission of each locus is invariant under
//     that flip, and so is the chain (the transitions read S_k xor S_k+1, which a flip at every
//     locus keeps). The classes of vectors under these flips form an exact lumped chain: one
//     representative per class has F's first child's selector from F at 0, the transition
//     between classes sums over the two phases of the next locus,
//       K_F(u, w) = (1 - t) prod_j t_j(u_j ^ w_j) + t prod_j t_j(u_j ^ w_j ^ 1),
//     j over F's other children, t the recombination fraction in F's sex. Every founder with a
//     child fixes one bit: bits = meioses kept - founders with children kept.
// Positions of a trait locus between markers share one forward and one backward pass over the
// markers: each position then costs two kernel steps and one product with the trait emission.
// Each emission is kept as its small factor tables (computed once per locus, a few KB), never as
// a 2^bits table; the steps run on a ChainBackend (linkage/chain.hpp: the CPU, or a GPU).
#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "linkage/chain.hpp"
#include "linkage/model.hpp"
#include "linkage/pedigree.hpp"

namespace kinfer::linkage {

class InheritanceModel {
 public:
  // `loci`: every reduced locus of this pedigree the analyses use (markers and the trait); the
  // people kept are those with a phenotype at one of them or a kept descendant.
  // `founder_phase` off keeps every meiosis as a bit (for tests of the lumping);
  // `keep_everyone` keeps every person (genotype posteriors ask about the untyped too).
  InheritanceModel(const Pedigree& ped, const std::vector<const PedigreeLocus*>& loci,
                   bool sex_linked, bool founder_phase = true, bool keep_everyone = false);

  // The chain's ceiling: 2^40 states of 8 bytes are 8 TiB per vector, beyond any machine, and
  // the layout's state masks are 64-bit. A larger pedigree is measured (bits(), meioses(),
  // people_kept()) but not laid out: location_scores throws std::length_error for it.
  static constexpr int kMaxBits = 40;

  int bits() const { return bits_; }
  int meioses() const { return static_cast<int>(meiosis_.size()); }
  int founder_phases() const { return fixed_; }
  int people_kept() const { return kept_; }
  // The state layout (bit positions, kernel regions, founder groups) the backends run on.
  const ChainLayout& layout() const { return layout_; }

  // A trait position: between markers[left] and markers[left + 1] (left = -1: before the first
  // marker, left = markers.size() - 1: after the last), with the recombination fractions from
  // the left marker to the trait and from the trait to the right marker.
  struct Point {
    int left = -1;
    double male_left = 0.5, female_left = 0.5, male_right = 0.5, female_right = 0.5;
  };
  // ln L of the markers (indices into `loci`, map order; thetas between adjacent markers) with
  // the trait locus `trait` (an index into `loci`) at each point; `markers_only` (may be null)
  // receives ln L of the markers alone. -inf where the likelihood is 0. `backend` (null: the
  // CPU, unbounded) runs the steps; its memory decides how many checkpoints are kept.
  std::vector<double> location_scores(const std::vector<int>& markers,
                                      const std::vector<double>& male,
                                      const std::vector<double>& female, int trait,
                                      const std::vector<Point>& points, double* markers_only,
                                      ChainBackend* backend = nullptr);

  // The emission of locus `l` (index into `loci`) over the states, as small factor tables;
  // when the elimination would build a factor of more than `table_limit` entries, as a program
  // evaluated per state on the fly instead (linkage/emission_program.hpp; table_limit 0: always).
  // Throws std::length_error when neither fits. `table_limit` >= 0: instead of the model's.
  Emission emission(int l, double table_limit = -1) const;
  // The same for a locus of this pedigree not among `loci` (another reduction of one of them:
  // a phenotype changed), over the same states; its people must be kept ones.
  Emission emission(const PedigreeLocus& L, double table_limit = -1) const;
  // The max-product emission of locus `l`: max over the alleles (instead of the sum) given the
  // inheritance vector, as factor tables (kinfer haplotypes' Viterbi path, linkage/viterbi.hpp).
  // Exact for the lumped states too: the flip of a founder's phase keeps every term. No
  // per-state program: throws std::length_error when a factor would exceed `table_limit`.
  Emission max_emission(int l, double table_limit = -1) const;
  // Every meiosis kept: the child, the side (0 paternal, 1 maternal), the parent and its state
  // position (-1: fixed at the parent's paternal allele by founder phase).
  struct MeiosisPosition {
    int child, side, parent, position;
  };
  std::vector<MeiosisPosition> meiosis_positions() const;
  // The per-state program of locus `l` (n == 0: this pedigree is beyond the program's limits).
  EmissionProgram program(int l) const { return program(*loci_.at(l)); }
  EmissionProgram program(const PedigreeLocus& L) const;
  bool kept(int person) const { return keep_.at(person) != 0; }
  // Locus L's allele network over the states, before any elimination: summed over its allele
  // variables it is L's emission, so summed over every variable with a table W over the states
  // it is sum_v W(v) e(v). Variables 0..bits-1 are the state bits (the bit at state position p
  // is variable bits-1-p, as in emission()), then the allele variables of the kept people (values
  // in `values`: L's alleles, 0-based). Tables list their variables ascending, the last fastest.
  // Every person has exactly one phenotype table (`person` >= 0) over its paternal and maternal
  // allele variables (a hemizygous male: the maternal one), all ones when untyped, so that the
  // derivative of the sum with respect to it (genotype posteriors:
  // linkage/genotype_cavities.hpp) is that person's cavity. The people the chain does not keep
  // are in it too, their selectors local variables (nothing about them is observed anywhere, so
  // each is 0 or 1 with probability 1/2 independently of the rest).
  struct AlleleNetwork {
    struct Table {
      std::vector<int> vars;
      std::vector<double> t;
      int person = -1;
    };
    std::vector<int> card;
    std::vector<std::vector<int>> values;         // per allele variable v: at values[v - bits]
    std::vector<Table> tables;
    std::vector<std::array<int, 2>> person_vars;  // per person: paternal, maternal (-1: none)
  };
  AlleleNetwork allele_network(const PedigreeLocus& L) const;
  void set_table_limit(double entries) { table_limit_ = entries; }
  // Host bytes location_scores may hold (0: unbounded): the emissions' factor tables and the
  // state vectors together (--max-memory less the rest of the process). A factor is limited to
  // an eighth of what four state vectors leave (a locus beyond: per state on the fly); the
  // emissions are computed in chunks (at most kEmissionChunk loci) that fit in what is free,
  // the largest tables dropped until the rest and one dropped locus fit, and a dropped locus
  // recomputed each time a step needs it (only with a backend that can forget an emission: the
  // CPU); the checkpoints get what is left. Throws std::length_error with the numbers when four
  // vectors and the tables do not fit.
  void set_memory_limit(double bytes) { memory_limit_ = bytes; }
  static constexpr int kEmissionChunk = 16;

  // Where the time of the last location_scores went (seconds; steps counted).
  struct Profile {
    double emission_s = 0, step_s = 0, score_s = 0;
    long steps = 0, score_steps = 0, factors = 0, mixed_factors = 0, programs = 0;
    long dropped = 0, recomputed = 0;  // loci whose tables did not fit: recomputed when needed
    double table_bytes = 0;            // the emissions' factor tables, all loci
    int checkpoint_every = 0;
    bool block_cache = false;
    bool direct = false;  // checkpoints and cached betas read in place (no copies)
  };
  const Profile& profile() const { return profile_; }

  // The walk of location_scores without a trait: for each marker k in map order, `visit(k, B,
  // va, vb, ln_scale, e_k)` with va = K(alpha_k-1) and vb = K(beta_k+1) on backend B (the
  // markers before and after k, each through the kernel to k; 1 at an end of the map), so that
  // B.ln_dot(va, &e, vb) + ln_scale is ln L of the other markers with emission e at k (e_k, the
  // marker's own: ln L of all markers). The visitor must not change va, vb or e_k. Loci as in
  // location_scores; memory as set_memory_limit.
  using MarkerVisitor = std::function<void(int k, ChainBackend& B, int va, int vb, double ln_scale,
                                           const Emission& e_k)>;
  void walk_markers(const std::vector<int>& markers, const std::vector<double>& male,
                    const std::vector<double>& female, const MarkerVisitor& visit,
                    ChainBackend* backend = nullptr);

 private:
  Emission emission_of(const PedigreeLocus& L, double table_limit, bool max) const;
  // The variables of a locus's allele network for the kept people (card: the state bits, then
  // one per allele variable; values: each allele variable's alleles; person_vars), no tables:
  // what emission_of and allele_network start from.
  AlleleNetwork kept_allele_variables(const PedigreeLocus& L) const;
  struct Walk;  // location_scores's steps (location_scores.cpp)
  // What location_scores and walk_markers share: the emissions of `markers` (and of `trait`, an
  // index into loci, when >= 0), the backward pass kept at checkpoints, then `pass` (the forward
  // walk that reads them) on `backend` (null: the CPU, unbounded).
  void walk(const std::vector<int>& markers, const std::vector<double>& male,
            const std::vector<double>& female, int trait, ChainBackend* backend,
            const std::function<void(Walk&)>& pass);
  struct Meiosis {
    int child, side, parent;  // side 0 paternal, 1 maternal
    int bit;                  // state bit, or -1 when fixed at 0 (founder phase)
  };
  const Pedigree& ped_;
  std::vector<const PedigreeLocus*> loci_;
  bool sex_linked_;
  std::vector<char> keep_;
  std::vector<Meiosis> meiosis_;
  std::vector<std::vector<int>> child_meioses_;  // per person: meioses it is the parent of
  int bits_ = 0, fixed_ = 0, kept_ = 0;
  std::vector<int> pos_;  // per bit (the emission's variable id): its state position
  ChainLayout layout_;
  Profile profile_;
  double table_limit_ = 67108864.0;  // 2^26 entries (512 MiB)
  double memory_limit_ = 0;
};

}  // namespace kinfer::linkage
