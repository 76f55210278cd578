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
  std::vector<LogFactor> factors; // factors with a non-empty scope
  double log_constant = 0.0;      // ln of constant factors and of free variables in no factor
  int num_observed = 0;
  // Set when some factor is zero everywhere given the evidence (so P(e) = 0).
  std::string impossible;
};

// Throws InputError for evidence that names unknown variables or values.
ReducedModel reduce(const Network& net, const Evidence& ev);

}  // namespace kinfer
