// The elimination-order search on one network, with its knobs exposed (not a test): prints one
// JSON object per run with the order's statistics, the search's work and wall time.
//   order_bench NETWORK [--evidence FILE] [--seed N] [--threads N] [--budget S] [--refine 0|1]
//               [--fraction F] [--states-per-second R] [--repeat K]
//               [--round-restarts R] [--round-chains C] [--round-moves M] [--trajectory]
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/ordering.hpp"
#include "engine/reduce.hpp"
#include "engine/task_tree.hpp"
#include "io/uai.hpp"

using namespace kinfer;

static double cpu_seconds() {  // user + system time of the process, all threads
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main(int argc, char** argv) {
  CLI::App app("elimination-order search benchmark");
  std::string network, evidence;
  OrderOptions oo;
  int threads = 0, repeat = 1;
  app.add_option("NETWORK", network)->required();
  app.add_option("-e,--evidence", evidence);
  app.add_option("--seed", oo.seed);
  app.add_option("--threads", threads);
  app.add_option("--budget", oo.time_budget, "most search work, nominal core-seconds");
  app.add_option("--refine", oo.refine);
  app.add_option("--fraction", oo.search_fraction);
  app.add_option("--states-per-second", oo.states_per_second);
  app.add_option("--repeat", repeat);
  app.add_option("--round-restarts", oo.round_restarts, "greedy restarts per round");
  app.add_option("--round-chains", oo.round_chains, "annealing chains per round");
  app.add_option("--round-moves", oo.round_moves, "moves per annealing chain");
  bool trajectory = false;
  app.add_flag("--trajectory", trajectory,
               "also print [work, seconds, log2 total state] after each round (the answer at "
               "any smaller budget, from one run)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  const Network net = io::read_uai(network);
  if (evidence.empty()) evidence = io::default_evidence_path(network);
  const Evidence ev = evidence.empty() ? Evidence{} : io::read_evidence(evidence, net);
  const ReducedModel m = reduce(net, ev);
  std::vector<std::vector<int>> scopes;
  for (const auto& f : m.factors) scopes.push_back(f.scope);
  for (int k = 0; k < repeat; ++k) {
    const double c0 = cpu_seconds();
    const OrderResult r = find_order(net.num_vars(), m.card, scopes, oo);
    const double cpu = cpu_seconds() - c0;
    // what the plan reports and the kernels compute: the task tree's buckets (a child merged
    // into its parent when the parent's clique is the child's output: engine/task_tree.cpp)
    double tree_total = 0;
    for (const Bucket& b : build_task_tree(m, r.order).buckets)
      tree_total += std::exp2(b.log2_states);
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the order: equal orders, equal hash
    for (int v : r.order) h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(h));
    nlohmann::json j = {{"network", network},
                        {"threads", omp_get_max_threads()},
                        {"seed", oo.seed},
                        {"refine", oo.refine},
                        {"round", {oo.round_restarts, oo.round_chains, oo.round_moves}},
                        {"heuristic", r.heuristic},
                        {"width", r.stats.width},
                        {"log2_total_state", r.stats.log2_total_state},
                        {"tree_log2_total_state", std::log2(tree_total)},
                        {"log2_max_table", r.stats.log2_max_table},
                        {"log2_total_greedy", r.log2_total_greedy},
                        {"restarts", r.restarts},
                        {"moves", r.moves},
                        {"rounds", r.rounds},
                        {"work", r.work},
                        {"span16", r.span16},
                        {"seconds", r.seconds},
                        {"cpu_seconds", cpu},
                        {"stopped_by", r.stopped_by},
                        {"order_hash", hash}};
    if (trajectory) {
      j["trajectory"] = nlohmann::json::array();
      for (const auto& t : r.trajectory)
        j["trajectory"].push_back({t.work, t.seconds, t.log2_total_state});
    }
    std::printf("%s\n", j.dump().c_str());
  }
}
