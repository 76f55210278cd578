#pragma once
// A Plan's task tree as a cost tree: per bucket, the predicted kernel time on each device from
// the profile's models, the upload of its factor input tables (as the executor merges them for the kernels), and the move of its output.
#include <span>
#include <vector>

#include "engine/plan.hpp"
#include "scheduler/cost_tree.hpp"
#include "scheduler/features.hpp"
#include "scheduler/profile.hpp"

namespace kinfer::sched {

struct PlanCosts {
  CostTree tree;                         // node b is bucket b; the root is the last bucket
  std::vector<BucketFeatures> features;  // per bucket, of its inputs as the plan has them
  std::vector<double> out_bytes;         // per bucket: its output table
  // per bucket: its factor input tables as the GPU executor uploads them (merged by
  // gpu::merge_plan; the plan's own tables when the profile has no GPU), and how many
  std::vector<double> input_bytes;
  std::vector<int> input_tables;
};

// The input scopes of bucket b, in the order the kernels take them: factors, then children.
std::vector<std::vector<int>> bucket_scopes(const Plan& plan, int b);

// `warm_gpu`: the GPU already ran this plan's bucket shapes (repeated evaluations), so no
// bucket pays the first-use cost of its shape.
PlanCosts plan_costs(const Plan& plan, const Profile& profile, bool warm_gpu = false);

// Bytes a schedule moves to the GPU (uploads and edges) and back (edges and the result).
struct Traffic {
  double h2d = 0, d2h = 0;
};
Traffic schedule_traffic(const PlanCosts& pc, std::span<const Device> a);

}  // namespace kinfer::sched
