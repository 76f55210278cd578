// kinfer genotypes: each person's posterior genotype probabilities at each marker of a LINKAGE
// pedigree, given all the data, and the observed genotypes that are improbable given everyone
// else's data (MERLIN's error check). Single-marker (every marker on its own), or with
// --multipoint all markers at once through the map by the Lander-Green chain (docs/genotypes.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/pedigree_input.hpp"
#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/posterior.hpp"
#include "engine/util.hpp"
#include "io/linkage.hpp"
#include "io/merlin.hpp"
#include "linkage/marker_posteriors.hpp"
#include "linkage/network.hpp"
#include "linkage/pedigree.hpp"

namespace kinfer::app {

namespace {

namespace lk = kinfer::linkage;

struct GenotypesOptions {
  PedigreeInput input;
  std::string out, max_memory;
  double error_threshold = 0.01;
  bool json = false;
  bool multipoint = false;
  int bits = 24;
};

// An unordered genotype as input alleles (1-based), the smaller first; a sex-linked male's
// single allele is (0, a).
using Genotype = std::pair<int, int>;
// The posterior of one person at one marker: each genotype with a nonzero probability.
using GenotypeDist = std::vector<std::pair<Genotype, double>>;

std::string label(const lk::Locus& locus, Genotype g) {
  if (g.first == 0) return locus.allele_name(g.second);
  std::string s = locus.allele_name(g.first);
  s += '/';
  s += locus.allele_name(g.second);
  return s;
}

std::optional<Genotype> observed(const lk::Person& p, int locus, bool hemizygous) {
  const lk::Phenotype ph = p.pheno[locus];
  if (ph.a1 == 0) return std::nullopt;
  if (hemizygous) return Genotype{0, ph.a1};
  return Genotype{std::min(ph.a1, ph.a2), std::max(ph.a1, ph.a2)};
}

// Hardy-Weinberg frequency of a genotype (of a single allele for a sex-linked male).
double population_frequency(const lk::Locus& locus, Genotype g) {
  const double b = locus.freq[g.second - 1];
  if (g.first == 0) return b;
  const double a = locus.freq[g.first - 1];
  return g.first == g.second ? a * a : 2 * a * b;
}

// The posterior genotype distribution of each person in `wanted` at one marker, or nothing when
// the data are impossible (a Mendelian inconsistency). The pedigree network of that marker alone
// gets, per wanted person, one more variable: the unordered genotype, a deterministic function
// of the person's allele variables (it sums to 1, so P(e) is unchanged); its marginal is the
// answer. No allele recoding: every allele keeps its own name.
std::optional<std::vector<GenotypeDist>> marker_posteriors(const lk::Pedigree& ped,
                                                           const lk::LocusFile& lf, int locus,
                                                           const std::vector<int>& wanted,
                                                           const PlanOptions& po) {
  lk::ReductionOptions ro;
  ro.recode = false;
  lk::Inconsistency err;
  const lk::PedigreeLocus L = lk::reduce_locus(ped, lf, locus, ro, &err);
  if (err.locus >= 0) return std::nullopt;
  const lk::PedigreeNetwork pn(ped, {&L}, false, true);
  Network net = pn.network();
  std::vector<lk::GenotypeVariable> gv;  // per wanted person
  for (int i : wanted) gv.push_back(lk::add_genotype_variable(net, pn, 0, i, L));
  ConditionedPlan cp = make_conditioned_plan(net, pn.evidence(), po);
  // One marker's network is small: one thread (OpenMP's start per bucket costs more than the
  // work), unless its largest table is large.
  const int threads = cp.plan.order.stats.log2_max_table < 16 ? 1 : 0;
  const Marginals m = compute_marginals(cp, threads);
  if (m.ln_pe == -INFINITY) return std::nullopt;
  std::vector<GenotypeDist> out;
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    GenotypeDist& d = out.emplace_back();
    for (std::size_t x = 0; x < gv[w].values.size(); ++x)
      if (m.p[gv[w].var][x] > 0) d.push_back({gv[w].values[x], m.p[gv[w].var][x]});
  }
  return out;
}

// P(observed genotype | everyone else's data): the person's own genotype at this marker made
// unknown, the rest as given. Nothing when the others' data are impossible on their own.
std::optional<double> leave_one_out(const lk::Pedigree& ped, const lk::LocusFile& lf, int locus,
                                     int person, Genotype obs, const PlanOptions& po) {
  lk::Pedigree without = ped;
  without.people[person].pheno[locus] = {0, 0};
  const auto d = marker_posteriors(without, lf, locus, {person}, po);
  if (!d) return std::nullopt;
  for (auto [g, p] : d->front())
    if (g == obs) return p;
  return 0.0;
}

std::string number(double x, const char* fmt = "%.6f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

// One marker's answers: the posteriors of every person (nothing when the data are impossible)
// and, per person, P(observed | others) (nothing: untyped, or the others' data impossible).
struct MarkerResult {
  std::optional<std::vector<GenotypeDist>> post;
  std::vector<std::optional<double>> given_others;
};

MarkerResult single_marker(const lk::Pedigree& ped, const lk::LocusFile& lf, int k,
                           const PlanOptions& po) {
  const int np = static_cast<int>(ped.people.size());
  std::vector<int> everyone(np);
  for (int i = 0; i < np; ++i) everyone[i] = i;
  MarkerResult r;
  r.post = marker_posteriors(ped, lf, k, everyone, po);
  r.given_others.resize(np);
  for (int i = 0; i < np; ++i) {
    const lk::Person& p = ped.people[i];
    if (const auto obs = observed(p, k, lf.sex_linked && p.sex == 1))
      r.given_others[i] = leave_one_out(ped, lf, k, i, *obs, po);
  }
  return r;
}

MarkerResult from_chain(const std::vector<lk::MultipointGenotypes::Cell>& cells) {
  MarkerResult r;
  r.post.emplace();
  for (const auto& c : cells) {
    if (c.posterior.empty()) r.post.reset();
    if (r.post) r.post->push_back(c.posterior);
    r.given_others.push_back(std::isnan(c.p_given_others) ? std::nullopt
                                                          : std::optional(c.p_given_others));
  }
  return r;
}

struct Report {
  nlohmann::json pedigrees = nlohmann::json::array();
  nlohmann::json suspect = nlohmann::json::array();
  std::ostringstream text, suspect_text;
};

// The multipoint answers of one pedigree (nothing without --multipoint): by the Lander-Green
// chain, or by the pedigree network when the chain does not fit --bits or --max-memory (exit 3
// when the network does not fit --max-memory either).
std::optional<lk::MultipointGenotypes> multipoint(const lk::Pedigree& ped, const lk::LocusFile& lf,
                                                  const GenotypesOptions& o,
                                                  const PlanOptions& po) {
  if (!o.multipoint) return std::nullopt;
  lk::MultipointOptions mo;
  mo.max_memory_bytes = po.max_memory_bytes;
  mo.max_bits = o.bits;
  lk::MultipointGenotypes mp;
  try {
    mp = lk::multipoint_genotypes(ped, lf, lk::marker_chain_map(lf), mo);
    std::string one_by_one;  // the markers whose candidates went one emission each
    if (mp.candidates > 0)
      one_by_one = fmt::format(", {} candidate emissions {:.2f} s, their sums {:.2f} s",
                               mp.candidates, mp.emission_s, mp.sum_s);
    spdlog::info(
        "pedigree {}: multipoint by the Lander-Green chain, {} bits: walk {:.2f} s, cavities "
        "at {} markers {:.2f} s{}",
        ped.id, mp.bits, mp.walk_s, mp.cavity_markers, mp.cavity_s, one_by_one);
  } catch (const std::length_error& e) {
    // Beyond the chain: the pedigree network, exact and much slower (one likelihood per typed
    // genotype besides the posteriors' pass).
    spdlog::info("{}: multipoint through the pedigree network instead", e.what());
    const auto t0 = std::chrono::steady_clock::now();
    mp = lk::multipoint_genotypes_network(ped, lf, lk::marker_chain_map(lf), po);
    spdlog::info("pedigree {}: multipoint by the pedigree network in {:.2f} s", ped.id,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int k : mp.left_out)
    spdlog::warn(
        "pedigree {}, marker {}: Mendelian-inconsistent; left out of the multipoint "
        "chain and analysed on its own",
        ped.id, lf.loci[k].name);
  if (std::isinf(mp.ln_likelihood))
    spdlog::warn(
        "pedigree {}: the data at all markers together are impossible; no multipoint "
        "posterior",
        ped.id);
  return mp;
}

// One pedigree: the posteriors of every person at every marker, and the error check of every
// typed genotype, into the report.
// `chromosome`: MERLIN input's (named in the output), else empty.
void analyze_pedigree(const lk::Pedigree& ped, const lk::LocusFile& lf, const PlanOptions& po,
                      const GenotypesOptions& o, const std::string& chromosome, Report& r) {
  const int np = static_cast<int>(ped.people.size());
  const double threshold = o.error_threshold;
  const std::optional<lk::MultipointGenotypes> mp = multipoint(ped, lf, o, po);
  nlohmann::json people = nlohmann::json::array();
  for (const lk::Person& p : ped.people)
    people.push_back({{"id", p.id}, {"markers", nlohmann::json::array()}});
  // column widths: the longest person id and marker name
  int pw = 6, mw = 6;
  for (const lk::Person& p : ped.people) pw = std::max(pw, static_cast<int>(p.id.size()));
  for (const lk::Locus& l : lf.loci) mw = std::max(mw, static_cast<int>(l.name.size()));
  char head[160];
  std::snprintf(head, sizeof head, "  %-*s  %-*s  %-8s  %-13s  %s\n", pw, "person", mw, "marker",
                "observed", "most probable", "P");
  const std::string on_chromosome = chromosome.empty() ? "" : " chromosome " + chromosome;
  r.text << "pedigree " << ped.id << on_chromosome << "\n" << head;
  for (int k = 0; k < lf.n_loci(); ++k) {
    const lk::Locus& locus = lf.loci[k];
    if (locus.type != lk::LocusType::Numbered) continue;
    // the chain's answer, or the marker on its own (without --multipoint, or left out of it)
    int in_chain = -1;
    if (mp)
      for (std::size_t j = 0; j < mp->markers.size(); ++j)
        if (mp->markers[j] == k) in_chain = static_cast<int>(j);
    const MarkerResult res =
        in_chain >= 0 ? from_chain(mp->cell[in_chain]) : single_marker(ped, lf, k, po);
    const auto& post = res.post;
    if (!post && in_chain < 0)
      spdlog::warn("pedigree {}, marker {}: the genotypes are Mendelian-inconsistent; no "
                   "posterior (the error check below says which genotype is at fault)",
                   ped.id, locus.name);
    for (int i = 0; i < np; ++i) {
      const lk::Person& p = ped.people[i];
      const bool hemi = lf.sex_linked && p.sex == 1;
      const auto obs = observed(p, k, hemi);
      nlohmann::json m = {{"marker", locus.name},
                          {"observed", obs ? nlohmann::json(label(locus, *obs)) : nullptr},
                          {"genotypes", nullptr}};
      std::string best = "-", best_p = "-";
      if (post) {
        m["genotypes"] = nlohmann::json::object();
        double top = -1;
        for (auto [g, pr] : (*post)[i]) {
          m["genotypes"][label(locus, g)] = pr;
          if (pr > top) top = pr, best = label(locus, g);
        }
        best_p = number(top);
      }
      char line[512];
      std::snprintf(line, sizeof line, "  %-*s  %-*s  %-8s  %-13s  %s\n", pw, p.id.c_str(), mw,
                    locus.name.c_str(), obs ? label(locus, *obs).c_str() : "-", best.c_str(),
                    best_p.c_str());
      r.text << line;
      if (obs) {
        const auto q = res.given_others[i];
        m["p_given_others"] = q ? nlohmann::json(*q) : nullptr;
        if (q && *q < threshold) {
          const double prior = population_frequency(locus, *obs);
          r.suspect.push_back({{"pedigree", ped.id},
                               {"person", p.id},
                               {"marker", locus.name},
                               {"observed", label(locus, *obs)},
                               {"p_given_others", *q},
                               {"population_frequency", prior}});
          if (!chromosome.empty()) r.suspect.back()["chromosome"] = chromosome;
          r.suspect_text << "  pedigree " << ped.id << on_chromosome << " person " << p.id
                         << " marker "
                         << locus.name << ": observed " << label(locus, *obs)
                         << ", P(observed | others) = " << number(*q, "%.4g")
                         << " (population frequency " << number(prior, "%.4g") << ")\n";
        }
      }
      people[i]["markers"].push_back(std::move(m));
    }
  }
  nlohmann::json out = {{"id", ped.id}, {"people", std::move(people)}};
  if (!chromosome.empty()) out["chromosome"] = chromosome;
  if (mp) {
    out["multipoint_by"] = mp->network ? "network" : "chain";
    if (!mp->network) out["chain_bits"] = mp->bits;
    out["ln_likelihood"] =
        std::isinf(mp->ln_likelihood) ? nlohmann::json(nullptr) : nlohmann::json(mp->ln_likelihood);
    nlohmann::json left = nlohmann::json::array();
    for (int k : mp->left_out) left.push_back(lf.loci[k].name);
    out["single_marker"] = std::move(left);
  }
  r.pedigrees.push_back(std::move(out));
}

// The pedigrees and loci of one analysis: LINKAGE input's, or one chromosome of MERLIN input's.
using Analysis = MarkerAnalysis;

int run_genotypes(const GenotypesOptions& o) {
  check_pedigree_input(o.input);
  check_output_file(o.out, "--out");
  PlanOptions po;
  po.order.heuristic = OrderHeuristic::MinFill;
  try {
    po.max_memory_bytes = within_available_memory(
        o.max_memory.empty() ? default_max_memory_bytes() : parse_size(o.max_memory),
        !o.max_memory.empty());
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--max-memory", e.what());
  }
  const std::vector<Analysis> analyses =
      read_marker_analyses(o.input, "kinfer genotypes",
                           "X-linked (a male's genotype is his one allele)");
  Report r;
  for (const Analysis& a : analyses)
    for (const lk::Pedigree& ped : a.pf.pedigrees)
      analyze_pedigree(ped, a.lf, po, o, a.chromosome, r);
  std::string out;
  if (o.json) {
    nlohmann::json j = {{"ped", o.input.ped},
                        {"dat", o.input.dat},
                        {"error_threshold", o.error_threshold},
                        {"multipoint", o.multipoint},
                        {"pedigrees", std::move(r.pedigrees)},
                        {"suspect", std::move(r.suspect)}};
    if (!o.input.map.empty()) j["map"] = o.input.map;
    out = j.dump(2) + "\n";
  } else {
    out = r.text.str();
    out += "suspect genotypes (P(observed | others' data) < " + number(o.error_threshold, "%g") +
           "):\n";
    const std::string s = r.suspect_text.str();
    out += s.empty() ? "  none\n" : s;
  }
  std::cout << out << std::flush;
  if (!o.out.empty()) write_file_atomically(o.out, out);
  return 0;
}

}  // namespace

Runner add_genotypes(CLI::App& root) {
  auto o = std::make_shared<GenotypesOptions>();
  CLI::App* cmd = root.add_subcommand(
      "genotypes",
      "posterior genotype probabilities of every person at every marker (LINKAGE or MERLIN "
      "input), and the observed genotypes improbable given everyone else's data");
  add_pedigree_input_options(*cmd, o->input);
  cmd->add_option("--error-threshold", o->error_threshold,
                  "flag an observed genotype whose probability given everyone else's data at "
                  "that marker is below this")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_flag("--multipoint", o->multipoint,
                "all markers at once through the map (the locus file's recombination fractions) "
                "by the Lander-Green chain, instead of each marker on its own");
  cmd->add_option("--bits", o->bits,
                  "--multipoint: a pedigree whose inheritance vector has more bits runs through "
                  "the pedigree network instead of the Lander-Green chain (exact, much slower)")
      ->check(CLI::Range(0, 40))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_option("--out", o->out, "also write the output (text or JSON) to this file");
  cmd->add_option("--max-memory", o->max_memory,
                  "memory one marker's computation may use, e.g. 8G (a plan that does not fit is "
                  "conditioned)");
  return [o, cmd]() { return cmd->parsed() ? run_genotypes(*o) : -1; };
}

}  // namespace kinfer::app
