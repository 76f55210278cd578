#pragma once
// Options shared by the commands that load a network and plan its elimination.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model.hpp"
#include "engine/solver.hpp"

namespace kinfer::app {

struct NetworkOptions {
  std::string network, evidence, order = "stochastic", max_memory, order_cache;
  double order_time = 5.0;
  int threads = 0;
  std::uint64_t seed = 1;

  void add(CLI::App& cmd);
  // Reads the network and the evidence (NETWORK.evid when -e is absent, logged).
  void load(Network& net, Evidence& ev) const;
  PlanOptions plan_options() const;
};

nlohmann::json order_json(const Plan& plan);
nlohmann::json memory_json(const Plan& plan);

// Writes `content` to `path` atomically (temporary file in the same folder, then rename).
void write_atomically(const std::string& path, const std::string& content);

}  // namespace kinfer::app
