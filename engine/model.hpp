#pragma once
// The graphical model as read from a file: discrete variables and non-negative factors.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kinfer {

// A factor over `scope`; `table` is row-major with the LAST scope variable varying fastest
// (the UAI convention). Values are in the linear domain and need not sum to 1.
struct Factor {
  std::vector<int> scope;
  std::vector<double> table;
  long source_line = 0;  // line of the factor's table in its file, for messages
};

struct Network {
  std::string source;  // file name, for messages
  std::string kind;    // "MARKOV" or "BAYES"
  std::vector<int> card;
  std::vector<Factor> factors;
  int num_vars() const { return static_cast<int>(card.size()); }
};

// Observed values: (variable, value) pairs, variables distinct.
struct Evidence {
  std::string source;
  std::vector<std::pair<int, int>> observed;
};

// Number of entries of a table over `scope` (saturates at INT64_MAX).
std::int64_t table_size(const std::vector<int>& scope, const std::vector<int>& card);

}  // namespace kinfer
