#pragma once
// kinfer lod's reports: the FASTLINK-like text of one LINKAGE analysis, the JSON object
// (`--json`, lod.json), the LOD scan with HLOD and alpha (LINKAGE and MERLIN input), the
// pedigrees' bit counts, and the LOD and HLOD curves drawn with gnuplot (`--plot`, lod.svg).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "linkage/analysis.hpp"
#include "linkage/hlod.hpp"
#include "linkage/model.hpp"

namespace kinfer::app {

// One point of a LOD scan: a map position (multipoint), or a theta (two-point; with the marker
// when each marker is its own two-point analysis).
struct ScanPoint {
  std::string marker;  // two-point per marker: the marker
  double x = 0;        // plotted abscissa: cM (positions, markers) or theta (one MLINK analysis)
  bool has_x = true;   // false: LINKMAP's unlinked point
  double theta = -1;   // two-point: theta; -1 for map positions
  double lod = 0;
  std::vector<double> family_lods;
  linkage::Hlod hlod;
};

// The points of one analysis with per-family LODs and HLOD: MLINK per varied theta, LINKMAP per
// position (+ offset_cm, MERLIN input's chromosome coordinate of the first marker).
std::vector<ScanPoint> scan_points(const linkage::AnalysisResult& r, double offset_cm = 0,
                                   const std::string& marker = "");
// The point of largest LOD (by_hlod: largest HLOD); nullptr for none.
const ScanPoint* scan_peak(const std::vector<ScanPoint>& points, bool by_hlod);
// A table (position or marker and theta, LOD, ALPHA, HLOD, per-family LODs up to 8 families)
// and the peaks, with the per-family LODs at the LOD peak.
std::string scan_report(const std::vector<ScanPoint>& points, const std::vector<std::string>& peds,
                        bool position_in_cm);
// {"points": [...], "peak": {...}, "peak_hlod": {...}}
nlohmann::json scan_json(const std::vector<ScanPoint>& points,
                         const std::vector<std::string>& peds);

// Per pedigree: people, founders and bits 2n - f, noting those beyond MERLIN's 24 bits (MERLIN
// input: what its users compare with).
std::string bits_report(const linkage::PedigreeFile& pf);
nlohmann::json bits_json(const linkage::PedigreeFile& pf);
// LINKAGE input: per pedigree, people and founders; for LINKMAP also the bits 2n - f and the
// method that computed it (the Lander-Green chain and its bits, or the network).
std::string pedigree_report(const linkage::PedigreeFile& pf, const linkage::AnalysisResult& r);
nlohmann::json pedigree_json(const linkage::PedigreeFile& pf, const linkage::AnalysisResult& r);

std::string lod_text_report(const linkage::AnalysisResult& r, const linkage::LocusFile& lf,
                            const linkage::PedigreeFile& pf);

nlohmann::json lod_json_report(const linkage::AnalysisResult& r, const linkage::LocusFile& lf,
                               const linkage::PedigreeFile& pf, const std::string& ped_path,
                               const std::string& dat_path, double seconds);

// --out DIR: writes lod.txt (the text) and lod.json there, and returns the picture to draw:
// --plot (relative to DIR), else DIR/lod.svg when gnuplot is installed. Without DIR: --plot.
std::string write_lod_outputs(const std::string& out_dir, const std::string& plot,
                              const std::string& text, const nlohmann::json& j);
// Before computing: --out and --plot can be written (the picture's extension and gnuplot too).
// CLI::ValidationError or InputError naming the path.
void check_lod_outputs(const std::string& out_dir, const std::string& plot);

struct PlotAxes {
  std::string xlabel;
  std::optional<std::pair<double, double>> xrange;
  std::vector<std::pair<std::string, double>> ticks;  // markers along the top
  std::string suffix;                                 // appended to the curves' titles
};
// Draws LOD and HLOD against the points' x to `path` (.svg or .png). Throws InputError when
// gnuplot is missing or fails, CLI::ValidationError for another extension.
void draw_lod_curves(const std::string& path, const std::vector<ScanPoint>& points,
                     const PlotAxes& axes);
// LOD and HLOD against theta (MLINK) or map position (LINKMAP).
void write_lod_plot(const std::string& path, const linkage::AnalysisResult& r,
                    const linkage::LocusFile& lf);

}  // namespace kinfer::app
