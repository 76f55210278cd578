// The hidden `kinfer batch MANIFEST --out DIR --serve` process: a device worker of the batch
// (see run_batch_device_worker in batch.hpp).
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/batch.hpp"
#include "apps/job_pipeline.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

namespace {

// A job the worker ran (or could not read), for the thread that records and reports it.
struct Finished {
  std::string id;
  CommandOutcome outcome;
  std::string unreadable;  // the job line could not be read: why
};

// Records results and reports jobs, in the order they finished, on a thread of its own: the
// result's durable write (file and folder synced) overlaps the next job, whose line the
// supervisor has already written (a worker holds up to two jobs).
class Reporter {
 public:
  explicit Reporter(std::filesystem::path out) : out_(std::move(out)), thread_([this] { loop(); }) {}
  ~Reporter() { finish(); }
  void push(Finished f) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(f));
    }
    ready_.notify_one();
  }
  // Every job pushed is reported when this returns.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    for (;;) {
      Finished f;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        f = std::move(queue_.front());
        queue_.pop_front();
      }
      report(f);
    }
  }
  void report(const Finished& f) const {
    const CommandOutcome& r = f.outcome;
    if (!f.unreadable.empty()) {
      report_job("failed", f.id.empty() ? "?" : f.id, 0, "unreadable job line: " + f.unreadable);
      return;
    }
    if (r.rc != 0) {
      report_job("failed", f.id, r.seconds, "exit code " + std::to_string(r.rc) + ": " + r.error);
      return;
    }
    try {
      const auto j = nlohmann::json::parse(r.out);
      record_result(out_, f.id, j);
      report_job("ok", f.id,
                 j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>()
                                                                     : r.seconds,
                 "");
    } catch (const std::exception& e) {
      report_job("failed", f.id, r.seconds,
                 std::string("the job printed no valid JSON: ") + e.what());
    }
  }

  std::filesystem::path out_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Finished> queue_;
  bool closed_ = false;
  std::thread thread_;
};

}  // namespace

int run_batch_device_worker(const BatchOptions& opt) {
  namespace fs = std::filesystem;
  const fs::path out = opt.out;
  // The GPU (the one CUDA_VISIBLE_DEVICES shows this process) opens now, while the batch's first
  // orders are searched, and stays open: every job's runner takes it as it is.
  sched::keep_gpus_open();
  const sched::OpenedDevice gpu = sched::open_gpu(0, true);
  if (!gpu.ctx) spdlog::warn("device worker: {}", gpu.name);
  Reporter reporter(out);
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    Finished f;
    std::vector<std::string> args;
    int threads = 0;
    try {
      const auto m = nlohmann::json::parse(line);
      f.id = m.at("id").get<std::string>();
      args = m.at("args").get<std::vector<std::string>>();
      threads = m.value("threads", 0);
    } catch (const std::exception& e) {
      f.unreadable = e.what();
      reporter.push(std::move(f));
      continue;
    }
    f.outcome = run_command_in_process(args, (out / "logs" / (f.id + ".log")).string(), threads);
    const int rc = f.outcome.rc;
    reporter.push(std::move(f));
    // An internal error may have left the GPU's context unusable (CUDA's errors are sticky):
    // the worker ends, and the supervisor starts a fresh one for the next jobs.
    if (rc == 1) {
      reporter.finish();
      return 1;
    }
  }
  reporter.finish();
  return 0;
}

}  // namespace kinfer::app
