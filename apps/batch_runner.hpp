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
  int jobs = 0;            // 0: number of cores
  bool resume = false, json = false;
  double max_memory = 0;   // bytes; 0: 85% of the machine
};

// Returns the exit code: 0 all succeeded, 4 some failed, 130 interrupted.
int run_batch(const BatchOptions& opt);

}  // namespace kinfer::app
