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
      const int nm = static_cast<int>(in.cm.size());
      Done d;
      d.label = model.label;
      d.chromosome = chr;
      std::vector<std::string> notes = in.notes;
      lk::AnalysisTiming timing;
      std::vector<std::string> peds;
      for (const lk::Pedigree& p : in.peds.pedigrees) peds.push_back(p.id);
      if (o.singlepoint) {
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
          timing.plans += r.timing.plans;
          timing.runs += r.timing.runs;
          timing.plan_s += r.timing.plan_s;
          timing.evaluate_s += r.timing.evaluate_s;
          timing.max_width = std::max(timing.max_width, r.timing.max_width);
          timing.log2_max_table = std::max(timing.log2_max_table, r.timing.log2_max_table);
        }
      } else {
        const std::vector<double> pos = merlin_positions(in.cm, o.grid, o.steps, o.start, o.stop);
        if (pos.empty())
          throw CLI::ValidationError(
              "--start", "no map position between --start and --stop on chromosome " + chr);
        lk::AnalysisOptions ao = base;
        ao.program = lk::Program::Linkmap;
        ao.moving_locus = 1;
        for (double x : pos) ao.positions.push_back(x - in.cm.front());
        const lk::AnalysisResult r = lk::analyze(in.loci, in.peds, ao);
        for (const auto& n : r.notes) notes.push_back(n);
        d.points = scan_points(r, in.cm.front());
        d.plotted = d.points;
        timing = r.timing;
      }
      for (int k = 1; k <= nm; ++k) d.axes.ticks.push_back({in.loci.loci[k].name, in.cm[k - 1]});
      d.axes.xlabel = "position on chromosome " + chr + " (cM, Haldane)";
      d.axes.suffix = o.singlepoint ? " (two-point, best theta)" : "";

      std::ostringstream s;
      s << "kinfer lod: MERLIN input, model " << model.label << " (" << model.trait
        << ": disease allele frequency " << io::fmt(model.freq) << ", penetrances "
        << io::fmt(model.pen[0]) << ' ' << io::fmt(model.pen[1]) << ' ' << io::fmt(model.pen[2])
        << "), chromosome " << chr << (in.x_linked ? " (X-linked)" : "") << ", "
        << (o.singlepoint ? "two-point" : "multipoint") << ", " << nm << " marker(s), "
        << in.peds.pedigrees.size() << " pedigree(s)\n";
      s << "MARKERS (cM, Haldane):";
      for (int k = 1; k <= nm; ++k)
        s << "  " << in.loci.loci[k].name << ' ' << num(in.cm[k - 1], 2);
      s << '\n';
      s << "ALLELE FREQUENCIES: "
        << (files.have_freq ? "from " + o.freq
                            : std::string("estimated from the data (allele counts over all "
                                          "genotyped individuals; no -f file)"))
        << '\n';
      for (const auto& n : notes) s << "NOTE: " << n << '\n';
      s << bits_report(in.peds);
      s << scan_report(d.points, peds, true);
      d.text = s.str();

      nlohmann::json j = scan_json(d.points, peds);
      j["model"] = {{"label", model.label},
                    {"trait", model.trait},
                    {"disease_allele_frequency", model.freq},
                    {"penetrances", {model.pen[0], model.pen[1], model.pen[2]}}};
      j["chromosome"] = chr;
      j["x_linked"] = in.x_linked;
      j["analysis"] = o.singlepoint ? "two-point" : "multipoint";
      nlohmann::json mk = nlohmann::json::array();
      for (int k = 1; k <= nm; ++k)
        mk.push_back({{"name", in.loci.loci[k].name}, {"position", in.cm[k - 1]}});
      j["markers"] = mk;
      j["allele_frequencies"] = files.have_freq ? o.freq : "estimated from the data";
      j["pedigree_bits"] = bits_json(in.peds);
      j["notes"] = notes;
      j["timings"] = {{"plan", timing.plan_s},
                      {"evaluate", timing.evaluate_s},
                      {"plans", timing.plans},
                      {"runs", timing.runs}};
      j["largest_plan"] = {{"width", timing.max_width}, {"log2_max_table", timing.log2_max_table}};
      d.json = std::move(j);
      done.push_back(std::move(d));
    }

  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  spdlog::info("{} analysis(es) in {:.3g} s", done.size(), secs);
  std::string text;
  const std::string rule(72, '=');
  for (const Done& d : done) text += rule + '\n' + d.text;
  if (done.size() > 1) {
    text += rule + "\nPEAKS\n";
    for (const Done& d : done) {
      const ScanPoint* p = scan_peak(d.points, false);
      if (!p) continue;
      text += "  model " + d.label + ", chromosome " + d.chromosome + ": LOD " + num(p->lod, 4) +
              " at " + (p->marker.empty() ? "" : p->marker + " ") + num(p->x, 2) + " cM" +
              (p->theta >= 0 ? " theta " + num(p->theta, 4) : "") + ", HLOD " +
              num(p->hlod.hlod, 4) + " (alpha " + num(p->hlod.alpha, 3) + ")\n";
    }
  }
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

  namespace fs = std::filesystem;
  const std::string plot = write_lod_outputs(o.out, o.plot, text, j);
  if (!plot.empty())
    for (const Done& d : done) {
      // One picture per analysis: FILE.svg alone, else FILE-MODEL-chrC.svg.
      std::string path = plot;
      if (done.size() > 1) {
        const fs::path p(plot);
        path = (p.parent_path() / (p.stem().string() + "-" + d.label + "-chr" + d.chromosome +
                                   p.extension().string()))
                   .string();
      }
      draw_lod_curves(path, d.plotted, d.axes);
    }
  return 0;
}

}  // namespace kinfer::app
