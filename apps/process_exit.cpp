#include "apps/process_exit.hpp"

#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "apps/environment.hpp"
#include "mpi/distributed.hpp"
#include "scheduler/devices.hpp"

namespace kinfer::app {

namespace {

pid_t g_parent = 0;

// The helper: raw system calls only (it runs on a small stack of its own, in the memory of a
// process that is ending). Polls until it is re-parented, i.e. the kinfer process has ended,
// then exits, releasing the descriptors and the memory it shares.
int helper(void*) {
  const struct timespec ms { 0, 1'000'000 };
  while (static_cast<pid_t>(syscall(SYS_getppid)) == g_parent) syscall(SYS_nanosleep, &ms, nullptr);
  syscall(SYS_exit_group, 0);
  return 0;
}

bool is_gpu_driver(int fd) {
  char link[64], target[256];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = 0;
  return std::strncmp(target, "/dev/nvidia", 11) == 0;
}

// Whether process 1 is an init that reaps the orphans it adopts (the helper becomes one). Where
// it does not (a container's own command as process 1, or a sandbox's agent), every helper would
// stay a zombie until the machine or container ends.
bool init_reaps_orphans() {
  std::FILE* f = std::fopen("/proc/1/comm", "r");
  if (!f) return false;
  char name[64] = {0};
  const bool read = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  if (!read) return false;
  name[std::strcspn(name, "\n")] = 0;
  for (const char* known : {"systemd", "init", "tini", "tini-static", "docker-init", "dumb-init",
                            "catatonit", "s6-svscan", "runit", "openrc-init"})
    if (std::strcmp(name, known) == 0) return true;
  return false;
}

}  // namespace

void leave_gpu_teardown_to_helper(int status) {
  const std::string& mode = environment().exit;
  if (mode == "wait" || mpi::size() > 1) return;
  const bool forced = mode == "fast" || mode == "helper";  // "helper": the tests, without a GPU
  if (!sched::gpu_driver_started() && mode != "helper") return;
  if (!forced && !init_reaps_orphans()) return;
  if (sched::under_gpu_tool()) return;
  // The descriptors to close: all but the driver's, listed before the helper exists.
  std::vector<int> close_fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    const int self = dirfd(d);
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int fd = std::atoi(e->d_name);
      if (fd != self && !is_gpu_driver(fd)) close_fds.push_back(fd);
    }
    closedir(d);
  } else {
    return;  // no /proc: cannot tell the driver's descriptors from the others
  }
  constexpr std::size_t kStack = 64 * 1024;
  void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED) return;
  spdlog::debug("the GPU driver's release of the device is left to a helper process");
  spdlog::default_logger()->flush();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  g_parent = getpid();
  // The helper starts with every signal blocked (it inherits this thread's mask): no handler of
  // kinfer's may run on its small stack; this thread ends right after anyway.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  const pid_t pid =
      clone(helper, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_FILES | SIGCHLD, nullptr);
  if (pid < 0) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    munmap(stack, kStack);
    return;
  }
  for (int fd : close_fds) close(fd);
  std::_Exit(status);
}

namespace {
// Async-signal-safe: write(2) and backtrace_symbols_fd only (backtrace() is primed in
// report_crashes, so that its first call, which may load libgcc, is not made here).
void on_crash(int sig) {
  char msg[64] = "kinfer: internal error (signal ";
  std::size_t n = std::strlen(msg);
  if (sig >= 10) msg[n++] = static_cast<char>('0' + sig / 10);
  msg[n++] = static_cast<char>('0' + sig % 10);
  const char tail[] = "); stack:\n";
  std::memcpy(msg + n, tail, sizeof tail);
  if (write(STDERR_FILENO, msg, std::strlen(msg)) < 0) _exit(128 + sig);
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  signal(sig, SIG_DFL);  // the default action: the process dies of this signal, as it would have
  raise(sig);
}
}  // namespace

void report_crashes() {
  void* prime[1];
  backtrace(prime, 1);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction sa {};
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace kinfer::app
