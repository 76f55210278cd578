#pragma once
// The subcommands of `kinfer`. Each registers its options on a CLI11 app and returns a runner.
#include <CLI/CLI.hpp>
#include <functional>

namespace kinfer::app {

using Runner = std::function<int()>;

// Exit statuses of --check (README "Exit codes"): the GPU and the CPU disagree beyond the
// tolerance; or there was no GPU to compare with (the answer printed is the CPU's).
inline constexpr int kExitCheckFailed = 5;
inline constexpr int kExitCheckNotRun = 6;

Runner add_pe(CLI::App& root);
Runner add_mar(CLI::App& root);
Runner add_mpe(CLI::App& root);
Runner add_info(CLI::App& root);
Runner add_batch(CLI::App& root);
Runner add_lod(CLI::App& root);
Runner add_genotypes(CLI::App& root);
Runner add_haplotypes(CLI::App& root);
Runner add_schedule(CLI::App& root);
Runner add_schedule_compare(CLI::App& root);
Runner add_calibrate(CLI::App& root);

}  // namespace kinfer::app
