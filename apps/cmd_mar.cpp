// kinfer mar: the posterior marginal of every variable given the evidence.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.hpp"
#include "apps/posterior_command.hpp"
#include "engine/posterior.hpp"
#include "engine/util.hpp"

namespace kinfer::app {

namespace {

std::string format_probability(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", p);
  return buf;
}

// The UAI 2014 MAR format: `MAR`, then on one line the number of variables and, per variable,
// its domain size and its probabilities.
std::string uai_mar(const Marginals& m) {
  std::ostringstream s;
  s << "MAR\n" << m.p.size();
  for (const auto& p : m.p) {
    s << ' ' << p.size();
    for (double x : p) s << ' ' << format_probability(x);
  }
  s << '\n';
  return s.str();
}

int run_mar(const PosteriorOptions& o) {
  Network net;
  const auto t0 = std::chrono::steady_clock::now();
  sched::Runner runner(posterior_run_request(o));
  runner.start_early();  // the device starts while the network is read and planned
  ConditionedPlan cp = plan_posterior(o, "mar", true, net, runner);
  const auto t1 = std::chrono::steady_clock::now();
  net = Network{};
  UpwardRuns runs;
  const Marginals m = compute_marginals(cp, o.net.threads, upward_through(runner, runs));
  if (m.ln_pe != -INFINITY)
    check_second_pass(
        o, runs, "marginals",
        [&](const UpwardRunner& upward) { return compute_marginals(cp, o.net.threads, upward); },
        [&](const Marginals& g) {
          double largest = 0;
          for (std::size_t v = 0; v < m.p.size(); ++v)
            for (std::size_t x = 0; x < m.p[v].size(); ++x)
              largest = std::max(largest, std::abs(g.p.at(v).at(x) - m.p[v][x]));
          return largest;
        });
  const auto t2 = std::chrono::steady_clock::now();
  const Plan& plan = cp.plan;
  if (m.ln_pe == -INFINITY) refuse_impossible(plan, "the posterior marginals are");
  const double log10_pe = m.ln_pe / std::log(10.0);
  if (!o.uai_output.empty()) write_file_atomically(o.uai_output, uai_mar(m));
  if (o.json) {
    nlohmann::json j = posterior_json(o, cp, log10_pe, t0, t1, t2, runner, runs);
    j["marginals"] = m.p;
    std::cout << j.dump(2) << std::endl;
    return posterior_exit(runner, runs, o.check);
  }
  std::ostringstream out;
  out << "log10 P(e) = " << format_log10(log10_pe) << "\n";
  for (std::size_t v = 0; v < m.p.size(); ++v) {
    out << "variable " << v << ":";
    for (double x : m.p[v]) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " %.6g", x);
      out << buf;
    }
    out << "\n";
  }
  out << run_lines(runner, runs, o.check);
  std::cout << out.str() << std::flush;
  return posterior_exit(runner, runs, o.check);
}

}  // namespace

Runner add_mar(CLI::App& root) {
  auto o = std::make_shared<PosteriorOptions>();
  CLI::App* cmd = root.add_subcommand(
      "mar", "compute the posterior marginal P(X | e) of every variable X, exactly");
  add_posterior_options(*cmd, *o, "MAR");
  return [o, cmd]() { return cmd->parsed() ? run_mar(*o) : -1; };
}

}  // namespace kinfer::app
