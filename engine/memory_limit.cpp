#include "engine/memory_limit.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kinfer {

double machine_memory_bytes() {
  double ram =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    std::string s;
    if (f >> s && !s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      double lim = std::stod(s);
      if (lim > 0) ram = std::min(ram, lim);
    }
  }
  return ram;
}

double available_memory_bytes() {
  double avail = 0;
  {
    std::ifstream f("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (f >> key >> kb) {
      std::getline(f, unit);
      if (key == "MemAvailable:") {
        avail = kb * 1024;
        break;
      }
    }
  }
  auto read_number = [](const char* path, double& v) {
    std::ifstream f(path);
    std::string s;
    if (!(f >> s) || s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    v = std::stod(s);
    return true;
  };
  for (auto [limit_path, usage_path] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    double limit = 0, used = 0;
    if (read_number(limit_path, limit) && read_number(usage_path, used) && limit > 0 &&
        limit < machine_memory_bytes() * 2) {
      const double left = std::max(0.0, limit - used);
      avail = avail > 0 ? std::min(avail, left) : left;
      break;
    }
  }
  return avail;
}

double default_max_memory_bytes() { return 0.85 * machine_memory_bytes(); }

double parse_size(const std::string& text) {
  std::size_t pos = 0;
  double v;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size (expected e.g. 512M, 16G)");
  }
  std::string unit = text.substr(pos);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  double mult = 1;
  if (unit.empty())
    mult = 1;
  else if (unit == "K")
    mult = 1024.0;
  else if (unit == "M")
    mult = 1024.0 * 1024;
  else if (unit == "G")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    throw std::invalid_argument("'" + text + "' has an unknown unit (expected K, M, G or T)");
  if (!(v > 0)) throw std::invalid_argument("size '" + text + "' must be positive");
  return v * mult;
}

void bound_allocator() {
  // Fixed thresholds switch off glibc's dynamic adjustment.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

}  // namespace kinfer
