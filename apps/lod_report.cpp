// kinfer lod's reports: the FASTLINK-like text, the JSON object and the gnuplot picture.
#include "apps/lod_report.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/errors.hpp"

namespace kinfer::app {

namespace lk = kinfer::linkage;

namespace {

std::string num(double x, int prec = 6) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}

nlohmann::json jnum(double x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  return x;
}

const double kLn10 = std::log(10.0);

}  // namespace

std::string lod_text_report(const lk::AnalysisResult& r, const lk::LocusFile& lf,
                            const lk::PedigreeFile& pf) {
  std::ostringstream s;
  const std::string rule = "-----------------------------------------------------------\n";
  s << "kinfer lod: " << (r.program == lk::Program::Mlink ? "MLINK" : "LINKMAP") << ", "
    << lf.n_loci() << "-point " << (r.sex_linked ? "sex-linked" : "autosomal") << " data, "
    << pf.pedigrees.size() << " pedigree(s) (" << (pf.post_makeped ? "post" : "pre")
    << "-makeped pedigree file)\n";
  s << "ORDER OF LOCI (map):";
  for (const auto& n : r.map_order) s << "  " << n;
  s << '\n';
  if (r.program == lk::Program::Mlink)
    s << "VARIED THETA: interval " << r.varied_interval + 1 << " ("
      << r.map_order[r.varied_interval] << " - " << r.map_order[r.varied_interval + 1]
      << "); LOD baseline sets it to 0.5\n";
  else
    s << "MOVING LOCUS: " << lf.loci[r.moving_locus].name
      << "; LOD baseline: the moving locus unlinked, log10 L = "
      << num(r.baseline.total_ln_l / kLn10) << "\n";
  for (const auto& n : r.notes) s << "NOTE: " << n << '\n';
  auto thetas = [&](const std::vector<double>& v) {
    std::ostringstream t;
    for (double x : v) t << ' ' << num(x, 4);
    return t.str();
  };
  const std::vector<const lk::Evaluation*> all = [&] {
    std::vector<const lk::Evaluation*> v;
    if (r.program == lk::Program::Mlink) v.push_back(&r.baseline);
    for (const auto& e : r.evaluations) v.push_back(&e);
    return v;
  }();
  for (const lk::Evaluation* e : all) {
    s << rule << rule;
    if (r.program == lk::Program::Linkmap) {
      s << "POSITION " << (e->position ? num(*e->position, 2) + " cM" : std::string("unlinked"))
        << "   ORDER:";
      for (const auto& n : e->order) s << ' ' << n;
      s << '\n';
    }
    if (r.sex_specific) {
      s << "MALE THETAS  " << thetas(e->male) << '\n';
      s << "FEMALE THETAS" << thetas(e->female) << '\n';
    } else {
      s << "THETAS" << thetas(e->male) << '\n';
    }
    s << rule << "PEDIGREE |  LN LIKE   | LOG 10 LIKE |     LOD\n" << rule;
    char line[160];
    for (std::size_t p = 0; p < e->ln_l.size(); ++p) {
      std::snprintf(line, sizeof line, "%9s %12s %13s %13s\n", r.pedigrees[p].c_str(),
                    num(e->ln_l[p]).c_str(), num(e->ln_l[p] / kLn10).c_str(),
                    num(lk::AnalysisResult::lod(e->ln_l[p], r.baseline.ln_l[p])).c_str());
      s << line;
    }
    s << rule;
    std::snprintf(line, sizeof line, "%-9s %12s %13s %13s\n", "TOTALS", num(e->total_ln_l).c_str(),
                  num(e->total_ln_l / kLn10).c_str(),
                  num(lk::AnalysisResult::lod(e->total_ln_l, r.baseline.total_ln_l)).c_str());
    s << line;
  }
  return s.str();
}

namespace {

nlohmann::json eval_json(const lk::Evaluation& e, const lk::AnalysisResult& r, bool with_lod) {
  nlohmann::json j;
  j["thetas"] = e.male;
  if (r.sex_specific) j["female_thetas"] = e.female;
  j["order"] = e.order;
  if (r.program == lk::Program::Linkmap)
    j["position"] = e.position ? nlohmann::json(*e.position) : nlohmann::json(nullptr);
  nlohmann::json peds = nlohmann::json::array();
  for (std::size_t p = 0; p < e.ln_l.size(); ++p) {
    nlohmann::json q = {
        {"id", r.pedigrees[p]}, {"ln_l", jnum(e.ln_l[p])}, {"log10_l", jnum(e.ln_l[p] / kLn10)}};
    if (with_lod) q["lod"] = jnum(lk::AnalysisResult::lod(e.ln_l[p], r.baseline.ln_l[p]));
    peds.push_back(q);
  }
  j["pedigrees"] = peds;
  j["total"] = {{"ln_l", jnum(e.total_ln_l)}, {"log10_l", jnum(e.total_ln_l / kLn10)}};
  if (with_lod)
    j["total"]["lod"] = jnum(lk::AnalysisResult::lod(e.total_ln_l, r.baseline.total_ln_l));
  return j;
}

}  // namespace

nlohmann::json lod_json_report(const lk::AnalysisResult& r, const lk::LocusFile& lf,
                               const lk::PedigreeFile& pf, const std::string& ped_path,
                               const std::string& dat_path, double seconds) {
  nlohmann::json j;
  j["program"] = lk::program_name(r.program);
  j["pedfile"] = ped_path;
  j["datfile"] = dat_path;
  j["pedigree_format"] = pf.post_makeped ? "post-makeped" : "pre-makeped";
  j["sex_linked"] = r.sex_linked;
  j["map_order"] = r.map_order;
  if (r.program == lk::Program::Mlink)
    j["varied_theta"] = r.varied_interval + 1;
  else
    j["moving_locus"] = {{"index", r.moving_locus + 1}, {"name", lf.loci[r.moving_locus].name}};
  if (r.program == lk::Program::Linkmap) {
    nlohmann::json m = nlohmann::json::array();
    for (const auto& [name, cm] : r.markers) m.push_back({{"name", name}, {"position", jnum(cm)}});
    j["markers"] = m;
  }
  j["baseline"] = eval_json(r.baseline, r, false);
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& e : r.evaluations) ev.push_back(eval_json(e, r, true));
  j["evaluations"] = ev;
  j["notes"] = r.notes;
  const auto& t = r.timing;
  j["timings"] = {{"seconds", seconds},       {"reduce", t.reduce_s}, {"plan", t.plan_s},
                  {"evaluate", t.evaluate_s}, {"plans", t.plans},     {"runs", t.runs}};
  j["largest_plan"] = {{"width", t.max_width},
                       {"log2_max_table", t.log2_max_table},
                       {"log2_total_state", t.log2_total_state},
                       {"buckets", t.buckets},
                       {"estimated_peak_bytes", t.peak_bytes}};
  return j;
}

namespace {

std::string gnuplot_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

}  // namespace

// Draws LOD against theta (MLINK) or map position (LINKMAP) with gnuplot.
void write_lod_plot(const std::string& path, const lk::AnalysisResult& r, const lk::LocusFile& lf) {
  namespace fs = std::filesystem;
  const std::string ext = fs::path(path).extension().string();
  if (ext != ".svg" && ext != ".png")
    throw CLI::ValidationError("--plot",
                               "the picture's name must end in .svg or .png, found '" + path + "'");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw InputError(path, 0,
                     "drawing the LOD curve needs gnuplot (Debian package gnuplot-nox), "
                     "which is not installed");
  const fs::path dir = fs::temp_directory_path() / ("kinfer-plot-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const bool mlink = r.program == lk::Program::Mlink;
  std::ofstream data(dir / "lod.dat");
  int points = 0;
  for (const auto& e : r.evaluations) {
    const double lod = lk::AnalysisResult::lod(e.total_ln_l, r.baseline.total_ln_l);
    if (std::isinf(lod)) continue;
    double x;
    if (mlink) {
      x = e.male[r.varied_interval];
    } else {
      if (!e.position) continue;
      x = *e.position;
    }
    data << num(x, 8) << ' ' << num(lod, 8) << '\n';
    ++points;
  }
  data.close();
  if (points == 0) throw InputError(path, 0, "no finite LOD score to draw");
  std::ofstream g(dir / "plot.gp");
  if (ext == ".svg")
    g << "set terminal svg size 800,500 dynamic noenhanced font 'Helvetica,14' linewidth 1.5\n";
  else
    g << "set terminal pngcairo size 1600,1000 noenhanced font 'Helvetica,26' linewidth 3\n";
  g << "set output " << gnuplot_quote(fs::absolute(path).string()) << "\n";
  g << "set border 3\nset tics nomirror\nset grid ytics lc rgb '#dddddd'\nset key off\n";
  g << "set ylabel 'LOD score'\n";
  std::string trait = mlink ? "" : lf.loci[r.moving_locus].name;
  if (mlink) {
    g << "set xlabel 'recombination fraction θ" << (r.sex_specific ? " (male)" : "") << " between "
      << r.map_order[r.varied_interval] << " and " << r.map_order[r.varied_interval + 1] << "'\n";
    g << "set xrange [0:0.5]\n";
  } else {
    g << "set xlabel 'map position of " << trait << " (cM, "
      << (lf.map_function == lk::MapFunction::Kosambi ? "Kosambi" : "Haldane") << ")'\n";
    // Markers as labelled ticks along the top.
    std::vector<std::pair<std::string, double>> mk;
    for (const auto& m : r.markers)
      if (std::isfinite(m.second)) mk.push_back(m);
    g << "set x2tics rotate by 45 left font '," << (ext == ".svg" ? 10 : 18) << "' (";
    for (std::size_t i = 0; i < mk.size(); ++i)
      g << (i ? ", " : "") << gnuplot_quote(mk[i].first) << ' ' << num(mk[i].second, 4);
    g << ")\nset link x2\n";
    for (const auto& [name, cm] : mk)
      g << "set arrow from " << num(cm, 4) << ", graph 0 to " << num(cm, 4)
        << ", graph 1 nohead dt 3 lc rgb '#999999'\n";
  }
  g << "set arrow from graph 0, first 3 to graph 1, first 3 nohead dt 2 lc rgb '#cc0000'\n";
  g << "plot " << gnuplot_quote((dir / "lod.dat").string())
    << " using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#1f4e9c'\n";
  g.close();
  const std::string cmd = "gnuplot " + gnuplot_quote((dir / "plot.gp").string()) + " 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int rc = pclose(p);
    fs::remove_all(dir);
    if (rc != 0) throw InputError(path, 0, "gnuplot could not draw the LOD curve: " + out);
  } else {
    fs::remove_all(dir);
    throw InputError(path, 0, "could not run gnuplot");
  }
  spdlog::info("LOD curve drawn to {}", path);
}

}  // namespace kinfer::app
