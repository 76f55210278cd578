#pragma once
// The `kinfer batch` supervisor's parts (apps/batch.hpp says what the batch does): the jobs'
// states, the child processes and the ranks (batch_processes.cpp), the Batch class that
// schedules them (batch_supervisor.cpp), sizes and places them (batch_sizing.cpp) and keeps their
// results, summary and verification (batch_results.cpp). Private to apps/.
#include <fcntl.h>
#include <poll.h>
#include <omp.h>
#include <signal.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include "apps/batch.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/util.hpp"
#include "io/text_file.hpp"
#include "io/uai.hpp"
#include "mpi/distributed.hpp"
#include "scheduler/devices.hpp"

namespace kinfer::app::supervisor {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

extern std::atomic<int> g_signal;  // the signal that interrupts the batch (0: none)
void on_signal(int sig);

enum class Status { Pending, Running, Ok, Failed, Interrupted };
const char* status_name(Status s);

struct JobState {
  io::Job job;
  JobOptions options;  // job.options as its single command parses them
  Status status = Status::Pending;
  std::string answer, error;
  double seconds = 0;
  double memory = 0;  // estimated peak bytes (pe jobs)
  double flops = 0;   // the plan's estimated work (pe jobs), for the GPU decision
  int threads = 0;    // the CPU threads it was given (its last start)
  bool probed = false;
  // Sized by its plan's order search ahead (a GPU candidate on a machine with device workers):
  // it waits for that search instead of a probe of its own (see size_by_searches).
  bool awaiting_search = false;
  bool solo = false;  // its group's worker died: run it alone
  // A lod job whose work is a guess (estimate_lod_work's beyond_chain): it takes a free GPU
  // but does not wait for a busy one while cores are free.
  bool gpu_gain_unknown = false;
  pid_t pid = -1;
  clock_type::time_point start;
  bool from_previous_run = false;
  std::string where;    // host:rank that ran it (this run)
  int attempts = 0;     // starts of the job alone (a killed job runs once more)
  int avoid_rank = -1;  // the rank its killed attempt ran on
  std::string verify;   // --verify: empty (not chosen), "same on host:rank", "MISMATCH: ..."
};

// Messages between rank 0 (the supervisor) and the other ranks of `mpirun kinfer batch`.
// kFeed writes a line to a device worker's input, kClose ends its input (a worker spawned with
// "serve").
enum Tag : int { kSpawn = 1, kLine = 2, kExit = 3, kTerm = 4, kStop = 5, kFeed = 6, kClose = 7 };

// Forks and execs `exe` with `args`: stdout to the file `out_path` (truncated) or, when it is
// empty, to a pipe whose read end (non-blocking) is stored in *pipe_fd; stderr appended to
// `log`; with `stdin_fd`, stdin from a pipe whose write end is stored there. The child never
// outlives this process and does not inherit the MPI launcher's variables (it would take itself for
// a rank of this job). Everything is prepared before fork(): the child only calls async-signal-safe
// functions (MPI may run threads in this process).
pid_t spawn_child(const std::string& exe, std::vector<std::string> args,
                  const std::string& out_path, int* pipe_fd, const std::string& log, int threads,
                  const std::string& order_cache, int gpu_device, int* stdin_fd = nullptr);

// Reads what is available on a non-blocking fd into `buf`; closes it (and sets -1) at EOF.
void drain(int& fd, std::string& buf);

// Waits until one of `fds` (workers' outputs) can be read or `ms` milliseconds have passed: a
// worker's finished job is taken at once, not at the next tick. Under mpirun the tick is short,
// for the other ranks' messages (which no fd announces).
void wait_for_output(const std::vector<int>& fds, int ms);

// What a rank offers the batch: its machine's cores, memory and GPU, shared with the other ranks
// on the same machine (docs/cluster.md).
struct RankSlot {
  std::string host;
  int cores = 1, slots = 1, gpu_slots = 0;
  double budget = 0;
  std::string gpu;             // its GPU's name, or why none
  std::vector<int> devices;    // the GPUs (visible indices) its jobs use
  std::vector<int> on_device;  // per entry of devices: its running GPU units
  int running = 0, gpu_running = 0;
  int search_threads = 0;  // threads of its running order searches ahead
  double memory = 0;       // estimated peak of its running units
};

// Every rank's offer (collective under mpirun), each machine's cores, memory and GPU jobs divided
// among the ranks it runs.
std::vector<RankSlot> gather_ranks(const BatchOptions& opt);

// The answer column of the summary: log10 P(e) for pe, the highest total LOD for lod.
std::string answer_of(const nlohmann::json& j);

// The last error line of a job's log, without the timestamp.
std::string last_error(const fs::path& log);

// The most estimated work (FLOPs, summed over its jobs) given to one group worker.
inline constexpr double kGroupWorkFlops = 5e8;
// The probe's order search, in nominal core-seconds (a few hundredths of a second on a 64-core
// machine): on linkage_11 and pedigree50 its plans have 2-3x the work of the full search's, on
// linkage_18 the same; a full search there took seconds on the supervisor's thread per network.
inline constexpr double kProbeSearchCoreSeconds = 2.0;

class Batch {
 public:
  explicit Batch(const BatchOptions& o) : opt_(o) {}

  int run();

 private:
  // A job's result in results/ (complete by construction: renamed into place): its answer and
  // seconds into `s`; false when there is none, or it is unreadable (then removed: atomic
  // renames make that impossible, but a bad result is never trusted).
  bool read_result(JobState& s);

  // Where each job started, one line "ID\tWHERE" appended when it starts (before it can
  // complete), so that summary.tsv says where also for the results --resume adopts.
  void note_where(const JobState& s);

  // A result present from an earlier run is complete by construction (renamed into place).
  void adopt_previous_results();

  // A pe job's plan estimates, made in this process with a short order search
  // (kProbeSearchCoreSeconds, not the job's: the estimate only sizes the job, its memory and
  // its device; the job's own search starts with the same restarts and keeps its best order, so
  // its plan is no larger in total states). Touches nothing of the batch: probe_all runs
  // several at once. `input_error`: the job's input is bad (it fails without a child).
  struct Estimate {
    double memory = 0, flops = 0;
    bool input_error = false;
    std::string error;
  };
  Estimate estimate_plan(const JobState& s) const;

  // Sizes a job before it starts (its memory, its work, hence its device). Bad input fails the
  // job here, without starting a child.
  void probe(JobState& s);

  // Every pending job sized at the start, the distinct plans estimated at once on the cores
  // (each search with its share of them), so that a batch of many networks does not wait for
  // their estimates one after another. Jobs awaiting their search ahead are left to it.
  void probe_all();

  // On a machine whose GPUs take jobs through device workers, a pe job that may run on a GPU is
  // sized by its plan's order search ahead (start_order_search), which it needs anyway, instead
  // of a probe's shorter search before it: one search per plan, and the first GPU jobs start as
  // soon as the first search ends. A job whose search fails is probed as any other.
  void size_by_searches();

  // order_ again, largest estimated work first (after searches ahead sized more jobs).
  void sort_order();

  // A running child: one job's single command, or a group worker for several pe jobs that name
  // the same network with the same options (they share its compiled plan).
  struct Unit {
    pid_t pid = -1;
    std::vector<std::size_t> jobs;
    bool group = false, gpu = false;
    double memory = 0;
    int fd = -1;  // group: the worker's stdout (one line per finished job)
    std::string buf;
    clock_type::time_point start;
    int rank = 0;  // where it runs; other than 0: pid is -1, the rank tells (kLine, kExit)
    int uid = 0;
    bool verify = false;  // a --verify recomputation of jobs.front()
    // An order search ahead of the GPU jobs of one plan (start_order_search): `kinfer info`
    // with their options, which caches the order their device worker would otherwise search.
    std::string search_key;
    fs::path search_answer;  // its --json answer
    int search_threads = 0;  // its threads (RankSlot::search_threads counts them)
    int gpu_device = -1;     // gpu: which of its rank's visible GPUs
    // A device worker (run_batch_device_worker): alive for the whole batch, its jobs written to
    // its stdin (rank 0: in_fd; another rank: kFeed to it), at most kWorkerDepth at a time: the
    // one it runs and the next, which it reads as soon as the first is done (while the first's
    // result is written), so that its GPU does not wait for the batch's answer. `queued`: the
    // jobs written and not reported yet, the running one first; each occupies a slot.
    // `accepting` until its input is closed.
    bool device_worker = false, accepting = false;
    int in_fd = -1;
    std::deque<std::size_t> queued;
  };
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  static constexpr std::size_t kWorkerDepth = 2;

  // Whether rank r can take one more GPU job now: a free GPU slot, or (device workers) room in
  // a worker's queue.
  bool gpu_room(int r) const;
  // A unit's slot, with the memory of one of its jobs (a device worker's differ).
  void occupy_job(Unit& u, std::size_t idx, int sign);

  // Starts `args` on rank u.rank: here, or by a message to that rank's executor
  // (run_batch_rank). stdout to `out_path`, or a pipe (u.fd) when it is empty; a device worker's
  // stdin from a pipe (here: u.in_fd; there: its rank keeps it).
  bool start(Unit& u, const std::vector<std::string>& args, const std::string& out_path,
             const fs::path& log, int threads);

  void write_log_header(const fs::path& log, const std::string& what,
                        const std::vector<std::string>& args);

  // The GPU decision for a job: a pe job whose plan is big enough for `pe --device auto` (or that
  // asks for --device gpu) wants the GPU; it gets it when fewer than --gpu-jobs hold it.
  bool wants_gpu(const JobState& s) const;
  // Whether it waits for a busy GPU rather than run on free cores: a GPU candidate of at least
  // --gpu-wait-flops whose work is not a guess (gpu_gain_unknown).
  bool waits_for_gpu(const JobState& s) const;
  // Whether a sized pending job waits for a GPU (waits_for_gpu).
  bool gpu_job_pending() const;

  // A job's single command line (`gpu`: a pe job may use the GPU).
  std::vector<std::string> job_args(const JobState& s, bool gpu) const;

  void launch(std::size_t idx, int threads, bool gpu, int rank);

  // --verify: the job's single command again, in a process of its own on `rank` (another rank
  // than the one that ran it, when there is one), into partial/ID.verify.json; compared with its
  // result when it ends (verify_reaped).
  void launch_verify(std::size_t idx, int rank);

  // The numbers a verification compares: log10 P(e) (pe), every evaluation's total ln L (lod).
  static std::vector<double> verified_numbers(const nlohmann::json& j);

  void verify_reaped(Unit& u, int wstatus);

  bool verify_selected(const JobState& s) const;

  std::string where_of(int rank) const { return ranks_[rank].host + ":" + std::to_string(rank); }
  // A unit starts (+1) or ends (-1) on its rank.
  void occupy(const Unit& u, int sign);

  void launch_group(const std::vector<std::size_t>& jobs, int threads, bool gpu, int rank);

  // Reads what a group worker has said so far; each complete line finishes one job.
  // (A worker on another rank: its rank forwards the lines, kLine.)
  void read_worker(Unit& u);

  void reap_unit(Unit& u, int wstatus);

  void reap(JobState& s, int wstatus, int rank);

  void finish(JobState& s, Status st, const std::string& err);

  // The pending pe jobs that can share job `idx`'s plan: same network file, same options, none
  // forced to run alone; at most `cap`, in manifest order, `idx` first.
  std::vector<std::size_t> group_of(std::size_t idx, std::size_t cap);

  // Starts the next job (or group) that may run on rank r; false when none may now.
  bool launch_on(int r);

  // The GPU jobs' order searches run ahead on the CPU cores, one `kinfer info` process per
  // plan (the jobs' network options, sized for the GPU as `pe --device gpu` sizes it), which
  // leaves the order in the batch's order cache: the device workers then take only jobs whose
  // order is cached, and the GPUs compute while the next plans' orders are searched. A job
  // whose plan is being searched waits (order_being_searched); a search that fails only costs
  // its jobs their own search. Starts one search on rank 0 when one is due and a slot is free.
  bool start_order_search(RankSlot& k);

  // A search ahead ended: its plan's estimates (the searched order's, for the GPU: its host
  // memory without the intermediate tables that live on the device) replace the probe's for
  // the jobs of that plan, so that GPU jobs are not held back by a CPU run's memory.
  void reap_order_search(const Unit& u, int wstatus);
  // The estimates a successful search ahead printed, for the jobs of its plan.
  void read_search_estimate(const Unit& u, int wstatus);
  // The jobs of plan `key` no longer wait for a search ahead to size them.
  void stop_awaiting(const std::string& key);

  // What makes two jobs' plans the same: network, evidence and options.
  static std::string plan_key(const JobState& s);

  // A GPU job whose plan's order is being searched, by a search ahead or by the plan's first job
  // on a device worker (when no search ahead could start): it would search the same order again
  // (the order cache is written when the search ends), so it waits and other plans' jobs go
  // first.
  bool order_being_searched(const JobState& c) const;

  // A GPU job to a device worker of rank r's GPU with the fewest jobs: an idle one, else a new
  // one. When no worker can take it, the job runs in a process of its own.
  void dispatch(std::size_t idx, int threads, int r);

  // A device worker on rank r for its GPU `device` (a visible index there), idle; nullptr when
  // it could not start. It opens its GPU at once, so that it is ready when its first job comes.
  Unit* start_device_worker(int r, int device, int threads);

  // Writes one line to a device worker's input (rank 0: its pipe; another rank: kFeed, which
  // that rank writes); false when the worker cannot take it. close_input ends its input.
  bool feed(Unit& w, const std::string& line);
  void close_input(Unit& w);

  // At the batch's start, when jobs will go to device workers: one worker per GPU of each rank,
  // opening its GPU while the first plans' orders are searched.
  void start_device_workers_early();

  // Device workers end (their input closed) once no pending job is left for them.
  void release_idle_workers();

  // A device worker ended: at the end of its input, or killed or crashed in a job. That job
  // (complete when its result was renamed into place) runs again in a process of its own.
  void reap_device_worker(Unit& u, int wstatus);

  // A message from another rank: a group worker's lines, or a unit's end.
  void receive(int from, int tag);

  void loop();

  // A lower bound on the wall of any schedule of this run's jobs where they ran: the longest
  // job; the GPU jobs' seconds spread evenly over the GPUs; the CPU jobs' core-seconds (seconds x
  // threads) over the cores. Jobs adopted from an earlier run are not counted.
  struct Ideal {
    double seconds = 0;
    int gpus = 0, cores = 0;
  };
  Ideal ideal_schedule() const;

  void draw_progress(int running);

  void write_summary();

  void print_json(int ok, int failed);

  BatchOptions opt_;
  fs::path out_;
  std::vector<JobState> states_;
  std::string self_;
  int finished_ = 0;
  double budget_ = 0;
  std::vector<RankSlot> ranks_;  // rank 0 (this process) and the others under mpirun
  std::vector<Unit> units_;
  int uids_ = 0;
  std::map<std::string, std::size_t> index_;
  std::vector<std::size_t> order_;     // job indices in the order they start
  std::vector<std::size_t> position_;  // per job index: its position in order_
  std::size_t next_ = 0;               // position in order_ before which nothing is pending
  int groups_started_ = 0, plans_shared_ = 0, device_workers_started_ = 0;
  // Plans whose order search has started (a search ahead, or the first job on a device
  // worker), and those of them still searching.
  std::set<std::string> searched_, searching_;
  std::vector<std::size_t> to_verify_;  // --verify: finished jobs waiting for their recomputation
  int verified_ = 0, verify_mismatches_ = 0, verify_not_run_ = 0;
  std::map<std::string, Estimate> probed_;  // inputs -> the plan's estimates
  double probe_seconds_ = 0;
  double sizing_seconds_ = 0;  // from the batch's start to its first job (workers, probes)
  double wall_seconds_ = 0;
  int order_searches_ = 0;           // order searches run ahead of GPU jobs
  double order_search_seconds_ = 0;  // their wall seconds, summed
  bool tty_ = false;
  clock_type::time_point t0_;
  // summary.tsv is rewritten as jobs end, at most every kSummaryInterval (each write is a
  // durable rename: milliseconds a GPU would wait per job); it is derived from results/, which
  // --resume reads, so a summary a few jobs behind loses nothing.
  static constexpr auto kSummaryInterval = std::chrono::milliseconds(500);
  bool summary_due_ = false;
  clock_type::time_point summary_written_;
};

// A rank other than 0 under `mpirun kinfer batch`: starts what rank 0 sends (kSpawn) as child
// processes, exactly as rank 0 starts its own, forwards a group worker's lines (kLine) and each
// child's end (kExit), passes an interruption on to its children (kTerm), and returns at kStop.
// Results, logs and the journal are written by the children into the shared output folder.
int run_batch_rank(const BatchOptions& opt);

}  // namespace kinfer::app::supervisor
