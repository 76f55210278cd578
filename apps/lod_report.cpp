// kinfer lod's reports: the FASTLINK-like text, the JSON object and the gnuplot picture.
#include "apps/lod_report.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/network_options.hpp"
#include "engine/errors.hpp"
#include "engine/json.hpp"
#include "engine/util.hpp"
#include "linkage/hlod.hpp"

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

std::vector<double> family_lods(const lk::Evaluation& e, const lk::AnalysisResult& r) {
  std::vector<double> lods;
  for (std::size_t f = 0; f < e.ln_l.size(); ++f)
    lods.push_back(lk::AnalysisResult::lod(e.ln_l[f], r.baseline.ln_l[f]));
  return lods;
}

}  // namespace

std::vector<ScanPoint> scan_points(const lk::AnalysisResult& r, double offset_cm,
                                   const std::string& marker) {
  std::vector<ScanPoint> out;
  for (const lk::Evaluation& e : r.evaluations) {
    ScanPoint p;
    p.marker = marker;
    if (r.program == lk::Program::Mlink) {
      p.theta = e.male[r.varied_interval];
      p.x = p.theta;
    } else {
      p.has_x = e.position.has_value();
      p.x = e.position ? *e.position + offset_cm : 0;
    }
    p.lod = lk::AnalysisResult::lod(e.total_ln_l, r.baseline.total_ln_l);
    p.family_lods = family_lods(e, r);
    p.hlod = lk::max_hlod(p.family_lods);
    out.push_back(std::move(p));
  }
  return out;
}

const ScanPoint* scan_peak(const std::vector<ScanPoint>& points, bool by_hlod) {
  const ScanPoint* best = nullptr;
  for (const ScanPoint& p : points) {
    const double v = by_hlod ? p.hlod.hlod : p.lod;
    if (!best || v > (by_hlod ? best->hlod.hlod : best->lod)) best = &p;
  }
  return best;
}

namespace {

std::string where(const ScanPoint& p, bool position_in_cm) {
  std::string w;
  if (!p.marker.empty()) w += "marker " + p.marker + ", ";
  if (p.theta >= 0) {
    if (!p.marker.empty() && p.has_x && position_in_cm) w += num(p.x, 2) + " cM, ";
    w += "theta " + num(p.theta, 4);
  } else {
    w += p.has_x ? "position " + num(p.x, 2) + " cM" : std::string("unlinked");
  }
  return w;
}

nlohmann::json point_json(const ScanPoint& p, const std::vector<std::string>& peds) {
  nlohmann::json j;
  if (!p.marker.empty()) j["marker"] = p.marker;
  if (p.theta >= 0) j["theta"] = p.theta;
  if (p.theta < 0 || !p.marker.empty())
    j["position"] = p.has_x ? nlohmann::json(p.x) : nlohmann::json(nullptr);
  j["lod"] = jnum(p.lod);
  j["hlod"] = p.hlod.hlod;
  j["alpha"] = p.hlod.alpha;
  nlohmann::json f = nlohmann::json::object();
  for (std::size_t i = 0; i < p.family_lods.size() && i < peds.size(); ++i)
    f[peds[i]] = jnum(p.family_lods[i]);
  j["family_lods"] = f;
  return j;
}

}  // namespace

std::string scan_report(const std::vector<ScanPoint>& points, const std::vector<std::string>& peds,
                        bool position_in_cm) {
  std::ostringstream s;
  const bool two_point = !points.empty() && points.front().theta >= 0;
  const bool per_family_columns = peds.size() <= 8;
  int width = 14;  // the marker column: as wide as the longest name (at most 40)
  for (const ScanPoint& p : points) width = std::max(width, std::min(40, int(p.marker.size())));
  char line[256];
  std::snprintf(line, sizeof line, "%-*s %10s %10s %8s %10s", width, two_point ? "MARKER" : "",
                two_point ? "THETA" : "POSITION", "LOD", "ALPHA", "HLOD");
  s << line;
  if (per_family_columns)
    for (const auto& id : peds) {
      std::snprintf(line, sizeof line, " %10s", ("LOD:" + id).substr(0, 10).c_str());
      s << line;
    }
  s << '\n';
  for (const ScanPoint& p : points) {
    const std::string x =
        p.theta >= 0 ? num(p.theta, 4) : (p.has_x ? num(p.x, 3) : std::string("unlinked"));
    std::snprintf(line, sizeof line, "%-*s %10s %10s %8s %10s", width,
                  p.marker.substr(0, width).c_str(),
                  x.c_str(), num(p.lod, 4).c_str(), num(p.hlod.alpha, 3).c_str(),
                  num(p.hlod.hlod, 4).c_str());
    s << line;
    if (per_family_columns)
      for (double f : p.family_lods) {
        std::snprintf(line, sizeof line, " %10s", num(f, 4).c_str());
        s << line;
      }
    s << '\n';
  }
  const ScanPoint* pk = scan_peak(points, false);
  const ScanPoint* ph = scan_peak(points, true);
  if (pk) {
    s << "PEAK LOD:  " << where(*pk, position_in_cm) << ": LOD " << num(pk->lod, 4) << ", HLOD "
      << num(pk->hlod.hlod, 4) << " (alpha " << num(pk->hlod.alpha, 3) << ")\n";
    s << "PEAK HLOD: " << where(*ph, position_in_cm) << ": HLOD " << num(ph->hlod.hlod, 4)
      << " (alpha " << num(ph->hlod.alpha, 3) << "), LOD " << num(ph->lod, 4) << "\n";
    s << "LOD per family at the LOD peak:";
    for (std::size_t i = 0; i < pk->family_lods.size() && i < peds.size(); ++i)
      s << "  " << peds[i] << ' ' << num(pk->family_lods[i], 4);
    s << '\n';
  }
  return s.str();
}

nlohmann::json scan_json(const std::vector<ScanPoint>& points,
                         const std::vector<std::string>& peds) {
  nlohmann::json j;
  nlohmann::json a = nlohmann::json::array();
  for (const ScanPoint& p : points) a.push_back(point_json(p, peds));
  j["points"] = a;
  const ScanPoint* pk = scan_peak(points, false);
  const ScanPoint* ph = scan_peak(points, true);
  j["peak"] = pk ? point_json(*pk, peds) : nlohmann::json(nullptr);
  j["peak_hlod"] = ph ? point_json(*ph, peds) : nlohmann::json(nullptr);
  return j;
}

namespace {
int founders(const lk::Pedigree& p) {
  int f = 0;
  for (const lk::Person& q : p.people) f += q.founder();
  return f;
}
}  // namespace

std::string bits_report(const lk::PedigreeFile& pf) {
  std::ostringstream s;
  s << "PEDIGREE   PEOPLE  FOUNDERS  BITS (2n-f)\n";
  char line[160];
  int beyond = 0, most = 0;
  for (const lk::Pedigree& p : pf.pedigrees) {
    const int f = founders(p), b = lk::lander_green_bits(p);
    most = std::max(most, b);
    beyond += b > lk::kMerlinMaxBits;
    std::snprintf(line, sizeof line, "%-9s %7zu %9d %12d%s\n", p.id.c_str(), p.people.size(), f, b,
                  b > lk::kMerlinMaxBits ? "  beyond MERLIN's 24 bits" : "");
    s << line;
  }
  if (beyond)
    s << "NOTE: " << beyond << " pedigree(s) have more than " << lk::kMerlinMaxBits
      << " bits (up to " << most
      << "): MERLIN's default refuses them; kinfer computes them exactly by elimination\n";
  return s.str();
}

namespace {
std::string method(const lk::AnalysisResult& r, std::size_t p) {
  if (p < r.chain_bits.size() && r.chain_bits[p] >= 0)
    return "chain (" + std::to_string(r.chain_bits[p]) + " bits)";
  return "network";
}
}  // namespace

std::string pedigree_report(const lk::PedigreeFile& pf, const lk::AnalysisResult& r) {
  const bool multipoint = r.program == lk::Program::Linkmap;
  std::ostringstream s;
  s << "PEDIGREE   PEOPLE  FOUNDERS" << (multipoint ? "  BITS (2n-f)  METHOD" : "") << "\n";
  char line[160];
  for (std::size_t i = 0; i < pf.pedigrees.size(); ++i) {
    const lk::Pedigree& p = pf.pedigrees[i];
    if (multipoint)
      std::snprintf(line, sizeof line, "%-9s %7zu %9d %12d  %s\n", p.id.c_str(), p.people.size(),
                    founders(p), lk::lander_green_bits(p), method(r, i).c_str());
    else
      std::snprintf(line, sizeof line, "%-9s %7zu %9d\n", p.id.c_str(), p.people.size(),
                    founders(p));
    s << line;
  }
  return s.str();
}

nlohmann::json pedigree_json(const lk::PedigreeFile& pf, const lk::AnalysisResult& r) {
  nlohmann::json a = nlohmann::json::array();
  for (std::size_t i = 0; i < pf.pedigrees.size(); ++i) {
    const lk::Pedigree& p = pf.pedigrees[i];
    const int f = founders(p);
    nlohmann::json e = {{"id", p.id},
                        {"people", p.people.size()},
                        {"founders", f},
                        {"non_founders", static_cast<int>(p.people.size()) - f},
                        {"bits", lk::lander_green_bits(p)}};
    if (r.program == lk::Program::Linkmap) {
      const bool chain = i < r.chain_bits.size() && r.chain_bits[i] >= 0;
      e["method"] = chain ? "chain" : "network";
      if (chain) e["chain_bits"] = r.chain_bits[i];
    }
    a.push_back(e);
  }
  return a;
}

nlohmann::json bits_json(const lk::PedigreeFile& pf) {
  nlohmann::json a = nlohmann::json::array();
  for (const lk::Pedigree& p : pf.pedigrees) {
    const int f = founders(p), b = lk::lander_green_bits(p);
    a.push_back({{"id", p.id},
                 {"people", p.people.size()},
                 {"founders", f},
                 {"non_founders", static_cast<int>(p.people.size()) - f},
                 {"bits", b},
                 {"beyond_merlin", b > lk::kMerlinMaxBits}});
  }
  return a;
}

namespace {
// MLINK: what the summary's MARKER column names: the marker of the varied interval paired with
// the trait (the affection locus), else both loci of the interval.
std::string mlink_marker(const lk::AnalysisResult& r, const lk::LocusFile& lf) {
  if (r.program != lk::Program::Mlink || r.varied_interval < 0) return {};
  const std::string& a = r.map_order[r.varied_interval];
  const std::string& b = r.map_order[r.varied_interval + 1];
  auto affection = [&](const std::string& name) {
    for (const auto& L : lf.loci)
      if (L.name == name) return L.type == lk::LocusType::Affection;
    return false;
  };
  if (affection(a) && !affection(b)) return b;
  if (affection(b) && !affection(a)) return a;
  return a + "-" + b;
}
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
  s << pedigree_report(pf, r);
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
    if (e != &r.baseline) {
      const lk::Hlod h = lk::max_hlod(family_lods(*e, r));
      s << "HLOD " << num(h.hlod) << " at ALPHA " << num(h.alpha, 4) << '\n';
    }
  }
  s << rule << rule << "SUMMARY: LOD, HLOD and the alpha maximising it\n";
  s << scan_report(scan_points(r, 0, mlink_marker(r, lf)), r.pedigrees,
                   r.program == lk::Program::Linkmap);
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
  if (with_lod) {
    j["total"]["lod"] = jnum(lk::AnalysisResult::lod(e.total_ln_l, r.baseline.total_ln_l));
    const lk::Hlod h = lk::max_hlod(family_lods(e, r));
    j["total"]["hlod"] = h.hlod;
    j["total"]["alpha"] = h.alpha;
  }
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
  j["pedigree_bits"] = pedigree_json(pf, r);
  const nlohmann::json scan = scan_json(scan_points(r, 0, mlink_marker(r, lf)), r.pedigrees);
  j["peak"] = scan["peak"];
  j["peak_hlod"] = scan["peak_hlod"];
  const auto& t = r.timing;
  j["timings"] = {{"seconds", seconds},       {"reduce", t.reduce_s}, {"plan", t.plan_s},
                  {"evaluate", t.evaluate_s}, {"plans", t.plans},     {"runs", t.runs}};
  j["largest_plan"] = {{"width", t.max_width},
                       {"log2_max_table", t.log2_max_table},
                       {"log2_total_state", t.log2_total_state},
                       {"buckets", t.buckets},
                       {"estimated_peak_bytes", bytes_or_null(t.peak_bytes)},
                       {"conditioned_plans", t.conditioned},
                       {"max_slices", t.max_slices}};
  return j;
}

namespace {

std::string gnuplot_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

}  // namespace

std::string write_lod_outputs(const std::string& out_dir, const std::string& plot,
                              const std::string& text, const nlohmann::json& j) {
  namespace fs = std::filesystem;
  if (out_dir.empty()) return plot;
  fs::create_directories(out_dir);
  write_file_atomically((fs::path(out_dir) / "lod.txt").string(), text);
  write_file_atomically((fs::path(out_dir) / "lod.json").string(), j.dump(2) + "\n");
  spdlog::info("results written to {}", out_dir);
  if (plot.empty())
    return std::system("command -v gnuplot >/dev/null 2>&1") == 0
               ? (fs::path(out_dir) / "lod.svg").string()
               : std::string();
  return fs::path(plot).is_relative() ? (fs::path(out_dir) / plot).string() : plot;
}

namespace {

void check_plot_name(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".svg" && ext != ".png")
    throw CLI::ValidationError("--plot",
                               "the picture's name must end in .svg or .png, found '" + path + "'");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw InputError(path, 0,
                     "drawing the LOD curve needs gnuplot (Debian package gnuplot-nox), "
                     "which is not installed");
}

}  // namespace

void check_lod_outputs(const std::string& out_dir, const std::string& plot) {
  namespace fs = std::filesystem;
  check_output_folder(out_dir, "--out");
  if (plot.empty()) return;
  check_plot_name(plot);
  const fs::path p = !out_dir.empty() && fs::path(plot).is_relative() ? fs::path(out_dir) / plot
                                                                      : fs::path(plot);
  // under --out the folder is made before the picture is drawn
  if (out_dir.empty() || !fs::path(plot).is_relative()) check_output_file(p.string(), "--plot");
}

void draw_lod_curves(const std::string& path, const std::vector<ScanPoint>& points,
                     const PlotAxes& axes) {
  namespace fs = std::filesystem;
  const std::string ext = fs::path(path).extension().string();
  check_plot_name(path);
  const fs::path dir = fs::temp_directory_path() / ("kinfer-plot-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream data(dir / "lod.dat");
  int points_drawn = 0;
  for (const ScanPoint& p : points) {
    if (std::isinf(p.lod) || !p.has_x) continue;
    data << num(p.x, 8) << ' ' << num(p.lod, 8) << ' ' << num(p.hlod.hlod, 8) << '\n';
    ++points_drawn;
  }
  data.close();
  if (points_drawn == 0) throw InputError(path, 0, "no finite LOD score to draw");
  std::ofstream g(dir / "plot.gp");
  if (ext == ".svg")
    g << "set terminal svg size 800,500 dynamic noenhanced font 'Helvetica,14' linewidth 1.5\n";
  else
    g << "set terminal pngcairo size 1600,1000 noenhanced font 'Helvetica,26' linewidth 3\n";
  g << "set output " << gnuplot_quote(fs::absolute(path).string()) << "\n";
  g << "set border 3\nset tics nomirror\nset grid ytics lc rgb '#dddddd'\n";
  g << "set key below horizontal\n";  // clear of the curves and the LOD 3 line
  g << "set offsets 0, 0, 0.5, 0\n";  // room above the highest curve (LOD 3 at least)
  g << "set ylabel 'LOD score'\n";
  g << "set xlabel " << gnuplot_quote(axes.xlabel) << "\n";
  if (axes.xrange)
    g << "set xrange [" << num(axes.xrange->first, 4) << ":" << num(axes.xrange->second, 4)
      << "]\n";
  if (!axes.ticks.empty()) {
    // Markers as labelled ticks along the top.
    g << "set x2tics rotate by 45 left font '," << (ext == ".svg" ? 10 : 18) << "' (";
    for (std::size_t i = 0; i < axes.ticks.size(); ++i)
      g << (i ? ", " : "") << gnuplot_quote(axes.ticks[i].first) << ' '
        << num(axes.ticks[i].second, 4);
    g << ")\nset link x2\n";
    for (const auto& [name, cm] : axes.ticks)
      g << "set arrow from " << num(cm, 4) << ", graph 0 to " << num(cm, 4)
        << ", graph 1 nohead dt 3 lc rgb '#999999'\n";
  }
  // LOD 3, the conventional threshold of significant linkage, as a curve of the plot: inside the
  // frame (the y range takes it in) and in the legend.
  const std::string file = gnuplot_quote((dir / "lod.dat").string());
  g << "plot " << file << " using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#1f4e9c' title 'LOD"
    << axes.suffix << "', \\\n     " << file
    << " using 1:3 with lines dt 4 lc rgb '#d9822b' title 'HLOD" << axes.suffix
    << "', \\\n     3 with lines dt 2 lc rgb '#cc0000' title 'LOD 3'\n";
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
  spdlog::info("LOD and HLOD curves drawn to {}", path);
}

// Draws LOD and HLOD against theta (MLINK) or map position (LINKMAP).
void write_lod_plot(const std::string& path, const lk::AnalysisResult& r, const lk::LocusFile& lf) {
  const bool mlink = r.program == lk::Program::Mlink;
  PlotAxes ax;
  if (mlink) {
    ax.xlabel = "recombination fraction θ" + std::string(r.sex_specific ? " (male)" : "") +
                " between " + r.map_order[r.varied_interval] + " and " +
                r.map_order[r.varied_interval + 1];
    ax.xrange = std::make_pair(0.0, 0.5);
  } else {
    ax.xlabel = "map position of " + lf.loci[r.moving_locus].name + " (cM, " +
                (lf.map_function == lk::MapFunction::Kosambi ? "Kosambi" : "Haldane") + ")";
    for (const auto& m : r.markers)
      if (std::isfinite(m.second)) ax.ticks.push_back(m);
  }
  draw_lod_curves(path, scan_points(r), ax);
}

}  // namespace kinfer::app
