#include "apps/job_pipeline.hpp"

#include <omp.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <iostream>
#include <new>
#include <sstream>

#include "apps/commands.hpp"
#include "apps/command_options.hpp"
#include "engine/errors.hpp"

namespace kinfer::app {

int classify_current_exception(std::string& message) {
  try {
    throw;
  } catch (const InputError& e) {
    message = e.what();
    return 2;
  } catch (const CLI::ValidationError& e) {
    message = e.what();
    return 2;
  } catch (const ResourceError& e) {
    message = e.what();
    return 3;
  } catch (const std::bad_alloc&) {
    message = "out of memory; try a smaller --max-memory so kinfer refuses before allocating";
    return 3;
  } catch (const std::exception& e) {
    message = std::string("internal error: ") + e.what();
    return 1;
  } catch (...) {
    message = "internal error: an unknown exception";
    return 1;
  }
}

CommandOutcome run_command_in_process(const std::vector<std::string>& args,
                                      const std::string& log_path, int threads) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  CommandOutcome r;
  static std::atomic<int> serial{0};
  auto logger = spdlog::basic_logger_st("job-" + std::to_string(++serial), log_path, false);
  logger->set_pattern("[%H:%M:%S.%e] [%l] %v");
  logger->set_level(spdlog::default_logger()->level());
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  std::ostringstream captured;
  std::streambuf* const stdout_buf = std::cout.rdbuf(captured.rdbuf());
  try {
    CLI::App app{"kinfer job"};
    app.require_subcommand(1);
    app.fallthrough();
    LogFlags log;
    add_log_flags(app, log);
    const std::vector<Runner> runners = {add_pe(app), add_lod(app), add_mar(app), add_mpe(app)};
    std::vector<std::string> argv_text = {"kinfer"};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      throw CLI::ValidationError(std::string(e.what()));
    }
    if (log.verbose) logger->set_level(spdlog::level::debug);
    if (log.quiet) logger->set_level(spdlog::level::warn);
    int n = threads;
    for (CLI::App* sub : app.get_subcommands())
      if (CLI::Option* t = sub->get_option_no_throw("--threads"); t && t->count() > 0)
        n = t->as<int>();
    if (n > 0) omp_set_num_threads(n);
    r.rc = -1;
    for (const auto& run : runners)
      if ((r.rc = run()) >= 0) break;
    if (r.rc < 0) r.rc = 1, r.error = "internal error: no command ran";
  } catch (...) {
    r.rc = classify_current_exception(r.error);
    spdlog::error("{}", r.error);
  }
  std::cout.rdbuf(stdout_buf);
  r.out = captured.str();
  if (r.rc != 0 && r.error.empty()) r.error = "exit code " + std::to_string(r.rc);
  logger->flush();
  spdlog::set_default_logger(previous);
  spdlog::drop(logger->name());
  r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

}  // namespace kinfer::app
