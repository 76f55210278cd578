// kinfer lod: exact two-point and multipoint LOD scores from LINKAGE or MERLIN-format files.
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

#include "apps/command_options.hpp"
#include "apps/commands.hpp"
#include "apps/lod_merlin.hpp"
#include "apps/lod_report.hpp"
#include "apps/network_options.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "io/linkage.hpp"
#include "linkage/analysis.hpp"
#include "mpi/distributed.hpp"
#include "scheduler/devices.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

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

namespace {

namespace lk = kinfer::linkage;


// LINKAGE input is --ped and --dat; MERLIN input adds -m (and --model), and takes MERLIN's
// position options instead of LINKAGE's program, positions and moving locus.
void check_input_options(const LodOptions& o) {
  const MerlinLodOptions& m = o.merlin;
  if (o.ped.empty() || o.dat.empty())
    throw CLI::ValidationError(
        "--ped/--dat",
        "give the pedigree and data files: --ped PED --dat DAT (LINKAGE), or "
        "-p PED -d DAT -m MAP --model MODEL [-f FREQ] (MERLIN)");
  if (m.map.empty()) {
    const char* merlin_only = !m.model.empty()  ? "--model"
                              : !m.freq.empty() ? "-f/--freq"
                              : m.grid > 0      ? "--grid"
                              : m.steps > 0     ? "--steps"
                              : m.start         ? "--start"
                              : m.stop          ? "--stop"
                              : m.singlepoint   ? "--singlepoint"
                                                : nullptr;
    if (merlin_only)
      throw CLI::ValidationError(merlin_only, "is for MERLIN-format input, which needs -m MAP");
    return;
  }
  if (m.model.empty())
    throw CLI::ValidationError("--model",
                               "MERLIN-format input needs the parametric model file (--model "
                               "FILE: AFFECTION ALLELE_FREQ P0,P1,P2 LABEL per line)");
  const char* linkage_only = !o.program.empty()     ? "--program"
                             : !o.positions.empty() ? "--positions"
                             : o.moving > 0         ? "--moving"
                                                    : nullptr;
  if (linkage_only)
    throw CLI::ValidationError(linkage_only,
                               "is for LINKAGE input; with MERLIN input use --grid, --steps, "
                               "--start, --stop or --singlepoint");
  if (!o.theta.empty() && !m.singlepoint)
    throw CLI::ValidationError("--theta", "with MERLIN input, --theta is for --singlepoint");
}

// The analysis as the options ask for it: program, thetas or positions, the chain's limits,
// the reductions, the order search and the memory limit.
lk::AnalysisOptions analysis_options(const LodOptions& o) {
  lk::AnalysisOptions ao;
  if (!o.program.empty())
    ao.program = o.program == "mlink" ? lk::Program::Mlink : lk::Program::Linkmap;
  if (!o.theta.empty()) {
    ao.thetas = parse_list("--theta", o.theta);
    for (double t : ao.thetas)
      if (t < 0 || t > 0.5)
        throw CLI::ValidationError(
            "--theta", "a recombination fraction is between 0 and 0.5, found " + std::to_string(t));
  }
  if (!o.positions.empty()) ao.positions = parse_list("--positions", o.positions);
  ao.moving_locus = o.moving;
  ao.lander_green_bits = o.bits;
  ao.emission_table_entries = o.emission_tables;
  ao.reduction.recode = !o.no_recode;
  ao.reduction.eliminate = !o.no_elimination;
  ao.plan.order.heuristic = parse_heuristic(o.order);
  ao.plan.order.time_budget = o.order_time;
  ao.plan.order.seed = o.seed;
  try {
    ao.plan.max_memory_bytes = within_available_memory(
        o.max_memory.empty() ? default_max_memory_bytes() : parse_size(o.max_memory),
        !o.max_memory.empty());
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--max-memory", e.what());
  }
  return ao;
}

int run_lod(const LodOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  check_input_options(o);
  check_lod_outputs(o.out, o.plot);
  lk::AnalysisOptions ao = analysis_options(o);
  // Every plan through one runner (scheduler/runner.hpp), which decides where each runs: the GPU
  // opened once, for the plans large enough to pay for it (`--device auto`) or all of them
  // (`gpu`), else the engine's run_plan; the profile read once. The plans are refills of a few
  // structures (per theta or position).
  sched::RunRequest req =
      run_request(o.device, o.schedule, o.profile, o.check, o.explain, o.gpu_memory);
  req.repeated_plans = true;
  req.host_memory_bytes = ao.plan.max_memory_bytes;  // the copies of a plan for several GPUs
  auto runner = std::make_shared<sched::Runner>(req);
  // A plan whose tables do not fit the device that will run it is conditioned (its slices run
  // one after another, or spread over the GPUs).
  ao.runner = [runner](ConditionedPlan& cp) { return runner->run(cp).ln_pr; };
  runner->budget_for_device(ao.plan);
  // The Lander-Green chain (dense maps): sched::gpu_chain_backends says when it uses the GPU.
  ao.chain_backend = sched::gpu_chain_backends(req.device, ao.plan.max_memory_bytes);
  // --check: the verdict over every plan run (logged), and the exit status
  auto check_status = [&o, runner]() {
    const sched::Runner::Totals& runs = runner->totals();
    if (runs.gpu_runs)
      spdlog::info("{} plan run(s) on the GPU, {} on the CPU", runs.gpu_runs, runs.cpu_runs);
    if (!o.check) return 0;
    if (runs.checked == 0) {
      spdlog::warn("check: not run (no GPU to compare with): every plan ran on the CPU alone");
      return kExitCheckNotRun;
    }
    const std::string v = sched::check_report_verdict(runs.check);
    if (runs.check.passed) {
      spdlog::info("{} over {} plan run(s)", v, runs.checked);
      return 0;
    }
    spdlog::error("{} (plan run {})", v, runs.check_run + 1);
    return kExitCheckFailed;
  };
  // Under mpirun: the (evaluation, pedigree) likelihoods dealt over the ranks, gathered after
  // each evaluation in pedigree order (the same sums as one process); rank 0 alone prints.
  // The Lander-Green chain's pedigrees are dealt the same way (gathered after the chain).
  std::unique_ptr<mpi::RankDealer> dealer;
  if (mpi::size() > 1) {
    dealer = std::make_unique<mpi::RankDealer>(o.verify, o.seed);
    ao.dealer = dealer.get();
    spdlog::info("{} ranks: the likelihoods of each evaluation's pedigrees dealt cyclically",
                 mpi::size());
  }
  // --verify: every rank knows every mismatch (combine() compares on all of them); exit 5 with
  // both values, as pe's slices. In one process there is nothing to compare with: exit 6.
  auto verify_status = [&o, &dealer](int status) {
    if (dealer && !dealer->mismatches().empty()) {
      for (const auto& m : dealer->mismatches())
        spdlog::error("verify: likelihood {} gave ln {:.17g} on rank {} and {:.17g} on rank {}",
                      m.item, m.a, m.rank_a, m.b, m.rank_b);
      return kExitCheckFailed;
    }
    if (status == 0 && o.verify > 0 && mpi::size() < 2) {
      spdlog::warn(
          "verify: not run (it recomputes likelihoods on another rank; run under mpirun -np 2 "
          "or more)");
      return kExitCheckNotRun;
    }
    return status;
  };
  if (!o.merlin.map.empty()) {
    MerlinLodOptions m = o.merlin;
    m.dat = o.dat;
    m.ped = o.ped;
    m.json = o.json;
    m.plot = o.plot;
    m.out = o.out;
    m.thetas = ao.thetas;
    const int rc = run_lod_merlin(m, ao);
    return verify_status(rc ? rc : check_status());
  }
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

  const lk::AnalysisResult r = lk::analyze(lf, pf, ao);
  int status = check_status();
  nlohmann::json mpi_report;  // the "mpi" member of --json
  if (dealer) {
    mpi_report = {
        {"ranks", mpi::size()},
        {"dealing",
         "cyclic over (evaluation, pedigree) pairs, and the Lander-Green chain's pedigrees"},
        {"per_rank", dealer->per_rank("likelihoods")}};
    if (dealer->verified() > 0 || !dealer->mismatches().empty())
      mpi_report["verify"] = {{"recomputed", dealer->verified()},
                              {"mismatches", dealer->mismatches().size()}};
    if (mpi::any(status != 0) && status == 0) status = kExitCheckFailed;  // failed elsewhere
    if (mpi::rank() > 0) return verify_status(status);
  }
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  spdlog::info(
      "{} evaluation(s) in {:.3g} s: reduce {:.3g} s, {} plan(s) {:.3g} s, {} run(s) {:.3g} s; "
      "largest width {}, largest table 2^{:.1f}",
      r.evaluations.size(), secs, r.timing.reduce_s, r.timing.plans, r.timing.plan_s, r.timing.runs,
      r.timing.evaluate_s, r.timing.max_width, r.timing.log2_max_table);

  const std::string text = lod_text_report(r, lf, pf);
  nlohmann::json j = lod_json_report(r, lf, pf, o.ped, o.dat, secs);
  if (o.check) {  // the verdict over every plan run, as in `kinfer pe --json`
    const sched::Runner::Totals& runs = runner->totals();
    j["check"] = runs.checked
                     ? sched::check_json(runs.check)
                     : nlohmann::json{{"passed", nullptr}, {"not_run", "no GPU to compare with"}};
    if (runs.checked) j["check"]["plan_runs"] = runs.checked;
  }
  if (!mpi_report.is_null()) j["mpi"] = mpi_report;
  if (const auto m = memory_limit_json(); !m.is_null()) j["memory_limit"] = m;
  if (o.json)
    std::cout << j.dump(2) << std::endl;
  else
    std::cout << text << std::flush;
  const std::string plot = write_lod_outputs(o.out, o.plot, text, j);
  if (!plot.empty()) write_lod_plot(plot, r, lf);
  return verify_status(status);
}

}  // namespace

void add_lod_options(CLI::App& cmd, LodOptions& o) {
  cmd.add_option("-p,--ped", o.ped,
                 "pedigree file: LINKAGE (pre- or post-makeped), or MERLIN's with -m");
  cmd.add_option("-d,--dat", o.dat, "LINKAGE locus (data) file, or MERLIN's data file with -m");
  auto* m = &o.merlin;
  cmd.add_option("-m,--map", m->map,
                 "MERLIN map (CHROMOSOME MARKER POSITION in cM): read -d, -p, -f and --model as "
                 "MERLIN files");
  cmd.add_option("-f,--freq", m->freq,
                 "MERLIN allele frequency file (default: counted over all genotyped people)");
  cmd.add_option("--model", m->model,
                 "MERLIN parametric model file: AFFECTION ALLELE_FREQ P0,P1,P2 LABEL per line, "
                 "one analysis per line");
  cmd.add_option("--grid", m->grid, "MERLIN input: a multipoint position every N cM")
      ->check(number_at_least(0.001));
  cmd.add_option("--steps", m->steps,
                 "MERLIN input: N multipoint positions between consecutive markers")
      ->check(count_at_least(0));
  cmd.add_option("--start", m->start, "MERLIN input: first multipoint position (cM)");
  cmd.add_option("--stop", m->stop, "MERLIN input: last multipoint position (cM)");
  cmd.add_flag("--singlepoint", m->singlepoint,
               "MERLIN input: two-point LOD scores of each marker (thetas: --theta, default "
               "0,0.01,0.05,0.1,0.2,0.3,0.4) instead of multipoint");
  cmd.add_option("--program", o.program,
                 "mlink (LOD scores over a theta) or linkmap (location scores); default: what "
                 "the locus file's last line is written for")
      ->check(CLI::IsMember({"mlink", "linkmap"}));
  cmd.add_option("--theta", o.theta,
                 "MLINK (or MERLIN input with --singlepoint): values of the varied theta, e.g. "
                 "'0,0.05,0.1' or '0:0.5:0.05'");
  cmd.add_option("--positions", o.positions,
                 "LINKMAP: map positions (cM from the first marker) of the moving locus across "
                 "the whole marker map, e.g. '-10:120:2'");
  cmd.add_option("--moving", o.moving,
                 "LINKMAP: the moving locus (input number; default: the last line's, else the "
                 "first affection locus)")
      ->check(count_at_least(1));
  cmd.add_flag("--json", o.json, "print one JSON object instead of text");
  cmd.add_option("--plot", o.plot, "draw the LOD curve to FILE.svg or FILE.png (gnuplot)");
  cmd.add_option("--out", o.out, "also write lod.txt, lod.json and lod.svg into this folder");
  cmd.add_option("--order", o.order, "elimination order heuristic")
      ->check(CLI::IsMember({"minfill", "minweight", "wminfill", "stochastic"}))
      ->capture_default_str();
  cmd.add_option("--order-time", o.order_time,
                 "most work of the stochastic order search per network, in nominal core-seconds "
                 "(counted, not timed; see `kinfer pe --help`)")
      ->check(number_at_least(0))
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "random seed of the stochastic order search")
      ->capture_default_str();
  cmd.add_option("--threads", o.threads, "CPU threads (default: all cores)")
      ->check(count_at_least(1));
  cmd.add_option("--max-memory", o.max_memory,
                 "memory one pedigree's computation may use, e.g. 8G (a plan that does not fit "
                 "is conditioned: its slices run one after another)");
  cmd.add_option("--bits", o.bits,
                 "multipoint: a pedigree whose inheritance vector has at most this many bits "
                 "(2n - f) runs the Lander-Green chain (on the GPU from 18 bits with --device "
                 "auto or gpu), larger ones the network (default 24, as MERLIN's --bits)")
      ->check(CLI::Range(0, 40));
  cmd.add_option("--emission-tables", o.emission_tables,
                 "multipoint chain: a marker's emission is kept as factor tables of at most this "
                 "many entries each (default 2^26); a larger one is computed per inheritance "
                 "vector on the fly (less memory, more time per step); 0: every locus on the fly")
      ->check(number_at_least(0));
  add_run_options(cmd, o.device, o.schedule, o.profile, o.check, &o.explain, o.gpu_memory);
  cmd.add_option("--verify", o.verify,
                 "under mpirun: recompute this fraction (0 to 1, drawn with --seed) of the "
                 "likelihoods on a second rank and compare (exit 5 on a mismatch, with both "
                 "values)")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_flag("--no-recode", o.no_recode, "keep every allele (no allele recoding)");
  cmd.add_flag("--no-genotype-elimination", o.no_elimination, "skip genotype elimination");
}

Runner add_lod(CLI::App& root) {
  auto o = std::make_shared<LodOptions>();
  CLI::App* cmd = root.add_subcommand(
      "lod",
      "exact two-point and multipoint LOD and HLOD scores from LINKAGE or MERLIN-format files");
  add_lod_options(*cmd, *o);
  return [o, cmd]() { return cmd->parsed() ? run_lod(*o) : -1; };
}

}  // namespace kinfer::app
