#pragma once
// kinfer lod's reports of one analysis: the FASTLINK-like text, the JSON object (`--json`,
// lod.json) and the LOD curve drawn with gnuplot (`--plot`, lod.svg).
#include <nlohmann/json.hpp>
#include <string>

#include "linkage/analysis.hpp"
#include "linkage/model.hpp"

namespace kinfer::app {

std::string lod_text_report(const linkage::AnalysisResult& r, const linkage::LocusFile& lf,
                            const linkage::PedigreeFile& pf);

nlohmann::json lod_json_report(const linkage::AnalysisResult& r, const linkage::LocusFile& lf,
                               const linkage::PedigreeFile& pf, const std::string& ped_path,
                               const std::string& dat_path, double seconds);

// Draws LOD against theta (MLINK) or map position (LINKMAP) to `path` (.svg or .png). Throws
// InputError when gnuplot is missing or fails, CLI::ValidationError for another extension.
void write_lod_plot(const std::string& path, const linkage::AnalysisResult& r,
                    const linkage::LocusFile& lf);

}  // namespace kinfer::app
