#pragma once
// One job, one pipeline: `kinfer pe|lod|mar|mpe ARGS` run through the same subcommand definitions and
// the same error mapping, whether as this process's own command line (main.cpp) or as one job of
// a batch's device worker, which runs many jobs in one process so that its GPU is opened once.
#include <functional>
#include <string>
#include <vector>

namespace kinfer::app {

// The exit code (2 input, 3 resource, 1 internal) and the message of the exception being
// handled; call it inside a catch block.
int classify_current_exception(std::string& message);

// What one in-process command did: its exit code, what it printed on stdout, and for a failure
// the error message.
struct CommandOutcome {
  int rc = 1;
  std::string out, error;
  double seconds = 0;
};

// Parses `args` (a subcommand and its options, as on the command line after `kinfer`) with the
// pe, lod, mar and mpe subcommands' own definitions, sets the OpenMP threads (the job's --threads, else
// `threads`), runs it with stdout captured and the log appended to `log_path` (the logger's
// level: `verbose`), and maps its errors as the command line would.
CommandOutcome run_command_in_process(const std::vector<std::string>& args,
                                      const std::string& log_path, int threads);

}  // namespace kinfer::app
