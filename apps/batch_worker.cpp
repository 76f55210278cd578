// The hidden `kinfer batch --worker` process: the pe jobs of one group, one after another on
// plans shared between jobs of the same reduced structure (see run_batch_worker in batch.hpp).
#include <signal.h>
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
#include "engine/errors.hpp"
#include "engine/plan.hpp"
#include "engine/util.hpp"
#include "gpu/device_api.hpp"
#include "gpu/executor.hpp"
#include "io/uai.hpp"

namespace kinfer::app {

namespace fs = std::filesystem;

namespace {

bool same_structure(const ReducedModel& a, const ReducedModel& b) {
  if (a.card != b.card || a.factors.size() != b.factors.size()) return false;
  for (std::size_t i = 0; i < a.factors.size(); ++i)
    if (a.factors[i].scope != b.factors[i].scope) return false;
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
        report("failed", id, 0, "the worker found no job with this id in the manifest");
        continue;
      }
      // Test hook: the worker dies as a crash would, before this job (tests/test_batch.py).
      if (const char* c = std::getenv("KINFER_BATCH_TEST_WORKER_CRASH"); c && id == c)
        ::raise(SIGKILL);
      run_job(it->second);
    }
    return 0;
  }

 private:
  struct Compiled {
    Plan plan;
    std::string key;        // network path + options
    std::string first_job;  // the job that compiled it
  };

  void report(const char* what, const std::string& id, double secs, const std::string& msg) {
    std::string m = msg;
    std::replace(m.begin(), m.end(), '\n', ' ');
    std::replace(m.begin(), m.end(), '\t', ' ');
    std::printf("%s\t%s\t%.6f\t%s\n", what, id.c_str(), secs, m.c_str());
    std::fflush(stdout);
  }

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
        if (c.key == key && same_structure(c.plan.model, model)) shared = &c;
      std::string plan_source;
      int tables_kept = 0;
      if (shared) {
        // The same reduced structure: the order, the task tree and the memory estimate hold;
        // only the input tables that differ are refilled into the plan.
        Plan& p = shared->plan;
        std::vector<InputTableRefill> fresh;
        for (std::size_t f = 0; f < model.factors.size(); ++f) {
          if (model.factors[f].logv == p.model.factors[f].logv)
            ++tables_kept;
          else
            fresh.push_back({f, model.factors[f].logv});
        }
        refill_inputs(p, std::move(fresh));
        p.model = std::move(model);  // the kept values, constants and evidence of this job
        p.evidence = ev;
        plan_source = "shared with job " + shared->first_job;
        spdlog::info(
            "plan shared with job {} (same reduced structure): {} of {} input tables kept, "
            "the rest re-read",
            shared->first_job, tables_kept, p.model.factors.size());
      } else {
        Compiled c;
        c.plan = make_plan(net_, ev, po);
        c.key = key;
        c.first_job = job.id;
        plans_.push_back(std::move(c));
        if (plans_.size() > 4) plans_.erase(plans_.begin());  // bound what the worker keeps
        shared = &plans_.back();
        plan_source = "compiled";
      }
      const Plan& plan = shared->plan;
      const auto t2 = clock::now();
      spdlog::info(
          "order {}: width {}, largest table 2^{:.1f}, {} buckets, estimated peak memory {}",
          plan.order.heuristic, plan.order.stats.width, plan.order.stats.log2_max_table,
          plan.tree.buckets.size(), human_bytes(plan.memory.peak_bytes));
      double ln_pr;
      std::string impossible = plan.model.impossible, device = "cpu", why_not_gpu;
      gpu::DeviceRunReport rep;
      bool on_gpu = false;
      auto t_dev = t2;
      if (!impossible.empty()) {
        ln_pr = -INFINITY;
      } else {
        RunOptions ro;
        ro.threads = net.threads;
        const std::string& device_option = jo.pe.device;
        const bool wants =
            device_option == "gpu" || (device_option == "auto" && plan.flops >= opt_.gpu_min_flops);
        if (wants && opt_.worker_gpu) {
          if (!ctx_ && ctx_why_not_.empty()) {
            const gpu::DeviceInfo info = gpu::probe();
            if (!info.available) {
              ctx_why_not_ = info.why_not;
            } else {
              try {
                ctx_ = gpu::Context::create();
                spdlog::info("GPU: {} (opened once for this group)", info.name);
              } catch (const std::exception& e) {
                ctx_why_not_ = e.what();
              }
            }
          }
          if (!ctx_) why_not_gpu = ctx_why_not_;
        } else if (wants) {
          why_not_gpu = "kinfer batch: no free GPU slot (--gpu-jobs) when this group started";
        }
        t_dev = clock::now();
        if (wants && ctx_) {
          ln_pr = gpu::run_plan_gpu(plan, *ctx_, ro, &rep);
          on_gpu = true;
          device = rep.cpu_buckets == 0 ? "gpu" : rep.gpu_buckets == 0 ? "cpu" : "gpu+cpu";
        } else {
          ln_pr = run_plan(plan, ro);
        }
        if (std::isinf(ln_pr) && ln_pr < 0)
          impossible = "the evidence is jointly impossible (no single factor is zero on its own)";
      }
      const auto t3 = clock::now();
      const double log10_pr = ln_pr / std::log(10.0);
      if (!impossible.empty()) spdlog::warn("P(e) = 0: {}", impossible);
      // The object `kinfer pe --json` prints, plus "batch_plan".
      nlohmann::json j = pe_json(job.network, plan, ln_pr, {t0, t1, t2, t_dev, t3}, device);
      j["batch_plan"] = plan_source;
      if (on_gpu) {
        j["gpu"] = {{"name", ctx_->name()},           {"buckets_gpu", rep.gpu_buckets},
                    {"buckets_cpu", rep.cpu_buckets}, {"buckets_cpu_small", rep.small_on_cpu},
                    {"cached", rep.cached_buckets},   {"plain", rep.plain_buckets}};
      } else if (!why_not_gpu.empty()) {
        j["gpu"] = {{"why_not", why_not_gpu}};
      }
      if (!impossible.empty()) j["impossible"] = impossible;
      write_file_atomically(out_ / "results" / (job.id + ".json"), j.dump(2) + "\n");
      std::ofstream(out_ / "journal.log", std::ios::app) << "completed " << job.id << '\n';
      spdlog::info("log10 P(e) = {} ({})", log10_pr, plan_source);
      logger->flush();
      spdlog::set_default_logger(previous);
      spdlog::drop(logger->name());
      report("ok", job.id, secs(t0, t3), "");
      return;
    } catch (const InputError& e) {
      error = e.what();
    } catch (const ResourceError& e) {
      error = e.what();
    } catch (const CLI::ValidationError& e) {
      error = e.what();
    } catch (const std::bad_alloc&) {
      error = "out of memory; try a smaller --max-memory so kinfer refuses before allocating";
    } catch (const std::exception& e) {
      error = std::string("internal error: ") + e.what();
    }
    spdlog::error("{}", error);
    logger->flush();
    spdlog::set_default_logger(previous);
    spdlog::drop(logger->name());
    report("failed", job.id, secs(t0, clock::now()), error);
  }

  BatchOptions opt_;
  fs::path out_;
  Network net_;
  std::string net_path_;
  std::vector<Compiled> plans_;
  std::unique_ptr<gpu::Context> ctx_;
  std::string ctx_why_not_;
};

}  // namespace

int run_batch_worker(const BatchOptions& opt) { return Worker(opt).run(); }

}  // namespace kinfer::app
