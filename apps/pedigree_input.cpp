#include "apps/pedigree_input.hpp"

#include <spdlog/spdlog.h>

#include "io/linkage.hpp"
#include "io/merlin.hpp"

namespace kinfer::app {

void add_pedigree_input_options(CLI::App& cmd, PedigreeInput& in) {
  cmd.add_option("-p,--ped", in.ped,
                 "pedigree file: LINKAGE (pre- or post-makeped), or MERLIN's with -m")
      ->required();
  cmd.add_option("-d,--dat", in.dat, "LINKAGE locus (data) file, or MERLIN's data file with -m")
      ->required();
  cmd.add_option("-m,--map", in.map,
                 "MERLIN map (CHROMOSOME MARKER POSITION in cM): read -d and -p as MERLIN files "
                 "(one analysis per chromosome)");
  cmd.add_option("-f,--freq", in.freq,
                 "MERLIN allele frequency file (default: counted over all genotyped people)");
}

void check_pedigree_input(const PedigreeInput& in) {
  if (in.map.empty() && !in.freq.empty())
    throw CLI::ValidationError("-f/--freq", "is for MERLIN-format input, which needs -m MAP");
}

std::vector<MarkerAnalysis> read_marker_analyses(const PedigreeInput& in, const std::string& command,
                                                 const std::string& x_linked_note) {
  std::vector<MarkerAnalysis> out;
  if (in.map.empty()) {
    MarkerAnalysis a;
    a.lf = io::read_locus_file(in.dat);
    for (const auto& w : a.lf.warnings) spdlog::warn("{}", w);
    a.pf = io::read_pedigree_file(in.ped, a.lf);
    for (const auto& w : a.pf.warnings) spdlog::warn("{}", w);
    out.push_back(std::move(a));
    return out;
  }
  for (io::MerlinAnalysisInput& m : io::merlin_marker_analyses(
           io::read_merlin_files(in.dat, in.ped, in.map, in.freq), in.map, command)) {
    for (const auto& n : m.notes) spdlog::info("{}", n);
    if (m.x_linked) spdlog::info("chromosome X: {}", x_linked_note);
    if (m.estimated_frequencies)
      spdlog::info("chromosome {}: allele frequencies counted over all genotyped people",
                   m.chromosome);
    out.push_back({m.chromosome, std::move(m.loci), std::move(m.peds)});
  }
  return out;
}

}  // namespace kinfer::app
