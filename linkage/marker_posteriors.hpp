#pragma once
// Multipoint genotype probabilities over a marker map by the inheritance-vector chain
// (linkage/inheritance.hpp): each person's posterior genotype at each marker given the data at
// every marker, and the error check P(observed | all other data).
//
// At marker k, with va = K(alpha_k-1) and vb = K(beta_k+1) from the chain's forward and
// backward passes (the data of every other marker, carried through the recombination kernel to
// k), the likelihood of the other markers with emission e at k is sum_v va(v) e(v) vb(v). So
//   P(G_i = g, all data) = that sum with e the emission of marker k where person i's phenotype is
//                          the genotype g (everyone else's as observed),
//   P(all data but i's genotype at k) = that sum with i's phenotype at k removed,
// and P(observed | others) = P(all data) / P(all data but i's at k). A person typed at k has
// the observed genotype with probability 1 (a marker phenotype is the genotype). Each such
// emission is an exact reduction of the marker's locus (allele recoding and genotype
// elimination of that phenotype set) over the same states, so founder-phase lumping stays exact
// (the flip changes no unordered genotype) and every allele keeps its name (an allele in a
// genotype asked about is typed there, so it is never merged).
#include <cmath>
#include <utility>
#include <vector>

#include "engine/plan.hpp"
#include "linkage/model.hpp"

namespace kinfer::linkage {

// An unordered genotype as input alleles (1-based), the smaller first; a sex-linked male's
// single allele is (0, a).
using UnorderedGenotype = std::pair<int, int>;

// The markers of a locus file in map order (numbered loci; input indices) and the recombination
// fractions between adjacent ones (across any other locus between them: combined).
struct MarkerChainMap {
  std::vector<int> markers;
  std::vector<double> male, female;
};
MarkerChainMap marker_chain_map(const LocusFile& lf);

struct MultipointOptions {
  double max_memory_bytes = 0;      // the process's limit (0: none)
  int max_bits = 24;                // a larger inheritance vector is refused (std::length_error)
  double table_limit = 67108864.0;  // an emission factor's entries at most (else per state)
  // Each marker's candidates from one computation of every person's cavity
  // (linkage/genotype_cavities.hpp) where it fits the memory the candidates would take; false:
  // always one emission per candidate (the path a marker whose cavities do not fit takes).
  bool cavities = true;
};

struct MultipointGenotypes {
  bool network = false;  // computed by multipoint_genotypes_network (bits is then 0)
  int bits = 0;
  double ln_likelihood = 0;  // ln L of the markers in the chain (-inf: impossible)
  // Markers left out of the chain: Mendelian-inconsistent in this pedigree (input indices).
  std::vector<int> left_out;
  struct Cell {
    // Each genotype with a nonzero probability (empty: the data are impossible).
    std::vector<std::pair<UnorderedGenotype, double>> posterior;
    // P(observed | all other data); NaN when untyped or when the other data are impossible.
    double p_given_others = std::nan("");
  };
  std::vector<int> markers;             // input indices, map order: the chain's markers
  std::vector<std::vector<Cell>> cell;  // [index into markers][person]
  // Where the time went (seconds): the walk (its emissions and steps), the candidates'
  // emissions, their sums against the walk's vectors; candidates computed.
  double walk_s = 0, emission_s = 0, sum_s = 0;
  long candidates = 0;
  // Markers whose candidates all came from one cavity computation
  // (linkage/genotype_cavities.hpp), and its seconds; the others' candidates are counted above.
  double cavity_s = 0;
  long cavity_markers = 0;
};

// Throws std::length_error (with the numbers) when the pedigree's inheritance vector has more
// than opt.max_bits bits or the chain does not fit opt.max_memory_bytes.
MultipointGenotypes multipoint_genotypes(const Pedigree& ped, const LocusFile& lf,
                                         const MarkerChainMap& map, const MultipointOptions& opt);

// The same answers through the pedigree network of every consistent marker (linkage/network.hpp,
// the thetas of `map`), for a pedigree whose chain is too large: one posterior-marginal
// computation over the network with one more variable per untyped person and marker (the
// unordered genotype, a deterministic function of that person's alleles there) gives every
// untyped person's posteriors; each typed person and marker costs one likelihood of the network
// without that genotype, for P(observed | others) = L / L(without it). Exact, and much slower
// than the chain where the chain fits. Plans under `po` (its memory limit: conditioned to fit,
// ResourceError when nothing fits).
MultipointGenotypes multipoint_genotypes_network(const Pedigree& ped, const LocusFile& lf,
                                                 const MarkerChainMap& map, const PlanOptions& po);

}  // namespace kinfer::linkage
