#pragma once
// The pedigree input of `kinfer genotypes` and `kinfer haplotypes`, the analyses of the markers
// alone: LINKAGE files, or MERLIN's with -m (one analysis per chromosome).
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "linkage/model.hpp"

namespace kinfer::app {

struct PedigreeInput {
  std::string ped, dat, map, freq;
};

// -p/--ped, -d/--dat, -m/--map, -f/--freq.
void add_pedigree_input_options(CLI::App& cmd, PedigreeInput& in);

struct MarkerAnalysis {
  std::string chromosome;  // MERLIN input only
  linkage::LocusFile lf;
  linkage::PedigreeFile pf;
};

// CLI::ValidationError for -f without -m (checked before anything else is).
void check_pedigree_input(const PedigreeInput& in);

// Reads the input, logging the readers' warnings and notes (`x_linked_note`: what an X
// chromosome means for the command's output); the readers' errors (InputError: file, line,
// what was expected) pass through.
std::vector<MarkerAnalysis> read_marker_analyses(const PedigreeInput& in, const std::string& command,
                                                 const std::string& x_linked_note);

}  // namespace kinfer::app
