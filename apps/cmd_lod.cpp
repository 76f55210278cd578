// kinfer lod: exact two-point and multipoint LOD scores from LINKAGE pedigree and locus files.
#include <omp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "gpu/device_api.hpp"
#include "gpu/executor.hpp"
#include "io/linkage.hpp"
#include "linkage/analysis.hpp"

namespace kinfer::app {

namespace {

namespace lk = kinfer::linkage;

// Below this many FLOP a plan finishes on the CPU before the GPU would have started.
constexpr double kLodGpuMinFlops = 1e9;

struct LodOptions {
  std::string ped, dat, program, theta, positions, plot, out;
  std::string order = "stochastic", max_memory, device = "auto";
  double order_time = 2.0;
  int threads = 0, moving = 0;
  std::uint64_t seed = 1;
  bool json = false, no_recode = false, no_elimination = false;
};

// "0.1,0.2 0.3" or "START:STOP:STEP" ranges, mixed.
std::vector<double> parse_list(const std::string& opt, const std::string& text) {
  std::vector<double> out;
  std::string s = text;
  for (char& c : s)
    if (c == ',' || c == ';') c = ' ';
  std::istringstream in(s);
  std::string w;
  auto num = [&](const std::string& t) {
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v))
      throw CLI::ValidationError(opt,
                                 "expected numbers or START:STOP:STEP ranges, found '" + t + "'");
    return v;
  };
  while (in >> w) {
    const auto c1 = w.find(':');
    if (c1 == std::string::npos) {
      out.push_back(num(w));
      continue;
    }
    const auto c2 = w.find(':', c1 + 1);
    if (c2 == std::string::npos)
      throw CLI::ValidationError(opt, "a range is START:STOP:STEP, found '" + w + "'");
    const double a = num(w.substr(0, c1)), b = num(w.substr(c1 + 1, c2 - c1 - 1)),
                 st = num(w.substr(c2 + 1));
    if (!(st > 0) || b < a || (b - a) / st > 1e6)
      throw CLI::ValidationError(
          opt, "a range START:STOP:STEP needs STEP > 0 and STOP >= START, found '" + w + "'");
    for (long i = 0; a + i * st <= b + 1e-9 * std::max(1.0, std::abs(b)); ++i)
      out.push_back(a + i * st);
  }
  if (out.empty()) throw CLI::ValidationError(opt, "expected at least one value");
  return out;
}

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

std::string text_report(const lk::AnalysisResult& r, const lk::LocusFile& lf,
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

nlohmann::json json_report(const lk::AnalysisResult& r, const lk::LocusFile& lf,
                           const LodOptions& o, const lk::PedigreeFile& pf, double seconds) {
  nlohmann::json j;
  j["program"] = lk::program_name(r.program);
  j["pedfile"] = o.ped;
  j["datfile"] = o.dat;
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

std::string gnuplot_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

// Draws LOD against theta (MLINK) or map position (LINKMAP) with gnuplot.
void write_plot(const std::string& path, const lk::AnalysisResult& r, const lk::LocusFile& lf) {
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

int run_lod(const LodOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const lk::LocusFile lf = io::read_locus_file(o.dat);
  for (const auto& w : lf.warnings) spdlog::warn("{}", w);
  const lk::PedigreeFile pf = io::read_pedigree_file(o.ped, lf);
  for (const auto& w : pf.warnings) spdlog::warn("{}", w);
  int people = 0;
  for (const auto& p : pf.pedigrees) people += static_cast<int>(p.people.size());
  spdlog::info("{}: {} loci{}; {}: {} pedigree(s), {} individuals ({}-makeped{})", o.dat,
               lf.n_loci(), lf.sex_linked ? " (sex-linked)" : "", o.ped, pf.pedigrees.size(),
               people, pf.post_makeped ? "post" : "pre",
               pf.merged_loop_breakers
                   ? ", " + std::to_string(pf.merged_loop_breakers) + " loop breaker copies merged"
                   : "");

  lk::AnalysisOptions ao;
  if (!o.program.empty())
    ao.program = o.program == "mlink" ? lk::Program::Mlink : lk::Program::Linkmap;
  if (!o.theta.empty()) {
    ao.thetas = parse_list("--theta", o.theta);
    for (double t : ao.thetas)
      if (t < 0 || t > 0.5)
        throw CLI::ValidationError(
            "--theta", "a recombination fraction is between 0 and 0.5, found " + num(t, 4));
  }
  if (!o.positions.empty()) ao.positions = parse_list("--positions", o.positions);
  ao.moving_locus = o.moving;
  ao.reduction.recode = !o.no_recode;
  ao.reduction.eliminate = !o.no_elimination;
  ao.plan.order.heuristic = parse_heuristic(o.order);
  ao.plan.order.time_budget = o.order_time;
  ao.plan.order.seed = o.seed;
  try {
    ao.plan.max_memory_bytes =
        o.max_memory.empty() ? default_max_memory_bytes() : parse_size(o.max_memory);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--max-memory", e.what());
  }
  // The GPU runs the plans large enough to pay for it (`--device auto`: at least
  // kLodGpuMinFlops; `gpu`: every plan), opened on first need; the rest run on the CPU.
  struct DeviceUse {
    bool tried = false;
    std::unique_ptr<gpu::Context> ctx;
    int gpu_runs = 0, cpu_runs = 0;
  };
  auto dev = std::make_shared<DeviceUse>();
  if (o.device != "cpu")
    ao.runner = [dev, all = o.device == "gpu"](const Plan& plan) {
      if (!all && plan.flops < kLodGpuMinFlops) return ++dev->cpu_runs, run_plan(plan);
      if (!dev->tried) {
        dev->tried = true;
        const gpu::DeviceInfo info = gpu::probe();
        try {
          if (!info.available) throw std::runtime_error(info.why_not);
          dev->ctx = gpu::Context::create();
          spdlog::info("GPU: {} ({:.0f} GiB) for plans of {} FLOP", info.name,
                       info.memory_bytes / (1 << 30),
                       all ? "any" : fmt::format("{:.0e}+", kLodGpuMinFlops));
        } catch (const std::exception& e) {
          spdlog::log(all ? spdlog::level::warn : spdlog::level::info,
                      "running on the CPU: no GPU ({})", e.what());
        }
      }
      if (!dev->ctx) return ++dev->cpu_runs, run_plan(plan);
      ++dev->gpu_runs;
      return gpu::run_plan_gpu(plan, *dev->ctx);
    };
  const lk::AnalysisResult r = lk::analyze(lf, pf, ao);
  if (dev->gpu_runs)
    spdlog::info("{} plan run(s) on the GPU, {} on the CPU", dev->gpu_runs, dev->cpu_runs);
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  spdlog::info(
      "{} evaluation(s) in {:.3g} s: reduce {:.3g} s, {} plan(s) {:.3g} s, {} run(s) {:.3g} s; "
      "largest width {}, largest table 2^{:.1f}",
      r.evaluations.size(), secs, r.timing.reduce_s, r.timing.plans, r.timing.plan_s, r.timing.runs,
      r.timing.evaluate_s, r.timing.max_width, r.timing.log2_max_table);

  const std::string text = text_report(r, lf, pf);
  const nlohmann::json j = json_report(r, lf, o, pf, secs);
  if (o.json)
    std::cout << j.dump(2) << std::endl;
  else
    std::cout << text << std::flush;
  std::string plot = o.plot;
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    write_atomically((std::filesystem::path(o.out) / "lod.txt").string(), text);
    write_atomically((std::filesystem::path(o.out) / "lod.json").string(), j.dump(2) + "\n");
    if (plot.empty() && std::system("command -v gnuplot >/dev/null 2>&1") == 0)
      plot = (std::filesystem::path(o.out) / "lod.svg").string();
    else if (!plot.empty() && std::filesystem::path(plot).is_relative())
      plot = (std::filesystem::path(o.out) / plot).string();
    spdlog::info("results written to {}", o.out);
  }
  if (!plot.empty()) write_plot(plot, r, lf);
  return 0;
}

}  // namespace

Runner add_lod(CLI::App& root) {
  auto o = std::make_shared<LodOptions>();
  CLI::App* cmd = root.add_subcommand(
      "lod", "exact two-point and multipoint LOD scores from LINKAGE pedigree and locus files");
  cmd->add_option("--ped", o->ped, "pedigree file (pre- or post-makeped)")->required();
  cmd->add_option("--dat", o->dat, "locus (data) file")->required();
  cmd->add_option("--program", o->program,
                  "mlink (LOD scores over a theta) or linkmap (location scores); default: what "
                  "the locus file's last line is written for")
      ->check(CLI::IsMember({"mlink", "linkmap"}));
  cmd->add_option("--theta", o->theta,
                  "MLINK: values of the varied theta, e.g. '0,0.05,0.1' or '0:0.5:0.05'");
  cmd->add_option("--positions", o->positions,
                  "LINKMAP: map positions (cM from the first marker) of the moving locus across "
                  "the whole marker map, e.g. '-10:120:2'");
  cmd->add_option("--moving", o->moving,
                  "LINKMAP: the moving locus (input number; default: the last line's, else the "
                  "first affection locus)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_option("--plot", o->plot, "draw the LOD curve to FILE.svg or FILE.png (gnuplot)");
  cmd->add_option("--out", o->out, "also write lod.txt, lod.json and lod.svg into this folder");
  cmd->add_option("--order", o->order, "elimination order heuristic")
      ->check(CLI::IsMember({"minfill", "minweight", "wminfill", "stochastic"}))
      ->capture_default_str();
  cmd->add_option("--order-time", o->order_time,
                  "most work of the stochastic order search per network, in nominal core-seconds "
                  "(counted, not timed; see `kinfer pe --help`)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed of the stochastic order search")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-memory", o->max_memory,
                  "memory one pedigree's computation may use, e.g. 8G");
  cmd->add_option(
         "--device", o->device,
         "auto: the GPU for plans of 1e9 FLOP and more when there is one; gpu: every plan on "
         "the GPU; cpu: never the GPU")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_flag("--no-recode", o->no_recode, "keep every allele (no allele recoding)");
  cmd->add_flag("--no-genotype-elimination", o->no_elimination, "skip genotype elimination");
  return [o, cmd]() { return cmd->parsed() ? run_lod(*o) : -1; };
}

}  // namespace kinfer::app
