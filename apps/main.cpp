// kinfer: exact inference for Bayesian networks and genetic linkage analysis.
// Exit codes: 0 success, 2 bad input or usage, 3 resource limit, 1 internal error.
#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "apps/command_options.hpp"
#include "apps/commands.hpp"
#include "apps/environment.hpp"
#include "apps/job_pipeline.hpp"
#include "apps/process_exit.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/util.hpp"
#include "mpi/distributed.hpp"
#include "scheduler/devices.hpp"
#include "scheduler/profile.hpp"

namespace {

// Whether the command line asks for JSON output: then an error is also printed on stdout as one
// object {"error": ..., "exit_code": ...}, so that a program reading stdout always gets JSON.
bool json_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--json") return true;
  return false;
}

void print_json_error(const std::string& message, int code) {
  if (kinfer::mpi::rank() != 0) return;
  std::cout << nlohmann::json{{"error", message}, {"exit_code", code}}.dump(2) << std::endl;
}

// Under mpirun/srun: an error in one rank ends every rank (the others may wait in a collective),
// with this rank's exit code; otherwise the code is returned.
int fail(int code) {
  if (kinfer::mpi::size() > 1) kinfer::mpi::abort(code);
  kinfer::mpi::finalize();
  return code;
}

int run(int argc, char** argv) {
  kinfer::bound_allocator();
  const kinfer::app::Environment& env = kinfer::app::environment();
  kinfer::mpi::init(&argc, &argv, env.no_mpi);  // MPI, only when started by mpirun or srun
  kinfer::sched::set_profiles_folder(env.profiles);
  auto logger = spdlog::stderr_color_mt("kinfer");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(kinfer::mpi::size() > 1
                          ? "[%H:%M:%S.%e] [" + kinfer::mpi::where() + "] [%^%l%$] %v"
                          : std::string("[%H:%M:%S.%e] [%^%l%$] %v"));

  const bool json = json_requested(argc, argv);
  auto error = [&](const std::string& message, int code) {
    spdlog::error("{}", message);
    if (json) print_json_error(message, code);
    return fail(code);
  };
  CLI::App app{"kinfer: exact probability of evidence, marginals, MPE and LOD scores"};
  app.set_version_flag("--version", std::string("kinfer ") + KINFER_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // -q and -v may follow the subcommand
  kinfer::app::LogFlags log;
  kinfer::app::add_log_flags(app, log);
  std::vector<kinfer::app::Runner> runners = {kinfer::app::add_pe(app), kinfer::app::add_mar(app),
                                              kinfer::app::add_mpe(app), kinfer::app::add_info(app),
                                              kinfer::app::add_lod(app),
                                              kinfer::app::add_genotypes(app),
                                              kinfer::app::add_haplotypes(app)};
  runners.push_back(kinfer::app::add_batch(app));
  for (auto add : {kinfer::app::add_schedule, kinfer::app::add_schedule_compare,
                   kinfer::app::add_calibrate})  // the scheduler's commands
    runners.push_back(add(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = kinfer::mpi::rank() == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    if (rc != 0 && json) print_json_error(e.what(), 2);
    kinfer::mpi::finalize();  // every rank parsed the same command line
    return rc == 0 ? 0 : 2;
  }
  // Ranks other than 0 log warnings and errors only, unless -v.
  spdlog::set_level(log.quiet || (kinfer::mpi::rank() > 0 && !log.verbose) ? spdlog::level::warn
                    : log.verbose                                          ? spdlog::level::debug
                                                                           : spdlog::level::info);
  // The one place that sets the OpenMP thread count: the subcommand's --threads, at start.
  // Code that needs the count itself gets it through its options, never from here.
  bool threads_given = false;
  for (CLI::App* sub : app.get_subcommands())
    if (CLI::Option* t = sub->get_option_no_throw("--threads"); t && t->count() > 0)
      if (const int n = t->as<int>(); n > 0) omp_set_num_threads(n), threads_given = true;
  // Several ranks on one machine share its cores (without --threads each would take them all).
  if (kinfer::mpi::size() > 1)
    if (const int local = kinfer::mpi::ranks_on_this_host(); local > 1 && !threads_given)
      omp_set_num_threads(std::max(1, omp_get_num_procs() / local));
  kinfer::log_resources("the command line read");
  try {
    for (auto& r : runners) {
      int rc = r();
      if (rc >= 0) {
        kinfer::log_resources("the command's end");
        kinfer::mpi::finalize();
        return rc;
      }
    }
    return fail(1);
  } catch (...) {
    std::string message;
    const int code = kinfer::app::classify_current_exception(message);
    return error(message, code);
  }
}

}  // namespace

int main(int argc, char** argv) {
  kinfer::sched::set_gpu_driver_environment();  // before any thread or CUDA call
  kinfer::app::report_crashes();
  const int status = run(argc, argv);
  // After a GPU run the driver's release of the device (~0.1 s) is left to a helper process.
  kinfer::app::leave_gpu_teardown_to_helper(status);
  return status;
}
