#include "linkage/analysis.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <omp.h>
#include <spdlog/spdlog.h>

#include "engine/errors.hpp"
#include "linkage/inheritance.hpp"
#include "linkage/network.hpp"

namespace kinfer::linkage {

std::string program_name(Program p) { return p == Program::Mlink ? "mlink" : "linkmap"; }

double AnalysisResult::lod(double ln_l, double ln_base) {
  if (std::isinf(ln_l) && ln_l < 0) return -std::numeric_limits<double>::infinity();
  return (ln_l - ln_base) / std::log(10.0);
}

namespace {

// Host bytes of a lod run besides the chain's tables and vectors and process_bytes(): the
// pedigrees, loci and results (a few MiB here), and with the chain on a GPU the CUDA context's
// host memory (~120 MiB measured on the H100 machine; docs/performance.md).
constexpr double kChainReserve = 32.0 * 1024 * 1024;
constexpr double kChainGpuReserve = 160.0 * 1024 * 1024;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr double kMlinkSlack = 1e-4;    // MLINK: theta <= finish + 1e-4 (FASTLINK)
constexpr double kLinkmapSlack = 1e-6;  // LINKMAP stops exactly at the stop theta (checked)

bool integer_token(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

bool tail_fits_linkmap(const LocusFile& lf) {
  const Tail& t = lf.tail;
  return t.present && integer_token(t.fields[0]) && t.values[0] >= 1 &&
         t.values[0] <= lf.n_loci() && t.values[1] >= 0 && t.values[1] <= 0.5 &&
         integer_token(t.fields[2]) && t.values[2] >= 1;
}

bool tail_fits_mlink(const LocusFile& lf) {
  const Tail& t = lf.tail;
  return t.present && integer_token(t.fields[0]) && t.values[0] >= 1 &&
         t.values[0] <= lf.n_loci() - 1 && t.values[1] > 0;
}

class Analysis {
 public:
  Analysis(const LocusFile& lf, const PedigreeFile& pf, const AnalysisOptions& opt,
           AnalysisResult& res)
      : lf_(lf), pf_(pf), opt_(opt), res_(res) {}

  void reduce_all() {
    const auto t0 = Clock::now();
    std::vector<std::pair<Inconsistency, int>> errors;
    reduced_.resize(pf_.pedigrees.size());
    for (std::size_t p = 0; p < pf_.pedigrees.size(); ++p)
      for (int k = 0; k < lf_.n_loci(); ++k) {
        Inconsistency e;
        e.locus = -1;
        reduced_[p].push_back(reduce_locus(pf_.pedigrees[p], lf_, k, opt_.reduction, &e));
        if (e.locus >= 0) errors.push_back({e, static_cast<int>(p)});
      }
    res_.timing.reduce_s += seconds_since(t0);
    if (errors.empty()) return;
    std::ostringstream s;
    s << "Mendelian inconsistenc" << (errors.size() > 1 ? "ies" : "y") << " (likelihood 0), fix "
      << (errors.size() > 1 ? "them" : "it") << " before computing LOD scores:";
    long line = 0;
    for (const auto& [e, p] : errors) {
      s << "\n  " << describe(e, lf_, pf_.pedigrees[p]);
      if (!line)
        for (const Person& q : pf_.pedigrees[p].people)
          if (!e.individuals.empty() && q.id == e.individuals.back()) line = q.line;
    }
    throw InputError(pf_.path, line, s.str());
  }

  // How many evaluations a locus order will get: the order search may spend a share of all
  // of them (a plan run 50 times deserves a longer search than one run once).
  void expect_runs(const std::vector<int>& chain, int runs) { expected_[chain] += runs; }

  // The numbers of the next `n` items dealt by opt_.dealer ((evaluation, pedigree) pairs, then
  // the Lander-Green chain's pedigrees), numbered alike on every process; each take is followed
  // by one combine() of n items, as the dealer counts them.
  std::uint64_t take_items(std::size_t n) {
    const std::uint64_t first = items_;
    items_ += n;
    return first;
  }

  // ln L of every pedigree for one evaluation over `chain` (input loci in map order); with
  // `skip`, the pedigrees marked 1 are left at 0 (another method computes them).
  void evaluate(Evaluation& e, const std::vector<int>& chain, const std::vector<char>* skip = {}) {
    auto& likes = compiled(chain, skip);
    e.order.clear();
    for (int k : chain) e.order.push_back(lf_.loci[k].name);
    e.ln_l.assign(likes.size(), 0);
    e.total_ln_l = 0;
    const auto t0 = Clock::now();
    std::vector<char> computed(likes.size(), 0);
    const std::uint64_t first_item = take_items(likes.size());
    for (std::size_t p = 0; p < likes.size(); ++p) {
      if (skip && (*skip)[p]) continue;  // left at 0 here and everywhere
      if (opt_.dealer && !opt_.dealer->mine(first_item + p)) continue;  // another process's
      computed[p] = 1;
      e.ln_l[p] = likes[p]->ln_likelihood(e.male, e.female);
      ++res_.timing.runs;
      if (std::isinf(e.ln_l[p]) && e.ln_l[p] < 0) diagnose_zero(static_cast<int>(p), chain, e);
    }
    if (opt_.dealer) opt_.dealer->combine(e.ln_l, computed);
    for (double v : e.ln_l) e.total_ln_l += v;
    res_.timing.evaluate_s += seconds_since(t0);
  }

 private:
  std::vector<std::unique_ptr<PedigreeLikelihood>>& compiled(const std::vector<int>& chain,
                                                             const std::vector<char>* skip = {}) {
    auto it = cache_.find(chain);
    if (it == cache_.end()) it = cache_.emplace(chain, pf_.pedigrees.size()).first;
    auto& v = it->second;
    const auto t0 = Clock::now();
    PlanOptions po = opt_.plan;
    const auto ex = expected_.find(chain);
    po.order.search_fraction *= std::max(1, ex == expected_.end() ? 1 : ex->second);
    for (std::size_t p = 0; p < pf_.pedigrees.size(); ++p) {
      if (v[p] || (skip && (*skip)[p])) continue;
      std::vector<const PedigreeLocus*> loci;
      for (int k : chain) loci.push_back(&reduced_[p][k]);
      v[p] = (std::make_unique<PedigreeLikelihood>(pf_.pedigrees[p], loci,
                                                   lf_.map_function == MapFunction::Kosambi, po,
                                                   opt_.reduction.joint_genotypes, opt_.runner));
      const Plan& plan = v[p]->plan();
      ++res_.timing.plans;
      res_.timing.max_width = std::max(res_.timing.max_width, plan.order.stats.width);
      res_.timing.log2_max_table =
          std::max(res_.timing.log2_max_table, plan.order.stats.log2_max_table);
      res_.timing.peak_bytes = std::max(res_.timing.peak_bytes, plan.memory.peak_bytes);
      if (const ConditionedPlan& cp = v[p]->conditioned_plan(); cp.conditioned()) {
        ++res_.timing.conditioned;
        res_.timing.max_slices = std::max(res_.timing.max_slices, cp.cond.slices);
        spdlog::info(
            "pedigree {}: plan conditioned on {} variable(s), {} slices of estimated "
            "peak {:.1f} MiB ({:.1f}% more work)",
            pf_.pedigrees[p].id, cp.cond.vars.size(), cp.cond.slices,
            cp.cond.slice_peak_bytes / (1 << 20), 100 * cp.cond.overhead());
      }
      if (plan.order.stats.log2_total_state >= res_.timing.log2_total_state) {
        res_.timing.log2_total_state = plan.order.stats.log2_total_state;
        res_.timing.buckets = static_cast<int>(plan.tree.buckets.size());
      }
    }
    res_.timing.plan_s += seconds_since(t0);
    return v;
  }

  // A zero likelihood with every theta above 0 means some locus is inconsistent on its own;
  // genotype elimination finds that in nuclear families but not always around a loop.
  void diagnose_zero(int p, const std::vector<int>& chain, const Evaluation& e) {
    for (double t : e.male)
      if (t <= 0) return;  // an obligate recombinant at theta 0: -inf
    for (double t : e.female)
      if (t <= 0) return;  // is the right answer there
    const Pedigree& ped = pf_.pedigrees[p];
    for (int k : chain) {
      if (chain.size() > 1) {
        const double x = compiled({k})[p]->ln_likelihood({}, {});
        if (!(std::isinf(x) && x < 0)) continue;
      }
      std::ostringstream s;
      s << "Mendelian inconsistency (likelihood 0): pedigree " << ped.id << ", locus " << k + 1
        << " (" << lf_.loci[k].name << "): no genotypes fit the typed individuals";
      if (ped.has_loop) s << " (the inconsistency runs around a marriage loop)";
      s << ":";
      int shown = 0;
      for (const Person& q : ped.people) {
        const Phenotype& ph = q.pheno[k];
        if (ph.a1 == 0) continue;
        if (shown++ == 30) {
          s << " ...";
          break;
        }
        s << ' ' << q.id;
      }
      throw InputError(pf_.path, ped.people.front().line, s.str());
    }
    throw std::logic_error("pedigree " + ped.id + ": likelihood 0 with every locus consistent");
  }

 public:
  const PedigreeLocus& reduced(int p, int k) const { return reduced_[p][k]; }
  AnalysisResult& result() { return res_; }

 private:
  const LocusFile& lf_;
  const PedigreeFile& pf_;
  const AnalysisOptions& opt_;
  AnalysisResult& res_;
  std::vector<std::vector<PedigreeLocus>> reduced_;
  std::map<std::vector<int>, std::vector<std::unique_ptr<PedigreeLikelihood>>> cache_;
  std::map<std::vector<int>, int> expected_;
  std::uint64_t items_ = 0;  // items numbered for opt_.dealer
};

// Female thetas for changed male thetas, keeping each interval's female/male Haldane distance
// ratio `ratio` (sex difference 2 in LINKMAP and in map positions).
double scaled_female(double male, double ratio) {
  return morgans_to_theta(ratio * theta_to_morgans(male, MapFunction::Haldane),
                          MapFunction::Haldane);
}

double distance_ratio(double female, double male) {
  const double dm = theta_to_morgans(male, MapFunction::Haldane);
  const double df = theta_to_morgans(female, MapFunction::Haldane);
  if (dm <= 0 || std::isinf(dm) || std::isinf(df)) return 1.0;
  return df / dm;
}

void run_mlink(const LocusFile& lf, const AnalysisOptions& opt, Analysis& an, AnalysisResult& res) {
  const int ni = lf.n_loci() - 1;
  int w = 0;
  if (lf.tail.present) {
    if (!tail_fits_mlink(lf))
      throw InputError(lf.path, lf.tail.line,
                       "MLINK reads the last line as: varied theta (1 to " + std::to_string(ni) +
                           "), increment (> 0), finishing value; found '" + lf.tail.fields[0] +
                           " " + lf.tail.fields[1] + " " + lf.tail.fields[2] + "'");
    w = static_cast<int>(lf.tail.values[0]) - 1;
  }
  res.varied_interval = w;
  std::vector<double> values = opt.thetas;
  if (values.empty()) {
    double v = lf.male_theta[w];
    const double inc = lf.tail.present ? lf.tail.values[1] : 0,
                 fin = lf.tail.present ? lf.tail.values[2] : 0;
    do {
      values.push_back(v);
      v += inc;
    } while (inc > 0 && v <= fin + kMlinkSlack && v <= 0.5 + 1e-12);
  }
  std::vector<int> chain = lf.map_order;
  auto point = [&](double v) {
    Evaluation e;
    e.male = lf.male_theta;
    e.male[w] = v;
    e.female = lf.sex_difference == 2 ? lf.female_theta : lf.female_for(e.male);
    return e;
  };
  an.expect_runs(chain, static_cast<int>(values.size()) + 1);
  res.baseline = point(0.5);
  an.evaluate(res.baseline, chain);
  for (double v : values) {
    res.evaluations.push_back(point(v));
    an.evaluate(res.evaluations.back(), chain);
  }
}

struct MarkerMap {
  std::vector<int> markers;          // input loci, map order, without the moving one
  std::vector<double> male, female;  // thetas between adjacent markers
  std::vector<double> cm;            // sex-averaged position of each marker, cM
  std::vector<double> male_cm, female_cm;
};

MarkerMap marker_map(const LocusFile& lf, int moving) {
  MarkerMap m;
  const int p = static_cast<int>(std::find(lf.map_order.begin(), lf.map_order.end(), moving) -
                                 lf.map_order.begin());
  for (int k : lf.map_order)
    if (k != moving) m.markers.push_back(k);
  for (int i = 0; i + 1 < lf.n_loci(); ++i) {
    if (i == p - 1 && p + 1 < lf.n_loci()) {
      // The moving locus sits in this interval: the markers' theta spans both of its sides.
      m.male.push_back(combine_thetas(lf.male_theta[i], lf.male_theta[i + 1], lf.map_function));
      m.female.push_back(
          combine_thetas(lf.female_theta[i], lf.female_theta[i + 1], lf.map_function));
      ++i;
    } else if (i == p - 1 || i == p) {
      continue;  // an exterior moving locus: its interval is not part of the marker map
    } else {
      m.male.push_back(lf.male_theta[i]);
      m.female.push_back(lf.female_theta[i]);
    }
  }
  double a = 0, b = 0;
  m.male_cm.push_back(0);
  m.female_cm.push_back(0);
  m.cm.push_back(0);
  for (std::size_t i = 0; i < m.male.size(); ++i) {
    a += 100 * theta_to_morgans(m.male[i], lf.map_function);
    b += 100 * theta_to_morgans(m.female[i], lf.map_function);
    m.male_cm.push_back(a);
    m.female_cm.push_back(b);
    m.cm.push_back((a + b) / 2);
  }
  return m;
}

// `dense`: per pedigree, ln L of the marker map computed by the inheritance chain (NaN:
// none; the network computes it).
void unlinked_baseline(const LocusFile& lf, int moving, const MarkerMap& mm, Analysis& an,
                       AnalysisResult& res, const std::vector<double>& dense = {}) {
  // Unlinked, the likelihood factorises: the moving locus alone times the marker map alone.
  Evaluation alone, markers;
  an.evaluate(alone, {moving});
  markers.male = mm.male;
  markers.female = mm.female;
  std::vector<char> skip(dense.size(), 0);
  for (std::size_t p = 0; p < dense.size(); ++p) skip[p] = !std::isnan(dense[p]);
  an.evaluate(markers, mm.markers, dense.empty() ? nullptr : &skip);
  for (std::size_t p = 0; p < dense.size(); ++p)
    if (skip[p]) markers.ln_l[p] = dense[p], markers.total_ln_l += dense[p];
  res.baseline = markers;
  for (std::size_t p = 0; p < alone.ln_l.size(); ++p) res.baseline.ln_l[p] += alone.ln_l[p];
  res.baseline.total_ln_l += alone.total_ln_l;
  res.baseline.order.push_back(lf.loci[moving].name + " (unlinked)");
}

using Todo = std::vector<std::pair<Evaluation, std::vector<int>>>;

// Where the moving locus sits in each position's locus order, for the inheritance chain.
std::vector<InheritanceModel::Point> chain_points(const Todo& todo, int moving) {
  std::vector<InheritanceModel::Point> points;
  for (const auto& [e, chain] : todo) {
    const int j = static_cast<int>(std::find(chain.begin(), chain.end(), moving) - chain.begin());
    InheritanceModel::Point pt;
    pt.left = j - 1;
    if (j > 0) pt.male_left = e.male[j - 1], pt.female_left = e.female[j - 1];
    if (j + 1 < static_cast<int>(chain.size()))
      pt.male_right = e.male[j], pt.female_right = e.female[j];
    points.push_back(pt);
  }
  return points;
}

// One pedigree's values by the inheritance chain: ln L of the markers alone, ln L per position,
// and the inheritance vector's bits.
struct ChainScores {
  double markers = 0;
  std::vector<double> positions;
  int bits = 0;
};

// The chain of pedigree p (on opt.chain_backend's device when it takes it, else the CPU); none
// when the pedigree needs more bits than allowed, the chain does not fit the memory limit, or
// its likelihood is 0 (the network path then computes it and says which locus and people).
std::optional<ChainScores> pedigree_chain(const LocusFile& lf, const PedigreeFile& pf,
                                          std::size_t p, const AnalysisOptions& opt, int moving,
                                          const MarkerMap& mm,
                                          const std::vector<InheritanceModel::Point>& points,
                                          Analysis& an) {
  const int nm = static_cast<int>(mm.markers.size());
  std::vector<int> idx(nm);
  for (int i = 0; i < nm; ++i) idx[i] = i;
  std::vector<const PedigreeLocus*> loci;
  for (int k : mm.markers) loci.push_back(&an.reduced(static_cast<int>(p), k));
  loci.push_back(&an.reduced(static_cast<int>(p), moving));
  InheritanceModel im(pf.pedigrees[p], loci, lf.sex_linked);
  spdlog::debug(
      "pedigree {}: inheritance vector of {} bits ({} meioses of {} people, {} founder phases)",
      pf.pedigrees[p].id, im.bits(), im.meioses(), im.people_kept(), im.founder_phases());
  if (im.bits() > std::min(opt.lander_green_bits, InheritanceModel::kMaxBits)) return std::nullopt;
  im.set_table_limit(opt.emission_table_entries);
  // Four state vectors at least (the checkpoints adapt to what is left: inheritance.cpp).
  const double vec = 8.0 * std::exp2(im.bits());
  std::unique_ptr<ChainBackend> backend;
  if (opt.chain_backend) backend = opt.chain_backend(im.layout());
  const bool on_gpu = backend != nullptr;
  const bool cpu_fits = opt.plan.max_memory_bytes <= 0 || 5 * vec <= opt.plan.max_memory_bytes;
  if (!backend) {
    if (!cpu_fits) return std::nullopt;
    backend = make_cpu_chain(im.layout(), opt.plan.max_memory_bytes);
  }
  // --max-memory holds the emission tables and the state vectors together, less the rest of
  // the process (the program, the pedigrees and results; a GPU's context on the host)
  if (opt.plan.max_memory_bytes > 0)
    im.set_memory_limit(std::max(1.0, opt.plan.max_memory_bytes -
                                          process_bytes(omp_get_max_threads()) -
                                          (on_gpu ? kChainGpuReserve : kChainReserve)));
  ChainScores scores;
  try {
    try {
      scores.positions =
          im.location_scores(idx, mm.male, mm.female, nm, points, &scores.markers, backend.get());
    } catch (const std::length_error& e) {
      // the GPU keeps every emission's tables: under a tight --max-memory the CPU chain,
      // which recomputes those without room, still fits (in the same memory limit: the CUDA
      // context stays on the host)
      if (!on_gpu || !cpu_fits) throw;
      spdlog::warn("pedigree {}: the chain on {} refused ({}): it runs on the CPU",
                   pf.pedigrees[p].id, backend->name(), e.what());
      backend = make_cpu_chain(im.layout(), opt.plan.max_memory_bytes);
      scores.positions =
          im.location_scores(idx, mm.male, mm.female, nm, points, &scores.markers, backend.get());
    }
  } catch (const std::length_error& e) {
    spdlog::warn("pedigree {}: the inheritance chain ({} bits) refused ({}): the network runs it",
                 pf.pedigrees[p].id, im.bits(), e.what());
    return std::nullopt;
  }
  const auto& pr = im.profile();
  spdlog::debug(
      "pedigree {}: chain on {}: emissions {:.3f} s ({} factors of {:.0f} MiB, {} beyond the "
      "first region, {} loci per state on the fly, {} without room recomputed {} times), {} "
      "steps {:.3f} s, {} points ({} kernel steps) {:.3f} s; checkpoint every {} markers{}",
      pf.pedigrees[p].id, backend->name(), pr.emission_s, pr.factors, pr.table_bytes / 1048576.0,
      pr.mixed_factors, pr.programs, pr.dropped, pr.recomputed, pr.steps, pr.step_s, points.size(),
      pr.score_steps, pr.score_s, pr.checkpoint_every, pr.block_cache ? ", block cache" : "");
  // Likelihood 0: the network path says which locus and people (diagnose_zero).
  if (std::isinf(scores.markers)) return std::nullopt;
  scores.bits = im.bits();
  return scores;
}

// Under mpirun: every rank's chain values (per pedigree: markers, bits, one per position) in
// pedigree order, each from the rank that computed it (RankDealer::combine).
void gather_chain_values(SliceDealer& dealer, const std::vector<char>& computed,
                         std::vector<double>& markers, std::vector<double>& bits,
                         std::vector<std::vector<double>>& lnl) {
  const std::size_t np = markers.size(), w = 2 + lnl.size();
  std::vector<double> row(np * w);
  for (std::size_t p = 0; p < np; ++p) {
    row[p * w] = markers[p];
    row[p * w + 1] = bits[p];
    for (std::size_t i = 0; i < lnl.size(); ++i) row[p * w + 2 + i] = lnl[i][p];
  }
  dealer.combine(row, computed, w);
  for (std::size_t p = 0; p < np; ++p) {
    markers[p] = row[p * w];
    bits[p] = row[p * w + 1];
    for (std::size_t i = 0; i < lnl.size(); ++i) lnl[i][p] = row[p * w + 2 + i];
  }
}

// Map positions by the inheritance chain (linkage/inheritance.hpp) for the pedigrees it
// fits: returns per pedigree ln L of the markers alone (NaN: not this way) and, per position,
// ln L of each pedigree in `lnl`.
std::vector<double> dense_positions(const LocusFile& lf, const PedigreeFile& pf,
                                    const AnalysisOptions& opt, int moving, const MarkerMap& mm,
                                    const Todo& todo, Analysis& an,
                                    std::vector<std::vector<double>>& lnl) {
  const std::size_t np = pf.pedigrees.size();
  std::vector<double> markers(np, std::nan(""));
  lnl.assign(todo.size(), std::vector<double>(np, 0));
  // Three Kosambi loci carry the interference model (network.hpp); the chain has none.
  if (opt.lander_green_bits <= 0 ||
      (lf.map_function == MapFunction::Kosambi && mm.markers.size() + 1 == 3))
    return markers;
  const auto t0 = Clock::now();
  const std::vector<InheritanceModel::Point> points = chain_points(todo, moving);
  // Under mpirun each pedigree's chain runs on the rank it is dealt to (as the network's
  // likelihoods); its values (markers, bits, one per position) are gathered in pedigree order.
  const std::uint64_t first_item = an.take_items(np);
  std::vector<double> bits(np, 0);
  std::vector<char> computed(np, 0);
  for (std::size_t p = 0; p < np; ++p) {
    if (opt.dealer && !opt.dealer->mine(first_item + p)) continue;
    computed[p] = 1;
    const std::optional<ChainScores> scores =
        pedigree_chain(lf, pf, p, opt, moving, mm, points, an);
    if (!scores) continue;
    markers[p] = scores->markers;
    for (std::size_t i = 0; i < todo.size(); ++i) lnl[i][p] = scores->positions[i];
    bits[p] = scores->bits;
  }
  if (opt.dealer) gather_chain_values(*opt.dealer, computed, markers, bits, lnl);
  int used = 0, max_bits = 0;
  an.result().chain_bits.assign(np, -1);
  for (std::size_t p = 0; p < np; ++p)
    if (!std::isnan(markers[p])) {
      ++used, max_bits = std::max(max_bits, static_cast<int>(bits[p]));
      an.result().chain_bits[p] = static_cast<int>(bits[p]);
    }
  if (used > 0) {
    an.result().notes.push_back("multipoint by inheritance vectors (Lander-Green chain) for " +
                                std::to_string(used) + " of " + std::to_string(np) +
                                " pedigrees, up to " + std::to_string(max_bits) +
                                " bits (meioses of the people that matter, less one per founder)");
    an.result().timing.evaluate_s += seconds_since(t0);
  }
  return markers;
}

// LINKMAP's moving locus: --moving, else the one the locus file's last line names, else the
// first affection locus.
int moving_locus(const LocusFile& lf, const AnalysisOptions& opt) {
  const int n = lf.n_loci();
  if (opt.moving_locus > 0) {
    if (opt.moving_locus > n)
      throw InputError("--moving", 0, "expected a locus number from 1 to " + std::to_string(n));
    return opt.moving_locus - 1;
  }
  if (lf.tail.present && integer_token(lf.tail.fields[0]) && lf.tail.values[0] >= 1 &&
      lf.tail.values[0] <= n)
    return static_cast<int>(lf.tail.values[0]) - 1;
  for (int k = 0; k < n; ++k)
    if (lf.loci[k].type == LocusType::Affection) return k;
  throw InputError(lf.path, lf.tail.line,
                   "LINKMAP needs a moving locus: the last line names "
                   "none and no locus is an affection locus; give --moving");
}

// The evaluation of map position x (cM on the sex-averaged marker map) and its locus order: the
// moving locus beyond an end of the map, or inside the interval holding x (the interval's
// length split in proportion, per sex).
std::pair<Evaluation, std::vector<int>> position_evaluation(double x, const LocusFile& lf,
                                                            int moving, const MarkerMap& mm) {
  const MapFunction mf = lf.map_function;
  const std::size_t nm = mm.markers.size();
  const double total = mm.cm.back(), total_m = mm.male_cm.back(), total_f = mm.female_cm.back();
  Evaluation e;
  e.position = x;
  std::vector<int> chain;
  if (x < mm.cm.front() || x > total || nm == 1) {
    const bool left = x < mm.cm.front() || (nm == 1 && x <= 0);
    const double d = std::abs(left ? mm.cm.front() - x : x - total) / 100;
    const double dm = total > 0 ? d * total_m / total : d, df = total > 0 ? d * total_f / total : d;
    if (left) {
      chain.push_back(moving);
      chain.insert(chain.end(), mm.markers.begin(), mm.markers.end());
      e.male = {morgans_to_theta(dm, mf)};
      e.female = {morgans_to_theta(df, mf)};
      e.male.insert(e.male.end(), mm.male.begin(), mm.male.end());
      e.female.insert(e.female.end(), mm.female.begin(), mm.female.end());
    } else {
      chain = mm.markers;
      chain.push_back(moving);
      e.male = mm.male;
      e.female = mm.female;
      e.male.push_back(morgans_to_theta(dm, mf));
      e.female.push_back(morgans_to_theta(df, mf));
    }
    return {std::move(e), chain};
  }
  std::size_t k = 0;
  while (k + 2 < nm && x > mm.cm[k + 1]) ++k;
  const double len = mm.cm[k + 1] - mm.cm[k];
  const double f = len > 0 ? (x - mm.cm[k]) / len : 0;
  const double lm = (mm.male_cm[k + 1] - mm.male_cm[k]) / 100,
               lf_ = (mm.female_cm[k + 1] - mm.female_cm[k]) / 100;
  chain.assign(mm.markers.begin(), mm.markers.begin() + k + 1);
  chain.push_back(moving);
  chain.insert(chain.end(), mm.markers.begin() + k + 1, mm.markers.end());
  e.male.assign(mm.male.begin(), mm.male.begin() + k);
  e.female.assign(mm.female.begin(), mm.female.begin() + k);
  e.male.push_back(morgans_to_theta(f * lm, mf));
  e.male.push_back(morgans_to_theta((1 - f) * lm, mf));
  e.female.push_back(morgans_to_theta(f * lf_, mf));
  e.female.push_back(morgans_to_theta((1 - f) * lf_, mf));
  e.male.insert(e.male.end(), mm.male.begin() + k + 1, mm.male.end());
  e.female.insert(e.female.end(), mm.female.begin() + k + 1, mm.female.end());
  return {std::move(e), chain};
}

// Location scores across the whole map (--positions): one locus order per interval, compiled
// once each; the pedigrees the inheritance chain takes are not evaluated by the network.
void run_map_positions(const LocusFile& lf, const PedigreeFile& pf, const AnalysisOptions& opt,
                       int moving, const MarkerMap& mm, Analysis& an, AnalysisResult& res) {
  for (double x : mm.cm)
    if (std::isinf(x))
      throw InputError(lf.path, 0,
                       "the marker map has an interval with theta 0.5 (unlinked "
                       "markers): map positions beyond it are undefined");
  Todo todo;
  for (double x : opt.positions) todo.push_back(position_evaluation(x, lf, moving, mm));
  std::vector<std::vector<double>> lnl;
  const std::vector<double> dense = dense_positions(lf, pf, opt, moving, mm, todo, an, lnl);
  std::vector<char> skip(dense.size());
  for (std::size_t p = 0; p < dense.size(); ++p) skip[p] = !std::isnan(dense[p]);
  unlinked_baseline(lf, moving, mm, an, res, dense);
  for (const auto& [e, chain] : todo) an.expect_runs(chain, 1);
  for (std::size_t i = 0; i < todo.size(); ++i) {
    auto& [e, chain] = todo[i];
    an.evaluate(e, chain, &skip);
    for (std::size_t p = 0; p < skip.size(); ++p)
      if (skip[p]) e.ln_l[p] = lnl[i][p], e.total_ln_l += lnl[i][p];
    res.evaluations.push_back(std::move(e));
  }
}

// FASTLINK's LINKMAP (no --positions): the moving locus stays in the interval the file puts it
// in and moves over the grid of the locus file's last line.
void run_tail_grid(const LocusFile& lf, int moving, const MarkerMap& mm, Analysis& an,
                   AnalysisResult& res) {
  const int n = lf.n_loci();
  const MapFunction mf = lf.map_function;
  if (!tail_fits_linkmap(lf))
    throw InputError(
        lf.path, lf.tail.line,
        lf.tail.present
            ? "LINKMAP reads the last line as: moving locus (1 to " + std::to_string(n) +
                  "), stop theta (0 to 0.5), grid size (an integer >= 1); found '" +
                  lf.tail.fields[0] + " " + lf.tail.fields[1] + " " + lf.tail.fields[2] +
                  "' (or give --positions)"
            : "LINKMAP needs the last line (moving locus, stop theta, grid size) or --positions");
  const double stop = lf.tail.values[1];
  const int grid = static_cast<int>(lf.tail.values[2]);
  const int p = static_cast<int>(std::find(lf.map_order.begin(), lf.map_order.end(), moving) -
                                 lf.map_order.begin());
  const std::vector<int> chain = lf.map_order;
  an.expect_runs(chain, grid + 1);
  auto female_of = [&](const std::vector<double>& male, const std::vector<int>& changed,
                       const std::vector<double>& ratio) {
    if (lf.sex_difference != 2) return lf.female_for(male);
    std::vector<double> f = lf.female_theta;
    for (std::size_t i = 0; i < changed.size(); ++i)
      f[changed[i]] = scaled_female(male[changed[i]], ratio[i]);
    return f;
  };
  auto position_of = [&](const Evaluation& e) -> std::optional<double> {
    auto avg = [&](int i) {
      return 50 * (theta_to_morgans(e.male[i], mf) + theta_to_morgans(e.female[i], mf));
    };
    double d;
    if (p == 0) {
      d = mm.cm.front() - avg(0);
    } else if (p == n - 1) {
      d = mm.cm.back() + avg(n - 2);
    } else {
      d = mm.cm[p - 1] + avg(p - 1);
    }
    if (std::isinf(d)) return std::nullopt;
    return d;
  };
  std::vector<double> male = lf.male_theta;
  if (p == 0 || p == n - 1) {
    // Exterior: the theta to the nearest marker moves by 0.5/grid, down on the left, up on
    // the right, starting from the file's value.
    const int i = p == 0 ? 0 : n - 2;
    const double step = 0.5 / grid;
    const std::vector<double> ratio{distance_ratio(lf.female_theta[i], lf.male_theta[i])};
    for (double v = male[i];;) {
      Evaluation e;
      e.male = male;
      e.male[i] = v;
      e.female = female_of(e.male, {i}, ratio);
      an.evaluate(e, chain);
      e.position = position_of(e);
      res.evaluations.push_back(std::move(e));
      v += p == 0 ? -step : step;
      if (p == 0 ? v < stop - kLinkmapSlack || v < -kLinkmapSlack
                 : v > stop + kLinkmapSlack || v > 0.5 + kLinkmapSlack)
        break;
    }
    return;
  }
  // Interior: theta to the left marker grows by (flanking theta)/grid; the right one follows
  // so that the flanking theta stays fixed. FASTLINK combines and splits with Haldane's
  // formula whatever the map function (checked: Kosambi 0.05, 0.1 moves by 0.035).
  const MapFunction hal = MapFunction::Haldane;
  const double total = combine_thetas(male[p - 1], male[p], hal);
  const double total_f = combine_thetas(lf.female_theta[p - 1], lf.female_theta[p], hal);
  const std::vector<double> ratio{distance_ratio(total_f, total)};
  const double step = total / grid;
  for (double v = male[p - 1]; v <= stop + kLinkmapSlack && v <= total + kLinkmapSlack; v += step) {
    Evaluation e;
    e.male = male;
    e.male[p - 1] = std::min(v, total);
    e.male[p] = std::max(0.0, split_theta(total, e.male[p - 1], hal));
    e.female = female_of(e.male, {p - 1}, ratio);
    if (lf.sex_difference == 2)
      e.female[p] = std::max(0.0, split_theta(total_f, e.female[p - 1], hal));
    an.evaluate(e, chain);
    e.position = position_of(e);
    res.evaluations.push_back(std::move(e));
  }
}

// LINKMAP: the moving locus's place on the marker map, then the location scores at the given
// map positions, or over the locus file's grid.
void run_linkmap(const LocusFile& lf, const PedigreeFile& pf, const AnalysisOptions& opt,
                 Analysis& an, AnalysisResult& res) {
  const int moving = moving_locus(lf, opt);
  res.moving_locus = moving;
  const MarkerMap mm = marker_map(lf, moving);
  for (std::size_t i = 0; i < mm.markers.size(); ++i)
    res.markers.push_back({lf.loci[mm.markers[i]].name, mm.cm[i]});
  if (!opt.positions.empty()) {
    run_map_positions(lf, pf, opt, moving, mm, an, res);
    return;
  }
  unlinked_baseline(lf, moving, mm, an, res);
  run_tail_grid(lf, moving, mm, an, res);
}

}  // namespace

Program program_from_tail(const LocusFile& lf) {
  if (tail_fits_linkmap(lf)) return Program::Linkmap;
  return Program::Mlink;
}

AnalysisResult analyze(const LocusFile& lf, const PedigreeFile& pf, const AnalysisOptions& opt) {
  AnalysisResult res;
  res.program = opt.program ? *opt.program
                            : (opt.positions.empty() ? program_from_tail(lf) : Program::Linkmap);
  if (res.program == Program::Mlink && !opt.positions.empty())
    throw InputError("--positions", 0,
                     "map positions are for LINKMAP (location scores), not MLINK");
  if (res.program == Program::Linkmap && !opt.thetas.empty())
    throw InputError("--theta", 0, "--theta sets MLINK's varied theta; LINKMAP takes --positions");
  res.sex_linked = lf.sex_linked;
  res.sex_specific = lf.sex_difference != 0;
  for (const Pedigree& p : pf.pedigrees) res.pedigrees.push_back(p.id);
  for (int k : lf.map_order) res.map_order.push_back(lf.loci[k].name);
  if (lf.map_function == MapFunction::Kosambi) {
    res.notes.push_back(
        lf.n_loci() == 3 || res.program == Program::Linkmap
            ? "Kosambi map function; three-locus orders model Kosambi interference as FASTLINK does"
            : "Kosambi map function; orders of more than three loci have no interference model "
              "(FASTLINK has none either)");
  }
  Analysis an(lf, pf, opt, res);
  an.reduce_all();
  if (res.program == Program::Mlink)
    run_mlink(lf, opt, an, res);
  else
    run_linkmap(lf, pf, opt, an, res);
  return res;
}

}  // namespace kinfer::linkage
