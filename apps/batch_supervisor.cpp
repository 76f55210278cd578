// The `kinfer batch` supervisor: the manifest, scheduling jobs on slots under the memory budget
// and the GPU slots, group workers for pe jobs that can share a plan, the journal, --resume and
// the summary (see batch.hpp).
#include "apps/batch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include "dist/distributed.hpp"
#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/util.hpp"
#include "gpu/device_api.hpp"
#include "io/text_file.hpp"
#include "io/uai.hpp"

namespace kinfer::app {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

enum class Status { Pending, Running, Ok, Failed, Interrupted };
const char* status_name(Status s) {
  static constexpr const char* kNames[] = {"not-run", "running", "ok", "failed", "interrupted"};
  return kNames[static_cast<int>(s)];
}

struct JobState {
  io::Job job;
  JobOptions options;  // job.options as its single command parses them
  Status status = Status::Pending;
  std::string answer, error;
  double seconds = 0;
  double memory = 0;  // estimated peak bytes (pe jobs)
  double flops = 0;   // the plan's estimated work (pe jobs), for the GPU decision
  int threads = 0;     // the CPU threads it was given (its last start)
  bool probed = false;
  bool solo = false;  // its group's worker died: run it alone
  pid_t pid = -1;
  clock_type::time_point start;
  bool from_previous_run = false;
  std::string where;    // host:rank that ran it (this run)
  int attempts = 0;     // starts of the job alone (a killed job runs once more)
  int avoid_rank = -1;  // the rank its killed attempt ran on
  std::string verify;   // --verify: empty (not chosen), "same on host:rank", "MISMATCH: ..."
};

// Messages between rank 0 (the supervisor) and the other ranks of `mpirun kinfer batch`.
enum Tag : int { kSpawn = 1, kLine = 2, kExit = 3, kTerm = 4, kStop = 5 };

// Forks and execs `exe` with `args`: stdout to the file `out_path` (truncated) or, when it is
// empty, to a pipe whose read end (non-blocking) is stored in *pipe_fd; stderr appended to
// `log`; with `stdin_fd`, stdin from a pipe whose write end is stored there. The child never outlives this process and does not inherit the MPI launcher's variables
// (it would take itself for a rank of this job). Everything is prepared before fork(): the
// child only calls async-signal-safe functions (MPI may run threads in this process).
pid_t spawn_child(const std::string& exe, std::vector<std::string> args,
                  const std::string& out_path, int* pipe_fd, const std::string& log, int threads,
                  const std::string& order_cache, int gpu_device, int* stdin_fd = nullptr) {
  // A job given GPU `gpu_device` (an index among this process's visible GPUs) sees that one.
  std::string visible;
  if (gpu_device >= 0) {
    std::vector<std::string> ids;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
      std::stringstream in(v);
      for (std::string id; std::getline(in, id, ',');) ids.push_back(id);
    }
    visible =
        gpu_device < static_cast<int>(ids.size()) ? ids[gpu_device] : std::to_string(gpu_device);
  }
  std::vector<std::string> env;
  for (char** e = ::environ; *e; ++e) {  // <unistd.h> declares it (_GNU_SOURCE)
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (dist::is_launcher_variable(name) || name == "OMP_NUM_THREADS" ||
        name == "KINFER_ORDER_CACHE" || name == "KINFER_NO_MPI" || name == "KINFER_EXIT" ||
        (!visible.empty() && name == "CUDA_VISIBLE_DEVICES"))
      continue;
    env.push_back(kv);
  }
  env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  env.push_back("KINFER_ORDER_CACHE=" + order_cache);
  env.push_back("KINFER_NO_MPI=1");
  // A job's process releases its GPU itself before the next job on that GPU starts: a release
  // left to a helper (apps/process_exit.hpp) would overlap the next job's device start and slow
  // both (back-to-back GPU processes: 0.52-0.57 s each against 0.49-0.51, docs/performance.md).
  env.push_back("KINFER_EXIT=wait");
  if (!visible.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& a : env) envp.push_back(a.data());
  envp.push_back(nullptr);
  int out_fd = -1, read_fd = -1;
  if (out_path.empty()) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
    read_fd = fds[0];
    out_fd = fds[1];
  } else {
    out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  const int err_fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  int in_read = -1, in_write = -1;
  if (stdin_fd) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) in_read = fds[0], in_write = fds[1];
  }
  if (out_fd < 0 || err_fd < 0 || (stdin_fd && in_read < 0)) {
    for (int fd : {out_fd, err_fd, read_fd, in_read, in_write})
      if (fd >= 0) ::close(fd);
    return -1;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed batch
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    if (in_read >= 0) ::dup2(in_read, STDIN_FILENO);
    ::execve(exe.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  if (in_read >= 0) ::close(in_read);
  if (pid < 0) {
    if (read_fd >= 0) ::close(read_fd);
    if (in_write >= 0) ::close(in_write);
    return -1;
  }
  if (stdin_fd) *stdin_fd = in_write;
  if (read_fd >= 0) {
    ::fcntl(read_fd, F_SETFL, ::fcntl(read_fd, F_GETFL) | O_NONBLOCK);
    *pipe_fd = read_fd;
  }
  return pid;
}

// Reads what is available on a non-blocking fd into `buf`; closes it (and sets -1) at EOF.
void drain(int& fd, std::string& buf) {
  char b[4096];
  while (fd >= 0) {
    const ssize_t n = ::read(fd, b, sizeof b);
    if (n > 0) {
      buf.append(b, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      ::close(fd);
      fd = -1;
    }
    break;  // EAGAIN: nothing more for now
  }
}

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
  double memory = 0;  // estimated peak of its running units
};

// Every rank's offer (collective under mpirun), each machine's cores, memory and GPU jobs divided
// among the ranks it runs.
std::vector<RankSlot> gather_ranks(const BatchOptions& opt) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const gpu::DeviceInfo info = opt.gpu_jobs != 0 ? gpu::probe() : gpu::DeviceInfo{};
  const int gpu_slots = !info.available ? 0 : opt.gpu_jobs < 0 ? info.count : opt.gpu_jobs;
  nlohmann::json me = {{"host", dist::host()},
                       {"cores", cores},
                       {"budget", opt.max_memory > 0 ? opt.max_memory : default_max_memory_bytes()},
                       {"gpu_slots", gpu_slots},
                       {"gpus", info.available ? info.count : 0},
                       {"gpu", opt.gpu_jobs == 0 ? "not asked for"
                               : info.available  ? info.name
                                                 : "none (" + info.why_not + ")"}};
  const std::vector<std::string> all = dist::allgather(me.dump());
  std::vector<RankSlot> ranks(all.size());
  std::map<std::string, int> per_host;
  for (const auto& a : all) ++per_host[nlohmann::json::parse(a)["host"].get<std::string>()];
  std::map<std::string, int> seen;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto j = nlohmann::json::parse(all[r]);
    RankSlot& k = ranks[r];
    k.host = j["host"];
    const int n = per_host[k.host], local = seen[k.host]++;
    k.cores = std::max(1, j["cores"].get<int>() / n);
    k.slots = opt.jobs > 0 ? opt.jobs : k.cores;
    k.budget = j["budget"].get<double>() / n;
    const int g = j["gpu_slots"].get<int>();
    k.gpu_slots = g / n + (local < g % n);
    k.gpu = j["gpu"];
    // The machine's GPUs dealt to its ranks (shared by all when there are fewer GPUs than ranks).
    const int gpus = j["gpus"].get<int>();
    for (int d = 0; d < gpus; ++d)
      if (gpus < n || d % n == local) k.devices.push_back(d);
    k.on_device.assign(k.devices.size(), 0);
  }
  return ranks;
}

// The answer column of the summary: log10 P(e) for pe, the highest total LOD for lod.
std::string answer_of(const nlohmann::json& j) {
  char buf[64];
  if (j.contains("log10_pr")) {
    if (j["log10_pr"].is_number()) {
      std::snprintf(buf, sizeof buf, "%.10g", j["log10_pr"].get<double>());
      return buf;
    }
    return j["log10_pr"].dump();
  }
  if (j.contains("evaluations") && j["evaluations"].is_array()) {
    double best = -INFINITY;
    for (const auto& e : j["evaluations"])
      if (e.contains("total") && e["total"].contains("lod") && e["total"]["lod"].is_number())
        best = std::max(best, e["total"]["lod"].get<double>());
    std::snprintf(buf, sizeof buf, "max LOD %.6g", best);
    return buf;
  }
  return "";
}

// The last error line of a job's log, without the timestamp.
std::string last_error(const fs::path& log) {
  std::ifstream f(log);
  std::string line, err, last;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find("error") != std::string::npos) err = line;
  }
  std::string e = err.empty() ? last : err;
  if (auto p = e.find("] ", e.find("] ") + 1); e.rfind('[', 0) == 0 && p != std::string::npos)
    e = e.substr(p + 2);
  return e;
}

// The most estimated work (FLOPs, summed over its jobs) given to one group worker.
constexpr double kGroupWorkFlops = 5e8;
// The probe's order search, in nominal core-seconds (a few hundredths of a second on a 64-core
// machine): on linkage_11 and pedigree50 its plans have 2-3x the work of the full search's, on
// linkage_18 the same; a full search there took seconds on the supervisor's thread per network.
constexpr double kProbeSearchCoreSeconds = 2.0;

class Batch {
 public:
  explicit Batch(const BatchOptions& o) : opt_(o) {}

  int run() {
    ranks_ = gather_ranks(opt_);  // every rank's offer (first: the other ranks wait for it)
    auto jobs = io::read_manifest(opt_.manifest);  // validated before anything runs
    out_ = fs::absolute(opt_.out.empty()
                            ? fs::path(opt_.manifest).replace_extension("").string() + "-results"
                            : opt_.out);
    fs::create_directories(out_ / "results");
    fs::create_directories(out_ / "logs");
    fs::create_directories(out_ / "partial");
    fs::create_directories(out_ / "order-cache");
    budget_ = ranks_[0].budget;  // a pe job's --max-memory (the smallest it may get)
    for (auto& j : jobs) {
      JobState s;
      s.options = parse_job_options(j);
      s.job = std::move(j);
      states_.push_back(std::move(s));
    }
    adopt_previous_results();
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const RankSlot& k = ranks_[r];
      budget_ = std::min(budget_, k.budget);
      if (ranks_.size() > 1)
        spdlog::info("batch: rank {} on {}: {} job(s) at once, {} cores, memory {}, GPU {}", r,
                     k.host, k.slots, k.cores, human_bytes(k.budget), k.gpu);
      if (opt_.gpu_jobs != 0 && r == 0)
        // Only the device count and properties: no context in this process (children exec).
        spdlog::info("batch: {}", k.gpu_slots > 0
                                      ? fmt::format("GPU {}: {} job(s) at once may use it, "
                                                    "those of at least {:.3g} FLOP",
                                                    k.gpu, k.gpu_slots, opt_.gpu_min_flops)
                                      : "GPU " + k.gpu + ": every job runs on the CPU");
    }
    // The order jobs start in: the largest estimated work first (every job sized now: pe jobs
    // by their plan's FLOPs, lod jobs by estimate_lod_work; unsized ones last, in manifest
    // order), so that no device or rank is left with a long job at the end while the others
    // wait.
    for (std::size_t i = 0; i < states_.size(); ++i) order_.push_back(i);
    self_ = fs::read_symlink("/proc/self/exe").string();
    std::signal(SIGPIPE, SIG_IGN);  // a device worker that died: its write fails, it is reaped
    start_device_workers_early();   // their GPUs open while the jobs are sized
    probe_all();
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      return states_[a].flops > states_[b].flops;
    });
    position_.resize(states_.size());
    for (std::size_t k = 0; k < order_.size(); ++k) position_[order_[k]] = k;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    tty_ = ::isatty(STDERR_FILENO);
    t0_ = clock_type::now();
    loop();
    write_summary();
    if (tty_) std::fprintf(stderr, "\n");
    int ok = 0, failed = 0, interrupted = 0;
    for (const auto& s : states_) {
      ok += s.status == Status::Ok;
      failed += s.status == Status::Failed;
      interrupted += s.status == Status::Interrupted || s.status == Status::Pending;
    }
    spdlog::info("batch: {} ok, {} failed, {} not finished; results in {}", ok, failed, interrupted,
                 out_.string());
    spdlog::info("batch: {:.2f} s spent estimating plans in this process before starting jobs",
                 probe_seconds_);
    if (device_workers_started_)
      spdlog::info("batch: {} device worker(s) ran the GPU jobs, each GPU opened once",
                   device_workers_started_);
    if (groups_started_)
      spdlog::info(
          "batch: {} group workers; {} jobs evaluated on a plan compiled for an earlier "
          "job of the same structure",
          groups_started_, plans_shared_);
    if (order_searches_)
      spdlog::info("batch: {} order search(es) ran ahead of the GPU jobs on CPU cores ({:.2f} s "
                   "in all)",
                   order_searches_, order_search_seconds_);
    wall_seconds_ = std::chrono::duration<double>(clock_type::now() - t0_).count();
    const Ideal ideal = ideal_schedule();
    if (ideal.seconds > 0)
      spdlog::info("batch: wall {:.2f} s; the ideal schedule of the jobs' own seconds over {} "
                   "GPU(s) and {} cores takes at least {:.2f} s ({:.2f}x of it)",
                   wall_seconds_, ideal.gpus, ideal.cores, ideal.seconds,
                   wall_seconds_ / ideal.seconds);
    if (opt_.verify > 0)
      spdlog::info("verify: {} job(s) recomputed with the same answer, {} mismatch(es), {} not run",
                   verified_, verify_mismatches_, verify_not_run_);
    if (opt_.json) print_json(ok, failed);
    if (g_signal) return 130;
    if (verify_mismatches_) return 5;
    return failed ? 4 : 0;
  }

 private:
  // A job's result in results/ (complete by construction: renamed into place): its answer and
  // seconds into `s`; false when there is none, or it is unreadable (then removed: atomic
  // renames make that impossible, but a bad result is never trusted).
  bool read_result(JobState& s) {
    const fs::path r = out_ / "results" / (s.job.id + ".json");
    if (!fs::exists(r)) return false;
    try {
      const auto j = nlohmann::json::parse(io::read_file(r));
      s.answer = answer_of(j);
      s.seconds = j.value("seconds", 0.0);
      return true;
    } catch (const std::exception&) {
      fs::remove(r);
      return false;
    }
  }

  // Where each job started, one line "ID\tWHERE" appended when it starts (before it can
  // complete), so that summary.tsv says where also for the results --resume adopts.
  void note_where(const JobState& s) {
    std::ofstream(out_ / "where.tsv", std::ios::app) << s.job.id << '\t' << s.where << '\n';
  }

  // A result present from an earlier run is complete by construction (renamed into place).
  void adopt_previous_results() {
    std::map<std::string, std::string> where;  // the last start of each job
    if (std::ifstream f(out_ / "where.tsv"); f)
      for (std::string line; std::getline(f, line);)
        if (const auto tab = line.find('\t'); tab != std::string::npos)
          where[line.substr(0, tab)] = line.substr(tab + 1);
    int found = 0;
    for (auto& s : states_) {
      if (!fs::exists(out_ / "results" / (s.job.id + ".json"))) continue;
      if (!opt_.resume)
        throw InputError(out_.string(), 0,
                         "this folder already holds results of an earlier batch; pass --resume to "
                         "continue it, or choose another --out");
      if (!read_result(s)) continue;
      s.status = Status::Ok;
      s.from_previous_run = true;
      if (auto w = where.find(s.job.id); w != where.end()) s.where = w->second;
      ++found;
    }
    if (opt_.resume) spdlog::info("resume: {} of {} jobs already complete", found, states_.size());
  }

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
  Estimate estimate_plan(const JobState& s) const {
    Estimate e;
    try {
      // The job's own network options (defaults when they do not parse: its child reports that).
      NetworkOptions no = s.options.parsed ? s.options.pe.net : NetworkOptions{};
      no.network = s.job.network;
      no.evidence = s.job.evidence;
      const io::NetworkWithEvidence r = io::read_network_and_evidence(no.network, no.evidence);
      PlanOptions po = no.plan_options(false);
      po.max_memory_bytes = 0;  // we want the estimate, whatever it is
      po.order.time_budget = std::min(po.order.time_budget, kProbeSearchCoreSeconds);
      po.order_cache_dir = "none";
      const Plan plan = make_plan(r.net, r.ev, po);
      e.memory = plan.memory.peak_bytes;
      e.flops = plan.flops;
    } catch (const InputError& x) {
      e.input_error = true;
      e.error = x.what();
    } catch (const std::exception&) {
      e.memory = 0;  // the child will report it properly
    }
    return e;
  }

  // Sizes a job before it starts (its memory, its work, hence its device). Bad input fails the
  // job here, without starting a child.
  void probe(JobState& s) {
    s.probed = true;
    if (!s.options.parsed) {  // what its single command would refuse, without starting it
      finish(s, Status::Failed,
             "options not accepted by kinfer " + s.job.kind + ": " + s.options.error);
      return;
    }
    if (s.job.kind == "lod") {
      s.flops = estimate_lod_work(s.job, s.options.lod);
      return;
    }
    if (s.job.kind != "pe") return;
    // A job with the same network, evidence and options as one probed before has the same plan.
    const std::string key = plan_key(s);
    auto it = probed_.find(key);
    if (it == probed_.end()) {
      const auto t0 = clock_type::now();
      it = probed_.emplace(key, estimate_plan(s)).first;
      probe_seconds_ += std::chrono::duration<double>(clock_type::now() - t0).count();
    }
    if (it->second.input_error) {
      finish(s, Status::Failed, it->second.error);
      return;
    }
    s.memory = it->second.memory;
    s.flops = it->second.flops;
  }

  // Every pending job sized at the start, the distinct plans estimated at once on the cores
  // (each search with its share of them), so that a batch of many networks does not wait for
  // their estimates one after another.
  void probe_all() {
    std::map<std::string, std::size_t> first;  // plans not estimated yet: their first job
    for (std::size_t i = 0; i < states_.size(); ++i) {
      const JobState& s = states_[i];
      if (s.status == Status::Pending && !s.probed && s.options.parsed && s.job.kind == "pe" &&
          !probed_.count(plan_key(s)))
        first.emplace(plan_key(s), i);
    }
    if (first.size() > 1) {
      const auto t0 = clock_type::now();
      const int cores = std::max(1, ranks_[0].cores);
      const int at_once = std::min<int>(static_cast<int>(first.size()), cores);
      const int threads = std::max(1, cores / at_once);
      std::vector<std::pair<std::string, std::size_t>> todo(first.begin(), first.end());
      std::vector<Estimate> done(todo.size());
      std::atomic<std::size_t> next{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < at_once; ++t)
        pool.emplace_back([&] {
          omp_set_num_threads(threads);  // this thread's searches
          for (std::size_t k; (k = next++) < todo.size();)
            done[k] = estimate_plan(states_[todo[k].second]);
        });
      for (auto& t : pool) t.join();
      for (std::size_t k = 0; k < todo.size(); ++k) probed_[todo[k].first] = done[k];
      probe_seconds_ += std::chrono::duration<double>(clock_type::now() - t0).count();
    }
    for (auto& s : states_)
      if (s.status == Status::Pending && !s.probed) probe(s);
  }

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
    int gpu_device = -1;  // gpu: which of its rank's visible GPUs
    // A device worker (run_batch_device_worker): alive for the whole batch, one job at a time
    // written to its stdin; it occupies a slot only while it runs one.
    bool device_worker = false;
    int in_fd = -1;
    std::size_t current = kNone;
  };
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  // Starts `args` on rank u.rank: here, or by a message to that rank's executor
  // (run_batch_rank). stdout to `out_path`, or a pipe (u.fd) when it is empty.
  bool start(Unit& u, const std::vector<std::string>& args, const std::string& out_path,
             const fs::path& log, int threads) {
    u.uid = ++uids_;
    if (u.gpu) {  // the rank's GPU with the fewest jobs
      const RankSlot& k = ranks_[u.rank];
      std::size_t e = 0;
      for (std::size_t i = 1; i < k.devices.size(); ++i)
        if (k.on_device[i] < k.on_device[e]) e = i;
      u.gpu_device = k.devices.empty() ? 0 : k.devices[e];
    }
    if (u.rank == 0) {
      u.pid = spawn_child(self_, args, out_path, &u.fd, log.string(), threads,
                          (out_ / "order-cache").string(), u.gpu_device);
      return u.pid > 0;
    }
    const nlohmann::json m = {{"uid", u.uid},
                              {"args", args},
                              {"out", out_path},
                              {"log", log.string()},
                              {"threads", threads},
                              {"order_cache", (out_ / "order-cache").string()},
                              {"gpu_device", u.gpu_device}};
    dist::send(u.rank, kSpawn, m.dump());
    u.pid = -1;
    return true;
  }

  void write_log_header(const fs::path& log, const std::string& what,
                        const std::vector<std::string>& args) {
    std::ofstream l(log, std::ios::trunc);
    l << "# kinfer batch " << what << ":";
    for (const auto& a : args) l << ' ' << a;
    l << '\n';
  }

  // The GPU decision for a job: a pe job whose plan is big enough for `pe --device auto` (or that
  // asks for --device gpu) wants the GPU; it gets it when fewer than --gpu-jobs hold it.
  bool wants_gpu(const JobState& s) const {
    const std::string d = s.options.device_given ? s.options.device() : "";
    // lod: under auto (or no --device) on a GPU machine a job large enough for the GPU (or not
    // sized: estimate_lod_work < 0) gets a device worker, whose runner puts each plan and the
    // chain where it is faster.
    if (s.job.kind != "pe") {
      if (d == "gpu") return true;
      if (d == "cpu" || (d.empty() && ranks_[0].gpu_slots == 0)) return false;
      return s.flops < 0 || s.flops >= opt_.gpu_min_flops;
    }
    if (d == "cpu") return false;
    return d == "gpu" || s.flops >= opt_.gpu_min_flops;
  }

  // A job's single command line (`gpu`: a pe job may use the GPU).
  std::vector<std::string> job_args(const JobState& s, bool gpu) const {
    std::vector<std::string> args = {self_, s.job.kind};
    if (s.job.kind == "pe") {
      args.push_back(s.job.network);
      if (!s.job.evidence.empty()) args.insert(args.end(), {"-e", s.job.evidence});
      args.insert(args.end(), {"--order-cache", (out_ / "order-cache").string()});
      if (s.options.pe.net.max_memory.empty())  // else the job's own limit (given twice: exit 2)
        args.insert(
            args.end(),
            {"--max-memory", std::to_string(static_cast<long long>(std::max(s.memory, budget_)))});
      // The batch decides where a pe job runs, by --gpu-min-flops and the free GPU slots.
      if (!s.options.device_given) args.insert(args.end(), {"--device", gpu ? "gpu" : "cpu"});
    } else {
      args.insert(args.end(), {"--ped", s.job.ped, "--dat", s.job.dat});
      // Given a GPU, a lod job decides per plan (auto); else it stays on the CPU (no GPU
      // context of its own beside the jobs given the GPU) unless its options name a --device.
      if (!s.options.device_given) args.insert(args.end(), {"--device", gpu ? "auto" : "cpu"});
    }
    args.push_back("--json");
    args.insert(args.end(), s.job.options.begin(), s.job.options.end());
    return args;
  }

  void launch(std::size_t idx, int threads, bool gpu, int rank) {
    JobState& s = states_[idx];
    const std::vector<std::string> args = job_args(s, gpu);
    const fs::path part = out_ / "partial" / (s.job.id + ".json");
    const fs::path log = out_ / "logs" / (s.job.id + ".log");
    write_log_header(log, "job " + s.job.id, args);
    Unit u;
    u.rank = rank;
    u.gpu = gpu;
    if (!start(u, args, part.string(), log, threads)) {
      finish(s, Status::Failed, "cannot start a process");
      return;
    }
    u.jobs = {idx};
    u.memory = s.memory;
    u.start = clock_type::now();
    s.pid = u.pid;
    s.status = Status::Running;
    s.start = u.start;
    s.where = where_of(rank) + (gpu ? ":gpu" + std::to_string(u.gpu_device) : "");
    s.threads = gpu ? 0 : threads;
    note_where(s);
    ++s.attempts;
    occupy(u, +1);
    units_.push_back(std::move(u));
  }

  // --verify: the job's single command again, in a process of its own on `rank` (another rank
  // than the one that ran it, when there is one), into partial/ID.verify.json; compared with its
  // result when it ends (verify_reaped).
  void launch_verify(std::size_t idx, int rank) {
    JobState& s = states_[idx];
    const std::vector<std::string> args = job_args(s, false);
    const fs::path part = out_ / "partial" / (s.job.id + ".verify.json");
    const fs::path log = out_ / "logs" / (s.job.id + ".verify.log");
    write_log_header(log, "verification of job " + s.job.id, args);
    Unit u;
    u.rank = rank;
    u.verify = true;
    u.jobs = {idx};
    u.memory = s.memory;
    u.start = clock_type::now();
    if (!start(u, args, part.string(), log, std::max(1, ranks_[rank].cores / ranks_[rank].slots))) {
      s.verify = "not run: cannot start a process";
      return;
    }
    s.verify = "running on " + where_of(rank);
    occupy(u, +1);
    units_.push_back(std::move(u));
  }

  // The numbers a verification compares: log10 P(e) (pe), every evaluation's total ln L (lod).
  static std::vector<double> verified_numbers(const nlohmann::json& j) {
    std::vector<double> v;
    if (j.contains("ln_pr"))  // a number, or "-inf" when P(e) = 0
      v.push_back(j["ln_pr"].is_number() ? j["ln_pr"].get<double>() : -INFINITY);
    if (j.contains("evaluations"))
      for (const auto& e : j["evaluations"])
        if (e.contains("total") && e["total"].contains("ln_l") && e["total"]["ln_l"].is_number())
          v.push_back(e["total"]["ln_l"].get<double>());
    return v;
  }

  void verify_reaped(Unit& u, int wstatus) {
    JobState& s = states_[u.jobs.front()];
    const fs::path part = out_ / "partial" / (s.job.id + ".verify.json");
    const std::string where = where_of(u.rank);
    if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
      s.verify = "not run: the recomputation on " + where + " failed";
      ++verify_not_run_;
      return;
    }
    try {
      const auto a = verified_numbers(
          nlohmann::json::parse(io::read_file(out_ / "results" / (s.job.id + ".json"))));
      const auto b = verified_numbers(nlohmann::json::parse(io::read_file(part)));
      fs::remove(part);
      bool same = a.size() == b.size() && !a.empty();
      std::size_t k = 0;
      for (; same && k < a.size(); ++k)
        same = a[k] == b[k] || std::abs(a[k] - b[k]) <= 1e-9 * std::max(1.0, std::abs(a[k]));
      if (same) {
        s.verify = "same on " + where;
        ++verified_;
        return;
      }
      char buf[160];
      std::snprintf(buf, sizeof buf, "MISMATCH: %.17g on %s, %.17g on %s",
                    k > 0 && k <= a.size() ? a[k - 1] : NAN, s.where.c_str(),
                    k > 0 && k <= b.size() ? b[k - 1] : NAN, where.c_str());
      s.verify = buf;
      ++verify_mismatches_;
      spdlog::error("verify: job {}: {}", s.job.id, s.verify);
    } catch (const std::exception& e) {
      s.verify = std::string("not run: ") + e.what();
      ++verify_not_run_;
    }
  }

  bool verify_selected(const JobState& s) const {
    if (opt_.verify <= 0) return false;
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a of the id: the same jobs in every run
    for (unsigned char c : s.job.id) h = (h ^ c) * 1099511628211ULL;
    h += 0x9e3779b97f4a7c15ULL;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<double>((h ^ (h >> 31)) >> 11) * 0x1.0p-53 < opt_.verify;
  }

  std::string where_of(int rank) const { return ranks_[rank].host + ":" + std::to_string(rank); }
  // A unit starts (+1) or ends (-1) on its rank.
  void occupy(const Unit& u, int sign) {
    RankSlot& k = ranks_[u.rank];
    k.running += sign;
    k.gpu_running += sign * u.gpu;
    k.memory += sign * u.memory;
    for (std::size_t e = 0; e < k.devices.size(); ++e)
      if (u.gpu && k.devices[e] == u.gpu_device) k.on_device[e] += sign;
  }

  void launch_group(const std::vector<std::size_t>& jobs, int threads, bool gpu, int rank) {
    JobState& first = states_[jobs.front()];
    std::string ids;
    for (std::size_t i : jobs) ids += (ids.empty() ? "" : ",") + states_[i].job.id;
    std::vector<std::string> args = {
        self_,
        "batch",
        fs::absolute(opt_.manifest).string(),
        "--out",
        out_.string(),
        "--worker",
        ids,
        "--max-memory",
        std::to_string(static_cast<long long>(std::max(first.memory, budget_))),
        "--gpu-min-flops",
        std::to_string(opt_.gpu_min_flops)};
    if (gpu) args.push_back("--worker-gpu");
    const fs::path log = out_ / "logs" / ("group-" + first.job.id + ".log");
    write_log_header(log, "group worker", args);
    Unit u;
    u.rank = rank;
    u.gpu = gpu;
    if (!start(u, args, "", log, threads)) {
      for (std::size_t i : jobs) states_[i].solo = true;  // run them alone
      return;
    }
    u.jobs = jobs;
    u.group = true;
    u.memory = first.memory;
    u.start = clock_type::now();
    for (std::size_t i : jobs) {
      states_[i].pid = u.pid;
      states_[i].status = Status::Running;
      states_[i].start = u.start;
      states_[i].probed = true;
      states_[i].where = where_of(rank);
      states_[i].threads = gpu ? 0 : threads;
      note_where(states_[i]);
    }
    occupy(u, +1);
    ++groups_started_;
    units_.push_back(std::move(u));
  }

  // Reads what a group worker has said so far; each complete line finishes one job.
  // (A worker on another rank: its rank forwards the lines, kLine.)
  void read_worker(Unit& u) {
    drain(u.fd, u.buf);
    std::size_t nl;
    while ((nl = u.buf.find('\n')) != std::string::npos) {
      const std::string line = u.buf.substr(0, nl);
      u.buf.erase(0, nl + 1);
      std::vector<std::string> f;
      std::stringstream ls(line);
      for (std::string x; std::getline(ls, x, '\t');) f.push_back(x);
      if (f.size() < 3) continue;
      auto it = index_.find(f[1]);
      if (it == index_.end()) continue;
      JobState& s = states_[it->second];
      if (u.device_worker && u.current == it->second) {  // the worker is free again
        occupy(u, -1);
        u.current = kNone;
        searching_.erase(plan_key(states_[it->second]));
      }
      if (s.status != Status::Running) continue;
      s.seconds = std::atof(f[2].c_str());
      if (f[0] == "ok") {
        try {
          auto j = nlohmann::json::parse(io::read_file(out_ / "results" / (s.job.id + ".json")));
          s.answer = answer_of(j);
          if (j.value("batch_plan", "").rfind("shared", 0) == 0) ++plans_shared_;
          finish(s, Status::Ok, "");
        } catch (const std::exception& e) {
          finish(s, Status::Failed, std::string("the worker's result is unreadable: ") + e.what());
        }
      } else {
        finish(s, Status::Failed, f.size() > 3 ? f[3] : "failed");
      }
    }
  }

  void reap_unit(Unit& u, int wstatus) {
    if (u.device_worker) {
      reap_device_worker(u, wstatus);
      return;
    }
    occupy(u, -1);
    if (!u.search_key.empty()) {
      reap_order_search(u, wstatus);
      return;
    }
    if (u.verify) {
      verify_reaped(u, wstatus);
      return;
    }
    if (!u.group) {
      reap(states_[u.jobs.front()], wstatus, u.rank);
      return;
    }
    read_worker(u);
    if (u.fd >= 0) ::close(u.fd);
    u.fd = -1;
    int left = 0;
    for (std::size_t i : u.jobs) {
      JobState& s = states_[i];
      if (s.status != Status::Running) continue;
      s.pid = -1;
      // The worker renamed the result into place and died before saying so: it is complete.
      if (read_result(s)) {
        finish(s, Status::Ok, "");
        continue;
      }
      ++left;
      if (g_signal) {
        finish(s, Status::Interrupted, "interrupted");
      } else {
        // The worker died (crash, out of memory, killed): this job and the other unfinished jobs
        // of its group run again, each alone, so one bad job cannot take the others with it.
        s.status = Status::Pending;
        s.solo = true;
        next_ = std::min(next_, position_[i]);
      }
    }
    if (left && !g_signal) {
      std::string why = WIFSIGNALED(wstatus)
                            ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                            : "exit code " + std::to_string(WEXITSTATUS(wstatus));
      spdlog::warn(
          "group worker of job {} ended ({}) with {} jobs unfinished; they run again one by one",
          states_[u.jobs.front()].job.id, why, left);
    }
  }

  void reap(JobState& s, int wstatus, int rank) {
    s.seconds = std::chrono::duration<double>(clock_type::now() - s.start).count();
    const fs::path part = out_ / "partial" / (s.job.id + ".json");
    const fs::path log = out_ / "logs" / (s.job.id + ".log");
    if (g_signal && !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
      finish(s, Status::Interrupted, "interrupted");
      return;
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
      try {
        const std::string text = io::read_file(part);
        auto j = nlohmann::json::parse(text);
        record_result(out_, s.job.id, j);
        fs::remove(part);
        s.answer = answer_of(j);
        if (j.contains("seconds") && j["seconds"].is_number())
          s.seconds = j["seconds"].get<double>();
        finish(s, Status::Ok, "");
      } catch (const std::exception& e) {
        finish(s, Status::Failed, std::string("the job printed no valid JSON: ") + e.what());
      }
      return;
    }
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL && s.attempts < 2) {
      // Killed from outside (a dead worker, the OOM killer, a lost node): once more, on another
      // rank when there is one; a second kill fails it.
      spdlog::warn("job {} was killed (signal 9) on {}; it runs once more{}", s.job.id, s.where,
                   ranks_.size() > 1 ? " on another rank" : "");
      s.status = Status::Pending;
      s.pid = -1;
      s.avoid_rank = rank;
      next_ = std::min(next_, position_[index_[s.job.id]]);
      return;
    }
    std::string why = last_error(log);
    if (WIFSIGNALED(wstatus))
      why =
          "killed by signal " + std::to_string(WTERMSIG(wstatus)) + (why.empty() ? "" : ": " + why);
    else
      why = "exit code " + std::to_string(WEXITSTATUS(wstatus)) + (why.empty() ? "" : ": " + why);
    finish(s, Status::Failed, why);
  }

  void finish(JobState& s, Status st, const std::string& err) {
    s.status = st;
    s.error = err;
    s.pid = -1;
    if (st == Status::Ok && verify_selected(s)) {
      s.verify = "waiting";
      to_verify_.push_back(index_[s.job.id]);
    }
    if (st == Status::Ok || st == Status::Failed) {
      if (!tty_)
        spdlog::info("job {} {} in {:.2f} s{}{} ({}/{})", s.job.id, status_name(st), s.seconds,
                     (st == Status::Ok ? s.answer : err).empty() ? "" : ": ",
                     st == Status::Ok ? s.answer : err, ++finished_, states_.size());
      else
        ++finished_;
      write_summary();
    }
  }

  // The pending pe jobs that can share job `idx`'s plan: same network file, same options, none
  // forced to run alone; at most `cap`, in manifest order, `idx` first.
  std::vector<std::size_t> group_of(std::size_t idx, std::size_t cap) {
    std::vector<std::size_t> g = {idx};
    const JobState& s = states_[idx];
    if (opt_.no_share || s.job.kind != "pe" || s.solo || !s.options.groupable) return g;
    for (std::size_t i = idx + 1; i < states_.size() && g.size() < cap; ++i) {
      const JobState& t = states_[i];
      if (t.status == Status::Pending && !t.solo && t.job.kind == "pe" &&
          t.job.network == s.job.network && t.job.options == s.job.options)
        g.push_back(i);
    }
    return g;
  }

  // Starts the next job (or group) that may run on rank r; false when none may now.
  bool launch_on(int r) {
    RankSlot& k = ranks_[r];
    if (k.running >= k.slots) return false;
    // Recomputations first (they are few): on another rank than the job's when there is one.
    for (std::size_t q = 0; q < to_verify_.size(); ++q) {
      const JobState& v = states_[to_verify_[q]];
      if (ranks_.size() > 1 && v.where == where_of(r)) continue;
      if (k.running > 0 && k.memory + v.memory > k.budget) continue;
      const std::size_t idx = to_verify_[q];
      to_verify_.erase(to_verify_.begin() + static_cast<long>(q));
      launch_verify(idx, r);
      return true;
    }
    while (next_ < order_.size() && states_[order_[next_]].status != Status::Pending) ++next_;
    if (next_ >= order_.size()) return false;
    if (r == 0 && start_order_search(k)) return true;
    // The first pending job in order, except that a job that needs the GPU (its plan is so
    // large that the CPU would take far longer) waits while the rank's GPU is busy, letting the
    // jobs after it run on the CPU meanwhile; and a job killed on this rank goes to another.
    std::size_t idx = states_.size();
    for (std::size_t q = next_; q < order_.size(); ++q) {
      JobState& c = states_[order_[q]];
      if (c.status != Status::Pending) continue;
      if (!c.probed) probe(c);
      if (c.status != Status::Pending) continue;
      if (c.avoid_rank == r && ranks_.size() > 1) continue;
      if (k.gpu_running > 0 && k.gpu_running >= k.gpu_slots && wants_gpu(c) &&
          c.flops >= opt_.gpu_wait_flops)
        continue;
      if (r == 0 && wants_gpu(c) && c.flops >= opt_.gpu_wait_flops && order_being_searched(c))
        continue;
      idx = order_[q];
      break;
    }
    if (idx >= states_.size()) return false;  // only jobs waiting for the GPU are left
    JobState& s = states_[idx];
    if (k.running > 0 && k.memory + s.memory > k.budget) return false;  // wait for memory
    int pending = 0, slots = 0;
    for (const auto& x : states_) pending += x.status == Status::Pending;
    for (const auto& x : ranks_) slots += x.slots;
    // Groups small enough that every slot keeps busy to the end: about two groups per slot.
    std::size_t cap = std::max<std::size_t>(1, (pending + 2 * slots - 1) / (2 * slots));
    // A shared plan saves a job's setup (process, reading, planning: milliseconds to a
    // second); jobs in one worker run one after another. So only jobs whose computation is
    // small are grouped: heavy jobs run alone, in parallel (grouping heavy jobs made a batch
    // slower than one process per job: docs/performance.md).
    cap = std::min(
        cap, static_cast<std::size_t>(std::max(1.0, kGroupWorkFlops / std::max(1.0, s.flops))));
    std::vector<std::size_t> g = group_of(idx, cap);
    const int concurrent =
        std::max(1, std::min(k.slots, k.running + pending - static_cast<int>(g.size()) + 1));
    // A job's own --threads sets its process's OpenMP threads (OMP_NUM_THREADS at start).
    int threads = std::max(1, k.cores / concurrent);
    if (s.options.threads() > 0) threads = s.options.threads();
    const bool gpu = wants_gpu(s) && k.gpu_running < k.gpu_slots;
    if (gpu && r == 0 && !opt_.no_share && !s.solo) {
      dispatch(idx, threads);
      return true;
    }
    if (g.size() > 1)
      launch_group(g, threads, gpu, r);
    else
      launch(idx, threads, gpu, r);
    return true;
  }

  // The GPU jobs' order searches run ahead on the CPU cores, one `kinfer info` process per
  // plan (the jobs' network options, sized for the GPU as `pe --device gpu` sizes it), which
  // leaves the order in the batch's order cache: the device workers then take only jobs whose
  // order is cached, and the GPUs compute while the next plans' orders are searched. A job
  // whose plan is being searched waits (order_being_searched); a search that fails only costs
  // its jobs their own search. Starts one search on rank 0 when one is due and a slot is free.
  bool start_order_search(RankSlot& k) {
    if (k.gpu_slots == 0 || opt_.no_share || k.running >= k.slots) return false;
    std::size_t first = kNone;
    std::set<std::string> due;  // plans whose order is not searched yet
    for (std::size_t q = next_; q < order_.size(); ++q) {
      const JobState& c = states_[order_[q]];
      if (c.status != Status::Pending || c.solo || !c.options.groupable || !wants_gpu(c) ||
          c.flops < opt_.gpu_wait_flops || searched_.count(plan_key(c)))
        continue;
      if (due.insert(plan_key(c)).second && first == kNone) first = order_[q];
    }
    if (first == kNone) return false;
    const JobState& s = states_[first];
    if (k.running > 0 && k.memory + s.memory > k.budget) return false;
    // The search's nominal work is fixed (OrderOptions::time_budget): threads shorten its wall.
    // The plans due share the cores left beside the GPUs' jobs, at most 16 threads each (the
    // search's rounds keep about 16 busy: engine/ordering.hpp).
    const int free_cores = std::max(1, k.cores - k.gpu_running);
    const int threads = std::clamp(free_cores / static_cast<int>(due.size()), 1, 16);
    std::vector<std::string> args = {self_, "info", s.job.network};
    if (!s.job.evidence.empty()) args.insert(args.end(), {"-e", s.job.evidence});
    args.insert(args.end(), {"--order-cache", (out_ / "order-cache").string(), "--json"});
    if (!s.options.device_given) args.insert(args.end(), {"--device", "gpu"});
    args.insert(args.end(), s.job.options.begin(), s.job.options.end());
    const fs::path log = out_ / "logs" / ("order-search-" + s.job.id + ".log");
    write_log_header(log, "order search for the GPU jobs like " + s.job.id, args);
    Unit u;
    u.rank = 0;
    u.search_key = plan_key(s);
    u.memory = s.memory;
    u.start = clock_type::now();
    u.uid = ++uids_;
    const fs::path answer = out_ / "partial" / ("order-search-" + s.job.id + ".json");
    u.search_answer = answer;
    u.pid = spawn_child(self_, args, answer.string(), nullptr, log.string(), threads,
                        (out_ / "order-cache").string(), -1);
    searched_.insert(u.search_key);
    if (u.pid <= 0) return false;  // its jobs search their order themselves
    searching_.insert(u.search_key);
    occupy(u, +1);
    ++order_searches_;
    units_.push_back(std::move(u));
    return true;
  }

  // A search ahead ended: its plan's estimates (the searched order's, for the GPU: its host
  // memory without the intermediate tables that live on the device) replace the probe's for
  // the jobs of that plan, so that GPU jobs are not held back by a CPU run's memory.
  void reap_order_search(const Unit& u, int wstatus) {
    searching_.erase(u.search_key);
    const double secs = std::chrono::duration<double>(clock_type::now() - u.start).count();
    order_search_seconds_ += secs;
    if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
      if (!g_signal)
        spdlog::warn("an order search ahead of the GPU jobs ended with {} (its log in {}); "
                     "those jobs search their order themselves",
                     WIFSIGNALED(wstatus) ? "signal " + std::to_string(WTERMSIG(wstatus))
                                          : "exit code " + std::to_string(WEXITSTATUS(wstatus)),
                     (out_ / "logs").string());
      return;
    }
    try {
      const auto j = nlohmann::json::parse(io::read_file(u.search_answer));
      fs::remove(u.search_answer);
      const double memory = j.at("memory").at("estimated_peak_bytes").get<double>();
      const double flops = j.at("memory").at("estimated_flops").get<double>();
      probed_[u.search_key] = Estimate{memory, flops, false, {}};
      for (auto& s : states_)
        if (s.status == Status::Pending && plan_key(s) == u.search_key) {
          s.memory = memory;
          s.flops = flops;
        }
    } catch (const std::exception& e) {
      spdlog::debug("order search {}: no estimate read ({})", u.search_answer.string(), e.what());
    }
  }

  // What makes two jobs' plans the same: network, evidence and options.
  static std::string plan_key(const JobState& s) {
    std::string key = s.job.network + "\x1f" + s.job.evidence;
    for (const auto& o : s.job.options) key += "\x1f" + o;
    return key;
  }

  // A GPU job whose plan's first job is running on a device worker and has not finished: that
  // job is searching the order that this one would otherwise search again (the order cache is
  // written when the search ends), so this one waits and other plans' jobs go first.
  bool order_being_searched(const JobState& c) const {
    return searching_.count(plan_key(c)) > 0;
  }

  // A GPU job to a device worker of the GPU with the fewest jobs: an idle one, else a new one.
  // When no worker can take it, the job runs in a process of its own.
  void dispatch(std::size_t idx, int threads) {
    JobState& s = states_[idx];
    const RankSlot& k = ranks_[0];
    std::size_t e = 0;
    for (std::size_t i = 1; i < k.devices.size(); ++i)
      if (k.on_device[i] < k.on_device[e]) e = i;
    const int device = k.devices.empty() ? 0 : k.devices[e];
    Unit* w = nullptr;
    for (auto& u : units_)
      if (u.device_worker && u.in_fd >= 0 && u.current == kNone && u.gpu_device == device) {
        w = &u;
        break;
      }
    if (!w) w = start_device_worker(device, threads);
    std::vector<std::string> args = job_args(s, true);
    args.erase(args.begin());  // the executable: the worker runs the rest in itself
    write_log_header(out_ / "logs" / (s.job.id + ".log"), "job " + s.job.id + " (device worker)",
                     args);
    const std::string line =
        nlohmann::json{{"id", s.job.id}, {"args", args}, {"threads", threads}}.dump() + "\n";
    if (!w || ::write(w->in_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      s.solo = true;  // no worker to take it (it could not start, or died): a process of its own
      launch(idx, threads, true, 0);
      return;
    }
    w->current = idx;
    w->memory = s.memory;
    w->start = clock_type::now();
    occupy(*w, +1);
    if (searched_.insert(plan_key(s)).second) searching_.insert(plan_key(s));
    s.pid = w->pid;
    s.status = Status::Running;
    s.start = w->start;
    s.where = where_of(0) + ":gpu" + std::to_string(device);
    note_where(s);
    ++s.attempts;
  }

  // A device worker for GPU `device` (a visible index of rank 0), idle; nullptr when it could
  // not start. It opens its GPU at once, so that it is ready when its first job comes.
  Unit* start_device_worker(int device, int threads) {
    Unit u;
    u.rank = 0;
    u.gpu = true;
    u.device_worker = true;
    u.gpu_device = device;
    u.uid = ++uids_;
    const std::vector<std::string> args = {self_, "batch", fs::absolute(opt_.manifest).string(),
                                           "--out", out_.string(), "--serve"};
    const fs::path log = out_ / "logs" / ("device-worker-gpu" + std::to_string(device) + ".log");
    if (!fs::exists(log)) write_log_header(log, "device worker", args);
    u.pid = spawn_child(self_, args, "", &u.fd, log.string(), threads,
                        (out_ / "order-cache").string(), device, &u.in_fd);
    if (u.pid <= 0) return nullptr;
    ++device_workers_started_;
    units_.push_back(std::move(u));
    return &units_.back();
  }

  // At the batch's start, when jobs will go to device workers: one worker per GPU of rank 0,
  // opening its GPU while the first plans' orders are searched.
  void start_device_workers_early() {
    const RankSlot& k = ranks_[0];
    if (k.gpu_slots == 0 || opt_.no_share) return;
    // Before the jobs are sized: any job that may want a GPU (not one that names --device cpu).
    bool gpu_jobs = false;
    for (const auto& s : states_)
      gpu_jobs = gpu_jobs || (s.status == Status::Pending && s.options.parsed &&
                              !(s.options.device_given && s.options.device() == "cpu"));
    if (!gpu_jobs) return;
    const int n = std::min(k.gpu_slots, static_cast<int>(k.devices.size()));
    for (int e = 0; e < n; ++e) start_device_worker(k.devices[e], std::max(1, k.cores / n));
  }

  // Device workers end (their input closed) once no pending job is left for them.
  void release_idle_workers() {
    for (const auto& s : states_)
      if (s.status == Status::Pending) return;
    for (auto& u : units_)
      if (u.device_worker && u.current == kNone && u.in_fd >= 0) {
        ::close(u.in_fd);
        u.in_fd = -1;
      }
  }

  // A device worker ended: at the end of its input, or killed or crashed in a job. That job
  // (complete when its result was renamed into place) runs again in a process of its own.
  void reap_device_worker(Unit& u, int wstatus) {
    read_worker(u);
    if (u.fd >= 0) ::close(u.fd);
    if (u.in_fd >= 0) ::close(u.in_fd);
    u.fd = u.in_fd = -1;
    if (u.current == kNone) return;
    const std::size_t idx = u.current;
    occupy(u, -1);
    u.current = kNone;
    searching_.erase(plan_key(states_[idx]));
    JobState& s = states_[idx];
    if (s.status != Status::Running) return;
    s.pid = -1;
    if (read_result(s)) {
      finish(s, Status::Ok, "");
      return;
    }
    if (g_signal) {
      finish(s, Status::Interrupted, "interrupted");
      return;
    }
    const std::string why = WIFSIGNALED(wstatus)
                                ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                                : "exit code " + std::to_string(WEXITSTATUS(wstatus));
    spdlog::warn("the device worker of GPU {} ended ({}) during job {}; it runs again in a "
                 "process of its own",
                 u.gpu_device, why, s.job.id);
    s.status = Status::Pending;
    s.solo = true;
    next_ = std::min(next_, position_[idx]);
  }

  // A message from another rank: a group worker's lines, or a unit's end.
  void receive(int from, int tag) {
    const auto m = nlohmann::json::parse(dist::receive(from, tag));
    const int uid = m["uid"];
    for (std::size_t k = 0; k < units_.size(); ++k) {
      if (units_[k].rank != from || units_[k].uid != uid) continue;
      if (tag == kLine) {
        units_[k].buf += m["text"].get<std::string>();
        read_worker(units_[k]);
      } else if (tag == kExit) {
        Unit u = std::move(units_[k]);
        units_.erase(units_.begin() + static_cast<long>(k));
        reap_unit(u, m["status"].get<int>());
      }
      return;
    }
  }

  void loop() {
    for (std::size_t i = 0; i < states_.size(); ++i) index_[states_[i].job.id] = i;
    auto last_draw = clock_type::now() - std::chrono::seconds(10);
    bool signalled = false;
    while (true) {
      if (g_signal && !signalled) {
        signalled = true;
        for (auto& u : units_)
          if (u.rank == 0) ::kill(u.pid, SIGTERM);
        for (std::size_t r = 1; r < ranks_.size(); ++r)
          dist::send(static_cast<int>(r), kTerm, "{}");
      }
      // launch while there is room: on the rank with the most free slots first
      for (bool started = true; started && !g_signal;) {
        started = false;
        std::vector<int> by_free(ranks_.size());
        for (std::size_t r = 0; r < ranks_.size(); ++r) by_free[r] = static_cast<int>(r);
        std::stable_sort(by_free.begin(), by_free.end(), [&](int a, int b) {
          return ranks_[a].slots - ranks_[a].running > ranks_[b].slots - ranks_[b].running;
        });
        for (int r : by_free)
          if ((started = launch_on(r))) break;
      }
      release_idle_workers();
      if (units_.empty()) break;
      for (auto& u : units_)
        if ((u.group || u.device_worker) && u.rank == 0) read_worker(u);
      bool busy = false;
      for (int from, tag; dist::poll(from, tag);) {
        receive(from, tag);
        busy = true;
      }
      int wstatus = 0;
      pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
      if (pid > 0) {
        for (std::size_t k = 0; k < units_.size(); ++k)
          if (units_[k].rank == 0 && units_[k].pid == pid) {
            Unit u = std::move(units_[k]);
            units_.erase(units_.begin() + static_cast<long>(k));
            reap_unit(u, wstatus);
            break;
          }
        continue;
      }
      if (busy) continue;
      if (tty_ && clock_type::now() - last_draw > std::chrono::milliseconds(250)) {
        int running = 0;
        for (const auto& u : units_) running += !u.device_worker || u.current != kNone;
        draw_progress(running);
        last_draw = clock_type::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (std::size_t r = 1; r < ranks_.size(); ++r) dist::send(static_cast<int>(r), kStop, "{}");
    if (g_signal)
      for (auto& s : states_)
        if (s.status == Status::Pending) s.error = "not started: the batch was interrupted";
  }

  // A lower bound on the wall of any schedule of this run's jobs where they ran: the longest
  // job; the GPU jobs' seconds spread evenly over the GPUs; the CPU jobs' core-seconds (seconds x
  // threads) over the cores. Jobs adopted from an earlier run are not counted.
  struct Ideal {
    double seconds = 0;
    int gpus = 0, cores = 0;
  };
  Ideal ideal_schedule() const {
    Ideal i;
    for (const auto& k : ranks_) {
      i.cores += k.cores;
      if (k.gpu_slots > 0) i.gpus += static_cast<int>(k.devices.size());
    }
    double longest = 0, gpu_seconds = 0, core_seconds = 0;
    for (const auto& s : states_) {
      if (s.from_previous_run || (s.status != Status::Ok && s.status != Status::Failed)) continue;
      longest = std::max(longest, s.seconds);
      if (s.where.find(":gpu") != std::string::npos)
        gpu_seconds += s.seconds;
      else
        core_seconds += s.seconds * std::max(1, s.threads);
    }
    i.seconds = std::max({longest, i.gpus > 0 ? gpu_seconds / i.gpus : 0.0,
                          core_seconds / std::max(1, i.cores)});
    if (i.gpus == 0 && gpu_seconds > 0) i.seconds = std::max(i.seconds, gpu_seconds);
    return i;
  }

  void draw_progress(int running) {
    int ok = 0, failed = 0, fresh = 0;
    double fresh_secs = 0;
    for (const auto& s : states_) {
      ok += s.status == Status::Ok;
      failed += s.status == Status::Failed;
      if ((s.status == Status::Ok || s.status == Status::Failed) && !s.from_previous_run)
        ++fresh, fresh_secs += s.seconds;
    }
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0_).count();
    const int left = static_cast<int>(states_.size()) - ok - failed;
    std::string eta = "?";
    if (fresh > 0) {
      const double per_job = elapsed / fresh;
      char b[32];
      std::snprintf(b, sizeof b, "%.0f s", per_job * left);
      eta = b;
    }
    int queued = 0;
    for (const auto& s : states_) queued += s.status == Status::Pending;
    // per GPU of this rank: the jobs on it now
    std::string gpus;
    const RankSlot& k = ranks_[0];
    for (std::size_t e = 0; e < k.devices.size(); ++e)
      gpus += fmt::format("{}gpu{} {}", gpus.empty() ? " (" : ", ", k.devices[e], k.on_device[e]);
    if (!gpus.empty()) gpus += ")";
    std::fprintf(stderr,
                 "\r\033[K[batch] %d/%zu done, %d running%s, %d queued, %d failed, elapsed %.0f s, "
                 "remaining ~%s",
                 ok + failed, states_.size(), running, gpus.c_str(), queued, failed, elapsed,
                 eta.c_str());
    std::fflush(stderr);
  }

  void write_summary() {
    std::ostringstream t;
    t << "id\tkind\tstatus\tanswer\tseconds\twhere\terror" << (opt_.verify > 0 ? "\tverify" : "")
      << '\n';
    for (const auto& s : states_) {
      std::string err = s.error;
      std::replace(err.begin(), err.end(), '\t', ' ');
      std::replace(err.begin(), err.end(), '\n', ' ');
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3f", s.seconds);
      t << s.job.id << '\t' << s.job.kind << '\t' << status_name(s.status) << '\t' << s.answer
        << '\t' << (s.status == Status::Ok || s.status == Status::Failed ? secs : "") << '\t'
        << s.where << '\t' << err;
      if (opt_.verify > 0) t << '\t' << s.verify;
      t << '\n';
    }
    write_file_atomically(out_ / "summary.tsv", t.str());
  }

  void print_json(int ok, int failed) {
    nlohmann::json j = {{"out", out_.string()},
                        {"ok", ok},
                        {"failed", failed},
                        {"group_workers", groups_started_},
                        {"plans_shared", plans_shared_},
                        {"probe_seconds", probe_seconds_},
                        {"order_searches", order_searches_},
                        {"wall_seconds", wall_seconds_},
                        {"ideal_seconds", ideal_schedule().seconds},
                        {"ranks", ranks_.size()},
                        {"verify",
                         {{"fraction", opt_.verify},
                          {"same", verified_},
                          {"mismatches", verify_mismatches_},
                          {"not_run", verify_not_run_}}},
                        {"jobs", nlohmann::json::array()}};
    for (const auto& s : states_)
      j["jobs"].push_back({{"id", s.job.id},
                           {"kind", s.job.kind},
                           {"status", status_name(s.status)},
                           {"answer", s.answer},
                           {"seconds", s.seconds},
                           {"where", s.where},
                           {"verify", s.verify},
                           {"error", s.error}});
    std::cout << j.dump(2) << std::endl;
  }

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
  // Plans whose first job went to a device worker, and those of them still running.
  std::set<std::string> searched_, searching_;
  std::vector<std::size_t> to_verify_;  // --verify: finished jobs waiting for their recomputation
  int verified_ = 0, verify_mismatches_ = 0, verify_not_run_ = 0;
  std::map<std::string, Estimate> probed_;  // inputs -> the plan's estimates
  double probe_seconds_ = 0;
  double wall_seconds_ = 0;
  int order_searches_ = 0;            // order searches run ahead of GPU jobs
  double order_search_seconds_ = 0;   // their wall seconds, summed
  bool tty_ = false;
  clock_type::time_point t0_;
};

// A rank other than 0 under `mpirun kinfer batch`: starts what rank 0 sends (kSpawn) as child
// processes, exactly as rank 0 starts its own, forwards a group worker's lines (kLine) and each
// child's end (kExit), passes an interruption on to its children (kTerm), and returns at kStop.
// Results, logs and the journal are written by the children into the shared output folder.
int run_batch_rank(const BatchOptions& opt) {
  gather_ranks(opt);  // the collective rank 0 starts with
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  struct Child {
    int uid = 0, fd = -1;
    std::string buf;
  };
  std::map<pid_t, Child> children;
  auto forward = [](Child& c) {
    drain(c.fd, c.buf);
    const auto nl = c.buf.rfind('\n');
    if (nl == std::string::npos) return;
    dist::send(0, kLine, nlohmann::json{{"uid", c.uid}, {"text", c.buf.substr(0, nl + 1)}}.dump());
    c.buf.erase(0, nl + 1);
  };
  bool stop = false, termed = false;
  while (!stop || !children.empty()) {
    if (g_signal && !termed) {
      termed = true;
      for (auto& [pid, c] : children) ::kill(pid, SIGTERM);
    }
    bool busy = false;
    for (int from, tag; !stop && dist::poll(from, tag);) {
      busy = true;
      const auto m = nlohmann::json::parse(dist::receive(from, tag));
      if (tag == kStop) {
        stop = true;
      } else if (tag == kTerm) {
        for (auto& [pid, c] : children) ::kill(pid, SIGTERM);
      } else if (tag == kSpawn) {
        Child c;
        c.uid = m["uid"];
        auto args = m["args"].get<std::vector<std::string>>();
        args[0] = self;
        const pid_t pid = spawn_child(self, args, m["out"], &c.fd, m["log"], m["threads"],
                                      m["order_cache"], m["gpu_device"]);
        if (pid < 0)  // as a child that could not exec
          dist::send(0, kExit, nlohmann::json{{"uid", c.uid}, {"status", 127 << 8}}.dump());
        else
          children[pid] = std::move(c);
      }
    }
    for (auto& [pid, c] : children)
      if (c.fd >= 0) forward(c);
    int wstatus = 0;
    const pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
    if (pid > 0) {
      if (auto it = children.find(pid); it != children.end()) {
        Child& c = it->second;
        while (c.fd >= 0) forward(c);  // the rest of its lines (the pipe is closed at its exit)
        if (!c.buf.empty())
          dist::send(0, kLine, nlohmann::json{{"uid", c.uid}, {"text", c.buf + "\n"}}.dump());
        dist::send(0, kExit, nlohmann::json{{"uid", c.uid}, {"status", wstatus}}.dump());
        children.erase(it);
      }
      continue;
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

}  // namespace

int run_batch(const BatchOptions& opt) {
  return dist::rank() > 0 ? run_batch_rank(opt) : Batch(opt).run();
}

}  // namespace kinfer::app
