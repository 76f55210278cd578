// RankDealer, and the plain-C++ parts of distributed.hpp (built with and without MPI).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "dist/distributed.hpp"

namespace kinfer::dist {

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// splitmix64: a seeded, platform-independent draw per item (every rank draws alike).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

std::string host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string where() { return host() + ":" + std::to_string(rank()); }

bool is_launcher_variable(const std::string& name) {
  for (const char* p : {"OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

RankDealer::RankDealer(double verify_fraction, std::uint64_t seed)
    : fraction_(verify_fraction), seed_(seed), start_(now()) {}

bool RankDealer::verifies(std::uint64_t item) const {
  if (fraction_ <= 0 || size() < 2) return false;
  const double u = static_cast<double>(mix(seed_ ^ mix(item)) >> 11) * 0x1.0p-53;
  return u < fraction_;
}

bool RankDealer::mine(std::uint64_t item) {
  const auto n = static_cast<std::uint64_t>(size()), r = static_cast<std::uint64_t>(rank());
  const bool m = item % n == r || (verifies(item) && (item + 1) % n == r);
  items_ += m;
  return m;
}

void RankDealer::combine(std::vector<double>& value, const std::vector<char>& computed) {
  busy_ += now() - start_;
  if (size() > 1) {
    // One exchange: per item, whether this rank computed it and the value.
    std::vector<double> mine(2 * value.size());
    for (std::size_t i = 0; i < value.size(); ++i)
      mine[2 * i] = computed[i] ? 1 : 0, mine[2 * i + 1] = value[i];
    const auto all = allgather(mine);
    for (std::size_t i = 0; i < value.size(); ++i) {
      int first = -1;
      for (int r = 0; r < size(); ++r) {
        if (all[r][2 * i] == 0) continue;
        const double v = all[r][2 * i + 1];
        if (first < 0) {
          first = r;
          value[i] = v;
          continue;
        }
        // computed twice (verification): the ln values must agree as --check's do
        ++verified_;
        const double a = value[i];
        const bool same = a == v || std::abs(a - v) <= 1e-9 * std::max(1.0, std::abs(a));
        if (!same) mismatches_.push_back({base_ + i, a, v, first, r});
      }
    }
    base_ += value.size();
  }
  start_ = now();
}

nlohmann::json RankDealer::per_rank(const char* items_name) const {
  const auto all = allgather(std::vector<double>{static_cast<double>(items_), busy_});
  const auto hosts = allgather(host());
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < size(); ++r)
    out.push_back({{"rank", r},
                   {"host", hosts[r]},
                   {items_name, static_cast<std::int64_t>(all[r][0])},
                   {"seconds", all[r][1]}});
  return out;
}

}  // namespace kinfer::dist
