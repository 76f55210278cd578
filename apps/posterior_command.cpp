#include "apps/posterior_command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "apps/command_options.hpp"
#include "apps/commands.hpp"
#include "engine/errors.hpp"
#include "engine/posterior.hpp"
#include "engine/util.hpp"

namespace kinfer::app {

void add_posterior_options(CLI::App& cmd, PosteriorOptions& o, const std::string& uai_format) {
  o.net.add(cmd);
  cmd.add_flag("--json", o.json, "print one JSON object instead of text");
  cmd.add_option("--uai-output", o.uai_output,
                 "also write the answer in the UAI 2014 " + uai_format + " format");
  add_run_options(cmd, o.device, o.schedule, o.profile, o.check, nullptr, o.gpu_memory);
  cmd.get_option("--check")
      ->description(
          "run every bucket of the upward pass on both the CPU and the GPU and compare them "
          "(tolerance 1e-9 relative in ln; the answer is the CPU's), then both passes again as "
          "without --check, on the GPU, and compare their answer with the CPU's (1e-9); exit 5 "
          "when they differ, 6 when there is no GPU");
}

sched::RunRequest posterior_run_request(const PosteriorOptions& o) {
  sched::RunRequest req = run_request(o.device, o.schedule, o.profile, o.check, false, o.gpu_memory);
  req.threads = o.net.threads;
  return req;
}

namespace {

// The plan of `net` within po's memory for the posterior's second pass too: pe's planner
// conditions a plan to fit its own estimate; the second pass keeps more (every bucket's
// output), so the budget it plans for is lowered until that fits as well. `need`: the
// estimated peak of the posterior's passes.
ConditionedPlan plan_within(const Network& net, const Evidence& ev, const PlanOptions& po,
                            const std::string& command, bool marginals, double& need) {
  PlanOptions trial = po;
  trial.keep_tables = false;  // the plan runs once: the reduced model's tables are dropped
  constexpr int kAttempts = 6;
  ConditionedPlan cp;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    try {
      cp = make_conditioned_plan(net, ev, trial);
    } catch (const ResourceError& e) {
      std::string message = command + ": ";
      message += e.what();
      if (attempt > 0)
        message += " (planning within " + human_bytes(trial.max_memory_bytes) + " so that " +
                   command + "'s second pass fits " + human_bytes(po.max_memory_bytes) + ")";
      throw ResourceError(message);
    }
    need = posterior_peak_bytes(cp.plan, marginals);
    if (!(po.max_memory_bytes > 0) || need <= po.max_memory_bytes) break;
    if (attempt + 1 == kAttempts)
      throw ResourceError(command + " needs an estimated " + human_bytes(need) +
                          " (every bucket's output kept for the second pass) even conditioned "
                          "into " + std::to_string(cp.cond.slices) + " slices, above the limit " +
                          human_bytes(po.max_memory_bytes) +
                          ": raise --max-memory or run on a machine with more memory");
    trial.max_memory_bytes = std::min(trial.max_memory_bytes, cp.plan.memory.peak_bytes) * 0.95 *
                             po.max_memory_bytes / need;
  }
  return cp;
}

}  // namespace

ConditionedPlan plan_posterior(const PosteriorOptions& o, const std::string& command,
                               bool marginals, Network& net, sched::Runner& runner) {
  check_output_file(o.uai_output, "--uai-output");
  Evidence ev;
  o.net.load(net, ev);
  // The order search sized for the device that runs the passes: mar's downward pass runs each
  // bucket where its upward pass did, and mpe's traceback has its large scans narrowed down on
  // the GPU where the upward pass left the outputs.
  PlanOptions po = o.net.plan_options();
  runner.plan_for_device(po);
  double need = 0;
  ConditionedPlan cp = plan_within(net, ev, po, command, marginals, need);
  const Plan& plan = cp.plan;
  if (cp.conditioned())
    spdlog::info("conditioning on {} variable(s): {} slices; {}", cp.cond.vars.size(),
                 cp.cond.slices, cp.cond.choice);
  spdlog::info(
      "order {}: width {}, largest table 2^{:.1f}, total state 2^{:.1f}, {} buckets, "
      "estimated peak memory {}",
      plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
      plan.order.stats.log2_total_state, plan.tree.buckets.size(), human_bytes(need));
  return cp;
}

UpwardRunner upward_through(sched::Runner& runner, UpwardRuns& runs) {
  return [&runner, &runs](const Plan& plan, const UpwardPass& pass) {
    struct Pass {  // the runner's next runs are this pass's, until it returns or throws
      sched::Runner& runner;
      Pass(sched::Runner& r, const UpwardPass& p) : runner(r) { runner.set_upward_pass(p); }
      ~Pass() { runner.set_upward_pass({}); }
    } in_pass(runner, pass);
    const sched::RunResult r = runner.run(plan);
    runs.gpu_runs += r.gpu_buckets > 0;
    runs.device = r.device;
    if (!r.gpu_name.empty()) runs.gpu_name = r.gpu_name;
    if (runs.note.empty()) runs.note = r.note;
    if (runs.check_not_run.empty()) runs.check_not_run = r.check_not_run;
    runs.upward_seconds += r.first_seconds;
  };
}

nlohmann::json posterior_json(const PosteriorOptions& o, const ConditionedPlan& cp,
                              double log10_pr, std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1,
                              std::chrono::steady_clock::time_point t2,
                              const sched::Runner& runner, const UpwardRuns& runs) {
  nlohmann::json j = {{"network", o.net.network},
                      {"evidence_observed", cp.plan.model.num_observed},
                      {"slices", cp.cond.slices},
                      {"log10_pr", log10_pr},
                      {"seconds", seconds_between(t0, t2)},
                      {"timings",
                       {{"plan", seconds_between(t0, t1)}, {"compute", seconds_between(t1, t2)}}}};
  j["device"] = runs.device;
  if (!runs.gpu_name.empty()) j["gpu"] = {{"name", runs.gpu_name}, {"runs", runs.gpu_runs}};
  if (!runs.note.empty()) j["note"] = runs.note;
  j["timings"]["upward"] = runs.upward_seconds;
  if (!o.check) return j;
  if (!runs.check_not_run.empty()) {
    j["check"] = {{"run", false}, {"why", runs.check_not_run}};
    return j;
  }
  j["check"] = sched::check_json(runner.totals().check);
  if (runs.second.run)
    j["check"]["second_pass"] = {{"compared", runs.second.what},
                                 {"device", runs.second.device},
                                 {"largest_difference", runs.second.largest},
                                 {"tolerance", runs.second.tolerance},
                                 {"passed", runs.second.passed}};
  return j;
}

namespace {

std::string second_pass_verdict(const SecondPassCheck& c) {
  return fmt::format("check of the second pass: the {} on {} against the CPU's, largest "
                     "difference {:.3g}, tolerance {:.3g}: {}",
                     c.what, c.device, c.largest, c.tolerance, c.passed ? "passed" : "FAILED");
}

}  // namespace

bool wants_second_check(const PosteriorOptions& o, const UpwardRuns& runs) {
  return o.check && runs.check_not_run.empty() && runs.gpu_runs > 0;
}

sched::RunRequest unchecked_run_request(const PosteriorOptions& o) {
  sched::RunRequest req = posterior_run_request(o);
  req.check = false;
  // --device auto would keep a small network on the CPU, which is not what is checked
  if (req.device == sched::DeviceChoice::automatic) req.device = sched::DeviceChoice::gpu;
  return req;
}

std::string run_lines(const sched::Runner& runner, const UpwardRuns& runs, bool check) {
  std::string s;
  if (!runs.gpu_name.empty())
    s += "upward pass on " + runs.device + " (" + runs.gpu_name + ")\n";
  if (!runs.note.empty()) s += "note: " + runs.note + "\n";
  if (check)
    s += (runs.check_not_run.empty() ? sched::check_report_verdict(runner.totals().check)
                                     : "check: not run (" + runs.check_not_run + ")") +
         "\n";
  if (check && runs.second.run) s += second_pass_verdict(runs.second) + "\n";
  return s;
}

int posterior_exit(const sched::Runner& runner, const UpwardRuns& runs, bool check) {
  if (!check) return 0;
  if (!runs.check_not_run.empty()) return kExitCheckNotRun;
  if (!runner.totals().check.passed) {
    spdlog::error("{}", sched::check_report_verdict(runner.totals().check));
    return kExitCheckFailed;
  }
  if (!runs.second.passed) {
    spdlog::error("{}", second_pass_verdict(runs.second));
    return kExitCheckFailed;
  }
  return 0;
}

void refuse_impossible(const Plan& plan, const std::string& what) {
  std::string message = "P(e) = 0";
  if (!plan.model.impossible.empty()) message += " (" + plan.model.impossible + ")";
  message += ": " + what + " undefined";
  throw ResourceError(message);
}

}  // namespace kinfer::app
