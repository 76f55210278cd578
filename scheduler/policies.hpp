#pragma once
// The four assignment policies of a cost tree, each with a recorded reason per node:
//   cpu-only, gpu-only;
//   greedy: each node alone on the device where it runs fastest as an isolated kernel (its
//           inputs and its output on the CPU), paper 001's "hybrid-greedy";
//   comm-aware: the dynamic program of paper 001 Fig. 4, optimal for the cost in cost_tree.hpp;
// and a fifth that needs no profile, from the task tree alone:
//   whole-plan: every bucket on the GPU except small ones (under 2^15 states) whose inputs are
//           all on the host, where the CPU finishes before a launch and its copies would.
#include <string>
#include <vector>

#include "engine/task_tree.hpp"
#include "scheduler/cost_tree.hpp"

namespace kinfer::sched {

enum class Policy { cpu_only, gpu_only, greedy, comm_aware, whole_plan };

const char* to_string(Policy p);
Policy parse_policy(const std::string& name);  // throws std::invalid_argument
// The policies make_schedule computes from a cost tree (whole-plan is whole_plan_schedule).
inline constexpr Policy kAllPolicies[] = {Policy::cpu_only, Policy::gpu_only, Policy::greedy,
                                          Policy::comm_aware};
// Whether a policy predicts from a profile's models (greedy, comm-aware).
bool needs_profile(Policy p);

struct Schedule {
  Policy policy = Policy::comm_aware;
  std::vector<Device> device;       // per node of the tree
  std::vector<std::string> reason;  // per node: why it went where it went
  CostBreakdown cost;               // of `device` under the tree's cost
};

// The tree must be valid (validate()). Ties go to the CPU. Throws std::invalid_argument for
// whole-plan (it places by size, not by cost: whole_plan_schedule).
Schedule make_schedule(const CostTree& t, Policy p);

// whole-plan on a plan's task tree (node b = bucket b): a bucket of fewer than `min_gpu_states`
// states none of whose children is on the GPU runs on the CPU, every other on the GPU. `cost` is
// left empty (no prediction); the executor moves buckets no kernel takes, or that do not fit
// device memory, to the CPU with their own reason.
inline constexpr double kWholePlanMinGpuStates = 32768;  // 2^15
Schedule whole_plan_schedule(const TaskTree& tree, double min_gpu_states = kWholePlanMinGpuStates);

}  // namespace kinfer::sched
