// The hidden `kinfer batch MANIFEST --out DIR --serve` process: a device worker of the batch
// (see run_batch_device_worker in batch.hpp).
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/batch.hpp"
#include "apps/job_pipeline.hpp"

namespace kinfer::app {

int run_batch_device_worker(const BatchOptions& opt) {
  namespace fs = std::filesystem;
  const fs::path out = opt.out;
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
