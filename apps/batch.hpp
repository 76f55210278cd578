#pragma once
// `kinfer batch`: runs the jobs of a manifest as child processes of this executable, several at
// once, keeping memory under the machine's and surviving failures and interruptions. The
// supervisor (batch_supervisor.cpp) schedules the jobs; pe jobs of one network may go to a group
// worker (batch_worker.cpp: the hidden `batch --worker` process) that shares their plan.
//
// Files under the output folder:
//   results/<id>.json  the job's answer, exactly what its single command prints with --json;
//                      written to a temporary file and renamed, so it is complete or absent
//   logs/<id>.log      the job's log (standard error)
//   summary.tsv        every job: id, kind, status, answer, seconds, where, error (rewritten
//                      atomically)
//   where.tsv          where each job started (host:rank, :gpuN on a GPU), one line per start
//   journal.log        one line per job that completed, appended after its result was renamed
//   order-cache/       elimination orders shared by jobs with the same network structure
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/command_options.hpp"
#include "apps/posterior_command.hpp"
#include "io/manifest.hpp"

namespace kinfer::app {

struct BatchOptions {
  std::string manifest, out;
  int jobs = 0;  // 0: number of cores
  bool resume = false, json = false;
  double max_memory = 0;  // bytes; 0: 85% of the machine
  int gpu_jobs = -1;      // jobs or groups that may hold a GPU at once (0: none; -1: one per GPU)
  double gpu_min_flops = 1e9;    // plans below this run on the CPU (as pe --device auto)
  // Plans from this size wait for a busy GPU instead of the CPU: a device worker's warm GPU is
  // 5-30x the whole CPU on such plans and far more than the CPU share a job gets in a busy batch
  // (56 large pe jobs on 4 H200: on the CPU 2-16 s each with a few threads, on a device worker
  // 0.03-0.3 s after each network's first).
  double gpu_wait_flops = 1e9;
  bool no_share = false;         // one process per job, no shared plans (for comparison)
  double verify = 0;             // fraction of jobs recomputed (another rank) and compared
  // Internal: run as a group worker for these job ids (comma-separated), see run_batch_worker.
  std::string worker;
  bool worker_gpu = false;
  // Internal: run as a device worker (run_batch_device_worker).
  bool serve = false;
};

// The supervisor (rank 0 under mpirun; the other ranks start the jobs it sends them). Returns the
// exit code: 0 all succeeded, 4 some failed, 5 a --verify recomputation differed, 130
// interrupted.
int run_batch(const BatchOptions& opt);

// A group worker: evaluates the pe jobs `opt.worker` (same network, same options) one after
// another in one process, compiling each distinct reduced structure once (order, task tree,
// memory estimate) and only refilling the input tables of each job into the shared plan. Each
// job's result is written atomically and journaled as in the supervisor; one line per job on
// stdout ("ok\tID\tSECONDS" or "failed\tID\tSECONDS\tMESSAGE") tells the supervisor. A failing
// job fails alone.
int run_batch_worker(const BatchOptions& opt);

// A device worker: one process per GPU slot of the batch (its GPU chosen by the supervisor
// through CUDA_VISIBLE_DEVICES), alive for the whole batch, so that the GPU is opened once and
// not once per job. It reads jobs on stdin, one JSON object a line {"id", "args", "threads"}
// (args: the job's single command line after `kinfer`), runs each through the single command's
// own pipeline in this process (apps/job_pipeline.hpp), writes its result atomically to
// results/ID.json and journals it, and answers one line per job on stdout as a group worker
// does. It ends at the end of its input. A job that crashes it takes only the worker: the
// supervisor runs that job again in a process of its own and starts another worker.
int run_batch_device_worker(const BatchOptions& opt);

// A worker's line to the supervisor for one finished job: "ok\tID\tSECONDS\t" or
// "failed\tID\tSECONDS\tMESSAGE" (the message on one line), flushed at once.
void report_job(const char* what, const std::string& id, double seconds, std::string message);
// A completed job's journal line ("completed ID"), appended to journal.log under `out`.
void journal_completed(const std::filesystem::path& out, const std::string& id);
// The same unless journal.log has it: for a result found written by a worker that died (before
// or after its journal line).
void journal_if_missing(const std::filesystem::path& out, const std::string& id);
// A completed job's result: results/ID.json under `out` written atomically, then its journal line.
void record_result(const std::filesystem::path& out, const std::string& id,
                   const nlohmann::json& result);

// A job's options parsed with its single command's own CLI11 definitions (add_pe_options,
// add_lod_options), the job's files included as the command line would carry them.
struct JobOptions {
  std::string kind;     // "pe", "lod", "mar" or "mpe"
  bool parsed = false;  // false: the options are not the command's (`error` says why); the job
                        // runs alone as its single command, which reports the error
  std::string error;
  PeOptions pe;                // kind "pe"
  LodOptions lod;              // kind "lod"
  PosteriorOptions posterior;  // kinds "mar" and "mpe"
  bool device_given = false;
  // A pe job whose options a group worker handles (network options and --device only).
  bool groupable = false;

  bool posterior_kind() const { return kind == "mar" || kind == "mpe"; }
  // The network options of a pe, mar or mpe job.
  const NetworkOptions& net() const { return posterior_kind() ? posterior.net : pe.net; }
  const std::string& device() const {
    return kind == "lod" ? lod.device : posterior_kind() ? posterior.device : pe.device;
  }
  int threads() const { return kind == "lod" ? lod.threads : net().threads; }
};
JobOptions parse_job_options(const io::Job& job);
// A lod job's work before it runs, for placing it (a rough count of state updates, comparable
// with a pe plan's FLOPs): per pedigree its inheritance vector's bits b = 2n - f (n non-founders,
// f founders), and per evaluation b x 2^b per locus for a multipoint scan (the chain's step, or
// the network beyond --bits, at least as large), 2^min(b, 20) per locus for two-point
// likelihoods. Negative when its files cannot be read (the job itself reports why).
// `beyond_chain` (optional) is set when a multipoint scan has a pedigree beyond --bits: its
// network's work is unknown before it is planned (often far less than b x 2^b), so how much a
// GPU gains on it is too.
double estimate_lod_work(const io::Job& job, const LodOptions& o, bool* beyond_chain = nullptr);

}  // namespace kinfer::app
