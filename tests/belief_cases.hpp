#pragma once
// Random buckets with targets for Context::belief_sums (gpu/belief_plan.hpp), and their sums by
// enumeration: the reference of the plan's emulation (test_gpu_policy) and of the kernel
// (test_gpu_kernel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/cpu_kernel.hpp"

namespace kinfer::test {

struct BeliefCase {
  BucketShape shape;  // n_marg 0
  std::vector<std::vector<int>> in_scopes, target_scopes;
  std::vector<std::vector<double>> data;  // log values, some -inf
  double ln_total = 0;                    // ln of the belief's total
  std::vector<std::vector<double>> want;  // ln of the sums onto each target
};

inline std::vector<int> random_subsequence(std::mt19937_64& rng, const std::vector<int>& vars,
                                           double keep) {
  std::bernoulli_distribution take(keep);
  std::vector<int> s;
  for (int v : vars)
    if (take(rng)) s.push_back(v);
  return s;
}

// A bucket of about 2^log2_states states (cardinalities 1-4), 1-`max_inputs` inputs and
// 1-`max_targets` targets over random subsets of its variables (the last variables among
// them often, as a child's output or an eliminated variable), with its sums by enumeration.
inline BeliefCase random_belief_case(std::mt19937_64& rng, double log2_states, int max_inputs,
                                     int max_targets) {
  BeliefCase c;
  std::uniform_int_distribution<int> card(1, 4);
  double states = 1;
  for (int v = 0; states < std::exp2(log2_states); ++v) {
    c.shape.vars.push_back(v);
    c.shape.card.push_back(card(rng));
    states *= c.shape.card.back();
  }
  const std::vector<int>& vars = c.shape.vars;
  const int n_in = std::uniform_int_distribution<int>(1, max_inputs)(rng);
  const int n_t = std::uniform_int_distribution<int>(1, max_targets)(rng);
  std::uniform_real_distribution<double> value(-6, 0), unit(0, 1);
  std::vector<std::int64_t> st(vars.size());
  for (int k = 0; k < n_in; ++k) {
    c.in_scopes.push_back(random_subsequence(rng, vars, k == 0 ? 0.8 : 0.4));
    std::vector<double> d(input_strides(c.shape, c.in_scopes.back(), st.data()));
    for (double& x : d)
      x = unit(rng) < 0.05 ? -std::numeric_limits<double>::infinity() : value(rng);
    c.data.push_back(std::move(d));
  }
  for (int t = 0; t < n_t; ++t) {
    const int kind = std::uniform_int_distribution<int>(0, 2)(rng);
    if (kind == 0)  // an eliminated variable: one of the last ones
      c.target_scopes.push_back(
          {vars[vars.size() - 1 - std::min<std::size_t>(t % 3, vars.size() - 1)]});
    else
      c.target_scopes.push_back(random_subsequence(rng, vars, kind == 1 ? 0.3 : 0.7));
  }
  // Enumeration: each configuration's belief, in linear terms against the largest.
  const std::int64_t n = static_cast<std::int64_t>(states);
  const int nv = static_cast<int>(vars.size());
  std::vector<std::vector<std::int64_t>> in_st(n_in, std::vector<std::int64_t>(nv)),
      t_st(n_t, std::vector<std::int64_t>(nv));
  for (int k = 0; k < n_in; ++k) input_strides(c.shape, c.in_scopes[k], in_st[k].data());
  std::vector<std::vector<double>> sums(n_t);
  for (int t = 0; t < n_t; ++t)
    sums[t].assign(input_strides(c.shape, c.target_scopes[t], t_st[t].data()), 0.0);
  std::vector<double> belief(n);
  std::vector<int> digit(nv, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    double x = 0;
    for (int k = 0; k < n_in; ++k) {
      std::int64_t at = 0;
      for (int v = 0; v < nv; ++v) at += digit[v] * in_st[k][v];
      x += c.data[k][at];
    }
    belief[i] = x;
    for (int v = nv - 1; v >= 0 && ++digit[v] == c.shape.card[v]; --v) digit[v] = 0;
  }
  const double top = *std::max_element(belief.begin(), belief.end());
  double total = 0;
  for (double x : belief) total += std::exp(x - top);
  c.ln_total = top + std::log(total);
  std::fill(digit.begin(), digit.end(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < n_t; ++t) {
      std::int64_t at = 0;
      for (int v = 0; v < nv; ++v) at += digit[v] * t_st[t][v];
      sums[t][at] += std::exp(belief[i] - c.ln_total);
    }
    for (int v = nv - 1; v >= 0 && ++digit[v] == c.shape.card[v]; --v) digit[v] = 0;
  }
  for (auto& s : sums)
    for (double& x : s)
      x = x > 0 ? std::log(x) + c.ln_total : -std::numeric_limits<double>::infinity();
  c.want = std::move(sums);
  return c;
}

// The largest difference between two ln tables (0 where both are -inf; infinite where one is).
inline double ln_difference(const std::vector<double>& a, const double* b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    d = std::max(d, std::abs(a[i] - b[i]));
  }
  return d;
}

}  // namespace kinfer::test
