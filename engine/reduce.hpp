#pragma once
// Evidence reduction: slice every factor at the observed values, drop cardinality-1 variables,
// and move to the log domain. What is left is what elimination works on.
#include <string>
#include <vector>

#include "engine/model.hpp"

namespace kinfer {

// A factor in the log domain; `scope` holds free variables only (card >= 2, unobserved),
// the last varying fastest.
struct LogFactor {
  std::vector<int> scope;
  std::vector<double> logv;
  int origin = -1;  // index of the Network factor it came from
};

struct ReducedModel {
  std::vector<int> card;          // cardinalities of all variables (original numbering)
  std::vector<char> fixed;        // 1 if observed or of cardinality 1
  std::vector<int> value;         // observed value of each fixed variable (0 for card-1 ones)
  std::vector<LogFactor> factors; // factors with a non-empty scope
  std::vector<std::pair<int, double>> constants;  // (network factor, ln value) of constant ones
  double free_constant = 0.0;     // ln of the cardinalities of free variables in no factor
  int num_observed = 0;
  double log_constant() const;    // everything outside `factors`, ln
  // Set when some factor is zero everywhere given the evidence (so P(e) = 0).
  std::string impossible;
};

// Throws InputError for evidence that names unknown variables or values.
ReducedModel reduce(const Network& net, const Evidence& ev);

// Reduces one network factor against the model's evidence (scope: its free variables).
// Sets `all_zero` when the factor is zero for every configuration given the evidence.
LogFactor reduce_factor(const Factor& f, const ReducedModel& m, bool& all_zero);

}  // namespace kinfer
