#include "apps/batch_runner.hpp"

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

#include <spdlog/spdlog.h>

#include "apps/network_options.hpp"
#include "engine/errors.hpp"
#include "engine/solver.hpp"
#include "engine/system.hpp"
#include "io/uai.hpp"

namespace kinfer::app {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

enum class Status { Pending, Running, Ok, Failed, Interrupted };
const char* status_name(Status s) {
  switch (s) {
    case Status::Pending: return "not-run";
    case Status::Running: return "running";
    case Status::Ok: return "ok";
    case Status::Failed: return "failed";
    case Status::Interrupted: return "interrupted";
  }
  return "?";
}

struct JobState {
  io::Job job;
  Status status = Status::Pending;
  std::string answer, error;
  double seconds = 0;
  double memory = 0;  // estimated peak bytes (pe jobs)
  bool probed = false;
  pid_t pid = -1;
  clock_type::time_point start;
  bool from_previous_run = false;
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
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

void write_file_atomically(const fs::path& path, const std::string& content) {
  const fs::path tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string());
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + tmp.string());
    }
    done += static_cast<std::size_t>(n);
  }
  ::fsync(fd);  // the rename must never expose a file whose data is not on disk
  ::close(fd);
  fs::rename(tmp, path);
}

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
      s.job = std::move(j);
      states_.push_back(std::move(s));
    }
    adopt_previous_results();
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
    spdlog::info("batch: {} ok, {} failed, {} not finished; results in {}", ok, failed,
                 interrupted, out_.string());
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
        auto j = nlohmann::json::parse(read_text(r));
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
    if (s.job.kind != "pe") return;
    try {
      NetworkOptions no;
      no.network = s.job.network;
      no.evidence = s.job.evidence;
      for (std::size_t i = 0; i + 1 < s.job.options.size(); ++i)
        if (s.job.options[i] == "--order") no.order = s.job.options[i + 1];
      no.order_cache = (out_ / "order-cache").string();
      Network net = io::read_uai(no.network);
      Evidence ev;
      std::string evpath = no.evidence.empty() ? io::default_evidence_path(no.network) : no.evidence;
      if (!evpath.empty()) ev = io::read_evidence(evpath, net);
      PlanOptions po = no.plan_options();
      po.max_memory_bytes = 0;  // we want the estimate, whatever it is
      Plan plan = make_plan(net, ev, po);
      s.memory = plan.memory.peak_bytes;
    } catch (const InputError& e) {
      finish(s, Status::Failed, e.what());
    } catch (const std::exception& e) {
      s.memory = 0;  // the child will report it properly
    }
  }

  void launch(JobState& s, int threads) {
    std::vector<std::string> args = {self_, s.job.kind};
    if (s.job.kind == "pe") {
      args.push_back(s.job.network);
      if (!s.job.evidence.empty()) args.insert(args.end(), {"-e", s.job.evidence});
      args.insert(args.end(), {"--order-cache", (out_ / "order-cache").string()});
      args.insert(args.end(), {"--max-memory", std::to_string(static_cast<long long>(std::max(s.memory, budget_)))});
    } else {
      args.insert(args.end(), {"--ped", s.job.ped, "--dat", s.job.dat});
    }
    args.push_back("--json");
    args.insert(args.end(), s.job.options.begin(), s.job.options.end());
    const fs::path part = out_ / "partial" / (s.job.id + ".json");
    const fs::path log = out_ / "logs" / (s.job.id + ".log");
    {
      std::ofstream l(log, std::ios::trunc);
      l << "# kinfer batch job " << s.job.id << ":";
      for (const auto& a : args) l << ' ' << a;
      l << '\n';
    }
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
      finish(s, Status::Failed, "cannot start a process");
      return;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed batch
      if (::getppid() != parent) ::_exit(127);
      int o = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = ::open(log.c_str(), O_WRONLY | O_APPEND);
      if (o < 0 || e < 0) ::_exit(127);
      ::dup2(o, STDOUT_FILENO);
      ::dup2(e, STDERR_FILENO);
      ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
      ::setenv("KINFER_ORDER_CACHE", (out_ / "order-cache").c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(self_.c_str(), argv.data());
      ::_exit(127);
    }
    s.pid = pid;
    s.status = Status::Running;
    s.start = clock_type::now();
    running_memory_ += s.memory;
  }

  void reap(JobState& s, int wstatus) {
    running_memory_ -= s.memory;
    s.seconds = std::chrono::duration<double>(clock_type::now() - s.start).count();
    const fs::path part = out_ / "partial" / (s.job.id + ".json");
    const fs::path log = out_ / "logs" / (s.job.id + ".log");
    if (g_signal && !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
      finish(s, Status::Interrupted, "interrupted");
      return;
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
      try {
        const std::string text = read_text(part);
        auto j = nlohmann::json::parse(text);
        write_file_atomically(out_ / "results" / (s.job.id + ".json"), j.dump(2) + "\n");
        fs::remove(part);
        std::ofstream(out_ / "journal.log", std::ios::app) << "completed " << s.job.id << '\n';
        s.answer = answer_of(j);
        if (j.contains("seconds") && j["seconds"].is_number()) s.seconds = j["seconds"].get<double>();
        finish(s, Status::Ok, "");
      } catch (const std::exception& e) {
        finish(s, Status::Failed, std::string("the job printed no valid JSON: ") + e.what());
      }
      return;
    }
    std::string why = last_error(log);
    if (WIFSIGNALED(wstatus))
      why = "killed by signal " + std::to_string(WTERMSIG(wstatus)) + (why.empty() ? "" : ": " + why);
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
                     s.answer.empty() ? "" : ": ", st == Status::Ok ? s.answer : err, ++finished_,
                     states_.size());
      else
        ++finished_;
      write_summary();
    }
  }

  void loop() {
    std::size_t next = 0;
    auto running = [&] {
      int n = 0;
      for (const auto& s : states_) n += s.status == Status::Running;
      return n;
    };
    auto last_draw = clock_type::now() - std::chrono::seconds(10);
    while (true) {
      if (g_signal) {
        for (auto& s : states_)
          if (s.status == Status::Running) ::kill(s.pid, SIGTERM);
      }
      // launch while there is room
      while (!g_signal && running() < slots_) {
        while (next < states_.size() && states_[next].status != Status::Pending) ++next;
        if (next >= states_.size()) break;
        JobState& s = states_[next];
        if (!s.probed) probe(s);
        if (s.status != Status::Pending) continue;
        if (running() > 0 && running_memory_ + s.memory > budget_) break;  // wait for memory
        int pending = 0;
        for (const auto& x : states_) pending += x.status == Status::Pending;
        const int concurrent = std::max(1, std::min(slots_, running() + pending));
        launch(s, std::max(1, cores_ / concurrent));
      }
      if (running() == 0) break;
      int wstatus = 0;
      pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
      if (pid > 0) {
        for (auto& s : states_)
          if (s.pid == pid) reap(s, wstatus);
        continue;
      }
      if (tty_ && clock_type::now() - last_draw > std::chrono::milliseconds(250)) {
        draw_progress(running());
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
    std::fprintf(stderr, "\r\033[K[batch] %d/%zu done, %d running, %d failed, elapsed %.0f s, remaining ~%s",
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
    nlohmann::json j = {{"out", out_.string()}, {"ok", ok}, {"failed", failed}, {"jobs", nlohmann::json::array()}};
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
  bool tty_ = false;
  clock_type::time_point t0_;
};

}  // namespace

int run_batch(const BatchOptions& opt) { return Batch(opt).run(); }

}  // namespace kinfer::app
