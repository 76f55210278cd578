#pragma once
// Shared by the scheduler tests: paths under the repository's data/ and the plan of a bundled
// UAI instance (min-fill order, its default evidence).
#include <string>

#include "engine/plan.hpp"
#include "io/uai.hpp"
#include "tests/support.hpp"

namespace kinfer::test {

inline std::string data_path(const std::string& rel) { return (data_dir() / rel).string(); }

inline Plan uai_plan(const std::string& name) {
  const std::string path = data_path("uai/" + name);
  const io::NetworkWithEvidence r = io::read_network_and_evidence(path);
  PlanOptions po;
  po.order.heuristic = OrderHeuristic::MinFill;
  return make_plan(r.net, r.ev, po);
}

}  // namespace kinfer::test
