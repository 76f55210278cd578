#pragma once
// One locus of one pedigree, reduced before the network is built (linkage-model.md 1.3):
//   allele recoding: alleles nobody in the pedigree is typed with merge into one allele with
//     the summed frequency (numbered loci only);
//   genotype elimination (Lange and Goradia 1987): ordered genotypes that no consistent
//     assignment of the nuclear families can use are removed, iterated to a fixed point.
// Neither changes the likelihood (tests/test_linkage_network.cpp checks both).
#include <string>
#include <vector>

#include "linkage/model.hpp"

namespace kinfer::linkage {

struct ReductionOptions {
  bool recode = true;
  bool eliminate = true;
  bool joint_genotypes = true;  // see PedigreeNetwork (linkage/network.hpp)
};

// A Mendelian inconsistency: no genotypes fit the phenotypes of these individuals.
struct Inconsistency {
  std::string pedigree;
  int locus = -1;                        // input index
  std::vector<std::string> individuals;  // the nuclear family (or one person) where it shows
  std::string detail;
};

struct PedigreeLocus {
  int locus = -1;  // input index
  bool sex_linked = false;
  int n_alleles = 0;  // after recoding
  std::vector<double> freq;
  std::vector<int> original;  // recoded allele -> original allele (1-based), 0 = merged ones
  // Per person: weight of each ordered genotype, index p * n + m (0-based alleles; a
  // sex-linked male has only m, index m). 0 = impossible; else the penetrance of the phenotype
  // (1 for markers).
  std::vector<std::vector<double>> weight;
  // Per person: alleles still possible on the paternal and the maternal side (sorted).
  std::vector<std::vector<int>> dom_p, dom_m;
  bool carries_paternal(const Person& p) const { return !(sex_linked && p.sex == 1); }
};

// Throws nothing; sets `err` (and returns a partial result) on a Mendelian inconsistency.
PedigreeLocus reduce_locus(const Pedigree& ped, const LocusFile& lf, int locus,
                           const ReductionOptions& opt, Inconsistency* err);

// A one-line description of an inconsistency for messages.
std::string describe(const Inconsistency& e, const LocusFile& lf, const Pedigree& ped);

}  // namespace kinfer::linkage
