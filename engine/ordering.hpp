#pragma once
// Elimination orders on the interaction graph: greedy heuristics (min-fill, min-weight,
// weighted min-fill) and a stochastic greedy search with random tie-breaking and restarts.
// Orders are scored by total table size (sum of bucket state spaces) and rejected when their
// largest intermediate table exceeds the memory budget.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kinfer {

enum class OrderHeuristic { MinFill, MinWeight, WeightedMinFill, Stochastic };

OrderHeuristic parse_heuristic(const std::string& name);  // throws std::invalid_argument
std::string heuristic_name(OrderHeuristic h);

struct OrderOptions {
  OrderHeuristic heuristic = OrderHeuristic::Stochastic;
  double time_budget = 2.0;  // seconds, stochastic search only
  // Largest intermediate table allowed, in entries; orders above it are rejected.
  double max_table_entries = std::numeric_limits<double>::infinity();
  std::uint64_t seed = 1;
  // Stop the stochastic search early once it has used this fraction of the estimated compute
  // time of the best order so far (no point ordering for 2 s what computes in 1 ms).
  double states_per_second = 2e8;
  double search_fraction = 0.25;
};

struct OrderStats {
  int width = 0;                // largest clique minus one (induced width)
  double log2_max_table = 0;    // largest intermediate (message) table, log2 entries
  double log2_max_clique = 0;   // largest bucket state space, log2
  double log2_total_state = 0;  // log2 of the sum of all bucket state spaces
};

struct OrderResult {
  std::vector<int> order;  // variables in elimination order (only scoped variables)
  OrderStats stats;
  std::string heuristic;  // what produced it, e.g. "stochastic(min-fill)"
  int restarts = 0;
  double seconds = 0;
  bool fits = true;  // largest table within max_table_entries
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
