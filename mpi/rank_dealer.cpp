// RankDealer, and the plain-C++ parts of distributed.hpp (built with and without MPI).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "mpi/distributed.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "engine/errors.hpp"

namespace kinfer::mpi {

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

int ranks_on_this_host() {
  const std::string me = host();
  int n = 0;
  for (const std::string& h : allgather(me)) n += h == me;
  return std::max(1, n);
}

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

void RankDealer::combine(std::vector<double>& value, const std::vector<char>& computed,
                         std::size_t width) {
  busy_ += now() - start_;
  const std::size_t items = computed.size(), w = std::max<std::size_t>(1, width);
  if (size() > 1) {
    // One exchange: per item, whether this rank computed it, then its values.
    std::vector<double> mine(items * (w + 1));
    for (std::size_t i = 0; i < items; ++i) {
      mine[i * (w + 1)] = computed[i] ? 1 : 0;
      for (std::size_t k = 0; k < w; ++k) mine[i * (w + 1) + 1 + k] = value[i * w + k];
    }
    const auto all = allgather(mine);
    auto same = [](double a, double v) {
      return a == v || (std::isnan(a) && std::isnan(v)) ||
             std::abs(a - v) <= 1e-9 * std::max(1.0, std::abs(a));
    };
    for (std::size_t i = 0; i < items; ++i) {
      const std::size_t at = i * (w + 1);
      // The values of the rank the item was dealt to (pe: item = slice, numbered from base_),
      // else of the first rank that computed it (lod's entries every rank computes alike).
      int first = static_cast<int>((base_ + i) % static_cast<std::uint64_t>(size()));
      if (all[first][at] == 0) {
        first = -1;
        for (int r = 0; r < size() && first < 0; ++r)
          if (all[r][at] != 0) first = r;
      }
      if (first < 0) continue;  // nobody computed it: it stays as it is (callers fill all)
      for (std::size_t k = 0; k < w; ++k) value[i * w + k] = all[first][at + 1 + k];
      for (int r = 0; r < size(); ++r) {
        if (r == first || all[r][at] == 0) continue;
        // computed twice (verification): the ln values must agree as --check's do
        ++verified_;
        for (std::size_t k = 0; k < w; ++k) {
          const double a = value[i * w + k], v = all[r][at + 1 + k];
          if (!same(a, v)) {
            mismatches_.push_back({base_ + i, a, v, first, r});
            break;
          }
        }
      }
    }
  }
  base_ += items;
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

ConditionedPlan conditioned_plan(const Network& net, const Evidence& ev, const PlanOptions& opt) {
  if (size() < 2) return make_conditioned_plan(net, ev, opt);
  // Rank 0's choice as text: heuristic, order, conditioning variables, then the figures and
  // the reason the log and --json report (an error on rank 0 ends every rank: apps/main.cpp).
  ConditionedPlan cp;
  std::ostringstream msg;
  if (rank() == 0) {
    cp = make_conditioned_plan(net, ev, opt);
    msg.precision(17);
    msg << cp.plan.order.heuristic << '\n'
        << fmt::format("{}", fmt::join(cp.plan.order.order, " ")) << '\n'
        << fmt::format("{}", fmt::join(cp.cond.vars, " ")) << '\n'
        << cp.cond.unconditioned_flops << ' ' << cp.cond.unconditioned_peak_bytes << '\n'
        << cp.cond.choice;
  }
  const std::string text = broadcast(msg.str());
  if (rank() == 0) return cp;
  std::istringstream in(text);
  std::string heuristic, line, choice;
  std::vector<int> order, vars;
  std::getline(in, heuristic);
  std::getline(in, line);
  for (std::istringstream l(line); l.good();)
    if (int v; l >> v) order.push_back(v);
  std::getline(in, line);
  for (std::istringstream l(line); l.good();)
    if (int v; l >> v) vars.push_back(v);
  double flops = 0, peak = 0;
  std::getline(in, line);
  std::istringstream(line) >> flops >> peak;
  std::getline(in, choice, '\0');
  cp = rebuild_conditioned_plan(net, ev, opt, std::move(order), vars, "rank 0's " + heuristic);
  if (cp.conditioned()) {
    cp.cond.unconditioned_flops = flops;
    cp.cond.unconditioned_peak_bytes = peak;
    cp.cond.choice = choice;
  }
  spdlog::debug("plan: rank 0's order and conditioning ({} variables), not searched here",
                vars.size());
  return cp;
}

std::unique_ptr<RankDealer> slice_dealer(const ConditionedPlan& cp, double verify_fraction,
                                         std::uint64_t seed) {
  if (size() < 2) return nullptr;
  std::string fp = fmt::format("{} slices; conditioned on {}; order {}", cp.cond.slices,
                               fmt::join(cp.cond.vars, " "), fmt::join(cp.plan.order.order, " "));
  const std::vector<std::string> all = allgather(fp);
  for (int r = 1; r < size(); ++r)
    if (all[r] != all[0])
      throw ResourceError(fmt::format(
          "the ranks planned differently (rank 0: {}...; rank {}: {}...): give every rank the "
          "same --order-time/--seed and hardware, or run in one process",
          all[0].substr(0, 200), r, all[r].substr(0, 200)));
  spdlog::info("{} ranks: {}", size(),
               cp.conditioned()
                   ? std::to_string(cp.cond.slices) + " slices dealt cyclically"
                   : std::string("the plan is not conditioned (one slice): it runs on rank 0"));
  return std::make_unique<RankDealer>(verify_fraction, seed);
}

}  // namespace kinfer::mpi
