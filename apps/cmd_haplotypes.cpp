// kinfer haplotypes: the most likely phased haplotypes of every pedigree over all markers jointly
// (multipoint, through the map): each person's paternal and maternal allele at every marker,
// where each non-founder's alleles came from (the grandparental origin) and the recombinations
// that implies, with log10 P(configuration, data). The exact MPE of the multi-locus pedigree
// network (docs/haplotypes.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/pedigree_input.hpp"
#include "apps/commands.hpp"
#include "apps/network_options.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/util.hpp"
#include "io/linkage.hpp"
#include "io/merlin.hpp"
#include "linkage/haplotypes.hpp"
#include "linkage/inheritance.hpp"

namespace kinfer::app {

namespace {

namespace lk = kinfer::linkage;

struct HaplotypesOptions {
  PedigreeInput input;
  std::string out, max_memory;
  std::string method = "auto";  // auto, chain or network
  int bits = 24;                // auto: the chain for pedigrees of at most this many bits
  bool json = false;
};

constexpr double kLn10 = 2.302585092994045684;

std::string fixed(double x, const char* fmt = "%.6f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

// One analysis: a locus file and its pedigrees (a MERLIN chromosome, or the LINKAGE files).
using Analysis = MarkerAnalysis;

struct Result {
  nlohmann::json json;
  std::string text;
  bool chain = false;  // some pedigree ran the Lander-Green chain
};

// One pedigree's most likely haplotypes by the path `o.method` asks for: auto runs the chain
// when the pedigree's bits are at most --bits and it fits the memory limit, else the network.
lk::PedigreeHaplotypes one_pedigree(const HaplotypesOptions& o, const lk::Pedigree& ped,
                                    const std::vector<lk::PedigreeLocus>& loci,
                                    const lk::MarkerChain& chain, const PlanOptions& po,
                                    const std::string& path) {
  if (o.method == "network") return lk::most_likely_haplotypes(ped, loci, chain, po, path);
  const int bits = lk::haplotypes_chain_bits(ped, loci, chain);
  const int ceiling = lk::InheritanceModel::kMaxBits;
  if (o.method == "chain" && (bits < 0 || bits > ceiling))
    throw ResourceError("pedigree " + ped.id + ": " +
                        (bits < 0 ? std::string("a Kosambi map over exactly three markers "
                                                "(interference) has no Lander-Green chain")
                                  : std::to_string(bits) + " bits, beyond the chain's " +
                                        std::to_string(ceiling)) +
                        "; run with --method network");
  if (o.method == "auto" && (bits < 0 || bits > o.bits))
    return lk::most_likely_haplotypes(ped, loci, chain, po, path);
  try {
    return lk::most_likely_haplotypes_chain(ped, loci, chain, po, path);
  } catch (const std::length_error& e) {
    if (o.method == "chain")
      throw ResourceError("pedigree " + ped.id + ": the Lander-Green chain (" +
                          std::to_string(bits) + " bits) does not fit: " + e.what());
    spdlog::info("pedigree {}: the Lander-Green chain ({} bits) does not fit ({}): the network",
                 ped.id, bits, e.what());
    return lk::most_likely_haplotypes(ped, loci, chain, po, path);
  }
}

// The most likely haplotypes of every pedigree of one analysis, as text and JSON.
Result analyse(const HaplotypesOptions& o, const Analysis& a, const PlanOptions& po) {
  bool any_chain = false;
  const lk::MarkerChain chain = lk::marker_chain(a.lf);
  if (chain.loci.empty())
    throw InputError(a.lf.path, 0,
                     "no marker (numbered) locus: there are no haplotypes to compute (affection "
                     "loci are not part of them)");
  const auto reduced = lk::reduce_markers(a.pf, a.lf, chain);
  std::vector<std::string> names;
  for (int k : chain.loci) names.push_back(a.lf.loci[k].name);
  const int nl = static_cast<int>(names.size());
  // interval i: the names of its two markers
  auto interval = [&](int i) { return nlohmann::json::array({names[i], names[i + 1]}); };

  std::ostringstream text;
  if (!a.chromosome.empty()) text << "chromosome " << a.chromosome << "\n";
  text << "markers (map order):";
  for (const auto& n : names) text << ' ' << n;
  text << "\n";
  if (nl > 1) {
    const bool sexdiff = chain.male != chain.female;
    text << (sexdiff ? "recombination fractions (male):" : "recombination fractions:");
    for (double t : chain.male) text << ' ' << fixed(t, "%.4g");
    if (sexdiff) {
      text << "\nrecombination fractions (female):";
      for (double t : chain.female) text << ' ' << fixed(t, "%.4g");
    }
    text << "\n";
  }
  nlohmann::json peds = nlohmann::json::array();
  double total = 0;
  for (std::size_t p = 0; p < a.pf.pedigrees.size(); ++p) {
    const lk::Pedigree& ped = a.pf.pedigrees[p];
    const lk::PedigreeHaplotypes h = one_pedigree(o, ped, reduced[p], chain, po, a.pf.path);
    const double log10 = h.ln_pr / kLn10;
    total += log10;
    any_chain = any_chain || h.chain;
    if (h.chain)
      spdlog::info(
          "pedigree {}: {} people, Lander-Green chain (Viterbi), {} bits, state vectors {}{}, "
          "{:.2f} s",
          ped.id, ped.people.size(), h.bits, human_bytes(h.peak_bytes),
          h.checkpoint_every > 1
              ? " (checkpoints every " + std::to_string(h.checkpoint_every) + " markers)"
              : std::string(),
          h.chain_s);
    else
      spdlog::info(
          "pedigree {}: {} people, network, width {}, largest table 2^{:.1f}, estimated peak "
          "{}{}",
          ped.id, ped.people.size(), h.width, h.log2_max_table, human_bytes(h.peak_bytes),
          h.slices > 1 ? ", conditioned into " + std::to_string(h.slices) +
                             " slices to fit the memory limit"
                       : std::string());
    // cells: per person and side, per marker "ALLELE" (founders) or "ALLELE:P|M"
    struct Row {
      std::string person, side, parent;
      std::vector<std::string> cells;
      std::string recomb;
    };
    std::vector<Row> rows;
    nlohmann::json persons = nlohmann::json::array();
    for (std::size_t i = 0; i < ped.people.size(); ++i) {
      const lk::Person& q = ped.people[i];
      const lk::PersonHaplotypes& ph = h.people[i];
      nlohmann::json jp = {
          {"id", q.id},
          {"father", q.founder() ? nlohmann::json() : nlohmann::json(ped.people[q.father].id)},
          {"mother", q.founder() ? nlohmann::json() : nlohmann::json(ped.people[q.mother].id)},
          {"founder", q.founder()}};
      for (int side = 0; side < 2; ++side) {
        const std::vector<int>& al = side == 0 ? ph.paternal : ph.maternal;
        const std::vector<int>& org = side == 0 ? ph.paternal_origin : ph.maternal_origin;
        Row r;
        r.person = q.id;
        r.side = side == 0 ? "paternal" : "maternal";
        r.parent = q.founder() ? "-" : ped.people[side == 0 ? q.father : q.mother].id;
        nlohmann::json alleles = nlohmann::json::array(), origins = nlohmann::json::array();
        for (int k = 0; k < nl; ++k) {
          const lk::Locus& L = a.lf.loci[chain.loci[k]];
          const std::string name = al[k] ? L.allele_name(al[k]) : "-";
          alleles.push_back(al[k] ? nlohmann::json(name) : nlohmann::json());
          const char* o = org[k] == 0 ? "P" : org[k] == 1 ? "M" : nullptr;
          origins.push_back(o ? nlohmann::json(o) : nlohmann::json());
          r.cells.push_back(o ? name + ":" + o : name);
        }
        nlohmann::json rec = nlohmann::json::array();
        for (int i2 : ph.recombinations[side]) {
          rec.push_back(interval(i2));
          r.recomb += (r.recomb.empty() ? "" : ",") + names[i2] + "|" + names[i2 + 1];
        }
        jp[side == 0 ? "paternal" : "maternal"] = std::move(alleles);
        jp[side == 0 ? "paternal_origin" : "maternal_origin"] =
            q.founder() ? nlohmann::json() : std::move(origins);
        jp[side == 0 ? "paternal_recombinations" : "maternal_recombinations"] = std::move(rec);
        rows.push_back(std::move(r));
      }
      persons.push_back(std::move(jp));
    }
    peds.push_back({{"id", ped.id},
                    {"log10_probability", log10},
                    {"recombinations", h.recombinations},
                    {"slices", h.slices},
                    {"persons", std::move(persons)}});
    // the table, columns as wide as their widest cell
    std::size_t wp = 6, wf = 4;
    std::vector<std::size_t> wc(nl);
    for (int k = 0; k < nl; ++k) wc[k] = names[k].size();
    for (const Row& r : rows) {
      wp = std::max(wp, r.person.size());
      wf = std::max(wf, r.parent.size());
      for (int k = 0; k < nl; ++k) wc[k] = std::max(wc[k], r.cells[k].size());
    }
    auto pad = [](const std::string& s, std::size_t w) {
      return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
    };
    text << "pedigree " << ped.id << ": log10 P(haplotypes, data) = " << fixed(log10) << ", "
         << h.recombinations << " recombination" << (h.recombinations == 1 ? "" : "s") << "\n";
    std::string head = "  " + pad("person", wp) + "  " + pad("side", 8) + "  " + pad("from", wf);
    for (int k = 0; k < nl; ++k) head += "  " + pad(names[k], wc[k]);
    head += "  recombinations";
    text << head << "\n";
    for (const Row& r : rows) {
      std::string line =
          "  " + pad(r.person, wp) + "  " + pad(r.side, 8) + "  " + pad(r.parent, wf);
      for (int k = 0; k < nl; ++k) line += "  " + pad(r.cells[k], wc[k]);
      line += "  " + (r.recomb.empty() ? std::string("-") : r.recomb);
      text << line << "\n";
    }
  }
  if (a.pf.pedigrees.size() > 1)
    text << "total: log10 P(haplotypes, data) = " << fixed(total) << " over "
         << a.pf.pedigrees.size() << " pedigrees\n";
  nlohmann::json j = {{"markers", names},
                      {"male_theta", chain.male},
                      {"female_theta", chain.female},
                      {"log10_probability", total},
                      {"pedigrees", std::move(peds)}};
  if (!a.chromosome.empty()) j["chromosome"] = a.chromosome;
  return {std::move(j), text.str(), any_chain};
}

int run_haplotypes(const HaplotypesOptions& o) {
  check_pedigree_input(o.input);
  check_output_file(o.out, "--out");
  PlanOptions po;
  try {
    po.max_memory_bytes = within_available_memory(
        o.max_memory.empty() ? default_max_memory_bytes() : parse_size(o.max_memory),
        !o.max_memory.empty());
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--max-memory", e.what());
  }
  const std::vector<Analysis> analyses =
      read_marker_analyses(o.input, "kinfer haplotypes",
                           "X-linked haplotypes (a male carries only his maternal allele)");
  std::string text;
  nlohmann::json chromosomes = nlohmann::json::array();
  bool any_chain = false;
  for (const Analysis& a : analyses) {
    Result r = analyse(o, a, po);
    any_chain = any_chain || r.chain;
    text += (text.empty() ? "" : "\n") + r.text;
    chromosomes.push_back(std::move(r.json));
  }
  text +=
      "(ALLELE:P = the parent's paternal allele, from the grandfather; ALLELE:M = the parent's "
      "maternal allele, from the grandmother; founders' alleles have no origin)\n";
  std::string out;
  if (o.json) {
    nlohmann::json j = {{"ped", o.input.ped}, {"dat", o.input.dat}};
    if (o.input.map.empty()) {
      j.update(chromosomes[0]);
    } else {
      j["map"] = o.input.map;
      j["chromosomes"] = std::move(chromosomes);
    }
    j["ties"] =
        std::string(any_chain
                        ? "the Lander-Green chain's Viterbi traceback (the lowest-numbered "
                          "inheritance state among equals, from the last marker back), each "
                          "marker's alleles by the one-marker network's max-product traceback "
                          "(lowest values first), "
                        : "the max-product traceback's (lowest values first, per bucket of "
                          "the elimination order, which is deterministic), ") +
        "then each founder's haplotypes ordered so that the paternal allele is the smaller at "
        "the founder's first heterozygous marker";
    out = j.dump(2) + "\n";
  } else {
    out = text;
  }
  std::cout << out << std::flush;
  if (!o.out.empty()) write_file_atomically(o.out, out);
  return 0;
}

}  // namespace

Runner add_haplotypes(CLI::App& root) {
  auto o = std::make_shared<HaplotypesOptions>();
  CLI::App* cmd = root.add_subcommand(
      "haplotypes",
      "the most likely phased haplotypes of every pedigree over all markers jointly "
      "(multipoint): each person's paternal and maternal alleles, their grandparental origin "
      "and the recombinations (LINKAGE or MERLIN input)");
  add_pedigree_input_options(*cmd, o->input);
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_option("--out", o->out, "also write the output (text or JSON) to this file");
  cmd->add_option("--method", o->method,
                  "auto: the Lander-Green chain (Viterbi) for pedigrees of at most --bits bits "
                  "that fit --max-memory, the network otherwise; chain or network: that path "
                  "for every pedigree")
      ->check(CLI::IsMember({"auto", "chain", "network"}));
  cmd->add_option("--bits", o->bits,
                  "auto: the largest inheritance vector (bits) run by the chain (default 24; 0: "
                  "always the network)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--max-memory", o->max_memory,
                  "memory one pedigree's computation may use, e.g. 8G (a plan that does not fit "
                  "is conditioned)");
  return [o, cmd]() { return cmd->parsed() ? run_haplotypes(*o) : -1; };
}

}  // namespace kinfer::app
