#include "engine/util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/errors.hpp"

namespace kinfer {

namespace {

[[noreturn]] void write_failed(const std::string& path, const std::string& what, int err) {
  throw InputError(path, 0, "cannot write (" + what + "): " + std::strerror(err));
}

// Writes all of `content` to `fd`, retrying short writes and interrupted calls.
bool write_all(int fd, const std::string& content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  // The pid and the thread keep concurrent writers (batch workers, parallel runs, the runners of
  // several GPUs in one process) off each other's temporary.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) %
                                         1000000);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) write_failed(path, "create " + tmp, errno);
  // fsync before the rename: the rename must never expose a file whose data is not on disk.
  if (!write_all(fd, content) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    write_failed(path, "write " + tmp, err);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    write_failed(path, "close " + tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    write_failed(path, "rename " + tmp, err);
  }
  // fsync the folder so that the rename itself survives a crash.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string human_bytes(double bytes) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  std::ostringstream s;
  s.precision(3);
  s << bytes << ' ' << unit[u];
  return s.str();
}

}  // namespace kinfer

namespace kinfer {

namespace {
// Set while the program is loaded (static initialisation, before main).
const auto g_process_start = std::chrono::steady_clock::now();

double status_mib(const std::string& status, const char* key) {
  const auto at = status.find(key);
  if (at == std::string::npos) return 0;
  return std::strtod(status.c_str() + at + std::strlen(key), nullptr) / 1024.0;  // kB
}
}  // namespace

void log_resources(const char* where) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  std::ifstream f("/proc/self/status");
  const std::string status((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  spdlog::debug("resources at {}: {:.3f} s, RSS {:.0f} MiB, peak RSS {:.0f} MiB", where,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - g_process_start)
                    .count(),
                status_mib(status, "VmRSS:"), status_mib(status, "VmHWM:"));
}

}  // namespace kinfer
