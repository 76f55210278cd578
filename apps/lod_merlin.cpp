#include "apps/lod_merlin.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "apps/lod_report.hpp"
#include "engine/errors.hpp"
#include "io/fields.hpp"
#include "io/merlin.hpp"
#include "mpi/distributed.hpp"

namespace kinfer::app {

namespace lk = kinfer::linkage;

std::vector<double> merlin_positions(const std::vector<double>& cm, double grid, int steps,
                                     std::optional<double> start, std::optional<double> stop) {
  std::vector<double> out;
  const double lo = start.value_or(cm.front()), hi = stop.value_or(cm.back());
  if (grid > 0) {
    for (long i = 0; lo + i * grid <= hi + 1e-9 * std::max(1.0, std::abs(hi)); ++i)
      out.push_back(lo + i * grid);
  } else {
    for (std::size_t i = 0; i < cm.size(); ++i) {
      out.push_back(cm[i]);
      if (i + 1 < cm.size())
        for (int s = 1; s <= steps; ++s)
          out.push_back(cm[i] + (cm[i + 1] - cm[i]) * s / (steps + 1));
    }
  }
  std::vector<double> kept;
  for (double x : out)
    if (x >= lo - 1e-9 && x <= hi + 1e-9) kept.push_back(x);
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end(),
                         [](double a, double b) { return std::abs(a - b) < 1e-9; }),
             kept.end());
  return kept;
}

namespace {

std::string num(double x, int prec) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}

struct Done {
  std::string label, chromosome, text;
  nlohmann::json json;
  std::vector<ScanPoint> points, plotted;  // two-point: plotted = the best theta per marker
  PlotAxes axes;
};

// The two-locus input (trait, marker k) of a two-point analysis.
void two_locus(const io::MerlinAnalysisInput& in, int k, lk::LocusFile& lf, lk::PedigreeFile& pf) {
  lf = in.loci;
  lf.loci = {in.loci.loci[0], in.loci.loci[k]};
  lf.map_order = {0, 1};
  lf.male_theta = lf.female_theta = {0.5};
  pf = in.peds;
  for (lk::Pedigree& p : pf.pedigrees)
    for (lk::Person& q : p.people) q.pheno = {q.pheno[0], q.pheno[k]};
}

}  // namespace

namespace {

// Sums of one analysis's plans and runs over the analyses of its markers.
void add_timing(lk::AnalysisTiming& sum, const lk::AnalysisTiming& t) {
  sum.plans += t.plans;
  sum.runs += t.runs;
  sum.plan_s += t.plan_s;
  sum.evaluate_s += t.evaluate_s;
  sum.max_width = std::max(sum.max_width, t.max_width);
  sum.log2_max_table = std::max(sum.log2_max_table, t.log2_max_table);
}

// Two-point: the trait against each marker alone at every theta (MLINK); plotted, per
// marker, its best LOD and HLOD over the thetas.
lk::AnalysisTiming two_point_scan(const io::MerlinAnalysisInput& in,
                                  const lk::AnalysisOptions& base,
                                  const std::vector<double>& thetas, Done& d) {
  lk::AnalysisTiming timing;
  const int nm = static_cast<int>(in.cm.size());
  for (int k = 1; k <= nm; ++k) {
    lk::LocusFile lf;
    lk::PedigreeFile pf;
    two_locus(in, k, lf, pf);
    lk::AnalysisOptions ao = base;
    ao.program = lk::Program::Mlink;
    ao.thetas = thetas;
    const lk::AnalysisResult r = lk::analyze(lf, pf, ao);
    ScanPoint best;
    best.x = in.cm[k - 1];
    best.lod = best.hlod.hlod = -INFINITY;
    for (ScanPoint p : scan_points(r, 0, lf.loci[1].name)) {
      p.x = in.cm[k - 1];
      best.lod = std::max(best.lod, p.lod);
      best.hlod.hlod = std::max(best.hlod.hlod, p.hlod.hlod);
      d.points.push_back(std::move(p));
    }
    d.plotted.push_back(best);
    add_timing(timing, r.timing);
  }
  return timing;
}

// Multipoint: the trait moved over the map positions (--grid/--steps, --start/--stop) of
// the chromosome's markers (LINKMAP); its notes are added to `notes`.
lk::AnalysisTiming multipoint_scan(const io::MerlinAnalysisInput& in, const MerlinLodOptions& o,
                                   const lk::AnalysisOptions& base, Done& d,
                                   std::vector<std::string>& notes) {
  const std::vector<double> pos = merlin_positions(in.cm, o.grid, o.steps, o.start, o.stop);
  if (pos.empty())
    throw CLI::ValidationError(
        "--start", "no map position between --start and --stop on chromosome " + in.chromosome);
  lk::AnalysisOptions ao = base;
  ao.program = lk::Program::Linkmap;
  ao.moving_locus = 1;
  for (double x : pos) ao.positions.push_back(x - in.cm.front());
  const lk::AnalysisResult r = lk::analyze(in.loci, in.peds, ao);
  for (const auto& n : r.notes) notes.push_back(n);
  d.points = scan_points(r, in.cm.front());
  d.plotted = d.points;
  return r.timing;
}

// The text report of one analysis: the model, the markers, the frequencies' source, the
// notes, the pedigrees' sizes and the scan.
std::string analysis_text(const MerlinLodOptions& o, const io::MerlinModel& model,
                          const io::MerlinAnalysisInput& in, bool have_freq,
                          const std::vector<std::string>& notes,
                          const std::vector<std::string>& peds, const Done& d) {
  const int nm = static_cast<int>(in.cm.size());
  std::ostringstream s;
  s << "kinfer lod: MERLIN input, model " << model.label << " (" << model.trait
    << ": disease allele frequency " << io::fmt(model.freq) << ", penetrances "
    << io::fmt(model.pen[0]) << ' ' << io::fmt(model.pen[1]) << ' ' << io::fmt(model.pen[2])
    << "), chromosome " << in.chromosome << (in.x_linked ? " (X-linked)" : "") << ", "
    << (o.singlepoint ? "two-point" : "multipoint") << ", " << nm << " marker(s), "
    << in.peds.pedigrees.size() << " pedigree(s)\n";
  s << "MARKERS (cM, Haldane):";
  for (int k = 1; k <= nm; ++k) s << "  " << in.loci.loci[k].name << ' ' << num(in.cm[k - 1], 2);
  s << '\n';
  s << "ALLELE FREQUENCIES: "
    << (have_freq ? "from " + o.freq
                  : std::string("estimated from the data (allele counts over all "
                                "genotyped individuals; no -f file)"))
    << '\n';
  for (const auto& n : notes) s << "NOTE: " << n << '\n';
  s << bits_report(in.peds);
  s << scan_report(d.points, peds, true);
  return s.str();
}

// The --json object of one analysis.
nlohmann::json analysis_json(const MerlinLodOptions& o, const io::MerlinModel& model,
                             const io::MerlinAnalysisInput& in, bool have_freq,
                             const std::vector<std::string>& notes,
                             const std::vector<std::string>& peds, const Done& d,
                             const lk::AnalysisTiming& timing) {
  const int nm = static_cast<int>(in.cm.size());
  nlohmann::json j = scan_json(d.points, peds);
  j["model"] = {{"label", model.label},
                {"trait", model.trait},
                {"disease_allele_frequency", model.freq},
                {"penetrances", {model.pen[0], model.pen[1], model.pen[2]}}};
  j["chromosome"] = in.chromosome;
  j["x_linked"] = in.x_linked;
  j["analysis"] = o.singlepoint ? "two-point" : "multipoint";
  nlohmann::json mk = nlohmann::json::array();
  for (int k = 1; k <= nm; ++k)
    mk.push_back({{"name", in.loci.loci[k].name}, {"position", in.cm[k - 1]}});
  j["markers"] = mk;
  j["allele_frequencies"] = have_freq ? o.freq : "estimated from the data";
  j["pedigree_bits"] = bits_json(in.peds);
  j["notes"] = notes;
  j["timings"] = {{"plan", timing.plan_s},
                  {"evaluate", timing.evaluate_s},
                  {"plans", timing.plans},
                  {"runs", timing.runs}};
  j["largest_plan"] = {{"width", timing.max_width}, {"log2_max_table", timing.log2_max_table}};
  return j;
}

// One analysis: a model on one chromosome, two-point or multipoint, with its report.
Done run_analysis(const MerlinLodOptions& o, const lk::AnalysisOptions& base,
                  const io::MerlinFiles& files, const io::MerlinModel& model,
                  const io::MerlinAnalysisInput& in, const std::vector<double>& thetas) {
  Done d;
  d.label = model.label;
  d.chromosome = in.chromosome;
  std::vector<std::string> notes = in.notes;
  std::vector<std::string> peds;
  for (const lk::Pedigree& p : in.peds.pedigrees) peds.push_back(p.id);
  const lk::AnalysisTiming timing =
      o.singlepoint ? two_point_scan(in, base, thetas, d) : multipoint_scan(in, o, base, d, notes);
  const int nm = static_cast<int>(in.cm.size());
  for (int k = 1; k <= nm; ++k) d.axes.ticks.push_back({in.loci.loci[k].name, in.cm[k - 1]});
  d.axes.xlabel = "position on chromosome " + in.chromosome + " (cM, Haldane)";
  d.axes.suffix = o.singlepoint ? " (two-point, best theta)" : "";
  d.text = analysis_text(o, model, in, files.have_freq, notes, peds, d);
  d.json = analysis_json(o, model, in, files.have_freq, notes, peds, d, timing);
  return d;
}

// With several analyses: each one's highest LOD, after their reports.
std::string peaks_text(const std::vector<Done>& done) {
  std::string text = "PEAKS\n";
  for (const Done& d : done) {
    const ScanPoint* p = scan_peak(d.points, false);
    if (!p) continue;
    text += "  model " + d.label + ", chromosome " + d.chromosome + ": LOD " + num(p->lod, 4) +
            " at " + (p->marker.empty() ? "" : p->marker + " ") + num(p->x, 2) + " cM" +
            (p->theta >= 0 ? " theta " + num(p->theta, 4) : "") + ", HLOD " + num(p->hlod.hlod, 4) +
            " (alpha " + num(p->hlod.alpha, 3) + ")\n";
  }
  return text;
}

// One picture per analysis: FILE.svg alone, else FILE-MODEL-chrC.svg.
void draw_plots(const std::string& plot, const std::vector<Done>& done) {
  namespace fs = std::filesystem;
  for (const Done& d : done) {
    std::string path = plot;
    if (done.size() > 1) {
      const fs::path p(plot);
      path = (p.parent_path() /
              (p.stem().string() + "-" + d.label + "-chr" + d.chromosome + p.extension().string()))
                 .string();
    }
    draw_lod_curves(path, d.plotted, d.axes);
  }
}

}  // namespace

int run_lod_merlin(const MerlinLodOptions& o, const lk::AnalysisOptions& base) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (o.singlepoint && (o.grid > 0 || o.steps > 0))
    throw CLI::ValidationError("--singlepoint",
                               "two-point analysis is at the markers: --grid and --steps are "
                               "for multipoint analysis");
  if (o.start && o.stop && *o.start > *o.stop)
    throw CLI::ValidationError("--start", "--start must not be after --stop");
  const io::MerlinFiles files = io::read_merlin_files(o.dat, o.ped, o.map, o.freq);
  for (const auto& n : files.dat.notes) spdlog::info("{}", n);
  for (const auto& n : files.map.notes) spdlog::info("{}", n);
  const std::vector<io::MerlinModel> models = io::read_merlin_model(o.model);
  const std::vector<std::string> chromosomes = io::merlin_chromosomes(files);
  spdlog::info("{}: {} item(s); {}: {} individuals; {}: {} marker(s) on {} chromosome(s); {}",
               o.dat, files.dat.items.size(), o.ped, files.ped.people.size(), o.map,
               files.map.markers.size(), chromosomes.size(),
               files.have_freq ? "allele frequencies from " + o.freq
                               : std::string("no frequency file: allele frequencies counted over "
                                             "all genotyped individuals"));
  const std::vector<double> thetas =
      o.thetas.empty() ? std::vector<double>{0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4} : o.thetas;

  std::vector<Done> done;
  std::set<std::string> logged;  // the same pedigree warning for every model once
  for (const io::MerlinModel& model : models)
    for (const std::string& chr : chromosomes) {
      const io::MerlinAnalysisInput in = io::merlin_analysis_input(files, model, o.model, chr);
      for (const auto& w : in.peds.warnings)
        if (logged.insert(w).second) spdlog::warn("{}", w);
      for (const auto& n : in.notes)
        if (logged.insert(n).second) spdlog::info("{}", n);
      done.push_back(run_analysis(o, base, files, model, in, thetas));
    }

  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  spdlog::info("{} analysis(es) in {:.3g} s", done.size(), secs);
  std::string text;
  const std::string rule(72, '=');
  for (const Done& d : done) text += rule + '\n' + d.text;
  if (done.size() > 1) text += rule + '\n' + peaks_text(done);
  nlohmann::json j;
  j["input"] = "merlin";
  j["files"] = {{"dat", o.dat}, {"ped", o.ped}, {"map", o.map}, {"model", o.model}};
  if (files.have_freq) j["files"]["freq"] = o.freq;
  j["analyses"] = nlohmann::json::array();
  for (const Done& d : done) j["analyses"].push_back(d.json);
  j["seconds"] = secs;
  if (mpi::rank() > 0) return 0;  // under mpirun rank 0 alone prints
  if (o.json)
    std::cout << j.dump(2) << std::endl;
  else
    std::cout << text << std::flush;
  const std::string plot = write_lod_outputs(o.out, o.plot, text, j);
  if (!plot.empty()) draw_plots(plot, done);
  return 0;
}

}  // namespace kinfer::app
