#pragma once
// MERLIN (QTDT-format) input: the data file (.dat), pedigree file (.ped), map (.map), allele
// frequencies (.freq) and the parametric model file (--model), read into the same
// linkage::LocusFile / PedigreeFile the LINKAGE parsers produce, so the analysis path is shared.
// Every error names the file, the line, the column and what was expected (InputError).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "linkage/model.hpp"

namespace kinfer::io {

// .dat: one item per line, `TYPE NAME`: A affection, M marker, T trait, C covariate,
// Z zygosity, S[n] skip n columns, E end of file.
struct MerlinItem {
  char type = 'M';
  std::string name;
  int columns = 1;  // pedigree-file columns it takes (a marker takes 1 or 2, see the ped reader)
  long line = 0;
};
struct MerlinData {
  std::string path;
  std::vector<MerlinItem> items;
  std::vector<std::string> notes;  // items kinfer reads past (traits, covariates, ...)
};
MerlinData parse_merlin_dat(const std::string& path, const std::string& text);

// .ped: FAMILY PERSON FATHER MOTHER SEX, then the .dat items. Alleles are labels: `1/2`, `1 2`,
// letters A/C/G/T (read as 1/2/3/4); missing `0`, `x`, `N` (either allele) or `0/0`.
struct MerlinGenotype {
  std::string a1, a2;  // normalised labels; "" = missing
  int column = 0;      // the first field of the genotype on its line
};
struct MerlinPerson {
  std::string family, id, father, mother;  // father/mother "0" for none
  int sex = 1;                             // 1 male, 2 female
  long line = 0;
  std::vector<int> status;                // per affection item: 0 unknown, 1, 2
  std::vector<int> status_column;         // per affection item
  std::vector<MerlinGenotype> genotypes;  // per marker item
};
struct MerlinPedigree {
  std::string path;
  long last_line = 0;
  std::vector<MerlinPerson> people;
};
MerlinPedigree parse_merlin_ped(const std::string& path, const std::string& text,
                                const MerlinData& dat);

// .map: CHROMOSOME MARKER POSITION (cM), with or without a header line.
struct MerlinMapEntry {
  std::string chromosome, marker;
  double cm = 0;
  long line = 0;
};
struct MerlinMap {
  std::string path;
  std::vector<MerlinMapEntry> markers;  // as listed
  std::vector<std::string> notes;
};
MerlinMap parse_merlin_map(const std::string& path, const std::string& text);

// .freq: `M name` then `F f1 f2 ...` (alleles 1, 2, ...) or `A label freq` lines.
struct MerlinAlleles {
  std::vector<std::string> labels;  // normalised
  std::vector<double> freq;
  long line = 0;
};
struct MerlinFreq {
  std::string path;
  std::map<std::string, MerlinAlleles> markers;
};
MerlinFreq parse_merlin_freq(const std::string& path, const std::string& text);

// --model: `AFFECTION_NAME DISEASE_ALLELE_FREQ PEN0,PEN1,PEN2 LABEL` (penetrances for 0, 1 and
// 2 copies of the disease allele; three separate fields are accepted too), an optional header.
struct MerlinModel {
  std::string trait, label;
  double freq = 0;
  double pen[3] = {0, 0, 0};
  long line = 0;
};
std::vector<MerlinModel> parse_merlin_model(const std::string& path, const std::string& text);

// An allele label as kinfer keeps it: A/C/G/T (either case) become 1/2/3/4; "" for missing.
std::string normalise_allele(const std::string& label);

// One linkage analysis built from the MERLIN files: the trait of `model` and the markers of
// one chromosome, in map order, in the LINKAGE structures.
struct MerlinAnalysisInput {
  std::string chromosome;
  bool x_linked = false;
  linkage::LocusFile loci;     // locus 0 is the trait; map order trait, then the markers
  linkage::PedigreeFile peds;  // read against `loci`
  std::vector<double> cm;      // chromosome position of each marker (loci 1..)
  bool estimated_frequencies = false;
  std::vector<std::string> notes;
};

struct MerlinFiles {
  MerlinData dat;
  MerlinPedigree ped;
  MerlinMap map;
  MerlinFreq freq;
  bool have_freq = false;
  std::vector<std::string> ped_lines;  // the .ped text by line (for messages)
};

// Reads the files (freq_path may be empty: frequencies are then counted over all genotyped
// people, as MERLIN does by default).
MerlinFiles read_merlin_files(const std::string& dat_path, const std::string& ped_path,
                              const std::string& map_path, const std::string& freq_path);
std::vector<MerlinModel> read_merlin_model(const std::string& path);

// The chromosomes of the map that carry markers of the data file, in the map's order.
std::vector<std::string> merlin_chromosomes(const MerlinFiles& f);

// The analysis input for one model and one chromosome. Markers of the data file missing from
// the map are left out (noted); an `X` chromosome gives an X-linked analysis (males carry one
// allele; a male's penetrance is the homozygous one).
MerlinAnalysisInput merlin_analysis_input(const MerlinFiles& f, const MerlinModel& model,
                                          const std::string& model_path,
                                          const std::string& chromosome);

// The markers alone (kinfer genotypes, haplotypes), one analysis per chromosome: the reader
// builds each around a trait, so an affection item nobody's status is known at is added for it
// (it is not a marker, so it changes nothing), and the notes about its penetrance are dropped.
// `command` names the trait in messages.
std::vector<MerlinAnalysisInput> merlin_marker_analyses(MerlinFiles f, const std::string& map_path,
                                                        const std::string& command);

// Allele frequencies counted over every genotyped person (MERLIN's default): per marker item
// of the data file, the labels (sorted, numerically where all are numbers) and frequencies.
// Markers on chromosome X (`x_markers`) count one allele per male.
std::map<std::string, MerlinAlleles> estimate_frequencies(const MerlinData& dat,
                                                          const MerlinPedigree& ped,
                                                          const std::set<std::string>& x_markers);

}  // namespace kinfer::io
