#pragma once
// Elimination orders on the interaction graph: greedy heuristics (min-fill, min-weight,
// weighted min-fill) and a reproducible search: randomized greedy restarts (shared out among
// criteria by what each has found) and simulated annealing on a few lines of descent from the
// best restarts (converged ones replaced by new restarts), in rounds of fixed work. Orders are
// scored by total table size (sum of bucket state spaces) and rejected when their largest
// intermediate table exceeds the memory budget.
//
// Reproducible: the search's result depends only on the graph, the options and the seed, never
// on the thread count, the machine or its load. Every restart and annealing chain draws from its
// own random stream seeded from (seed, its index), results are combined in index order, and the
// search stops on a count of its work (word operations of the elimination, converted to nominal
// seconds by a fixed rate), not on a clock.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace kinfer {

// Changes when the search may find other orders for the same options (the order cache's key).
inline constexpr int kOrderSearchVersion = 4;

// The search's prediction of the CPU's compute, without a better one (OrderOptions::
// predict_seconds): the total state space over this rate, in nominal core-seconds of search
// that take as long as that compute. On the 16-core reference machine the CPU kernel computes
// 7e7-1.1e8 states per core-second on the linkage networks and 16 threads search 6-7.4
// nominal core-seconds per second, so with 2e8 the search's target (a quarter of the
// prediction) is about a quarter of the compute's wall time there. One core's rate (5e7) let the
// search run as long as the compute: with 2e8 and --order-time 40, `pe --device cpu` of
// linkage_11/12/13/17 over seeds 1-3 took 62.4 s in all against 70.5 s (docs/performance.md).
inline constexpr double kCpuSearchStatesPerSecond = 2e8;

enum class OrderHeuristic { MinFill, MinWeight, WeightedMinFill, Stochastic };

OrderHeuristic parse_heuristic(const std::string& name);  // throws std::invalid_argument
std::string heuristic_name(OrderHeuristic h);

struct OrderStats {
  int width = 0;                // largest clique minus one (induced width)
  double log2_max_table = 0;    // largest intermediate (message) table, log2 entries
  double log2_max_clique = 0;   // largest bucket state space, log2
  double log2_total_state = 0;  // log2 of the sum of all bucket state spaces
};

struct OrderOptions {
  OrderHeuristic heuristic = OrderHeuristic::Stochastic;
  // Most work the stochastic search may do, in nominal core-seconds (work counted, not timed:
  // the same on every machine and thread count; one core of a current x86 server does about
  // one nominal second of search per second, so T threads finish it in about 1/T of it).
  double time_budget = 2.0;
  // Largest intermediate table allowed, in entries; orders above it are rejected.
  double max_table_entries = std::numeric_limits<double>::infinity();
  std::uint64_t seed = 1;
  // The search stops once its work reaches `search_fraction` of the predicted compute time of
  // the best order found so far (at least `min_search_seconds`; at most `time_budget`): no point
  // ordering for 2 s what computes in 0.1 s. The prediction is `predict_seconds(stats)` when set
  // (e.g. from the device profile of the backend that will run the plan), else the total state
  // space over `states_per_second` (kCpuSearchStatesPerSecond). Both are in nominal
  // core-seconds of search, so the ratio of search to compute time holds on any thread count.
  std::function<double(const OrderStats&)> predict_seconds;
  // Names what predict_seconds predicts from (empty: the engine's own CPU rate). Part of the
  // order cache's key with every other option here, so that a cached order is the one this
  // search would find.
  std::string predict_key;
  double states_per_second = kCpuSearchStatesPerSecond;
  double search_fraction = 0.25;
  double min_search_seconds = 0.05;
  // Local refinement of the best orders (simulated annealing) besides fresh greedy restarts.
  bool refine = true;
  // One round of the search: `round_restarts` randomized greedy restarts and `round_chains`
  // annealing chains of `round_moves` moves on the best orders, run in parallel, merged in index
  // order. Many tasks of similar length keep 16 threads busy: 16 restarts + 4 chains of 12
  // moves kept them 6.7x busy (the chains' length was each round's wall time), 32 + 12 x 8 11.6x
  // at the same quality per work (docs/performance.md).
  int round_restarts = 32;
  int round_chains = 12;
  int round_moves = 8;
};

struct OrderResult {
  std::vector<int> order;  // variables in elimination order (only scoped variables)
  OrderStats stats;
  std::string heuristic;  // what produced it, e.g. "stochastic(min-fill)"
  int restarts = 0;       // greedy runs, deterministic and randomized
  int moves = 0;          // annealing moves tried on the best orders
  int rounds = 0;         // rounds of restarts and annealing chains
  double work = 0;        // nominal core-seconds of search (deterministic)
  // nominal seconds of the search's critical path on 16 threads: each round's tasks handed out
  // in order to the first free thread (deterministic; work / span16 is the most 16 threads can
  // speed the search up)
  double span16 = 0;
  double seconds = 0;            // wall time of the search
  double log2_total_greedy = 0;  // the best deterministic greedy order's total state space
  std::string stopped_by;        // "target" (fraction of the predicted compute), "budget", ""
  bool fits = true;              // largest table within max_table_entries
  // After each round: the work so far (nominal core-s), the wall time (s) and the answer's log2
  // total state. The answer of a search stopped by a smaller budget B is the one after the
  // first round whose work reached B (the search is deterministic), so one run gives them all.
  struct Round {
    double work, seconds, log2_total_state;
  };
  std::vector<Round> trajectory;
};

// Variables 0..num_vars-1 with cardinalities `card`; `scopes` are the factors' scopes.
// Variables in no scope are not ordered.
OrderResult find_order(int num_vars, const std::vector<int>& card,
                       const std::vector<std::vector<int>>& scopes, const OrderOptions& opt);

// Statistics of a given order (every scoped variable must appear exactly once).
OrderStats evaluate_order(int num_vars, const std::vector<int>& card,
                          const std::vector<std::vector<int>>& scopes,
                          const std::vector<int>& order);

// Number of connected components of the interaction graph among scoped variables.
int count_components(int num_vars, const std::vector<std::vector<int>>& scopes);

}  // namespace kinfer
