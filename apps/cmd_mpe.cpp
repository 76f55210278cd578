// kinfer mpe: a most probable assignment of every variable given the evidence.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "apps/commands.hpp"
#include "apps/posterior_command.hpp"
#include "engine/posterior.hpp"
#include "engine/util.hpp"

namespace kinfer::app {

namespace {

// The UAI 2014 format of the MPE task (the competition's MAP task, and its solution files):
// `MAP`, then on one line the number of variables and one value per variable.
std::string uai_mpe(const std::vector<int>& x) {
  std::ostringstream s;
  s << "MAP\n" << x.size();
  for (int v : x) s << ' ' << v;
  s << '\n';
  return s.str();
}

int run_mpe(const PosteriorOptions& o) {
  Network net;
  const auto t0 = std::chrono::steady_clock::now();
  sched::Runner runner(posterior_run_request(o));
  runner.start_early();  // the device starts while the network is read and planned
  ConditionedPlan cp = plan_posterior(o, "mpe", false, net, runner);
  const auto t1 = std::chrono::steady_clock::now();
  UpwardRuns runs;
  const MostProbable m = compute_mpe(cp, o.net.threads, upward_through(runner, runs));
  if (m.ln_pr != -INFINITY)
    check_second_pass(
        o, runs, "assignment",
        [&](const UpwardRunner& upward) { return compute_mpe(cp, o.net.threads, upward); },
        [&](const MostProbable& g) {  // an assignment of the same probability is as good
          return std::abs(ln_joint(net, g.assignment) - m.ln_pr) /
                 std::max(1.0, std::abs(m.ln_pr));
        });
  const auto t2 = std::chrono::steady_clock::now();
  const Plan& plan = cp.plan;
  if (m.ln_pr == -INFINITY) refuse_impossible(plan, "a most probable assignment is");
  // The assignment's own probability from the network's tables: the answer checks itself.
  const double own = ln_joint(net, m.assignment);
  if (!(std::abs(own - m.ln_pr) <= 1e-9 * std::max(1.0, std::abs(m.ln_pr))))
    throw std::logic_error("mpe: the assignment's ln probability " + std::to_string(own) +
                           " is not the maximum computed, " + std::to_string(m.ln_pr));
  const double log10_pr = m.ln_pr / std::log(10.0);
  if (!o.uai_output.empty()) write_file_atomically(o.uai_output, uai_mpe(m.assignment));
  if (o.json) {
    nlohmann::json j = posterior_json(o, cp, log10_pr, t0, t1, t2, runner, runs);
    j["assignment"] = m.assignment;
    std::cout << j.dump(2) << std::endl;
    return posterior_exit(runner, runs, o.check);
  }
  std::ostringstream out;
  out << "log10 P(x, e) = " << format_log10(log10_pr) << "\nassignment:";
  for (int v : m.assignment) out << ' ' << v;
  out << "\n" << run_lines(runner, runs, o.check);
  std::cout << out.str() << std::flush;
  return posterior_exit(runner, runs, o.check);
}

}  // namespace

Runner add_mpe(CLI::App& root) {
  auto o = std::make_shared<PosteriorOptions>();
  CLI::App* cmd = root.add_subcommand(
      "mpe", "compute a most probable assignment x of every variable and log10 P(x, e)");
  add_posterior_options(*cmd, *o, "MAP (MPE)");
  return [o, cmd]() { return cmd->parsed() ? run_mpe(*o) : -1; };
}

}  // namespace kinfer::app
