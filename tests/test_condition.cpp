// Conditioning against independent computations: ln P(e) of random networks, conditioned on
// random variable sets and on the accountant's greedy choice under small budgets, against
// brute-force enumeration of the joint (long double, linear domain); real networks under forced
// small budgets against their unconditioned plan and the UAI references.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/plan.hpp"
#include "io/uai.hpp"
#include "tests/brute_force.hpp"
#include "tests/support.hpp"

using namespace kinfer;
using namespace kinfer::test;
namespace fs = std::filesystem;

namespace {

// A shared network with its default evidence (the .uai or .uai.gz in KINFER_DATA/uai).
std::pair<Network, Evidence> shared_network(const std::string& name) {
  fs::path path = test::data_dir() / "uai" / (name + ".uai");
  if (!fs::exists(path)) path += ".gz";
  io::NetworkWithEvidence r = io::read_network_and_evidence(path.string());
  return {std::move(r.net), std::move(r.ev)};
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Case {
  Network net;
  Evidence ev;
};

// Cardinalities 1-3, scopes of up to 4 variables, entries over a wide range with exact zeros
// (some factors zero on whole slices), random evidence.
// `dense`: more variables and small scopes (tables of pairs and triples): small inputs and
// larger intermediate tables, the case conditioning is for.
Case random_case(std::mt19937_64& rng, bool dense = false) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto real = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  Case c;
  c.net.source = "random";
  c.net.kind = "MARKOV";
  const int nv = dense ? uni(8, 12) : uni(2, 9);
  double joint;
  do {
    c.net.card.clear();
    joint = 1;
    for (int v = 0; v < nv; ++v) joint *= c.net.card.emplace_back(uni(dense ? 2 : 1, 3));
  } while (joint > 6e4);
  const double p_zero = std::vector<double>{0.0, 0.1, 0.4}[uni(0, 2)];
  const double spread = std::vector<double>{1.0, 30.0}[uni(0, 1)];
  const int nf = dense ? uni(nv, 2 * nv) : uni(1, nv + 5);
  for (int f = 0; f < nf; ++f) {
    Factor fac;
    std::vector<int> vars(nv);
    for (int v = 0; v < nv; ++v) vars[v] = v;
    std::shuffle(vars.begin(), vars.end(), rng);
    fac.scope.assign(vars.begin(), vars.begin() + (dense ? uni(2, 3) : uni(1, std::min(4, nv))));
    fac.table.resize(table_size(fac.scope, c.net.card));
    for (double& x : fac.table) x = real(0, 1) < p_zero ? 0.0 : std::exp(real(-spread, spread));
    c.net.factors.push_back(std::move(fac));
  }
  c.ev.source = "random evidence";
  for (int v = 0; v < nv; ++v)
    if (real(0, 1) < 0.15) c.ev.observed.push_back({v, uni(0, c.net.card[v] - 1)});
  return c;
}

double run_cpu(ConditionedPlan& cp, int threads = 1) {
  RunOptions ro;
  ro.threads = threads;
  return run_conditioned(cp, [&](const Plan& p) { return run_plan(p, ro); });
}

// The structure of make_plan without its memory check: reduce, order, tree.
Plan structure_of(const Network& net, const Evidence& ev, const PlanOptions& po) {
  OrderedModel om = order_model(net, ev, po);
  return plan_structure(net, ev, po, std::move(om.model), std::move(om.order));
}

// ln P(e) references of data/uai (log10 in REFERENCES.tsv).
std::map<std::string, double> references() {
  std::ifstream f(test::data_dir() / "uai" / "REFERENCES.tsv");
  std::map<std::string, double> r;
  std::string line;
  std::getline(f, line);
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string name, value;
    std::getline(s, name, '\t');
    std::getline(s, value, '\t');
    r[name] = std::stod(value);
  }
  return r;
}

}  // namespace

TEST_CASE("Condition.RandomSetsMatchBruteForce", "[engine]") {
  std::mt19937_64 rng(20261123);
  int compared = 0, conditioned = 0, impossible_slices = 0;
  for (int it = 0; it < 300; ++it) {
    const Case c = random_case(rng);
    const long double z = brute_force(c.net, c.ev);
    const double want = z > 0 ? static_cast<double>(std::log(z)) : kNegInf;
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::MinFill;
    po.keep_tables = it % 2 == 0;
    Plan base = structure_of(c.net, c.ev, po);
    if (!base.model.impossible.empty()) continue;
    // Scoped variables of the reduced model; condition on a random subset of 1-3 of them
    // (sometimes every variable of a factor: per-slice constants).
    std::vector<int> scoped;
    for (const auto& f : base.model.factors)
      for (int v : f.scope)
        if (std::find(scoped.begin(), scoped.end(), v) == scoped.end()) scoped.push_back(v);
    if (scoped.empty()) continue;
    std::shuffle(scoped.begin(), scoped.end(), rng);
    const int k = std::uniform_int_distribution<int>(
        1, std::min<int>(3, static_cast<int>(scoped.size())))(rng);
    std::vector<int> vars(scoped.begin(), scoped.begin() + k);
    std::sort(vars.begin(), vars.end());
    ConditionedPlan cp = condition_plan(base, vars, po);
    REQUIRE(cp.conditioned());
    ++conditioned;
    std::vector<double> slice_values;
    const double got = run_conditioned(
        cp, [&](const Plan& p) { return run_plan(p, {}); },
        [&](std::int64_t, double v) { slice_values.push_back(v); });
    INFO("network " << it << ": " << c.net.num_vars() << " variables, " << c.net.factors.size()
                    << " factors, conditioned on " << k << " variable(s), " << cp.cond.slices
                    << " slices; got " << got << ", brute force " << want);
    CHECK(static_cast<std::int64_t>(slice_values.size()) == cp.cond.slices);
    for (double v : slice_values) impossible_slices += v == kNegInf;
    CHECK(close_ln(got, want, 1e-9));
    // the same answer, bit for bit, on another run and with two threads
    CHECK(run_cpu(cp, 1) == got);
    CHECK(close_ln(run_cpu(cp, 2), want, 1e-9));
    ++compared;
  }
  CHECK(compared > 200);
  CHECK(impossible_slices > 0);  // zeros reached: slices that contribute -inf
}

TEST_CASE("Condition.GreedyChoiceUnderSmallBudgetsMatchesBruteForce", "[engine]") {
  std::mt19937_64 rng(7);
  int forced = 0;
  for (int it = 0; it < 200; ++it) {
    const Case c = random_case(rng, true);
    const long double z = brute_force(c.net, c.ev);
    const double want = z > 0 ? static_cast<double>(std::log(z)) : kNegInf;
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::MinFill;
    po.keep_tables = false;
    const Plan base = structure_of(c.net, c.ev, po);
    if (!base.model.impossible.empty()) continue;
    const MemoryEstimate& m = base.memory;
    // a budget that leaves the intermediate tables half of what they need (and room for the
    // tables slices are cut from)
    const double budget = m.running_bytes - m.intermediate_bytes / 2 + m.input_bytes;
    bool feasible = false;
    ConditionedPlan cp = condition_to_fit(base, budget, po, feasible);
    if (!feasible) continue;
    forced += cp.conditioned();
    INFO("network " << it << ": " << cp.cond.vars.size() << " variables conditioned, "
                    << cp.cond.slices << " slices, peak " << cp.plan.memory.peak_bytes << " of "
                    << budget);
    CHECK(cp.plan.memory.running_bytes <= budget);
    CHECK(close_ln(run_cpu(cp), want, 1e-9));
  }
  CHECK(forced > 20);
  INFO(forced << " forced");
}

TEST_CASE("Condition.RealNetworksUnderForcedBudgets", "[engine]") {
  const auto ref = references();
  for (const std::string name : {"Pedigree_11", "Pedigree_13", "pedigree1", "linkage_16"}) {
    const auto [net, ev] = shared_network(name);
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::WeightedMinFill;
    po.keep_tables = false;
    ConditionedPlan whole = make_conditioned_plan(net, ev, po);  // no limit
    REQUIRE(!whole.conditioned());
    const double ln_whole = run_cpu(whole, 2);
    const MemoryEstimate& m = whole.plan.memory;
    // an eighth of the intermediate tables (the part conditioning can shrink)
    po.max_memory_bytes = m.peak_bytes - m.intermediate_bytes * 7 / 8 + 2 * m.input_bytes;
    ConditionedPlan cp = make_conditioned_plan(net, ev, po);
    INFO(name << ": limit " << po.max_memory_bytes << ", unconditioned peak " << m.peak_bytes
              << ", " << cp.cond.slices << " slices of peak " << cp.plan.memory.peak_bytes << " ("
              << cp.cond.choice << ")");
    CHECK(cp.plan.memory.peak_bytes <= po.max_memory_bytes);
    if (!cp.conditioned()) continue;  // the search under the limit found an order that fits
    const double ln = run_cpu(cp, 2);
    CHECK(close_ln(ln, ln_whole, 1e-11));
    CHECK(std::abs(ln / std::log(10.0) - ref.at(name)) <= 0.006);
  }
}

TEST_CASE("Condition.DeviceOrderNeverWorseThanStateSpaceOrderConditioned", "[engine]") {
  // A device objective that prefers orders with large tables (as a GPU's profile does) may find
  // one that needs far more slices under a device budget than the order of least total state
  // space: make_conditioned_plan must then take the latter. Its estimated work is at most that
  // of the state-space order conditioned to fit (computed here independently), or at most four
  // times the device order's unconditioned work.
  const auto ref = references();
  for (const std::string name : {"Pedigree_11", "pedigree1", "linkage_16"}) {
    const auto [net, ev] = shared_network(name);
    PlanOptions lean;
    lean.keep_tables = false;
    lean.order.seed = 3;
    const ConditionedPlan whole = make_conditioned_plan(net, ev, lean);
    REQUIRE(!whole.conditioned());
    // room for the inputs and a quarter of the intermediate tables (what conditioning shrinks)
    const MemoryEstimate& m = whole.plan.memory;
    const double device = m.input_bytes + m.intermediate_bytes / 4;
    PlanOptions po = lean;
    po.order.predict_seconds = [](const OrderStats& st) {
      return 1e6 * std::exp2(-st.log2_max_table) + 1e-9 * std::exp2(st.log2_total_state);
    };
    po.order.predict_key = "test: large tables first";
    po.device_budget = [device](const Plan&) { return device; };
    ConditionedPlan cp = make_conditioned_plan(net, ev, po);
    bool feasible = false;
    OrderedModel om = order_model(net, ev, lean);
    const Plan lean_plan = plan_structure(net, ev, lean, om.model, std::move(om.order));
    const ConditionedPlan lean_fit = condition_to_fit(lean_plan, 0, lean, feasible, device);
    INFO(name << ": device budget " << device << ", chosen " << cp.cond.slices << " slices, "
              << cp.cond.flops << " FLOP (" << cp.cond.choice << "); state-space order "
              << (feasible ? std::to_string(lean_fit.cond.flops) : std::string("does not fit")));
    CHECK(cp.plan.memory.device_bytes <= device);
    // The state-space order is searched when conditioning the device's order at least
    // quadruples its work (kStateSpaceOverhead); then it is never beaten by less.
    if (feasible)
      CHECK((cp.cond.flops <= lean_fit.cond.flops * (1 + 1e-12) ||
             cp.cond.flops <= 4 * cp.cond.unconditioned_flops * (1 + 1e-12)));
    CHECK(std::abs(run_cpu(cp, 2) / std::log(10.0) - ref.at(name)) <= 0.006);
  }
}

TEST_CASE("Condition.RefusesOnlyWhenConditioningCannotFit", "[engine]") {
  // One factor of 2^16 entries over 16 binary variables: no slice can be smaller than the
  // tables it is cut from, so a limit below the program plus twice that must be refused.
  Network net;
  net.kind = "MARKOV";
  net.card.assign(16, 2);
  Factor f;
  for (int v = 0; v < 16; ++v) f.scope.push_back(v);
  f.table.assign(1 << 16, 0.5);
  net.factors.push_back(f);
  PlanOptions po;
  po.keep_tables = false;
  po.max_memory_bytes = process_bytes(1) + 64 * 1024;
  CHECK_THROWS_AS(make_conditioned_plan(net, {}, po), ResourceError);
  // with room for the tables, it plans and answers exactly: 2^16 * 0.5
  po.max_memory_bytes = 0;
  ConditionedPlan cp = make_conditioned_plan(net, {}, po);
  CHECK(close_ln(run_cpu(cp), 15 * std::log(2.0), 1e-12));
}

TEST_CASE("Condition.RebuiltFromOrderAndVariables", "[engine]") {
  // rebuild_conditioned_plan (the other MPI ranks build rank 0's plan without searching): from
  // a conditioned plan's order and variables, the same order, slices and tree, and the same
  // ln P(e) bit for bit; an order of another network is refused.
  for (const std::string name : {"Pedigree_13", "linkage_16"}) {
    const auto [net, ev] = shared_network(name);
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::WeightedMinFill;
    po.keep_tables = false;
    const ConditionedPlan whole = make_conditioned_plan(net, ev, po);
    const MemoryEstimate& m = whole.plan.memory;
    po.max_memory_bytes = m.peak_bytes - m.intermediate_bytes * 7 / 8 + 2 * m.input_bytes;
    ConditionedPlan cp = make_conditioned_plan(net, ev, po);
    ConditionedPlan again =
        rebuild_conditioned_plan(net, ev, po, cp.plan.order.order, cp.cond.vars, "rank 0's");
    INFO(name << ": " << cp.cond.slices << " slices");
    CHECK(again.cond.vars == cp.cond.vars);
    CHECK(again.cond.slices == cp.cond.slices);
    CHECK(again.plan.order.order == cp.plan.order.order);
    CHECK(again.plan.tree.buckets.size() == cp.plan.tree.buckets.size());
    CHECK(run_cpu(again, 2) == run_cpu(cp, 2));
    std::vector<int> wrong = cp.plan.order.order;
    wrong.pop_back();
    if (!cp.conditioned())
      CHECK_THROWS_AS(rebuild_conditioned_plan(net, ev, po, wrong, {}, "x"), ResourceError);
    wrong.push_back(static_cast<int>(net.num_vars()) + 5);
    CHECK_THROWS_AS(rebuild_conditioned_plan(net, ev, po, wrong, cp.cond.vars, "x"), ResourceError);
  }
}

TEST_CASE("Condition.ConditionedFurtherAtRunTime", "[engine]") {
  // recondition (a GPU with less free memory when the plan runs than when it was planned): a
  // compiled plan, unconditioned (keep_tables off: its model's tables are gone, its inputs are
  // the source) and then the result again, conditioned on more variables so that a slice fits
  // a third of the device estimate, answers as the unconditioned plan and the UAI reference.
  const auto ref = references();
  for (const std::string name : {"Pedigree_11", "linkage_16"}) {
    const auto [net, ev] = shared_network(name);
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::WeightedMinFill;
    po.keep_tables = false;
    ConditionedPlan whole = make_conditioned_plan(net, ev, po);
    REQUIRE(!whole.conditioned());
    REQUIRE(whole.plan.memory.device_bytes > 0);
    const double ln_whole = run_cpu(whole, 2);
    double budget = whole.plan.memory.device_bytes / 3;
    bool feasible = false;
    ConditionedPlan once = recondition(whole, 0, budget, po, feasible);
    INFO(name << ": device estimate " << whole.plan.memory.device_bytes << ", budget " << budget);
    REQUIRE(feasible);
    CHECK(once.conditioned());
    CHECK(once.plan.memory.device_bytes <= budget);
    CHECK_THAT(once.cond.choice, Catch::Contains("at run time"));
    CHECK(close_ln(run_cpu(once, 2), ln_whole, 1e-11));
    CHECK(std::abs(run_cpu(once, 2) / std::log(10.0) - ref.at(name)) <= 0.006);
    // and again, from the conditioned plan: its variables first, then the new ones
    budget = once.plan.memory.device_bytes / 2;
    ConditionedPlan twice = recondition(once, 0, budget, po, feasible);
    if (!feasible) continue;  // nothing smaller to cut (the slices' inputs are the floor)
    CHECK(twice.cond.vars.size() > once.cond.vars.size());
    CHECK(std::equal(once.cond.vars.begin(), once.cond.vars.end(), twice.cond.vars.begin()));
    CHECK(twice.plan.memory.device_bytes <= budget);
    CHECK(close_ln(run_cpu(twice, 2), ln_whole, 1e-11));
  }
  // a plan that fits is not conditioned further (nothing to choose): not feasible, left alone
  const auto [net, ev] = shared_network("Pedigree_13");
  PlanOptions po;
  po.keep_tables = false;
  const ConditionedPlan whole = make_conditioned_plan(net, ev, po);
  bool feasible = true;
  recondition(whole, 0, 2 * whole.plan.memory.device_bytes, po, feasible);
  CHECK_FALSE(feasible);
}
