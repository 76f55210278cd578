#pragma once
// Random networks for the engine tests: small enough to enumerate, with exact zeros and random
// evidence (tests/brute_force.hpp is their independent reference).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/model.hpp"

namespace kinfer::test {

struct Case {
  Network net;
  Evidence ev;
};

// A random network: cardinalities 1-4 (the joint kept small enough to enumerate), random scopes
// of up to 4 variables, tables drawn over a wide range with exact zeros, random evidence.
inline Case random_case(std::mt19937_64& rng, int max_vars, double max_joint) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto real = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  Case c;
  Network& net = c.net;
  net.source = "random";
  net.kind = "MARKOV";
  const int nv = uni(1, max_vars);
  double joint;
  do {
    net.card.assign(nv, 0);
    joint = 1;
    for (int& k : net.card) joint *= (k = uni(1, 4));
  } while (joint > max_joint);
  const double p_zero = std::vector<double>{0.0, 0.05, 0.3}[uni(0, 2)];
  const double spread = std::vector<double>{1.0, 5.0, 40.0}[uni(0, 2)];  // ln-range of entries
  const int nf = uni(0, nv + 4);
  for (int f = 0; f < nf; ++f) {
    Factor fac;
    std::vector<int> vars(nv);
    for (int v = 0; v < nv; ++v) vars[v] = v;
    std::shuffle(vars.begin(), vars.end(), rng);
    fac.scope.assign(vars.begin(), vars.begin() + uni(0, std::min(4, nv)));
    fac.table.resize(table_size(fac.scope, net.card));
    for (double& x : fac.table) x = real(0, 1) < p_zero ? 0.0 : std::exp(real(-spread, spread));
    net.factors.push_back(std::move(fac));
  }
  c.ev.source = "random evidence";
  const double p_obs = std::vector<double>{0.0, 0.2, 0.5}[uni(0, 2)];
  for (int v = 0; v < nv; ++v)
    if (real(0, 1) < p_obs) c.ev.observed.push_back({v, uni(0, net.card[v] - 1)});
  return c;
}

}  // namespace kinfer::test
