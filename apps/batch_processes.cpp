// The batch's child processes (spawn_child, drain), its ranks under mpirun (gather_ranks, and
// run_batch_rank: the executor of a rank other than 0) and what a finished job left (its answer,
// its log's last error).
#include "apps/batch_supervisor.hpp"

namespace kinfer::app::supervisor {

std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal = sig; }

const char* status_name(Status s) {
  static constexpr const char* kNames[] = {"not-run", "running", "ok", "failed", "interrupted"};
  return kNames[static_cast<int>(s)];
}

pid_t spawn_child(const std::string& exe, std::vector<std::string> args,
                  const std::string& out_path, int* pipe_fd, const std::string& log, int threads,
                  const std::string& order_cache, int gpu_device, int* stdin_fd) {
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
    if (mpi::is_launcher_variable(name) || name == "OMP_NUM_THREADS" ||
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

void wait_for_output(const std::vector<int>& fds, int ms) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  ::poll(p.data(), p.size(), ms);
}

std::vector<RankSlot> gather_ranks(const BatchOptions& opt) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const sched::GpuList info = opt.gpu_jobs != 0 ? sched::list_gpus() : sched::GpuList{};
  const int gpu_slots = !info.available ? 0 : opt.gpu_jobs < 0 ? info.count : opt.gpu_jobs;
  nlohmann::json me = {{"host", mpi::host()},
                       {"cores", cores},
                       {"budget", opt.max_memory > 0 ? opt.max_memory : default_max_memory_bytes()},
                       {"gpu_slots", gpu_slots},
                       {"gpus", info.available ? info.count : 0},
                       {"gpu", opt.gpu_jobs == 0 ? "not asked for"
                               : info.available  ? info.name
                                                 : "none (" + info.why_not + ")"}};
  const std::vector<std::string> all = mpi::allgather(me.dump());
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

// A rank other than 0 under `mpirun kinfer batch`: starts what rank 0 sends (kSpawn) as child
// processes, exactly as rank 0 starts its own, forwards a group worker's lines (kLine) and each
// child's end (kExit), passes an interruption on to its children (kTerm), and returns at kStop.
// Results, logs and the journal are written by the children into the shared output folder.
int run_batch_rank(const BatchOptions& opt) {
  gather_ranks(opt);  // the collective rank 0 starts with
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a device worker that died: its write fails, it is reaped
  struct Child {
    int uid = 0, fd = -1;
    int in_fd = -1;  // a device worker's input (kFeed, kClose)
    std::string buf;
  };
  std::map<pid_t, Child> children;
  auto by_uid = [&](int uid) -> Child* {
    for (auto& [pid, c] : children)
      if (c.uid == uid) return &c;
    return nullptr;
  };
  auto forward = [](Child& c) {
    drain(c.fd, c.buf);
    const auto nl = c.buf.rfind('\n');
    if (nl == std::string::npos) return;
    mpi::send(0, kLine, nlohmann::json{{"uid", c.uid}, {"text", c.buf.substr(0, nl + 1)}}.dump());
    c.buf.erase(0, nl + 1);
  };
  bool stop = false, termed = false;
  while (!stop || !children.empty()) {
    if (g_signal && !termed) {
      termed = true;
      for (auto& [pid, c] : children) ::kill(pid, SIGTERM);
    }
    bool busy = false;
    for (int from, tag; !stop && mpi::poll(from, tag);) {
      busy = true;
      const auto m = nlohmann::json::parse(mpi::receive(from, tag));
      if (tag == kStop) {
        stop = true;
        for (auto& [pid, c] : children)  // device workers end at the end of their input
          if (c.in_fd >= 0) ::close(c.in_fd), c.in_fd = -1;
      } else if (tag == kTerm) {
        for (auto& [pid, c] : children) ::kill(pid, SIGTERM);
      } else if (tag == kFeed) {  // a worker gone already: its kExit tells rank 0
        if (Child* c = by_uid(m["uid"]); c && c->in_fd >= 0) {
          const std::string line = m["line"];
          if (::write(c->in_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
            ::close(c->in_fd);
            c->in_fd = -1;
          }
        }
      } else if (tag == kClose) {
        if (Child* c = by_uid(m["uid"]); c && c->in_fd >= 0) {
          ::close(c->in_fd);
          c->in_fd = -1;
        }
      } else if (tag == kSpawn) {
        Child c;
        c.uid = m["uid"];
        auto args = m["args"].get<std::vector<std::string>>();
        args[0] = self;
        const pid_t pid =
            spawn_child(self, args, m["out"], &c.fd, m["log"], m["threads"], m["order_cache"],
                        m["gpu_device"], m.value("serve", false) ? &c.in_fd : nullptr);
        if (pid < 0)  // as a child that could not exec
          mpi::send(0, kExit, nlohmann::json{{"uid", c.uid}, {"status", 127 << 8}}.dump());
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
          mpi::send(0, kLine, nlohmann::json{{"uid", c.uid}, {"text", c.buf + "\n"}}.dump());
        mpi::send(0, kExit, nlohmann::json{{"uid", c.uid}, {"status", wstatus}}.dump());
        if (c.in_fd >= 0) ::close(c.in_fd);
        children.erase(it);
      }
      continue;
    }
    if (!busy) {
      std::vector<int> fds;
      for (const auto& [pid, c] : children)
        if (c.fd >= 0) fds.push_back(c.fd);
      wait_for_output(fds, 2);
    }
  }
  return 0;
}

}  // namespace kinfer::app::supervisor
