#pragma once
// The independent reference of the engine tests: P(e) by enumerating every configuration of
// every variable, in the linear domain (for_each_configuration for other sums over them), and the comparison of ln values the tests use.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/model.hpp"

namespace kinfer::test {

// Calls visit(x, p) for every configuration x consistent with the evidence, p the product of
// the factors at x (linear domain).
template <class Visit>
void for_each_configuration(const Network& net, const Evidence& ev, Visit&& visit) {
  const int n = net.num_vars();
  std::vector<int> lo(n, 0), hi(n);
  for (int v = 0; v < n; ++v) hi[v] = net.card[v] - 1;
  for (auto [v, x] : ev.observed) lo[v] = hi[v] = x;
  std::vector<int> x(lo);
  for (;;) {
    long double p = 1;
    for (const Factor& f : net.factors) {
      std::int64_t idx = 0;
      for (int v : f.scope) idx = idx * net.card[v] + x[v];
      p *= f.table[idx];
    }
    visit(std::as_const(x), p);
    int v = n - 1;
    for (; v >= 0; --v) {
      if (++x[v] <= hi[v]) break;
      x[v] = lo[v];
    }
    if (v < 0) break;
  }
}

inline long double brute_force(const Network& net, const Evidence& ev) {
  long double z = 0;
  for_each_configuration(net, ev, [&](const std::vector<int>&, long double p) { z += p; });
  return z;
}

// |got - want| within `rel` of max(1, |want|); both -inf also agree.
inline bool close_ln(double got, double want, double rel) {
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= rel * std::max(1.0, std::abs(want));
}

}  // namespace kinfer::test
