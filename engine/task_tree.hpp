#pragma once
// Buckets formed into a task tree, and the global variable order of paper 000 section 3.
//
// Global order: a variable eliminated earlier is LESS significant. Every table is stored with
// its scope sorted from most to least significant (last varies fastest), so in every bucket the
// summed-out variables are the least significant ones: the kernel reads each input in runs and
// writes its output exactly once, in order. Intermediate tables are produced already in the
// order their consumer needs; only the input factors are restructured, once.
#include <cstdint>
#include <vector>

#include "engine/reduce.hpp"

namespace kinfer {

struct Bucket {
  std::vector<int> vars;  // most significant first; the last n_marg are summed out
  int n_marg = 0;
  std::vector<int> factors;   // ReducedModel factor indices that enter here
  std::vector<int> children;  // buckets whose outputs enter here
  int parent = -1;            // -1 only for the root
  double log2_states = 0;     // log2 of the bucket's state space (product of cardinalities)
  double log2_output = 0;     // log2 of its output table size

  std::vector<int> output_vars() const { return {vars.begin(), vars.end() - n_marg}; }
};

struct TaskTree {
  std::vector<Bucket> buckets;  // children before parents; the root is the last one
  std::vector<int> rank;        // per variable: position in the global order (-1: not in tree)
  int root() const { return static_cast<int>(buckets.size()) - 1; }
};

// Builds the tree for an elimination order over the model's scoped variables. A bucket whose
// clique equals its child's clique minus the child's summed variables is merged into the child:
// the merged bucket costs no more operations and saves one table and one kernel launch.
TaskTree build_task_tree(const ReducedModel& model, const std::vector<int>& order);

// Sorts `scope` by decreasing rank (most significant first).
void sort_by_rank(std::vector<int>& scope, const std::vector<int>& rank);

// Transposes a factor into global order; returns the permuted log table and sets `scope_out`.
std::vector<double> restructure(const LogFactor& f, const std::vector<int>& card,
                                const std::vector<int>& rank, std::vector<int>& scope_out);

}  // namespace kinfer
