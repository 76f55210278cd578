#pragma once
// The options of the single commands, defined once: `kinfer pe` and `kinfer lod` register them
// on their subcommand, and `kinfer batch` registers the same definitions on a private CLI11 app
// to parse a job's option string (so a job accepts exactly what its single command accepts).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/lod_merlin.hpp"
#include "apps/network_options.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::app {

// -q / -v, on the root app (they may follow the subcommand: the root falls through).
struct LogFlags {
  bool quiet = false, verbose = false;
};
void add_log_flags(CLI::App& root, LogFlags& f);

// --device, --schedule, --profile, --check, --explain, --gpu-memory: how a command's plans run
// through the runner (scheduler/runner.hpp); `kinfer pe`, `kinfer lod`, `kinfer mar` and
// `kinfer mpe` share them (defined in cmd_pe.cpp). `explain` nullptr: no --explain.
void add_run_options(CLI::App& cmd, std::string& device, std::string& schedule,
                     std::string& profile, bool& check, bool* explain, std::string& gpu_memory);
// The runner's request from those options (CLI::ValidationError for a bad --gpu-memory).
sched::RunRequest run_request(const std::string& device, const std::string& schedule,
                              const std::string& profile, bool check, bool explain,
                              const std::string& gpu_memory);

struct PeOptions {
  NetworkOptions net;
  bool json = false;
  std::string uai_output;
  std::string device = "auto";
  bool check = false;
  std::string schedule;  // empty: the default GPU schedule when a GPU is used
  std::string profile;
  bool explain = false;
  std::string gpu_memory;  // empty: 90% of the device's free memory
  int repeat = 0;
  double verify = 0;  // under mpirun: the fraction of slices recomputed on a second rank
  // Diagnostics of `kinfer pe`'s GPU runs, hidden options (RunRequest::gpu_timeline_path,
  // gpu_shapes_path; docs/performance.md); empty: none.
  std::string gpu_timeline, gpu_shapes;
};
// Registers the options of `kinfer pe` (defined in cmd_pe.cpp).
void add_pe_options(CLI::App& cmd, PeOptions& o);

struct LodOptions {
  std::string ped, dat, program, theta, positions, plot, out;
  std::string order = "stochastic", max_memory, device = "auto";
  std::string schedule, profile, gpu_memory;  // through the runner, as in `kinfer pe`
  bool check = false, explain = false;
  double order_time = 2.0;
  int threads = 0, moving = 0;
  int bits = 24;  // largest inheritance vector for the Lander-Green chain (MERLIN's --bits)
  double emission_tables = 67108864;  // largest emission factor table (entries); 0: on the fly
  std::uint64_t seed = 1;
  bool json = false, no_recode = false, no_elimination = false;
  double verify = 0;        // under mpirun: the fraction of likelihoods recomputed on a second rank
  MerlinLodOptions merlin;  // -m: MERLIN-format input (dat, ped, json, plot, out are copied)
};
// Registers the options of `kinfer lod` (defined in cmd_lod.cpp).
void add_lod_options(CLI::App& cmd, LodOptions& o);
// A list option of lod ("0.1,0.2 0.3" or START:STOP:STEP ranges, mixed); CLI::ValidationError
// naming `opt` for anything else.
std::vector<double> parse_list(const std::string& opt, const std::string& text);

}  // namespace kinfer::app
