#pragma once
// Genetic linkage data as the LINKAGE files describe it: loci (locus file) and pedigrees
// (pedigree file). Plain data, no file format here (io/linkage.hpp reads and writes them).
// Specification: docs/linkage-model.md.
#include <string>
#include <vector>

namespace kinfer::linkage {

enum class LocusType { Affection = 1, Numbered = 3 };

struct Locus {
  std::string name;
  LocusType type = LocusType::Numbered;
  int n_alleles = 0;
  std::vector<double> freq;  // per allele, index 0 = allele 1
  // Affection loci: per liability class, P(status 2 | unordered genotype) in the order
  // (1,1),(1,2),...,(1,n),(2,2),...,(n,n); sex-linked loci add one value per allele for males.
  std::vector<std::vector<double>> penetrance;
  std::vector<std::vector<double>> male_penetrance;
  // Allele names as the input wrote them, index 0 = allele 1 (MERLIN files name alleles freely:
  // 152, A); empty when the alleles are the numbers 1..n themselves (LINKAGE files).
  std::vector<std::string> labels;
  long line = 0;  // header line in the locus file
  // Allele a (1-based) as the user wrote it.
  std::string allele_name(int a) const {
    return a >= 1 && a <= static_cast<int>(labels.size()) ? labels[a - 1] : std::to_string(a);
  }
  int n_classes() const { return static_cast<int>(penetrance.size()); }
};

// Index of the unordered genotype {a, b} (alleles 1-based) in a penetrance line.
int genotype_index(int a, int b, int n_alleles);

enum class MapFunction { Haldane, Kosambi };

// Map distance (Morgans) of a recombination fraction and back. theta 0.5 is infinitely far.
double theta_to_morgans(double theta, MapFunction f);
double morgans_to_theta(double morgans, MapFunction f);

// The program-specific last line of a locus file, kept as read; what it means depends on the
// program (MLINK: which_theta increment finish; LINKMAP: moving_locus stop_theta gridsize).
struct Tail {
  bool present = false;
  long line = 0;
  std::vector<std::string> fields;  // as written (LINKMAP's gridsize must be an integer)
  std::vector<double> values;
};

struct LocusFile {
  std::string path;
  int risk_locus = 0;  // 1-based, 0 = none
  bool sex_linked = false;
  int program = 0;             // the code on line 1, informational
  std::vector<int> map_order;  // input locus index (0-based) at each map position
  std::vector<Locus> loci;     // input order
  int sex_difference = 0;      // 0 none, 1 constant female/male distance ratio, 2 separate thetas
  MapFunction map_function = MapFunction::Haldane;
  std::vector<double> male_theta;    // between adjacent map positions (nloci - 1)
  std::vector<double> female_theta;  // equals male_theta without a sex difference
  double distance_ratio = 1.0;       // sex_difference 1
  Tail tail;
  std::vector<std::string> warnings;  // what was read leniently (tell the user)
  int n_loci() const { return static_cast<int>(loci.size()); }
  // Female thetas for the given male thetas under this file's sex-difference model.
  std::vector<double> female_for(const std::vector<double>& male) const;
};

// Phenotype at one locus. Numbered alleles: a1, a2 in 1..n or 0 (untyped; a sex-linked male has
// one allele, a2 = 0 or a2 = a1). Affection: a1 = status 0 (unknown), 1 (unaffected), 2
// (affected); a2 = liability class, 1-based.
struct Phenotype {
  int a1 = 0, a2 = 0;
};

struct Person {
  std::string id;
  int father = -1, mother = -1;  // index into Pedigree::people, -1 for a founder
  int sex = 1;                   // 1 male, 2 female
  std::vector<Phenotype> pheno;  // input locus order
  long line = 0;                 // line in the pedigree file
  bool founder() const { return father < 0; }
};

struct Pedigree {
  std::string id;
  std::vector<Person> people;
  bool has_loop = false;  // the graph of matings and offspring has a cycle (loop or inbreeding)
};

struct PedigreeFile {
  std::string path;
  bool post_makeped = false;
  int merged_loop_breakers = 0;
  std::vector<Pedigree> pedigrees;    // in order of first appearance
  std::vector<std::string> warnings;  // e.g. a pedigree in unconnected parts
};

}  // namespace kinfer::linkage
