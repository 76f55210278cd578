#pragma once
// Fitting a bucket's factor inputs to the GPU kernels (plain C++). Two rules, both exact (only
// the grouping of the product changes) and both on the host's factor tables, never on the
// children's outputs (those are computed on either device):
//  1. Small products. Factor inputs of one class (both varying with the summed variables, or
//     both not) whose product has at most kSmallProduct entries are multiplied together: a
//     linkage bucket's single-variable factors (selector priors, penetrances sliced by the
//     evidence) otherwise cost one load and one add per term each (docs/performance.md).
//  2. Limits. A bucket with more inputs than a launch takes (kMaxInputs), or more inputs
//     varying with the summed variables than the kernels have cases for (kMaxVarying), gets its
//     smallest factor inputs multiplied together as long as the products stay at most 2^20
//     entries.
// The products come from the CPU kernel (sum_product_log) on the bucket restricted to the union
// of the scopes, with nothing summed. merge_plan() says what is merged without computing a
// table: the cost model (scheduler/plan_costs.cpp) sees the kernel's inputs as the executor
// uploads them.
#include <cstdint>
#include <vector>

#include "engine/cpu_kernel.hpp"

namespace kinfer::gpu {

constexpr std::int64_t kSmallProduct = 4096;     // rule 1: 32 KiB, resident in L1
constexpr std::int64_t kLimitProduct = 1 << 20;  // rule 2

// A factor input as the GPU path feeds it: a table of the plan, or a product owned by the caller.
struct HostInput {
  const double* data = nullptr;
  std::int64_t size = 0;
  std::vector<int> scope;  // a subsequence of the bucket's vars
};

// The kernel's factor inputs: each the product of a group of the bucket's factor inputs.
struct MergePlan {
  std::vector<std::vector<int>> groups;  // per kernel input: indices into the factor inputs
  std::vector<std::vector<int>> scopes;  // per kernel input: its scope (bucket order)
  std::vector<std::int64_t> sizes;       // per kernel input: its entries
  bool merged() const;                   // some group has more than one factor
};

// `factor_scopes`: the scopes of the bucket's factor inputs; `child_scopes`: those of its
// children's outputs. `small_products`: rule 1 (on without the argument: kinfer's choice; the
// tests compare it off).
MergePlan merge_plan(const BucketShape& shape, const std::vector<std::vector<int>>& factor_scopes,
                     const std::vector<std::vector<int>>& child_scopes);
MergePlan merge_plan(const BucketShape& shape, const std::vector<std::vector<int>>& factor_scopes,
                     const std::vector<std::vector<int>>& child_scopes, bool small_products);

// Rule 3, on the GPU only: a kernel input whose scope lies inside a child's output scope is not
// a kernel input: the device adds it into that child's table before the bucket's kernel (a
// broadcast add of log values; a child's table has one consumer, this bucket), which saves the
// kernel a varying input (a load and an add per term). fold_targets(...)[k]: the child (index
// into child_scopes) that group k of `p` folds into, the smallest that holds its scope, or -1
// when it stays a kernel input.
constexpr int kFoldMaxVars = 48;  // a child table of at most this many variables (FoldArgs)
std::vector<int> fold_targets(const BucketShape& shape, const MergePlan& p,
                              const std::vector<std::vector<int>>& child_scopes);

// Returns the factor inputs to upload (merge_plan's); merged products are appended to `owned`,
// which must outlive the returned inputs (they point into its tables; moving `owned` keeps them
// valid). When nothing small enough can be merged under rule 2, returns what it has: the kernel
// selector then says why the bucket is not taken.
std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> factors,
                                    const std::vector<std::vector<int>>& child_scopes,
                                    std::vector<std::vector<double>>& owned);
std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> factors,
                                    const std::vector<std::vector<int>>& child_scopes,
                                    std::vector<std::vector<double>>& owned, bool small_products);
// The same for a plan merge_plan made for these factors (its groups index them).
std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> factors,
                                    const MergePlan& plan, std::vector<std::vector<double>>& owned);

}  // namespace kinfer::gpu
