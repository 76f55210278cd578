// The hidden `kinfer batch MANIFEST --out DIR --serve` process: a device worker of the batch
// (see run_batch_device_worker in batch.hpp).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/batch.hpp"
#include "apps/job_pipeline.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

int run_batch_device_worker(const BatchOptions& opt) {
  namespace fs = std::filesystem;
  const fs::path out = opt.out;
  // The GPU (the one CUDA_VISIBLE_DEVICES shows this process) opens now, while the batch's first
  // orders are searched, and stays open: every job's runner takes it as it is.
  sched::keep_gpus_open();
  const sched::OpenedDevice gpu = sched::open_gpu(0, true);
  if (!gpu.ctx) spdlog::warn("device worker: {}", gpu.name);
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    std::string id;
    std::vector<std::string> args;
    int threads = 0;
    try {
      const auto m = nlohmann::json::parse(line);
      id = m.at("id").get<std::string>();
      args = m.at("args").get<std::vector<std::string>>();
      threads = m.value("threads", 0);
    } catch (const std::exception& e) {
      report_job("failed", id.empty() ? "?" : id, 0, std::string("unreadable job line: ") + e.what());
      continue;
    }
    const CommandOutcome r =
        run_command_in_process(args, (out / "logs" / (id + ".log")).string(), threads);
    if (r.rc != 0) {
      report_job("failed", id, r.seconds, "exit code " + std::to_string(r.rc) + ": " + r.error);
      // An internal error may have left the GPU's context unusable (CUDA's errors are sticky):
      // the worker ends, and the supervisor starts a fresh one for the next jobs.
      if (r.rc == 1) return 1;
      continue;
    }
    try {
      const auto j = nlohmann::json::parse(r.out);
      record_result(out, id, j);
      report_job("ok", id, j.contains("seconds") && j["seconds"].is_number()
                           ? j["seconds"].get<double>()
                           : r.seconds,
             "");
    } catch (const std::exception& e) {
      report_job("failed", id, r.seconds, std::string("the job printed no valid JSON: ") + e.what());
    }
  }
  return 0;
}

}  // namespace kinfer::app
