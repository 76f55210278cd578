// The hidden `kinfer batch MANIFEST --out DIR --serve` process: a device worker of the batch
// (see run_batch_device_worker in batch.hpp).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/batch.hpp"
#include "apps/job_pipeline.hpp"
#include "engine/util.hpp"

namespace kinfer::app {

namespace {

void report(const char* what, const std::string& id, double secs, std::string msg) {
  for (char& c : msg)
    if (c == '\n' || c == '\t') c = ' ';
  std::printf("%s\t%s\t%.6f\t%s\n", what, id.c_str(), secs, msg.c_str());
  std::fflush(stdout);
}

}  // namespace

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
      report("failed", id.empty() ? "?" : id, 0, std::string("unreadable job line: ") + e.what());
      continue;
    }
    const CommandOutcome r =
        run_command_in_process(args, (out / "logs" / (id + ".log")).string(), threads);
    if (r.rc != 0) {
      report("failed", id, r.seconds, "exit code " + std::to_string(r.rc) + ": " + r.error);
      continue;
    }
    try {
      auto j = nlohmann::json::parse(r.out);
      write_file_atomically(out / "results" / (id + ".json"), j.dump(2) + "\n");
      std::ofstream(out / "journal.log", std::ios::app) << "completed " << id << '\n';
      report("ok", id, j.contains("seconds") && j["seconds"].is_number()
                           ? j["seconds"].get<double>()
                           : r.seconds,
             "");
    } catch (const std::exception& e) {
      report("failed", id, r.seconds, std::string("the job printed no valid JSON: ") + e.what());
    }
  }
  return 0;
}

}  // namespace kinfer::app
