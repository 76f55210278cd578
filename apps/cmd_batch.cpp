// kinfer batch: many analyses on one workstation, nothing lost.
#include <memory>

#include "apps/batch.hpp"
#include "apps/commands.hpp"
#include "engine/memory_limit.hpp"

namespace kinfer::app {

Runner add_batch(CLI::App& root) {
  auto o = std::make_shared<BatchOptions>();
  auto mem = std::make_shared<std::string>();
  CLI::App* cmd =
      root.add_subcommand("batch", "run the jobs of a manifest (TSV or JSON), several at once");
  cmd->add_option("MANIFEST", o->manifest, "TSV with a header row, or a JSON list of jobs")
      ->required();
  cmd->add_option("--out", o->out,
                  "output folder (default: MANIFEST without extension + -results)");
  cmd->add_option("--jobs", o->jobs, "jobs running at once (default: number of cores)")
      ->check(count_at_least(1));
  cmd->add_flag("--resume", o->resume,
                "continue an interrupted batch: skip jobs whose result is complete");
  cmd->add_flag("--json", o->json, "print a JSON summary at the end");
  cmd->add_option("--max-memory", *mem,
                  "memory all running jobs together may use (default: 85% of this machine's)");
  cmd->add_option("--gpu-jobs", o->gpu_jobs,
                  "jobs (or groups of jobs) that may use a GPU at once, spread over the GPUs "
                  "(each job sees one: CUDA_VISIBLE_DEVICES); the others run on the CPU "
                  "(default: the number of GPUs)")
      ->check(count_at_least(0));
  cmd->add_option("--gpu-min-flops", o->gpu_min_flops,
                  "only plans of at least this many FLOPs ask for the GPU (as pe --device auto)")
      ->check(number_at_least(0))
      ->capture_default_str();
  cmd->add_option(
         "--gpu-wait-flops", o->gpu_wait_flops,
         "plans of at least this many FLOPs wait for a busy GPU instead of running on the CPU "
         "(the jobs after them go ahead meanwhile)")
      ->check(number_at_least(0))
      ->capture_default_str();
  cmd->add_flag("--no-share", o->no_share,
                "one process per job: jobs of the same network do not share a compiled plan");
  cmd->add_option("--verify", o->verify,
                  "recompute this fraction (0 to 1, chosen by job id) of the finished jobs in a "
                  "process of their own, on another rank under mpirun, and compare (exit 5 on a "
                  "mismatch; summary.tsv's verify column)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--worker", o->worker, "internal: evaluate these job ids in one process")
      ->group("");
  cmd->add_flag("--worker-gpu", o->worker_gpu, "internal: the worker may open the GPU")->group("");
  cmd->add_flag("--serve", o->serve, "internal: run as a device worker (jobs on stdin)")
      ->group("");
  return [o, mem, cmd]() {
    if (!cmd->parsed()) return -1;
    if (!mem->empty()) {
      try {
        o->max_memory = parse_size(*mem);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("--max-memory", e.what());
      }
    }
    if (!o->worker.empty()) return run_batch_worker(*o);
    if (o->serve) return run_batch_device_worker(*o);
    check_output_folder(o->out, "--out");
    return run_batch(*o);
  };
}

}  // namespace kinfer::app
