// Posterior marginals and MPE against independent answers: enumeration of the joint of random
// networks (long double, linear domain); P(X = x | e) = P(e, X = x) / P(e) through `kinfer pe`;
// the UAI 2014 MAR and MAP reference solutions (data/uai/NAME.uai.MAR, data/uai-mpe/); and the
// exit codes of the errors a user can cause.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/condition.hpp"
#include "engine/plan.hpp"
#include "engine/posterior.hpp"
#include "io/uai.hpp"
#include "tests/brute_force.hpp"
#include "tests/random_network.hpp"
#include "tests/support.hpp"

using namespace kinfer;
using namespace kinfer::test;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Enumeration of every configuration consistent with the evidence: P(e, X = x) per variable and
// value, and the largest P(x, e), all in the linear domain.
struct Enumerated {
  long double z = 0, best = 0;
  std::vector<std::vector<long double>> joint;
};

Enumerated enumerate(const Network& net, const Evidence& ev) {
  Enumerated e;
  for (int v = 0; v < net.num_vars(); ++v) e.joint.emplace_back(net.card[v], 0.0L);
  for_each_configuration(net, ev, [&](const std::vector<int>& x, long double p) {
    e.z += p;
    e.best = std::max(e.best, p);
    for (std::size_t v = 0; v < x.size(); ++v) e.joint[v][x[v]] += p;
  });
  return e;
}

// ln of the product of the factors at `x`, the tests' own sum (not the engine's ln_joint).
double ln_at(const Network& net, const std::vector<int>& x) {
  long double p = 0;
  for (const Factor& f : net.factors) {
    std::int64_t idx = 0;
    for (int v : f.scope) idx = idx * net.card[v] + x.at(v);
    p += std::log(static_cast<long double>(f.table[idx]));
  }
  return static_cast<double>(p);
}

// The numbers after the first word of a UAI solution file (MAR, MAP).
std::vector<double> solution_numbers(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string first;
  in >> first;
  REQUIRE(first == word);
  std::vector<double> x;
  for (double d; in >> d;) x.push_back(d);
  return x;
}

// Marginals of a MAR file: count, then per variable its domain size and its probabilities.
std::vector<std::vector<double>> read_mar(const std::string& text) {
  const std::vector<double> x = solution_numbers(text, "MAR");
  REQUIRE(!x.empty());
  std::vector<std::vector<double>> m(static_cast<std::size_t>(x[0]));
  std::size_t i = 1;
  for (auto& p : m) {
    REQUIRE(i < x.size());
    const auto k = static_cast<std::size_t>(x[i++]);
    REQUIRE(i + k <= x.size());
    p.assign(x.begin() + i, x.begin() + i + k);
    i += k;
  }
  CHECK(i == x.size());
  return m;
}

std::vector<int> read_map(const std::string& text) {
  const std::vector<double> x = solution_numbers(text, "MAP");
  REQUIRE(!x.empty());
  REQUIRE(x.size() == static_cast<std::size_t>(x[0]) + 1);
  return {x.begin() + 1, x.end()};
}

PlanOptions options(int it) {
  PlanOptions po;
  po.order.heuristic = it % 2 ? OrderHeuristic::Stochastic : OrderHeuristic::MinFill;
  po.order.time_budget = 0.01;
  po.reduce.value_elimination = it % 3 != 0;
  return po;
}

}  // namespace

TEST_CASE("Posterior.MarginalsMatchBruteForce", "[engine]") {
  std::mt19937_64 rng(20240736);
  int impossible = 0, compared = 0;
  for (int it = 0; it < 200; ++it) {
    const Case c = random_case(rng, it < 120 ? 7 : 10, 2e4);
    const Enumerated e = enumerate(c.net, c.ev);
    const Plan plan = make_plan(c.net, c.ev, options(it));
    INFO("network " << it << ": " << c.net.num_vars() << " variables, " << c.net.factors.size()
                    << " factors, " << c.ev.observed.size() << " observed");
    for (int threads : {1, 2}) {
      const Marginals m = compute_marginals(plan, threads);
      if (e.z == 0) {
        CHECK(m.ln_pe == kNegInf);
        ++impossible;
        continue;
      }
      CHECK(close_ln(m.ln_pe, static_cast<double>(std::log(e.z)), 1e-9));
      REQUIRE(m.p.size() == e.joint.size());
      for (std::size_t v = 0; v < m.p.size(); ++v) {
        REQUIRE(m.p[v].size() == e.joint[v].size());
        for (std::size_t x = 0; x < m.p[v].size(); ++x) {
          INFO("variable " << v << " value " << x);
          CHECK(std::abs(m.p[v][x] - static_cast<double>(e.joint[v][x] / e.z)) <= 1e-9);
        }
      }
      ++compared;
    }
  }
  CHECK(impossible > 0);
  CHECK(compared > 200);
}

TEST_CASE("Posterior.BucketOfManySmallChildrenMatchesBruteForce", "[engine]") {
  // A Markov network shaped like Alchemy_11's root: a core of 16 binary variables with a factor
  // on every pair, and leaves each on a pair of the core. The core is one bucket of 2^16 states
  // (16 blocks) whose small children's messages and eliminated variables are over a block's
  // variables only: summed from the blocks' total after the pass, not block by block.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> entry(0.1, 3.0);
  const int core = 16, leaves = 4;
  Network net;
  net.source = "core and leaves";
  net.kind = "MARKOV";
  net.card.assign(core + leaves, 2);
  for (int a = 0; a < core; ++a)
    for (int b = a + 1; b < core; ++b) {
      Factor f{{a, b}, {}};
      for (int k = 0; k < 4; ++k) f.table.push_back(entry(rng));
      net.factors.push_back(std::move(f));
    }
  for (int l = 0; l < leaves; ++l) {
    const int a = (3 * l) % core, b = (5 * l + 4) % core;
    Factor f{{core + l, a, b}, {}};
    for (int k = 0; k < 8; ++k) f.table.push_back(k == 5 ? 0.0 : entry(rng));
    net.factors.push_back(std::move(f));
  }
  for (const Evidence& ev : {Evidence{}, Evidence{"leaf observed", {{core + 1, 1}}}}) {
    const Enumerated e = enumerate(net, ev);
    const Plan plan = make_plan(net, ev, options(0));
    for (int threads : {1, 2, 5}) {
      INFO(ev.observed.size() << " observed, " << threads << " threads");
      const Marginals m = compute_marginals(plan, threads);
      CHECK(close_ln(m.ln_pe, static_cast<double>(std::log(e.z)), 1e-9));
      REQUIRE(m.p.size() == e.joint.size());
      double worst = 0;
      for (std::size_t v = 0; v < m.p.size(); ++v)
        for (std::size_t x = 0; x < m.p[v].size(); ++x)
          worst = std::max(worst, std::abs(m.p[v][x] - static_cast<double>(e.joint[v][x] / e.z)));
      CHECK(worst <= 1e-9);
    }
  }
}

TEST_CASE("Posterior.MpeMatchesBruteForce", "[engine]") {
  std::mt19937_64 rng(20240737);
  int impossible = 0, compared = 0;
  for (int it = 0; it < 200; ++it) {
    const Case c = random_case(rng, it < 120 ? 7 : 10, 2e4);
    const Enumerated e = enumerate(c.net, c.ev);
    const Plan plan = make_plan(c.net, c.ev, options(it));
    INFO("network " << it << ": " << c.net.num_vars() << " variables, " << c.net.factors.size()
                    << " factors, " << c.ev.observed.size() << " observed");
    for (int threads : {1, 2}) {
      const MostProbable m = compute_mpe(plan, threads);
      if (e.best == 0) {
        CHECK(m.ln_pr == kNegInf);
        ++impossible;
        continue;
      }
      const double want = static_cast<double>(std::log(e.best));
      CHECK(close_ln(m.ln_pr, want, 1e-9));
      REQUIRE(m.assignment.size() == static_cast<std::size_t>(c.net.num_vars()));
      for (auto [v, x] : c.ev.observed) CHECK(m.assignment[v] == x);
      for (int v = 0; v < c.net.num_vars(); ++v) {
        CHECK(m.assignment[v] >= 0);
        CHECK(m.assignment[v] < c.net.card[v]);
      }
      CHECK(close_ln(ln_at(c.net, m.assignment), want, 1e-9));
      ++compared;
    }
  }
  CHECK(impossible > 0);
  CHECK(compared > 200);
}

// A device for the MPE's traceback, on the host: it computes scans' group maxima
// (DeviceOutputs::maxima) with the CPU's max-product kernel and, with `hold`, keeps every output
// but the root's (taken out of the upward pass's tables, as the executor leaves them empty),
// read from there. The traceback narrowing its scans down by groups, and reading the held
// outputs' parts, gives the assignment of the plain scan.
class GroupMaxima final : public DeviceOutputs {
 public:
  struct Calls {
    int maxima = 0, with_held = 0, reads = 0;
  };
  GroupMaxima(Calls& calls, double maxima_from, double held_from)
      : calls_(calls), maxima_from_(maxima_from), held_from_(held_from) {}
  void hold(std::vector<LnTable>& up) {
    held_.resize(up.size());
    for (std::size_t b = 0; b + 1 < up.size(); ++b) held_[b] = std::move(up[b]), up[b].clear();
  }
  bool holds(int b) const override { return b < static_cast<int>(held_.size()) && !held_[b].empty(); }
  void read(int b, std::int64_t first, std::int64_t n, double* to) override {
    ++calls_.reads;
    REQUIRE(first + n <= static_cast<std::int64_t>(held_.at(b).size()));
    std::copy_n(held_[b].data() + first, n, to);
  }
  std::span<const std::pair<int, int>> folded(int) const override { return {}; }
  double maxima_from() const override { return maxima_from_; }
  double held_from() const override { return held_from_; }
  bool maxima(const BucketShape& shape, std::span<const InputTable> inputs,
              std::span<const HeldPart> held, double* out) override {
    ++calls_.maxima;
    std::vector<InputTable> in(inputs.begin(), inputs.end());
    std::vector<std::int64_t> st(shape.vars.size());
    for (std::size_t i = 0; i < held.size(); ++i)
      if (held[i].bucket >= 0) {
        const std::int64_t n = input_strides(shape, in[i].scope, st.data());
        REQUIRE(held[i].first + n <= static_cast<std::int64_t>(held_.at(held[i].bucket).size()));
        in[i].data = held_[held[i].bucket].data() + held[i].first;
        ++calls_.with_held;
      }
    max_product_log(shape, in, out, 1);
    return true;
  }
  bool downward(const Plan&, std::vector<LnTable>&, std::vector<LnTable>&,
                std::vector<LnTable>&, const std::function<void(int)>&, int) override {
    return false;
  }

 private:
  Calls& calls_;
  double maxima_from_, held_from_;
  std::vector<LnTable> held_;
};

TEST_CASE("Posterior.MpeTracebackByGroupMaxima", "[engine]") {
  // Three devices: every scan of two or more variables narrowed down, host tables only; every
  // output but the root's held and read where it is; held and every scan with a held part
  // narrowed down.
  struct Way {
    bool hold;
    double maxima_from, held_from;
  };
  constexpr double kNever = std::numeric_limits<double>::infinity();
  const Way ways[] = {{false, 0, kNever}, {true, kNever, kNever}, {true, kNever, 0}};
  std::mt19937_64 rng(20240739);
  GroupMaxima::Calls calls[3];
  int compared = 0;
  for (int it = 0; it < 120; ++it) {
    const Case c = random_case(rng, 10, 2e4);
    const Plan plan = make_plan(c.net, c.ev, options(it));
    INFO("network " << it);
    const MostProbable want = compute_mpe(plan, 1);
    for (int w = 0; w < 3; ++w) {
      INFO("way " << w);
      const UpwardRunner upward = [&](const Plan& p, const UpwardPass& pass) {
        RunOptions ro;
        ro.threads = 1;
        ro.pass = pass;
        ro.pass.on_device = nullptr;  // every output to the host
        run_plan(p, ro);
        auto dev = std::make_unique<GroupMaxima>(calls[w], ways[w].maxima_from, ways[w].held_from);
        if (ways[w].hold) dev->hold(*pass.outputs);
        *pass.on_device = std::move(dev);
      };
      const MostProbable m = compute_mpe(plan, 1, upward);
      CHECK(m.ln_pr == want.ln_pr);
      CHECK(m.assignment == want.assignment);
    }
    ++compared;
  }
  CHECK(compared == 120);
  CHECK(calls[0].maxima > 50);
  CHECK(calls[0].reads == 0);
  CHECK(calls[1].maxima == 0);
  CHECK(calls[1].reads > 100);
  CHECK(calls[2].with_held > 20);
}

namespace {
// A shared network planned by a short stochastic search (linkage_16's min-fill order has a table
// of 2^28 entries).
Plan stochastic_plan(const char* name) {
  const fs::path path = uai_network_path(name);
  REQUIRE(!path.empty());
  const io::NetworkWithEvidence r = io::read_network_and_evidence(path.string());
  PlanOptions po;
  po.order.heuristic = OrderHeuristic::Stochastic;
  po.order.time_budget = 0.5;
  return make_plan(r.net, r.ev, po);
}
}  // namespace

TEST_CASE("Posterior.MarginalsOnManyThreads", "[engine]") {
  // The downward pass deals a bucket's blocks to its threads by variables its largest targets
  // have, those written by the threads directly, the others through a copy per thread: the
  // marginals on 1 thread (no dealing) and on 3, 6 and 16 are the same.
  for (const char* name : {"linkage_16", "Grids_11"}) {
    const Plan plan = stochastic_plan(name);
    const Marginals one = compute_marginals(plan, 1);
    for (int threads : {3, 6, 16}) {
      INFO(name << ", " << threads << " threads");
      const Marginals many = compute_marginals(plan, threads);
      CHECK(many.ln_pe == Approx(one.ln_pe).epsilon(1e-12));
      REQUIRE(many.p.size() == one.p.size());
      double worst = 0;
      for (std::size_t v = 0; v < one.p.size(); ++v)
        for (std::size_t x = 0; x < one.p[v].size(); ++x)
          worst = std::max(worst, std::abs(many.p[v][x] - one.p[v][x]));
      CHECK(worst <= 1e-12);
    }
  }
}

TEST_CASE("Posterior.MpeOnManyThreads", "[engine]") {
  // The traceback's scans look for the first configuration at the upward pass's maximum, the
  // threads taking chunks in order and stopping after the first hit: the assignment on 1 thread
  // and on 3, 6 and 16 is the same (the first in index order), its probability the maximum.
  for (const char* name : {"linkage_16", "Grids_11"}) {
    const Plan plan = stochastic_plan(name);
    const MostProbable one = compute_mpe(plan, 1);
    for (int threads : {3, 6, 16}) {
      INFO(name << ", " << threads << " threads");
      const MostProbable many = compute_mpe(plan, threads);
      CHECK(many.ln_pr == Approx(one.ln_pr).epsilon(1e-12));
      CHECK(many.assignment == one.assignment);
    }
  }
}

// Conditioned plans: a random set of 1-3 of the scoped variables sliced, marginals and MPE
// against enumeration.
TEST_CASE("Posterior.ConditionedMatchBruteForce", "[engine]") {
  std::mt19937_64 rng(20240738);
  int compared = 0;
  for (int it = 0; it < 150; ++it) {
    const Case c = random_case(rng, 8, 2e4);
    const Enumerated e = enumerate(c.net, c.ev);
    const PlanOptions po = options(it);
    OrderedModel om = order_model(c.net, c.ev, po);
    Plan base = plan_structure(c.net, c.ev, po, std::move(om.model), std::move(om.order));
    std::vector<int> scoped;
    for (const auto& f : base.model.factors)
      for (int v : f.scope)
        if (std::find(scoped.begin(), scoped.end(), v) == scoped.end()) scoped.push_back(v);
    if (scoped.empty() || !base.model.impossible.empty()) continue;
    std::shuffle(scoped.begin(), scoped.end(), rng);
    const int k = std::uniform_int_distribution<int>(
        1, std::min<int>(3, static_cast<int>(scoped.size())))(rng);
    std::vector<int> vars(scoped.begin(), scoped.begin() + k);
    std::sort(vars.begin(), vars.end());
    ConditionedPlan cp = condition_plan(std::move(base), vars, po);
    INFO("network " << it << ": " << c.net.num_vars() << " variables, " << k << " conditioned");
    const Marginals m = compute_marginals(cp, 1);
    const MostProbable mpe = compute_mpe(cp, 1);
    if (e.z == 0) {
      CHECK(m.ln_pe == kNegInf);
      CHECK(mpe.ln_pr == kNegInf);
      continue;
    }
    CHECK(close_ln(m.ln_pe, static_cast<double>(std::log(e.z)), 1e-9));
    REQUIRE(m.p.size() == e.joint.size());
    for (std::size_t v = 0; v < m.p.size(); ++v)
      for (std::size_t x = 0; x < m.p[v].size(); ++x) {
        INFO("variable " << v << " value " << x);
        CHECK(std::abs(m.p[v][x] - static_cast<double>(e.joint[v][x] / e.z)) <= 1e-9);
      }
    const double best = static_cast<double>(std::log(e.best));
    CHECK(close_ln(mpe.ln_pr, best, 1e-9));
    CHECK(close_ln(ln_at(c.net, mpe.assignment), best, 1e-9));
    ++compared;
  }
  CHECK(compared > 50);
}

// P(X = x | e) from `kinfer mar` against P(e, X = x) / P(e), each a `kinfer pe` run, on a few
// unobserved variables of Pedigree_11.
TEST_CASE("Posterior.MarAgreesWithPe", "[apps]") {
  const fs::path net = uai_network_path("Pedigree_11");
  REQUIRE(!net.empty());
  const std::string evid = read_text(net.string() + ".evid");
  const auto r = run_kinfer({"mar", net.string(), "--json", "--order", "minfill", "-q"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto pe = [&](const std::string& evidence_text) {
    TempDir tmp;
    write_text(tmp / "e.evid", evidence_text);
    const auto p = run_kinfer({"pe", net.string(), "-e", (tmp / "e.evid").string(), "--json",
                               "--order", "minfill", "-q"});
    INFO(p.err);
    REQUIRE(p.rc == 0);
    const auto answer = nlohmann::json::parse(p.out)["log10_pr"];
    return answer.is_string() ? -std::numeric_limits<double>::infinity() : answer.get<double>();
  };
  const double log10_pe = pe(evid);
  CHECK(j["log10_pr"].get<double>() == Approx(log10_pe).epsilon(1e-9));
  std::istringstream in(evid);
  int count = 0;
  in >> count;
  std::vector<std::pair<int, int>> observed(count);
  for (auto& [v, x] : observed) in >> v >> x;
  int checked = 0;
  for (int v : {0, 100, 200, 384}) {
    if (std::any_of(observed.begin(), observed.end(), [&](auto o) { return o.first == v; }))
      continue;
    const auto& p = j["marginals"][v];
    for (std::size_t x = 0; x < p.size(); ++x) {
      std::ostringstream e;
      e << count + 1;
      for (auto [u, y] : observed) e << ' ' << u << ' ' << y;
      e << ' ' << v << ' ' << x << '\n';
      const double want = std::pow(10.0, pe(e.str()) - log10_pe);
      INFO("variable " << v << " value " << x);
      CHECK(std::abs(p[x].get<double>() - want) <= 1e-9);
      ++checked;
    }
  }
  CHECK(checked >= 6);
}

// The UAI 2014 MAR references (about 6 digits printed): every probability within 1e-4.
TEST_CASE("Posterior.UaiMarReferences", "[apps]") {
  // linkage_14 is left out: 20 s on two cores (its reference agrees within 5e-7 all the same)
  for (const std::string name :
       {"Alchemy_11", "CSP_12", "DBN_11", "Grids_11", "ObjectDetection_74", "Pedigree_11",
        "Pedigree_12", "Pedigree_13", "Promedus_24", "Segmentation_12", "linkage_16",
        "linkage_21", "linkage_24"}) {
    INFO(name);
    const fs::path net = uai_network_path(name);
    const fs::path ref = data_dir() / "uai" / (name + ".uai.MAR");
    REQUIRE(!net.empty());
    REQUIRE(fs::exists(ref));
    TempDir tmp;
    const auto r =
        run_kinfer({"mar", net.string(), "--uai-output", (tmp / "out.MAR").string(), "-q"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto got = read_mar(read_text(tmp / "out.MAR"));
    const auto want = read_mar(read_text(ref));
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t v = 0; v < got.size(); ++v) {
      REQUIRE(got[v].size() == want[v].size());
      for (std::size_t x = 0; x < got[v].size(); ++x)
        worst = std::max(worst, std::abs(got[v][x] - want[v][x]));
    }
    INFO("largest difference " << worst);
    CHECK(worst <= 1e-4);
  }
}

// The UAI 2014 MAP (MPE) references: an MPE need not be unique, so ours must be at least as
// probable as the reference assignment, and its printed probability its own.
TEST_CASE("Posterior.UaiMpeReferences", "[apps]") {
  // Left out: Promedas_69 (11 s and 2 GiB on two cores), wcsp_15 (width 62: beyond exact).
  for (const std::string name : {"Grids_30", "Promedas_70", "ProteinFolding_11",
                                 "Segmentation_12", "Segmentation_13"}) {
    INFO(name);
    const fs::path dir = data_dir() / "uai-mpe";
    const fs::path net = dir / (name + ".uai");
    REQUIRE(fs::exists(net));
    TempDir tmp;
    const auto r = run_kinfer(
        {"mpe", net.string(), "--json", "--uai-output", (tmp / "out.MAP").string(), "-q"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    const io::NetworkWithEvidence nwe = io::read_network_and_evidence(net.string());
    const std::vector<int> ours = read_map(read_text(tmp / "out.MAP"));
    CHECK(ours == j["assignment"].get<std::vector<int>>());
    const std::vector<int> ref = read_map(read_text(dir / (name + ".uai.MAP")));
    for (auto [v, x] : nwe.ev.observed) CHECK(ours.at(v) == x);
    const double ln10 = std::log(10.0);
    const double own = ln_at(nwe.net, ours) / ln10, reference = ln_at(nwe.net, ref) / ln10;
    INFO("ours " << own << ", reference " << reference);
    CHECK(j["log10_pr"].get<double>() == Approx(own).margin(1e-9));
    CHECK(own >= reference - 1e-6);
  }
}

// `kinfer mar` and `mpe` under a --max-memory that conditions Grids_11 into slices: the answers
// of the unconditioned run.
TEST_CASE("Posterior.ConditionedCommands", "[apps]") {
  const std::string net = uai_network_path("Grids_11").string();
  for (const auto& [cmd, limit] : {std::pair{"mar", "25M"}, std::pair{"mpe", "21M"}}) {
    INFO(cmd);
    const auto whole = run_kinfer({cmd, net, "--json", "-q"});
    const auto sliced = run_kinfer({cmd, net, "--json", "-q", "--max-memory", limit});
    INFO(whole.err << sliced.err);
    REQUIRE(whole.rc == 0);
    REQUIRE(sliced.rc == 0);
    const auto w = nlohmann::json::parse(whole.out), c = nlohmann::json::parse(sliced.out);
    CHECK(w["slices"] == 1);
    CHECK(c["slices"].get<int>() > 1);
    CHECK(c["log10_pr"].get<double>() == Approx(w["log10_pr"].get<double>()).epsilon(1e-12));
    if (std::string(cmd) == "mpe") continue;
    double worst = 0;
    for (std::size_t v = 0; v < w["marginals"].size(); ++v)
      for (std::size_t x = 0; x < w["marginals"][v].size(); ++x)
        worst = std::max(worst, std::abs(w["marginals"][v][x].get<double>() -
                                         c["marginals"][v][x].get<double>()));
    CHECK(worst <= 1e-9);
  }
}

TEST_CASE("Posterior.DeviceOptions", "[apps]") {
  // --device and --check as pe takes them. Without a GPU (CI): --device gpu falls back to the
  // CPU (said in "device") with the same answer; --check says it did not run (exit 6). With a
  // GPU the same answer on it, and the check passes (scripts/gpu-checks.sh runs both).
  const std::string net = uai_network_path("Pedigree_13").string();
  for (const std::string cmd : {"mar", "mpe"}) {
    INFO(cmd);
    // one order (a GPU's order search may find another, whose traceback may pick another
    // assignment of the same probability)
    const auto cpu = run_kinfer({cmd, net, "--json", "-q", "--device", "cpu", "--order", "minfill"});
    const auto dev = run_kinfer({cmd, net, "--json", "-q", "--device", "gpu", "--order", "minfill"});
    REQUIRE(cpu.rc == 0);
    REQUIRE(dev.rc == 0);
    const auto c = nlohmann::json::parse(cpu.out), d = nlohmann::json::parse(dev.out);
    CHECK(c["device"] == "cpu");
    const bool gpu = d["device"] != "cpu";  // a GPU was there, and used ("gpu", "gpu+cpu")
    CHECK(d["log10_pr"].get<double>() == Approx(c["log10_pr"].get<double>()).epsilon(1e-12));
    if (cmd == "mpe") CHECK(d["assignment"] == c["assignment"]);
    const auto checked = run_kinfer({cmd, net, "--json", "-q", "--check"});
    CHECK(checked.rc == (gpu ? 0 : 6));
    const auto k = nlohmann::json::parse(checked.out);
    if (gpu)
      CHECK(k["check"]["passed"] == true);
    else
      CHECK(k["check"]["run"] == false);
    CHECK(k["log10_pr"].get<double>() == Approx(c["log10_pr"].get<double>()).epsilon(1e-12));
    CHECK(run_kinfer({cmd, net, "--device", "tpu"}).rc == 2);
  }
}

TEST_CASE("Posterior.UserErrors", "[apps]") {
  TempDir tmp;
  // P(A = 1) = 0: the evidence A = 1 is impossible
  write_text(tmp / "zero.uai", "BAYES\n2\n2 2\n2\n1 0\n2 0 1\n\n2\n 1 0\n4\n 0.5 0.5 0.5 0.5\n");
  write_text(tmp / "zero.uai.evid", "1 0 1\n");
  write_text(tmp / "bad.evid", "1 0 7\n");
  for (const std::string cmd : {"mar", "mpe"}) {
    INFO(cmd);
    const std::string zero = (tmp / "zero.uai").string();
    CHECK(run_kinfer({cmd, zero}).rc == 3);
    const auto js = run_kinfer({cmd, zero, "--json"});
    CHECK(js.rc == 3);
    CHECK(nlohmann::json::parse(js.out)["exit_code"] == 3);
    CHECK(run_kinfer({cmd, (tmp / "missing.uai").string()}).rc == 2);
    CHECK(run_kinfer({cmd, zero, "-e", (tmp / "bad.evid").string()}).rc == 2);
    CHECK(run_kinfer({cmd, zero, "-e", (tmp / "none.evid").string()}).rc == 2);
    CHECK(run_kinfer({cmd, zero, "--uai-output", (tmp / "no/such/folder/out").string()}).rc == 2);
    CHECK(run_kinfer({cmd, uai_network_path("Pedigree_11").string(), "--max-memory", "1M"}).rc ==
          3);
    // without evidence the network is fine, and the answer file is written
    write_text(tmp / "empty.evid", "0\n");
    const auto ok = run_kinfer(
        {cmd, zero, "-e", (tmp / "empty.evid").string(), "--uai-output", (tmp / "out").string()});
    INFO(ok.err);
    CHECK(ok.rc == 0);
    CHECK(fs::exists(tmp / "out"));
  }
}
