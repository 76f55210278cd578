#pragma once
// kinfer lod on MERLIN-format input (-d -p -m [-f] --model): one analysis per model line and
// chromosome, multipoint at MERLIN's --grid/--steps/--start/--stop positions or two-point per
// marker (--singlepoint), through the same linkage::analyze as LINKAGE input.
#include <optional>
#include <string>
#include <vector>

#include "linkage/analysis.hpp"

namespace kinfer::app {

struct MerlinLodOptions {
  std::string dat, ped, map, freq, model;
  double grid = 0;  // cM between positions (0: none)
  int steps = 0;    // positions between consecutive markers
  std::optional<double> start, stop;
  bool singlepoint = false;
  std::vector<double> thetas;  // two-point (empty: 0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4)
  bool json = false;
  std::string plot, out;
};

// The map positions (cM) of a multipoint scan over markers at `cm` (sorted): the markers
// themselves, `steps` more between consecutive markers, or every `grid` cM from start (default
// the first marker) to stop (default the last); then only those within [start, stop].
std::vector<double> merlin_positions(const std::vector<double>& cm, double grid, int steps,
                                     std::optional<double> start, std::optional<double> stop);

// Runs every analysis, prints the report (text or JSON), writes --plot and --out. `base`
// carries the plan, reduction and runner options of the command line.
int run_lod_merlin(const MerlinLodOptions& o, const linkage::AnalysisOptions& base);

}  // namespace kinfer::app
