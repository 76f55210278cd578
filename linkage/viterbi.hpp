#pragma once
// The most likely inheritance over a marker map by the Lander-Green chain in the max-times
// semiring (Viterbi): max over (founder alleles, selectors at every marker) of
// P(configuration, data), the objective of kinfer haplotypes' network path, for pedigrees whose
// inheritance vector fits (docs/haplotypes.md).
//   - Emission of a marker: InheritanceModel::max_emission, the alleles maximised out given the
//     vector (factor tables).
//   - Transition: per state bit a 2x2 max-times butterfly (x[w] <- max((1-t) x[w], t x[w^b])),
//     per founder group (founder-phase lumping) the same on the flip of the group's mask. The
//     lumping stays exact for the max: the emissions do not depend on a founder's phase, and the
//     phase at each marker enters the transitions only through its change d between adjacent
//     markers, free and independent per interval and founder, so the class chain takes the max
//     over d where the sum-product chain sums; a founder with one child kept (an empty group)
//     adds max(1 - t, t) per interval.
//   - Traceback: the state at marker k - 1 maximising delta_{k-1}(s') K(s', s_k), K(s', s) a
//     function of s' xor s (popcounts per theta and group); each group's phase change is the
//     d attaining the group's max. The deltas are kept at every marker when they fit the memory
//     limit, else at checkpoints every C markers and recomputed a block at a time.
#include <array>
#include <vector>

#include "linkage/inheritance.hpp"
#include "linkage/model.hpp"

namespace kinfer::linkage {

struct ViterbiPath {
  double ln_max = 0;  // ln max P(configuration, data); -inf: no configuration is possible
  // [marker][person][side]: the selector (0: the parent's paternal allele, 1: its maternal one),
  // -1 where the person has no meiosis on that side (founders; sex-linked: a father's X).
  std::vector<std::vector<std::array<int, 2>>> selectors;
  int checkpoint_every = 1;  // 1: every marker's delta kept
  long emissions_recomputed = 0;
  double emission_s = 0, forward_s = 0, traceback_s = 0;
  double recompute_s = 0;  // of traceback_s: the blocks of deltas recomputed from checkpoints
};

// `im`: the model over the markers (every locus index 0..M-1 in map order, everyone kept);
// male/female: the recombination fractions between adjacent markers; `max_bytes` (0: no bound)
// bounds the state vectors and the kept emissions. Throws std::length_error when the vectors
// (checkpoints and one block) or a marker's max-product emission tables do not fit.
ViterbiPath viterbi_path(const InheritanceModel& im, const Pedigree& ped, int markers,
                         const std::vector<double>& male, const std::vector<double>& female,
                         bool sex_linked, double max_bytes);

}  // namespace kinfer::linkage
