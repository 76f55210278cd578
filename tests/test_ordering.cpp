// The elimination-order search: reproducible (same seed, same order on 1 and 2 threads), valid
// (a permutation of the scoped variables whose statistics a recomputation confirms), never worse
// than its greedy start, never made worse by a table limit that its answer fits, and stopped by
// the predicted compute time.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/ordering.hpp"
#include "engine/plan.hpp"
#include "engine/reduce.hpp"
#include "io/uai.hpp"
#include "tests/support.hpp"

using namespace kinfer;

namespace {

struct Instance {
  int num_vars = 0;
  std::vector<int> card;
  std::vector<std::vector<int>> scopes;
};

Instance real_instance(const std::string& file) {
  const std::string path = (kinfer::test::data_dir() / "uai" / file).string();
  const Network net = io::read_uai(path);
  const std::string evid = io::default_evidence_path(path);
  const Evidence ev = evid.empty() ? Evidence{} : io::read_evidence(evid, net);
  const ReducedModel m = reduce(net, ev);
  Instance in{net.num_vars(), m.card, {}};
  for (const auto& f : m.factors) in.scopes.push_back(f.scope);
  return in;
}

// A random sparse graph of small factors (pedigree-like degree), cardinalities 2..4.
Instance random_instance(std::mt19937_64& rng, int n) {
  Instance in;
  in.num_vars = n;
  for (int v = 0; v < n; ++v) in.card.push_back(2 + static_cast<int>(rng() % 3));
  for (int v = 1; v < n; ++v) {
    std::vector<int> s{v};
    const int parents = 1 + static_cast<int>(rng() % 3);
    for (int p = 0; p < parents; ++p) s.push_back(static_cast<int>(rng() % v));
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    in.scopes.push_back(s);
  }
  return in;
}

OrderResult search(const Instance& in, int threads, const OrderOptions& oo) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  OrderResult r = find_order(in.num_vars, in.card, in.scopes, oo);
  omp_set_num_threads(saved);
  return r;
}

void check_valid(const Instance& in, const OrderResult& r) {
  std::set<int> scoped;
  for (const auto& s : in.scopes) scoped.insert(s.begin(), s.end());
  CHECK(r.order.size() == scoped.size());
  CHECK(std::set<int>(r.order.begin(), r.order.end()) == scoped);
  const OrderStats e = evaluate_order(in.num_vars, in.card, in.scopes, r.order);
  CHECK(e.width == r.stats.width);
  CHECK(e.log2_max_table == Approx(r.stats.log2_max_table).margin(1e-9));
  CHECK(e.log2_max_clique == Approx(r.stats.log2_max_clique).margin(1e-9));
  CHECK(e.log2_total_state == Approx(r.stats.log2_total_state).margin(1e-9));
}

}  // namespace

TEST_CASE("Ordering.SameSeedSameOrderOnOneAndTwoThreads", "[engine]") {
  OrderOptions oo;
  oo.seed = 7;
  oo.time_budget = 0.3;
  oo.search_fraction = 1e9;  // run to the budget: many rounds, restarts and annealing chains
  for (const std::string file : {"linkage_21.uai.gz", "Pedigree_13.uai"}) {
    INFO(file);
    const Instance in = real_instance(file);
    const OrderResult a = search(in, 1, oo), b = search(in, 2, oo);
    CHECK(a.rounds > 1);
    CHECK(a.moves > 0);
    CHECK(a.order == b.order);
    CHECK(a.restarts == b.restarts);
    CHECK(a.work == b.work);
    CHECK(a.heuristic == b.heuristic);
    check_valid(in, a);
  }
  std::mt19937_64 rng(20261123);
  for (int it = 0; it < 20; ++it) {
    INFO("random graph " << it);
    const Instance in = random_instance(rng, 60 + 20 * (it % 5));
    OrderOptions ro = oo;
    ro.seed = it;
    ro.time_budget = 0.02;
    const OrderResult a = search(in, 1, ro), b = search(in, 2, ro);
    CHECK(a.order == b.order);
    check_valid(in, a);
  }
}

TEST_CASE("Ordering.RefinementNeverWorseThanGreedy", "[engine]") {
  std::mt19937_64 rng(4242);
  for (int it = 0; it < 20; ++it) {
    INFO("random graph " << it);
    const Instance in = random_instance(rng, 80);
    OrderOptions greedy;
    greedy.heuristic = OrderHeuristic::MinFill;
    const OrderResult g = find_order(in.num_vars, in.card, in.scopes, greedy);
    OrderOptions oo;
    oo.time_budget = 0.02;
    oo.search_fraction = 1e9;
    const OrderResult r = find_order(in.num_vars, in.card, in.scopes, oo);
    check_valid(in, r);
    CHECK(r.log2_total_greedy <= g.stats.log2_total_state + 1e-12);
    CHECK(r.stats.log2_total_state <= r.log2_total_greedy + 1e-12);
  }
  // On a real network the annealing does better than the greedy start (a 2^29.4 start).
  const Instance in = real_instance("linkage_21.uai.gz");
  OrderOptions oo;
  oo.time_budget = 0.3;
  const OrderResult r = find_order(in.num_vars, in.card, in.scopes, oo);
  check_valid(in, r);
  CHECK(r.stats.log2_total_state < r.log2_total_greedy);
}

TEST_CASE("Ordering.TableLimitNeverMakesTheOrderWorse", "[engine]") {
  const Instance in = real_instance("linkage_21.uai.gz");
  OrderOptions oo;
  oo.time_budget = 0.2;
  const OrderResult free = find_order(in.num_vars, in.card, in.scopes, oo);
  // A limit the unlimited answer fits: the same order.
  oo.max_table_entries = std::exp2(free.stats.log2_max_table);
  const OrderResult fit = find_order(in.num_vars, in.card, in.scopes, oo);
  CHECK(fit.fits);
  CHECK(fit.order == free.order);
  // A tighter one: an order within it (min-weight's largest table is far smaller), or the one
  // with the smallest largest table, flagged.
  oo.max_table_entries = std::exp2(free.stats.log2_max_table - 3);
  const OrderResult tight = find_order(in.num_vars, in.card, in.scopes, oo);
  check_valid(in, tight);
  if (tight.fits) CHECK(tight.stats.log2_max_table <= free.stats.log2_max_table - 3 + 1e-9);
}

TEST_CASE("Ordering.StopsAtAFractionOfThePredictedCompute", "[engine]") {
  const Instance in = real_instance("linkage_21.uai.gz");
  OrderOptions oo;
  oo.time_budget = 5;
  oo.min_search_seconds = 0.01;
  // Predicted to compute in no time: the search stops at its floor (one round's work past it).
  oo.predict_seconds = [](const OrderStats&) { return 0.0; };
  const OrderResult quick = find_order(in.num_vars, in.card, in.scopes, oo);
  CHECK(quick.stopped_by == "target");
  CHECK(quick.work < 0.2);
  // Predicted to compute for a day: the budget stops it.
  oo.time_budget = 0.1;
  oo.predict_seconds = [](const OrderStats&) { return 86400.0; };
  const OrderResult slow = find_order(in.num_vars, in.card, in.scopes, oo);
  CHECK(slow.stopped_by == "budget");
  CHECK(slow.work >= 0.1);
  CHECK(slow.work < 0.3);
  // Deterministic heuristics do no search.
  oo.heuristic = OrderHeuristic::MinFill;
  const OrderResult mf = find_order(in.num_vars, in.card, in.scopes, oo);
  CHECK(mf.restarts == 1);
  CHECK(mf.rounds == 0);
  check_valid(in, mf);
}

// Without predict_seconds the search predicts the compute as the total states over
// kCpuSearchStatesPerSecond (2e8) and stops after the first round whose work reaches a
// quarter of that for the best order so far (the trajectory holds each round's work and answer).
TEST_CASE("Ordering.DefaultPredictionStopsAtAQuarter", "[engine]") {
  const Instance in = real_instance("linkage_21.uai.gz");
  OrderOptions oo;
  oo.time_budget = 40;
  REQUIRE(oo.states_per_second == kCpuSearchStatesPerSecond);
  const OrderResult r = find_order(in.num_vars, in.card, in.scopes, oo);
  check_valid(in, r);
  REQUIRE(r.stopped_by == "target");
  REQUIRE(!r.trajectory.empty());
  const auto target = [&](double log2_total) {
    return std::max(oo.min_search_seconds,
                    0.25 * std::exp2(log2_total) / kCpuSearchStatesPerSecond);
  };
  for (std::size_t k = 0; k + 1 < r.trajectory.size(); ++k)
    CHECK(r.trajectory[k].work < target(r.trajectory[k].log2_total_state));
  CHECK(r.trajectory.back().work >= target(r.trajectory.back().log2_total_state));
  CHECK(r.trajectory.back().log2_total_state == r.stats.log2_total_state);
  CHECK(r.work == r.trajectory.back().work);
}

TEST_CASE("Ordering.CacheKeepsTheOrder", "[engine]") {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("kinfer-order-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string path = (kinfer::test::data_dir() / "uai" / "Pedigree_13.uai").string();
  const Network net = io::read_uai(path);
  const Evidence ev = io::read_evidence(io::default_evidence_path(path), net);
  PlanOptions po;
  po.order.time_budget = 0.1;
  po.order_cache_dir = dir.string();
  const Plan first = make_plan(net, ev, po);
  REQUIRE(fs::exists(dir));
  const Plan second = make_plan(net, ev, po);
  CHECK(second.order.order == first.order.order);
  CHECK(second.order.heuristic.rfind("cached", 0) == 0);
  CHECK(run_plan(second) == run_plan(first));
  // The key holds every search option: another seed searches again (and is cached beside it),
  // and its order is the one the search finds without a cache.
  po.order.seed = 99;
  const Plan other = make_plan(net, ev, po);
  CHECK(other.order.heuristic.rfind("cached", 0) != 0);
  PlanOptions uncached = po;
  uncached.order_cache_dir = "none";
  CHECK(make_plan(net, ev, uncached).order.order == other.order.order);
  CHECK(make_plan(net, ev, po).order.heuristic.rfind("cached", 0) == 0);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  CHECK(files == 2);
  // A search under a memory limit is cached apart: its own entry, found again by the same limit,
  // and not the answer of the search without one; also where it finds no order within the limit
  // (its answer then does not fit, and is not searched for again).
  po.order.seed = 1;
  const OrderedModel om = order_model(net, ev, po);
  std::vector<std::vector<int>> scopes;
  for (const auto& f : om.model.factors) scopes.push_back(f.scope);
  OrderOptions bounded = po.order;
  bounded.max_table_entries = std::exp2(om.order.stats.log2_max_table);
  const OrderResult limited =
      find_order_cached(net.num_vars(), om.model, scopes, bounded, po.order_cache_dir);
  CHECK(limited.heuristic.rfind("cached", 0) != 0);
  CHECK(limited.fits);
  const OrderResult again =
      find_order_cached(net.num_vars(), om.model, scopes, bounded, po.order_cache_dir);
  CHECK(again.heuristic.rfind("cached", 0) == 0);
  CHECK(again.order == limited.order);
  CHECK(find_order(net.num_vars(), om.model.card, scopes, bounded).order == limited.order);
  bounded.max_table_entries = 2;  // no order of Pedigree_13 has tables this small
  const OrderResult none =
      find_order_cached(net.num_vars(), om.model, scopes, bounded, po.order_cache_dir);
  CHECK_FALSE(none.fits);
  const OrderResult none_again =
      find_order_cached(net.num_vars(), om.model, scopes, bounded, po.order_cache_dir);
  CHECK(none_again.heuristic.rfind("cached", 0) == 0);
  CHECK_FALSE(none_again.fits);
  CHECK(none_again.order == none.order);
  files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  CHECK(files == 4);
  fs::remove_all(dir);
}
