#include "linkage/haplotypes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/posterior.hpp"
#include "engine/util.hpp"
#include "linkage/inheritance.hpp"
#include "linkage/network.hpp"
#include "linkage/viterbi.hpp"

namespace kinfer::linkage {

MarkerChain marker_chain(const LocusFile& lf) {
  MarkerChain c;
  c.kosambi = lf.map_function == MapFunction::Kosambi;
  const int n = lf.n_loci();
  double male = 0, female = 0;  // from the last marker to this map position
  for (int pos = 0; pos < n; ++pos) {
    const int k = lf.map_order[pos];
    if (lf.loci[k].type == LocusType::Numbered) {
      if (!c.loci.empty()) c.male.push_back(male), c.female.push_back(female);
      c.loci.push_back(k);
      male = female = 0;
    }
    if (!c.loci.empty() && pos + 1 < n) {
      male = combine_thetas(male, lf.male_theta[pos], lf.map_function);
      female = combine_thetas(female, lf.female_theta[pos], lf.map_function);
    }
  }
  return c;
}

std::vector<std::vector<PedigreeLocus>> reduce_markers(const PedigreeFile& pf, const LocusFile& lf,
                                                       const MarkerChain& chain) {
  ReductionOptions ro;
  ro.recode = false;  // every allele keeps its name
  std::vector<std::vector<PedigreeLocus>> out(pf.pedigrees.size());
  std::ostringstream s;
  int errors = 0;
  long line = 0;
  for (std::size_t p = 0; p < pf.pedigrees.size(); ++p)
    for (int k : chain.loci) {
      Inconsistency e;
      out[p].push_back(reduce_locus(pf.pedigrees[p], lf, k, ro, &e));
      if (e.locus < 0) continue;
      ++errors;
      s << "\n  " << describe(e, lf, pf.pedigrees[p]);
      if (!line)
        for (const Person& q : pf.pedigrees[p].people)
          if (!e.individuals.empty() && q.id == e.individuals.back()) line = q.line;
    }
  if (errors)
    throw InputError(pf.path, line,
                     std::string("Mendelian inconsistenc") + (errors > 1 ? "ies" : "y") +
                         " (no haplotype configuration has a positive probability), fix " +
                         (errors > 1 ? "them" : "it") + " first:" + s.str());
  return out;
}

namespace {

// The plan of one pedigree's network for the MPE: conditioned when it does not fit the limit,
// the budget lowered until the traceback's memory (every bucket's output kept) fits too, as
// `kinfer mpe` plans (apps/posterior_command.cpp).
ConditionedPlan plan_mpe(const Network& net, const Evidence& ev, const PlanOptions& po,
                         const std::string& pedigree) {
  PlanOptions trial = po;
  trial.keep_tables = false;  // runs once
  constexpr int kAttempts = 6;
  ConditionedPlan cp;
  for (int attempt = 0;; ++attempt) {
    try {
      cp = make_conditioned_plan(net, ev, trial);
    } catch (const ResourceError& e) {
      throw ResourceError(
          "pedigree " + pedigree + ": " + e.what() +
          (attempt > 0 ? " (planning within " + human_bytes(trial.max_memory_bytes) +
                             " so that the traceback fits " + human_bytes(po.max_memory_bytes) + ")"
                       : std::string()));
    }
    const double need = posterior_peak_bytes(cp.plan, false);
    if (!(po.max_memory_bytes > 0) || need <= po.max_memory_bytes) return cp;
    if (attempt + 1 == kAttempts)
      throw ResourceError("pedigree " + pedigree +
                          ": the most likely haplotypes need an estimated " + human_bytes(need) +
                          " (every bucket's output kept for the traceback) even conditioned into " +
                          std::to_string(cp.cond.slices) + " slices, above the limit " +
                          human_bytes(po.max_memory_bytes) +
                          ": raise --max-memory or run on a machine with more memory");
    trial.max_memory_bytes = std::min(trial.max_memory_bytes, cp.plan.memory.peak_bytes) * 0.95 *
                             po.max_memory_bytes / need;
  }
}

}  // namespace

namespace {

// A configuration: per marker and person, the recoded (paternal, maternal) alleles (-1: a
// sex-linked male's paternal side) and the selectors' values (-1: none).
using Alleles = std::vector<std::vector<std::pair<int, int>>>;
using Selectors = std::vector<std::vector<std::array<int, 2>>>;

void read_config(const PedigreeNetwork& pn, const std::vector<int>& x, int nl, int np,
                 Alleles& g, Selectors& s) {
  const Network& net = pn.network();
  g.assign(nl, std::vector<std::pair<int, int>>(np));
  s.assign(nl, std::vector<std::array<int, 2>>(np));
  for (int k = 0; k < nl; ++k)
    for (int i = 0; i < np; ++i) {
      const PedigreeNetwork::Genotype& gt = pn.genotype(k, i);
      std::int64_t idx = 0;
      for (int v : gt.vars) idx = idx * net.card[v] + x[v];
      g[k][i] = gt.alleles[idx];
      for (int side = 0; side < 2; ++side) {
        const int v = pn.selector(k, i, side);
        s[k][i][side] = v < 0 ? -1 : x[v];
      }
    }
}

// The network assignment of a configuration; false when an allele pair is not among the
// genotypes genotype elimination kept (the configuration has probability 0).
bool write_config(const PedigreeNetwork& pn, const Alleles& g, const Selectors& s,
                  std::vector<int>& x) {
  const Network& net = pn.network();
  for (std::size_t k = 0; k < g.size(); ++k)
    for (std::size_t i = 0; i < g[k].size(); ++i) {
      const PedigreeNetwork::Genotype& gt = pn.genotype(static_cast<int>(k), static_cast<int>(i));
      auto at = std::find(gt.alleles.begin(), gt.alleles.end(), g[k][i]);
      if (at == gt.alleles.end()) return false;
      std::int64_t idx = at - gt.alleles.begin();
      for (auto v = gt.vars.rbegin(); v != gt.vars.rend(); ++v) {
        x[*v] = static_cast<int>(idx % net.card[*v]);
        idx /= net.card[*v];
      }
      for (int side = 0; side < 2; ++side)
        if (const int v = pn.selector(static_cast<int>(k), static_cast<int>(i), side); v >= 0) {
          if (s[k][i][side] < 0) return false;
          x[v] = s[k][i][side];
        }
    }
  return true;
}

bool same_ln(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The founders' tie rule on a configuration of probability `ln` (assignment x of pn), then the
// people's haplotypes, origins and recombinations into `out`.
void finish(const Pedigree& ped, const std::vector<PedigreeLocus>& loci, const PedigreeNetwork& pn,
            Alleles g, Selectors s, std::vector<int> x, double ln, PedigreeHaplotypes& out) {
  const int np = static_cast<int>(ped.people.size());
  const int nl = static_cast<int>(loci.size());
  // The tie rule for founders: their two haplotypes ordered by the first heterozygous marker.
  // Swapping a founder's haplotypes and flipping every selector of the meioses from that
  // founder keeps the probability (founder frequencies, transmission and the selector chain
  // are symmetric); checked by recomputing it.
  const Alleles g0 = g;
  const Selectors s0 = s;
  bool swapped = false;
  for (int f = 0; f < np; ++f) {
    const Person& p = ped.people[f];
    if (!p.founder()) continue;
    int k = 0;
    while (k < nl && g[k][f].first == g[k][f].second) ++k;
    if (k == nl || g[k][f].first < 0) continue;  // homozygous throughout, or hemizygous
    if (loci[k].original[g[k][f].first] < loci[k].original[g[k][f].second]) continue;
    for (int j = 0; j < nl; ++j) std::swap(g[j][f].first, g[j][f].second);
    for (int c = 0; c < np; ++c)
      for (int side = 0; side < 2; ++side)
        if ((side == 0 ? ped.people[c].father : ped.people[c].mother) == f)
          for (int j = 0; j < nl; ++j)
            if (s[j][c][side] >= 0) s[j][c][side] = 1 - s[j][c][side];
    swapped = true;
  }
  if (swapped) {
    const double ln_swapped = write_config(pn, g, s, x) ? ln_joint(pn.network(), x) : -INFINITY;
    if (same_ln(ln_swapped, ln)) {
      ln = ln_swapped;
      out.founders_swapped = true;
    } else {  // not expected: keep the traceback's configuration
      spdlog::warn(
          "pedigree {}: ordering the founders' haplotypes changed the probability; "
          "the traceback's order is kept",
          ped.id);
      g = g0, s = s0;
    }
  }
  out.ln_pr = ln;

  out.people.resize(np);
  for (int i = 0; i < np; ++i) {
    const Person& p = ped.people[i];
    PersonHaplotypes& h = out.people[i];
    for (int k = 0; k < nl; ++k) {
      const PedigreeLocus& L = loci[k];
      auto input = [&L](int a) {
        return a < 0 ? 0 : a < static_cast<int>(L.original.size()) ? L.original[a] : a + 1;
      };
      h.paternal.push_back(input(g[k][i].first));
      h.maternal.push_back(input(g[k][i].second));
      int from = s[k][i][0];
      // a daughter's paternal X is her father's only (maternal) one
      if (!p.founder() && L.sex_linked && L.carries_paternal(p)) from = 1;
      h.paternal_origin.push_back(from);
      h.maternal_origin.push_back(s[k][i][1]);
    }
    for (int side = 0; side < 2; ++side) {
      const std::vector<int>& o = side == 0 ? h.paternal_origin : h.maternal_origin;
      for (int k = 0; k + 1 < nl; ++k)
        if (o[k] >= 0 && o[k + 1] >= 0 && o[k] != o[k + 1]) {
          h.recombinations[side].push_back(k);
          ++out.recombinations;
        }
    }
  }
}

InputError impossible(const std::string& path, const Pedigree& ped) {
  return InputError(path, 0,
                    "pedigree " + ped.id +
                        ": no haplotype configuration has a positive probability, though "
                        "every marker is consistent on its own: the inheritance the data "
                        "force at markers with recombination fraction 0 between them disagrees");
}

std::vector<const PedigreeLocus*> pointers(const std::vector<PedigreeLocus>& loci) {
  std::vector<const PedigreeLocus*> ptrs;
  for (const PedigreeLocus& L : loci) ptrs.push_back(&L);
  return ptrs;
}

}  // namespace

PedigreeHaplotypes most_likely_haplotypes(const Pedigree& ped,
                                          const std::vector<PedigreeLocus>& loci,
                                          const MarkerChain& chain, const PlanOptions& po,
                                          const std::string& path) {
  const int np = static_cast<int>(ped.people.size());
  const int nl = static_cast<int>(loci.size());
  PedigreeNetwork pn(ped, pointers(loci), chain.kosambi, true);
  if (nl > 1) pn.set_thetas(chain.male, chain.female);
  const Network& net = pn.network();
  ConditionedPlan cp = plan_mpe(net, pn.evidence(), po, ped.id);
  PedigreeHaplotypes out;
  out.pedigree = ped.id;
  out.slices = cp.cond.slices;
  out.width = cp.plan.order.stats.width;
  out.log2_max_table = cp.plan.order.stats.log2_max_table;
  out.peak_bytes = posterior_peak_bytes(cp.plan, false);
  // A small network runs on one thread (OpenMP's start per bucket would cost more).
  const int threads = cp.plan.order.stats.log2_max_table < 16 ? 1 : 0;
  const MostProbable mpe = compute_mpe(cp, threads);
  if (!(mpe.ln_pr > -INFINITY)) throw impossible(path, ped);
  out.ln_max = mpe.ln_pr;
  Alleles g;
  Selectors s;
  read_config(pn, mpe.assignment, nl, np, g, s);
  const double ln = ln_joint(net, mpe.assignment);
  if (!same_ln(ln, mpe.ln_pr))
    spdlog::warn(
        "pedigree {}: the traceback's configuration has ln P = {:.12g}, the maximum "
        "is {:.12g}",
        ped.id, ln, mpe.ln_pr);
  finish(ped, loci, pn, std::move(g), std::move(s), mpe.assignment, ln, out);
  return out;
}

int haplotypes_chain_bits(const Pedigree& ped, const std::vector<PedigreeLocus>& loci,
                          const MarkerChain& chain) {
  if (loci.empty() || (chain.kosambi && loci.size() == 3)) return -1;
  return InheritanceModel(ped, pointers(loci), loci[0].sex_linked, true, true).bits();
}

PedigreeHaplotypes most_likely_haplotypes_chain(const Pedigree& ped,
                                                const std::vector<PedigreeLocus>& loci,
                                                const MarkerChain& chain, const PlanOptions& po,
                                                const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const int np = static_cast<int>(ped.people.size());
  const int nl = static_cast<int>(loci.size());
  const std::vector<const PedigreeLocus*> ptrs = pointers(loci);
  const bool sex_linked = loci.at(0).sex_linked;
  const InheritanceModel im(ped, ptrs, sex_linked, true, true);
  if (im.bits() > InheritanceModel::kMaxBits || (chain.kosambi && nl == 3))
    throw std::length_error("pedigree " + ped.id + " is beyond the chain");
  const ViterbiPath vp =
      viterbi_path(im, ped, nl, chain.male, chain.female, sex_linked, po.max_memory_bytes);
  if (!(vp.ln_max > -INFINITY)) throw impossible(path, ped);
  PedigreeHaplotypes out;
  out.pedigree = ped.id;
  out.chain = true;
  out.bits = im.bits();
  out.checkpoint_every = vp.checkpoint_every;
  out.peak_bytes = 8.0 * std::exp2(im.bits()) *
                   (vp.checkpoint_every == 1 ? nl + 1
                                             : (nl + vp.checkpoint_every - 1) / vp.checkpoint_every +
                                                   vp.checkpoint_every + 1);
  out.ln_max = vp.ln_max;
  spdlog::debug("pedigree {}: Viterbi chain, {} bits: emissions {:.2f} s, forward {:.2f} s, "
                "traceback {:.2f} s ({:.2f} s recomputing from checkpoints every {} marker(s), {} "
                "emission(s) recomputed)",
                ped.id, im.bits(), vp.emission_s, vp.forward_s, vp.traceback_s, vp.recompute_s,
                vp.checkpoint_every, vp.emissions_recomputed);

  // Each marker's alleles given its selectors: the one-marker network's MPE with the selectors
  // as evidence (the traceback's tie rule, lowest values first in its buckets).
  Alleles g(nl, std::vector<std::pair<int, int>>(np));
  const Selectors& s = vp.selectors;
  PlanOptions one = po;
  for (int k = 0; k < nl; ++k) {
    PedigreeNetwork p1(ped, {ptrs[k]}, false, true);
    Evidence ev = p1.evidence();
    for (int i = 0; i < np; ++i)
      for (int side = 0; side < 2; ++side)
        if (const int v = p1.selector(0, i, side); v >= 0) {
          if (s[k][i][side] < 0)
            throw ResourceError("pedigree " + ped.id +
                                ": the chain left a meiosis without a selector (a bug): run "
                                "with --method network");
          ev.observed.emplace_back(v, s[k][i][side]);
        }
    ConditionedPlan cp = plan_mpe(p1.network(), ev, one, ped.id);
    const MostProbable m = compute_mpe(cp, 1);
    if (!(m.ln_pr > -INFINITY))
      throw ResourceError("pedigree " + ped.id + ": the chain's inheritance at marker " +
                          std::to_string(k + 1) +
                          " has no allele configuration (a bug): run with --method network");
    Alleles gk;
    Selectors sk;
    read_config(p1, m.assignment, 1, np, gk, sk);
    g[k] = gk[0];
  }

  // The configuration's probability from the multi-locus network's tables: it must be the
  // chain's maximum.
  PedigreeNetwork pn(ped, ptrs, chain.kosambi, true);
  if (nl > 1) pn.set_thetas(chain.male, chain.female);
  std::vector<int> x(pn.network().num_vars(), 0);
  const double ln = write_config(pn, g, s, x) ? ln_joint(pn.network(), x) : -INFINITY;
  if (!same_ln(ln, vp.ln_max))
    throw ResourceError("pedigree " + ped.id + ": the chain's most likely configuration has ln P = " +
                        std::to_string(ln) + " recomputed, not the chain's maximum " +
                        std::to_string(vp.ln_max) +
                        " (a bug): the answer is withheld; run with --method network");
  finish(ped, loci, pn, std::move(g), s, std::move(x), ln, out);
  out.chain_s = since(t0);
  return out;
}

}  // namespace kinfer::linkage
