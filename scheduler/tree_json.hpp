#pragma once
// TREE.json: an explicit cost tree, so that the policies can be studied without a network.
//   {"root": 7,
//    "nodes": [{"id": 7, "children": [3, 5], "cpu": 0.8, "gpu": 0.1,
//               "upload": 0.01, "to_gpu": 0.02, "to_cpu": 0.02}, ...]}
// Seconds everywhere. "children", "upload", "to_gpu" and "to_cpu" may be left out (empty, 0);
// "gpu": null marks a node the GPU cannot run. to_gpu/to_cpu move that node's OUTPUT.
#include <string>

#include <nlohmann/json.hpp>

#include "scheduler/cost_tree.hpp"
#include "scheduler/policies.hpp"

namespace kinfer::sched {

// Throws InputError (file, line of the offending node, what was expected) for malformed JSON,
// unknown or duplicate ids, cycles, a second root, negative costs.
CostTree read_cost_tree(const std::string& path);
CostTree parse_cost_tree(const std::string& text, const std::string& source);

nlohmann::json to_json(const CostTree& t);

// {"assignment": {id: "cpu"|"gpu"}, "cost": seconds (null if infeasible), "feasible", ...};
// with reasons when `explain`.
nlohmann::json to_json(const CostTree& t, const Schedule& s, bool explain);

}  // namespace kinfer::sched
