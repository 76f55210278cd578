#pragma once
// The most likely phased haplotypes of a pedigree over all marker loci jointly (multipoint):
// each person's paternal and maternal allele at every marker and, for non-founders, which of the
// parent's two alleles was received (the inheritance), as the exact most probable explanation
// (engine/posterior.hpp compute_mpe: max-product, then a deterministic traceback) of the
// pedigree network over the marker chain (linkage/network.hpp), without allele recoding so that
// every allele keeps its name. docs/haplotypes.md.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "linkage/model.hpp"
#include "linkage/pedigree.hpp"

namespace kinfer::linkage {

// The numbered (marker) loci of a locus file in map order and the recombination fractions
// between adjacent ones. Affection loci are left out: the fraction across one is the two
// intervals combined by the file's map function.
struct MarkerChain {
  std::vector<int> loci;             // input indices, map order
  std::vector<double> male, female;  // per interval (loci.size() - 1)
  bool kosambi = false;              // the locus file's map function (linkage/network.hpp)
};
MarkerChain marker_chain(const LocusFile& lf);

// Every chain locus of every pedigree reduced without allele recoding (genotype elimination
// only): [pedigree][chain position]. InputError naming the pedigree, the marker and the people
// of each Mendelian inconsistency.
std::vector<std::vector<PedigreeLocus>> reduce_markers(const PedigreeFile& pf, const LocusFile& lf,
                                                       const MarkerChain& chain);

struct PersonHaplotypes {
  // Per marker (chain order): input alleles (1-based). A sex-linked male has no paternal
  // allele (0).
  std::vector<int> paternal, maternal;
  // Per marker: which of the parent's two alleles this one is: 0 the parent's paternal allele
  // (from the grandfather), 1 the parent's maternal allele (from the grandmother); -1 for
  // founders and a sex-linked male's paternal side. (A daughter's paternal allele at a
  // sex-linked locus is her father's one X: always 1.)
  std::vector<int> paternal_origin, maternal_origin;
  // Per side (paternal, maternal): the intervals (i: between markers i and i + 1) where the
  // origin changes, i.e. a recombination in that meiosis.
  std::vector<int> recombinations[2];
};

struct PedigreeHaplotypes {
  std::string pedigree;
  double ln_pr = 0;   // ln P(configuration, data): the configuration's own probability
  double ln_max = 0;  // ln max over configurations, as the max-product pass computed it
  std::vector<PersonHaplotypes> people;  // in the pedigree's order
  int recombinations = 0;
  bool founders_swapped = false;  // the tie rule swapped some founder's haplotypes
  // The plan: conditioned into `slices` when it did not fit the memory limit.
  std::int64_t slices = 1;
  int width = 0;
  double log2_max_table = 0, peak_bytes = 0;
  // The path that computed it: the network's MPE, or the Lander-Green chain's Viterbi (with its
  // bit count and, when the deltas did not all fit, the checkpoint interval).
  bool chain = false;
  int bits = 0, checkpoint_every = 1;
  double chain_s = 0;  // the chain's emissions, passes and traceback
};


// The most likely configuration of one pedigree. `loci`: reduce_markers' row of this pedigree.
// Ties: the traceback's (lowest values first in the elimination order's buckets), then each
// founder's two haplotypes put so that at the first marker where the founder is heterozygous
// the paternal allele is the smaller number (the same probability: the children's origins
// from that founder flip with them). ResourceError when the plan (every bucket's output kept
// for the traceback) does not fit plan.max_memory_bytes even conditioned; InputError (`path`
// named) when no configuration has a positive probability (markers at theta 0 whose
// inheritance the data contradict).
PedigreeHaplotypes most_likely_haplotypes(const Pedigree& ped,
                                          const std::vector<PedigreeLocus>& loci,
                                          const MarkerChain& chain, const PlanOptions& plan,
                                          const std::string& path);

// The bits of the pedigree's chain for the haplotypes (every person kept: the untyped ones'
// alleles are printed too; less one per founder with children), or -1 when the chain does not
// apply (a Kosambi map over exactly three markers: FASTLINK's interference is not Markov).
int haplotypes_chain_bits(const Pedigree& ped, const std::vector<PedigreeLocus>& loci,
                          const MarkerChain& chain);

// The same answer (the same maximum; ties may resolve differently, docs/haplotypes.md) by the
// Lander-Green chain in the max-times semiring (linkage/viterbi.hpp): the most likely
// inheritance vector at every marker, then at each marker the founder alleles attaining the
// max given it (the one-marker network's MPE with the selectors as evidence), the founders'
// tie rule as above, and the configuration's probability recomputed from the multi-locus
// network's tables. std::length_error when the chain does not fit plan.max_memory_bytes (the
// caller may run the network instead); ResourceError when the recomputed probability is not
// the chain's maximum (not expected: the answer is withheld rather than possibly wrong).
PedigreeHaplotypes most_likely_haplotypes_chain(const Pedigree& ped,
                                                const std::vector<PedigreeLocus>& loci,
                                                const MarkerChain& chain,
                                                const PlanOptions& plan, const std::string& path);

}  // namespace kinfer::linkage
