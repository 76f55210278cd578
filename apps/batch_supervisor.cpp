// The `kinfer batch` supervisor: the manifest, scheduling jobs on slots under the memory budget
// and the GPU slots, group workers for pe jobs that can share a plan, the journal, --resume and
// the summary (see batch.hpp).
#include "apps/batch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

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
  bool probed = false;
  bool solo = false;  // its group's worker died: run it alone
  pid_t pid = -1;
  clock_type::time_point start;
  bool from_previous_run = false;
};

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

class Batch {
 public:
  explicit Batch(const BatchOptions& o) : opt_(o) {}

  int run() {
    auto jobs = io::read_manifest(opt_.manifest);  // validated before anything runs
    out_ = opt_.out.empty() ? fs::path(opt_.manifest).replace_extension("").string() + "-results"
                            : opt_.out;
    fs::create_directories(out_ / "results");
    fs::create_directories(out_ / "logs");
    fs::create_directories(out_ / "partial");
    fs::create_directories(out_ / "order-cache");
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    slots_ = opt_.jobs > 0 ? opt_.jobs : cores;
    cores_ = cores;
    budget_ = opt_.max_memory > 0 ? opt_.max_memory : default_max_memory_bytes();
    for (auto& j : jobs) {
      JobState s;
      s.options = parse_job_options(j);
      s.job = std::move(j);
      states_.push_back(std::move(s));
    }
    adopt_previous_results();
    if (opt_.gpu_jobs > 0) {
      // Only the device count and properties: no context in this process (children exec).
      const gpu::DeviceInfo info = gpu::probe();
      gpu_slots_ = info.available ? opt_.gpu_jobs : 0;
      spdlog::info("batch: {}", info.available
                                    ? fmt::format("GPU {}: {} job(s) at once may use it, "
                                                  "those of at least {:.3g} FLOP",
                                                  info.name, gpu_slots_, opt_.gpu_min_flops)
                                    : "no GPU (" + info.why_not + "): every job runs on the CPU");
    }
    self_ = fs::read_symlink("/proc/self/exe").string();
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
    if (groups_started_)
      spdlog::info(
          "batch: {} group workers; {} jobs evaluated on a plan compiled for an earlier "
          "job of the same structure",
          groups_started_, plans_shared_);
    if (opt_.json) print_json(ok, failed);
    if (g_signal) return 130;
    return failed ? 4 : 0;
  }

 private:
  // A result present from an earlier run is complete by construction (renamed into place).
  void adopt_previous_results() {
    int found = 0;
    for (auto& s : states_) {
      const fs::path r = out_ / "results" / (s.job.id + ".json");
      if (!fs::exists(r)) continue;
      if (!opt_.resume)
        throw InputError(out_.string(), 0,
                         "this folder already holds results of an earlier batch; pass --resume to "
                         "continue it, or choose another --out");
      try {
        auto j = nlohmann::json::parse(io::read_file(r));
        s.status = Status::Ok;
        s.answer = answer_of(j);
        s.seconds = j.value("seconds", 0.0);
        s.from_previous_run = true;
        ++found;
      } catch (const std::exception&) {
        fs::remove(r);  // cannot happen with atomic renames, but never trust a bad result
      }
    }
    if (opt_.resume) spdlog::info("resume: {} of {} jobs already complete", found, states_.size());
  }

  // Estimates the memory of a pe job in this process (and caches its elimination order for the
  // child). Bad input fails the job here, without starting a child.
  void probe(JobState& s) {
    s.probed = true;
    if (!s.options.parsed) {  // what its single command would refuse, without starting it
      finish(s, Status::Failed,
             "options not accepted by kinfer " + s.job.kind + ": " + s.options.error);
      return;
    }
    if (s.job.kind != "pe") return;
    const auto t0 = clock_type::now();
    struct Timer {
      clock_type::time_point t0;
      double& total;
      ~Timer() { total += std::chrono::duration<double>(clock_type::now() - t0).count(); }
    } timer{t0, probe_seconds_};
    // A job with the same network, evidence and options as one probed before has the same plan.
    std::string key = s.job.network + "\x1f" + s.job.evidence;
    for (const auto& o : s.job.options) key += "\x1f" + o;
    if (auto it = probed_.find(key); it != probed_.end()) {
      s.memory = it->second.first;
      s.flops = it->second.second;
      return;
    }
    try {
      // The job's own network options (defaults when they do not parse: its child reports that).
      NetworkOptions no = s.options.parsed ? s.options.pe.net : NetworkOptions{};
      no.network = s.job.network;
      no.evidence = s.job.evidence;
      no.order_cache = (out_ / "order-cache").string();
      const io::NetworkWithEvidence r = io::read_network_and_evidence(no.network, no.evidence);
      PlanOptions po = no.plan_options();
      po.max_memory_bytes = 0;  // we want the estimate, whatever it is
      Plan plan = make_plan(r.net, r.ev, po);
      s.memory = plan.memory.peak_bytes;
      s.flops = plan.flops;
      probed_[key] = {s.memory, s.flops};
    } catch (const InputError& e) {
      finish(s, Status::Failed, e.what());
    } catch (const std::exception& e) {
      s.memory = 0;  // the child will report it properly
    }
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
  };

  // Forks and execs this executable with `args`, stdout to `out_fd`, stderr appended to `log`.
  pid_t spawn(std::vector<std::string> args, int out_fd, const fs::path& log, int threads) {
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed batch
      if (::getppid() != parent) ::_exit(127);
      int e = ::open(log.c_str(), O_WRONLY | O_APPEND);
      if (out_fd < 0 || e < 0) ::_exit(127);
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(e, STDERR_FILENO);
      ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
      ::setenv("KINFER_ORDER_CACHE", (out_ / "order-cache").c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(self_.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
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
    if (s.job.kind != "pe") return d == "auto" || d == "gpu";  // lod: only when asked for
    if (d == "cpu") return false;
    return d == "gpu" || s.flops >= opt_.gpu_min_flops;
  }

  void launch(std::size_t idx, int threads, bool gpu) {
    JobState& s = states_[idx];
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
      // A lod job's plans are not sized before it runs: it stays on the CPU (no GPU context of
      // its own beside the jobs given the GPU) unless its options name a --device.
      if (!s.options.device_given) args.insert(args.end(), {"--device", "cpu"});
    }
    args.push_back("--json");
    args.insert(args.end(), s.job.options.begin(), s.job.options.end());
    const fs::path part = out_ / "partial" / (s.job.id + ".json");
    const fs::path log = out_ / "logs" / (s.job.id + ".log");
    write_log_header(log, "job " + s.job.id, args);
    int o = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t pid = o < 0 ? -1 : spawn(args, o, log, threads);
    if (o >= 0) ::close(o);
    if (pid < 0) {
      finish(s, Status::Failed, "cannot start a process");
      return;
    }
    Unit u;
    u.pid = pid;
    u.jobs = {idx};
    u.gpu = gpu;
    u.memory = s.memory;
    u.start = clock_type::now();
    s.pid = pid;
    s.status = Status::Running;
    s.start = u.start;
    running_memory_ += u.memory;
    gpu_running_ += gpu;
    units_.push_back(std::move(u));
  }

  void launch_group(const std::vector<std::size_t>& jobs, int threads, bool gpu) {
    JobState& first = states_[jobs.front()];
    std::string ids;
    for (std::size_t i : jobs) ids += (ids.empty() ? "" : ",") + states_[i].job.id;
    std::vector<std::string> args = {
        self_,
        "batch",
        opt_.manifest,
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
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      for (std::size_t i : jobs) states_[i].solo = true;  // run them alone
      return;
    }
    pid_t pid = spawn(args, fds[1], log, threads);
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      for (std::size_t i : jobs) states_[i].solo = true;
      return;
    }
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    Unit u;
    u.pid = pid;
    u.jobs = jobs;
    u.group = true;
    u.gpu = gpu;
    u.memory = first.memory;
    u.fd = fds[0];
    u.start = clock_type::now();
    for (std::size_t i : jobs) {
      states_[i].pid = pid;
      states_[i].status = Status::Running;
      states_[i].start = u.start;
      states_[i].probed = true;
    }
    running_memory_ += u.memory;
    gpu_running_ += gpu;
    ++groups_started_;
    units_.push_back(std::move(u));
  }

  // Reads what a group worker has said so far; each complete line finishes one job.
  void read_worker(Unit& u) {
    char buf[4096];
    while (u.fd >= 0) {
      ssize_t n = ::read(u.fd, buf, sizeof buf);
      if (n > 0) {
        u.buf.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) {
        ::close(u.fd);
        u.fd = -1;
      }
      break;  // EAGAIN: nothing more for now
    }
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
    running_memory_ -= u.memory;
    gpu_running_ -= u.gpu;
    if (!u.group) {
      reap(states_[u.jobs.front()], wstatus);
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
      const fs::path result = out_ / "results" / (s.job.id + ".json");
      if (fs::exists(result)) {
        // The worker renamed the result into place and died before saying so: it is complete.
        try {
          auto j = nlohmann::json::parse(io::read_file(result));
          s.answer = answer_of(j);
          s.seconds = j.value("seconds", 0.0);
          finish(s, Status::Ok, "");
          continue;
        } catch (const std::exception&) {
          fs::remove(result);
        }
      }
      ++left;
      if (g_signal) {
        finish(s, Status::Interrupted, "interrupted");
      } else {
        // The worker died (crash, out of memory, killed): this job and the other unfinished jobs
        // of its group run again, each alone, so one bad job cannot take the others with it.
        s.status = Status::Pending;
        s.solo = true;
        next_ = std::min(next_, i);
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

  void reap(JobState& s, int wstatus) {
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
        write_file_atomically(out_ / "results" / (s.job.id + ".json"), j.dump(2) + "\n");
        fs::remove(part);
        std::ofstream(out_ / "journal.log", std::ios::app) << "completed " << s.job.id << '\n';
        s.answer = answer_of(j);
        if (j.contains("seconds") && j["seconds"].is_number())
          s.seconds = j["seconds"].get<double>();
        finish(s, Status::Ok, "");
      } catch (const std::exception& e) {
        finish(s, Status::Failed, std::string("the job printed no valid JSON: ") + e.what());
      }
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

  void loop() {
    for (std::size_t i = 0; i < states_.size(); ++i) index_[states_[i].job.id] = i;
    auto last_draw = clock_type::now() - std::chrono::seconds(10);
    bool signalled = false;
    while (true) {
      if (g_signal && !signalled) {
        signalled = true;
        for (auto& u : units_) ::kill(u.pid, SIGTERM);
      }
      // launch while there is room
      while (!g_signal && static_cast<int>(units_.size()) < slots_) {
        while (next_ < states_.size() && states_[next_].status != Status::Pending) ++next_;
        if (next_ >= states_.size()) break;
        // The first pending job in manifest order, except that a job that needs the GPU (its
        // plan is so large that the CPU would take far longer) waits while the GPU is busy,
        // letting the jobs after it run on the CPU meanwhile.
        std::size_t idx = states_.size();
        for (std::size_t i = next_; i < states_.size(); ++i) {
          JobState& c = states_[i];
          if (c.status != Status::Pending) continue;
          if (!c.probed) probe(c);
          if (c.status != Status::Pending) continue;
          if (gpu_running_ > 0 && gpu_running_ >= gpu_slots_ && wants_gpu(c) &&
              c.flops >= opt_.gpu_wait_flops)
            continue;
          idx = i;
          break;
        }
        if (idx >= states_.size()) break;  // only jobs waiting for the GPU are left
        JobState& s = states_[idx];
        if (!units_.empty() && running_memory_ + s.memory > budget_) break;  // wait for memory
        int pending = 0;
        for (const auto& x : states_) pending += x.status == Status::Pending;
        const int running = static_cast<int>(units_.size());
        // Groups small enough that every slot keeps busy to the end: about two groups per slot.
        std::size_t cap = std::max<std::size_t>(1, (pending + 2 * slots_ - 1) / (2 * slots_));
        // A shared plan saves a job's setup (process, reading, planning: milliseconds to a
        // second); jobs in one worker run one after another. So only jobs whose computation is
        // small are grouped: heavy jobs run alone, in parallel (grouping heavy jobs made a batch
        // slower than one process per job: bench/batch/RESULTS.md, docs/perf-notes.md).
        cap = std::min(
            cap, static_cast<std::size_t>(std::max(1.0, kGroupWorkFlops / std::max(1.0, s.flops))));
        std::vector<std::size_t> g = group_of(idx, cap);
        const int concurrent =
            std::max(1, std::min(slots_, running + pending - static_cast<int>(g.size()) + 1));
        // A job's own --threads sets its process's OpenMP threads (OMP_NUM_THREADS at start).
        int threads = std::max(1, cores_ / concurrent);
        if (s.options.threads() > 0) threads = s.options.threads();
        const bool gpu = wants_gpu(s) && gpu_running_ < gpu_slots_;
        if (g.size() > 1)
          launch_group(g, threads, gpu);
        else
          launch(idx, threads, gpu);
      }
      if (units_.empty()) break;
      for (auto& u : units_)
        if (u.group) read_worker(u);
      int wstatus = 0;
      pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
      if (pid > 0) {
        for (std::size_t k = 0; k < units_.size(); ++k)
          if (units_[k].pid == pid) {
            Unit u = std::move(units_[k]);
            units_.erase(units_.begin() + static_cast<long>(k));
            reap_unit(u, wstatus);
            break;
          }
        continue;
      }
      if (tty_ && clock_type::now() - last_draw > std::chrono::milliseconds(250)) {
        draw_progress(static_cast<int>(units_.size()));
        last_draw = clock_type::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (g_signal)
      for (auto& s : states_)
        if (s.status == Status::Pending) s.error = "not started: the batch was interrupted";
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
    std::fprintf(
        stderr, "\r\033[K[batch] %d/%zu done, %d running, %d failed, elapsed %.0f s, remaining ~%s",
        ok + failed, states_.size(), running, failed, elapsed, eta.c_str());
    std::fflush(stderr);
  }

  void write_summary() {
    std::ostringstream t;
    t << "id\tkind\tstatus\tanswer\tseconds\terror\n";
    for (const auto& s : states_) {
      std::string err = s.error;
      std::replace(err.begin(), err.end(), '\t', ' ');
      std::replace(err.begin(), err.end(), '\n', ' ');
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3f", s.seconds);
      t << s.job.id << '\t' << s.job.kind << '\t' << status_name(s.status) << '\t' << s.answer
        << '\t' << (s.status == Status::Ok || s.status == Status::Failed ? secs : "") << '\t' << err
        << '\n';
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
                        {"jobs", nlohmann::json::array()}};
    for (const auto& s : states_)
      j["jobs"].push_back({{"id", s.job.id},
                           {"kind", s.job.kind},
                           {"status", status_name(s.status)},
                           {"answer", s.answer},
                           {"seconds", s.seconds},
                           {"error", s.error}});
    std::cout << j.dump(2) << std::endl;
  }

  BatchOptions opt_;
  fs::path out_;
  std::vector<JobState> states_;
  std::string self_;
  int slots_ = 1, cores_ = 1, finished_ = 0;
  double budget_ = 0, running_memory_ = 0;
  std::vector<Unit> units_;
  std::map<std::string, std::size_t> index_;
  std::size_t next_ = 0;
  int gpu_running_ = 0, gpu_slots_ = 0, groups_started_ = 0, plans_shared_ = 0;
  std::map<std::string, std::pair<double, double>> probed_;  // inputs -> memory, flops
  double probe_seconds_ = 0;
  bool tty_ = false;
  clock_type::time_point t0_;
};

}  // namespace

int run_batch(const BatchOptions& opt) { return Batch(opt).run(); }

}  // namespace kinfer::app
