// The hidden `kinfer batch --worker` process: the pe jobs of one group, one after another on
// plans shared between jobs of the same reduced structure (see run_batch_worker in batch.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include "apps/batch.hpp"
#include "apps/job_pipeline.hpp"
#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/plan.hpp"
#include "engine/util.hpp"
#include "io/uai.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

namespace fs = std::filesystem;

namespace {

// Whether a compiled plan (conditioned or not) was made for this reduced structure.
bool same_structure(const ConditionedPlan& cp, const ReducedModel& b) {
  const std::vector<LogFactor>& f = model_factors(cp);
  if (cp.plan.model.card != b.card || f.size() != b.factors.size()) return false;
  for (std::size_t i = 0; i < f.size(); ++i)
    if (f[i].scope != b.factors[i].scope) return false;
  return true;
}

// A group worker (see run_batch_worker in the header).
class Worker {
 public:
  explicit Worker(const BatchOptions& o) : opt_(o) {}

  int run() {
    out_ = opt_.out;
    std::map<std::string, io::Job> by_id;
    for (auto& j : io::read_manifest(opt_.manifest)) by_id.emplace(j.id, std::move(j));
    std::vector<std::string> ids;
    std::stringstream ss(opt_.worker);
    for (std::string id; std::getline(ss, id, ',');) ids.push_back(id);
    for (const auto& id : ids) {
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        report_job("failed", id, 0, "the worker found no job with this id in the manifest");
        continue;
      }
      run_job(it->second);
    }
    return 0;
  }

 private:
  struct Compiled {
    ConditionedPlan plan;    // conditioned when it does not fit the memory limits
    MemoryEstimate planned;  // the accountant's estimate as planned (for the CPU)
    std::string key;         // network path + options
    std::string first_job;   // the job that compiled it
  };

  void run_job(const io::Job& job) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    const fs::path log = out_ / "logs" / (job.id + ".log");
    auto logger = spdlog::basic_logger_st("job " + job.id, log.string(), true);
    logger->set_pattern("[%H:%M:%S.%e] [%l] %v");
    logger->set_level(spdlog::default_logger()->level());
    auto previous = spdlog::default_logger();
    spdlog::set_default_logger(logger);
    std::string error;
    try {
      JobOptions jo = parse_job_options(job);
      if (!jo.parsed || !jo.groupable)
        throw std::runtime_error(
            "options a group worker does not handle (the batch runs such jobs alone)");
      NetworkOptions& net = jo.pe.net;  // NETWORK and -e come from the manifest's columns
      // The device is the runner's choice, as for `kinfer pe --device D` (D the job's, auto by
      // default), unless the supervisor gave this group no GPU slot.
      const std::string device = opt_.worker_gpu ? jo.pe.device : "cpu";
      net.order_cache = (out_ / "order-cache").string();
      spdlog::info("kinfer batch job {}: pe {} (group worker, process {})", job.id, job.network,
                   ::getpid());
      // The network is read once per group (every job of a group names the same file).
      if (net_path_ != job.network) {
        net_ = io::read_uai(job.network);
        net_path_ = job.network;
      } else {
        spdlog::info("network already read by this worker");
      }
      const Evidence ev = io::read_evidence_of(net_, job.network, net.evidence);
      PlanOptions po = net.plan_options();
      if (net.max_memory.empty() && opt_.max_memory > 0) po.max_memory_bytes = opt_.max_memory;
      const auto t1 = clock::now();
      std::string key = job.network + "\x1f";
      for (const auto& o : job.options) key += o + "\x1f";
      ReducedModel model = reduce(net_, ev, po.reduce);
      Compiled* shared = nullptr;
      for (auto& c : plans_)
        if (c.key == key && same_structure(c.plan, model)) shared = &c;
      std::string plan_source;
      int tables_kept = 0;
      if (shared) {
        // The same reduced structure: the order, the task tree and the memory estimate hold;
        // only the input tables that differ are refilled into the plan.
        ConditionedPlan& cp = shared->plan;
        std::vector<InputTableRefill> fresh;
        const std::vector<LogFactor>& old = model_factors(cp);
        for (std::size_t f = 0; f < model.factors.size(); ++f) {
          if (model.factors[f].logv == old[f].logv)
            ++tables_kept;
          else
            fresh.push_back({f, model.factors[f].logv});
        }
        refill_inputs(cp, std::move(fresh));
        if (cp.conditioned()) {  // the slices are cut from the refilled source as they run
          cp.base_constants = model.constants;
          cp.plan.model.impossible = model.impossible;
          cp.plan.model.num_observed = model.num_observed;
        } else {
          cp.plan.model = std::move(model);  // the kept values, constants, evidence of this job
        }
        cp.plan.evidence = ev;
        plan_source = "shared with job " + shared->first_job;
        spdlog::info(
            "plan shared with job {} (same reduced structure): {} of {} input tables kept, "
            "the rest re-read",
            shared->first_job, tables_kept, old.size());
      } else {
        Compiled c;
        po.device_budget = [&](const Plan& p) { return runner(device, jo.pe).device_budget(p); };
        c.plan = make_conditioned_plan(net_, ev, po);
        c.planned = c.plan.plan.memory;
        c.key = key;
        c.first_job = job.id;
        plans_.push_back(std::move(c));
        if (plans_.size() > 4) plans_.erase(plans_.begin());  // bound what the worker keeps
        shared = &plans_.back();
        plan_source = "compiled";
      }
      ConditionedPlan& cplan = shared->plan;
      const Plan& plan = cplan.plan;
      const auto t2 = clock::now();
      if (cplan.conditioned())
        spdlog::info("conditioning on {} variable(s), {} slices of estimated peak {}: {}",
                     cplan.cond.vars.size(), cplan.cond.slices,
                     human_bytes(cplan.cond.slice_peak_bytes), cplan.cond.choice);
      spdlog::info(
          "order {}: width {}, largest table 2^{:.1f}, {} buckets, estimated peak memory {}",
          plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
          plan.tree.buckets.size(), human_bytes(plan.memory.peak_bytes));
      // The job runs through the worker's runner, as `kinfer pe` runs through its own (the same
      // run block, run_evidence): the same placement policy and the same JSON whichever process
      // runs the job.
      sched::Runner& runner_used = runner(device, jo.pe);
      runner_used.set_threads(net.threads);
      cplan.plan.memory = shared->planned;
      cplan.plan.memory = runner_used.estimate(cplan.plan);  // for the device that runs it
      std::string impossible;
      sched::RunResult run = run_evidence(runner_used, cplan, impossible);
      const auto t_dev = t2 + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(run.device_seconds));
      if (impossible.empty() && !opt_.worker_gpu && jo.pe.device != "cpu") {
        run.why_not_gpu = "kinfer batch: no free GPU slot (--gpu-jobs) when this group started";
        run.note.clear();
      }
      const double ln_pr = run.ln_pr;
      const auto t3 = clock::now();
      const double log10_pr = ln_pr / std::log(10.0);
      if (!impossible.empty()) spdlog::warn("P(e) = 0: {}", impossible);
      // The object `kinfer pe --json` prints, plus "batch_plan".
      nlohmann::json j = pe_json(job.network, plan, ln_pr, {t0, t1, t2, t_dev, t3}, run.device);
      j["batch_plan"] = plan_source;
      if (cplan.conditioned()) j["conditioning"] = conditioning_json(cplan);
      if (impossible.empty()) j.update(sched::run_json(run, false));
      if (!impossible.empty()) j["impossible"] = impossible;
      record_result(out_, job.id, j);
      spdlog::info("log10 P(e) = {} ({})", log10_pr, plan_source);
      logger->flush();
      spdlog::set_default_logger(previous);
      spdlog::drop(logger->name());
      report_job("ok", job.id, secs(t0, t3), "");
      return;
    } catch (...) {
      classify_current_exception(error);
    }
    spdlog::error("{}", error);
    logger->flush();
    spdlog::set_default_logger(previous);
    spdlog::drop(logger->name());
    report_job("failed", job.id, secs(t0, clock::now()), error);
  }

  // The worker's runner for `device` (auto, cpu, gpu), made on first use and kept: a GPU it
  // opens stays open for the worker's later jobs.
  sched::Runner& runner(const std::string& device, const PeOptions& pe) {
    std::unique_ptr<sched::Runner>& r = runners_[device];
    if (!r) r = std::make_unique<sched::Runner>(run_request(device, "", "", false, false, pe.gpu_memory));
    return *r;
  }

  BatchOptions opt_;
  fs::path out_;
  Network net_;
  std::string net_path_;
  std::vector<Compiled> plans_;
  std::map<std::string, std::unique_ptr<sched::Runner>> runners_;
};

}  // namespace

int run_batch_worker(const BatchOptions& opt) { return Worker(opt).run(); }

}  // namespace kinfer::app
