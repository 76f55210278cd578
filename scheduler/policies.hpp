#pragma once
// The four assignment policies of a cost tree, each with a recorded reason per node:
//   cpu-only, gpu-only;
//   greedy: each node alone on the device where it runs fastest as an isolated kernel (its
//           inputs and its output on the CPU), paper 001's "hybrid-greedy";
//   comm-aware: the dynamic program of paper 001 Fig. 4, optimal for the cost in cost_tree.hpp.
#include <string>
#include <vector>

#include "scheduler/cost_tree.hpp"

namespace kinfer::sched {

enum class Policy { cpu_only, gpu_only, greedy, comm_aware };

const char* to_string(Policy p);
Policy parse_policy(const std::string& name);  // throws std::invalid_argument
inline constexpr Policy kAllPolicies[] = {Policy::cpu_only, Policy::gpu_only, Policy::greedy,
                                          Policy::comm_aware};

struct Schedule {
  Policy policy = Policy::comm_aware;
  std::vector<Device> device;       // per node of the tree
  std::vector<std::string> reason;  // per node: why it went where it went
  CostBreakdown cost;               // of `device` under the tree's cost
};

// The tree must be valid (validate()). Ties go to the CPU.
Schedule make_schedule(const CostTree& t, Policy p);

}  // namespace kinfer::sched
