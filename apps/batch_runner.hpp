#pragma once
// `kinfer batch`: runs the jobs of a manifest as child processes of this executable, several at
// once, keeping memory under the machine's and surviving failures and interruptions.
//
// Files under the output folder:
//   results/<id>.json  the job's answer, exactly what its single command prints with --json;
//                      written to a temporary file and renamed, so it is complete or absent
//   logs/<id>.log      the job's log (standard error)
//   summary.tsv        every job: id, kind, status, answer, seconds, error (rewritten atomically)
//   journal.log        one line per job that completed, appended after its result was renamed
//   order-cache/       elimination orders shared by jobs with the same network structure
#include <string>

#include "io/manifest.hpp"

namespace kinfer::app {

struct BatchOptions {
  std::string manifest, out;
  int jobs = 0;  // 0: number of cores
  bool resume = false, json = false;
  double max_memory = 0;         // bytes; 0: 85% of the machine
  int gpu_jobs = 1;              // jobs or groups that may hold the GPU at once (0: none)
  double gpu_min_flops = 1e9;    // plans below this run on the CPU (as pe --device auto)
  double gpu_wait_flops = 1e10;  // plans from this size wait for a busy GPU instead of the CPU
  bool no_share = false;         // one process per job, no shared plans (for comparison)
  // Internal: run as a group worker for these job ids (comma-separated), see run_batch_worker.
  std::string worker;
  bool worker_gpu = false;
};

// Returns the exit code: 0 all succeeded, 4 some failed, 130 interrupted.
int run_batch(const BatchOptions& opt);

// A group worker: evaluates the pe jobs `opt.worker` (same network, same options) one after
// another in one process, compiling each distinct reduced structure once (order, task tree,
// memory estimate) and only re-reading the tables of each job into the shared plan. Each job's
// result is written atomically and journaled as in the parent; one line per job on stdout
// ("ok\tID" or "failed\tID\tMESSAGE") tells the parent. A failing job fails alone.
int run_batch_worker(const BatchOptions& opt);

}  // namespace kinfer::app
