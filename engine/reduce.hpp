#pragma once
// Evidence reduction and value elimination: slice every factor at the observed values, drop
// cardinality-1 variables, remove domain values that no factor supports (a value whose every
// entry is zero in some factor contributes nothing to P(e)), repeat to a fixed point, and move
// to the log domain. What is left is what elimination works on.
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
  std::vector<int> orig_card;          // cardinalities as declared in the network
  std::vector<int> card;               // after value elimination (what the factors are indexed by)
  std::vector<std::vector<int>> kept;  // per free variable: the original values still possible
  std::vector<char> fixed;             // 1 if observed, of cardinality 1, or reduced to one value
  std::vector<int> value;              // original value of each fixed variable
  std::vector<LogFactor> factors;      // factors with a non-empty scope
  std::vector<std::pair<int, double>> constants;  // (network factor, ln value) of constant ones
  double free_constant = 0.0;  // ln of the cardinalities of free variables in no factor
  int num_observed = 0;
  int values_removed = 0;  // domain values removed by value elimination
  int dims_dropped = 0;    // factor dimensions removed by drop_independent
  // Set when P(e) = 0 is evident (a factor zero everywhere, or a variable with no possible
  // value): says which factor or variable.
  std::string impossible;
  double log_constant() const;  // everything outside `factors`, ln
};

struct ReduceOptions {
  bool value_elimination = true;
  // After value elimination, a factor whose table does not vary with one of its variables
  // (e.g. a child's allele given a selector whose parent is homozygous) loses that variable:
  // exact, and it cuts edges out of the interaction graph. Off by default because a plan whose
  // tables are refilled later (refill_inputs) must keep every refilled factor's shape: list
  // those in `fixed_shape` (network factor indices) when turning it on.
  bool drop_independent = false;
  std::vector<int> fixed_shape;
};

// Throws InputError for evidence that names unknown variables or values.
ReducedModel reduce(const Network& net, const Evidence& ev, const ReduceOptions& opt = {});

}  // namespace kinfer
