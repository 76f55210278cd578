#pragma once
// From a network and evidence to ln P(e): reduce, order, build the task tree, estimate memory,
// then run every bucket with the CPU kernel. A Plan is computed once and can be run many times.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"
#include "engine/model.hpp"
#include "engine/ordering.hpp"
#include "engine/reduce.hpp"
#include "engine/task_tree.hpp"

namespace kinfer {

struct MemoryEstimate {
  double input_bytes = 0;  // restructured input tables
  double peak_bytes = 0;   // inputs + the most intermediate tables alive at once
  double largest_table_bytes = 0;
  int largest_bucket = -1;  // bucket producing the largest table
};

struct PlanOptions {
  OrderOptions order;
  ReduceOptions reduce;
  double max_memory_bytes = 0;  // 0: no limit
  // When set, elimination orders are cached here, keyed by the reduced structure: jobs and runs
  // that share a network structure (e.g. the same pedigree with other evidence) share the order.
  // When empty, the environment variable KINFER_ORDER_CACHE names the folder, if set.
  std::string order_cache_dir;
};

struct Plan {
  Evidence evidence;
  ReduceOptions reduce_options;
  ReducedModel model;
  OrderResult order;
  TaskTree tree;
  MemoryEstimate memory;
  double flops = 0;  // estimated work: state space x (inputs + 2) per bucket, summed
  int components = 0;
  // Inputs in global order, grouped per bucket (restructured once).
  std::vector<std::vector<double>> input_data;  // per reduced factor
  std::vector<std::vector<int>> input_scope;    // per reduced factor
};

// Orders and builds the tree; does not allocate intermediate tables. Throws ResourceError when
// no order fits max_memory_bytes.
Plan make_plan(const Network& net, const Evidence& ev, const PlanOptions& opt);

// The second half of make_plan, for planners that choose plan.order their own way
// (linkage/order.cpp): builds the task tree, reports the tree's own statistics in
// plan.order.stats, checks the memory estimate (ResourceError starting with `who`, when not
// empty, and ending with `advice`) and restructures the inputs.
void finish_plan(Plan& plan, const PlanOptions& opt, const std::string& who,
                 const std::string& advice);

MemoryEstimate estimate_memory(const ReducedModel& model, const TaskTree& tree);
double estimate_flops(const TaskTree& tree);

// The shape and the input scopes of bucket b (inputs: its factors, then its children).
BucketShape bucket_shape(const Plan& plan, int b);

struct RunOptions {
  int threads = 0;
  // Optional per-bucket hook, e.g. to run a bucket on another backend and compare.
  std::function<void(int bucket, const BucketShape&, std::span<const InputTable>,
                     const double* out)>
      after_bucket;
};

// Compile once, evaluate many: the one way to change a compiled plan's input tables. Each entry
// gives factor `factor` of plan.model a new log table (same scope, same kept values, so the
// order and the task tree hold) and restructures it into the plan's input. All tables are
// checked and restructured before any is stored: on std::logic_error (a table whose size is not
// its factor's) the plan is unchanged.
struct InputTableRefill {
  std::size_t factor;
  std::vector<double> logv;
};
void refill_inputs(Plan& plan, std::vector<InputTableRefill> tables);

// refill_inputs from a network: re-reads the tables of the network factors `changed` (whose
// scopes and the evidence are unchanged) by reducing the network afresh. Throws
// std::logic_error if the new tables change which values value elimination keeps.
void refill_factors(Plan& plan, const Network& net, std::span<const int> changed);

// Returns ln P(e) (−inf when the evidence is impossible).
double run_plan(const Plan& plan, const RunOptions& opt = {});

}  // namespace kinfer
