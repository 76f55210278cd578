#include "engine/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "engine/errors.hpp"

namespace kinfer {

double ReducedModel::log_constant() const {
  double c = free_constant;
  for (const auto& [f, x] : constants) c += x;
  return c;
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Slices network factor `f` to the model's fixed values and kept domains, in the log domain.
LogFactor slice(const Factor& f, const ReducedModel& m, bool& all_zero) {
  const int k = static_cast<int>(f.scope.size());
  std::vector<std::int64_t> stride(k);
  std::int64_t s = 1;
  for (int j = k - 1; j >= 0; --j) {
    stride[j] = s;
    s *= m.orig_card[f.scope[j]];
  }
  LogFactor out;
  std::vector<std::vector<std::int64_t>> step;  // per kept variable: source offset of each value
  std::int64_t base = 0;
  for (int j = 0; j < k; ++j) {
    const int v = f.scope[j];
    if (m.fixed[v]) {
      base += m.value[v] * stride[j];
    } else {
      out.scope.push_back(v);
      std::vector<std::int64_t> off;
      for (int x : m.kept[v]) off.push_back(x * stride[j]);
      step.push_back(std::move(off));
    }
  }
  const std::int64_t size = table_size(out.scope, m.card);
  out.logv.resize(size);
  const int kk = static_cast<int>(out.scope.size());
  std::vector<int> digit(kk, 0);
  std::int64_t src = base;
  for (int j = 0; j < kk; ++j) src += step[j][0];
  bool any_nonzero = false;
  for (std::int64_t i = 0; i < size; ++i) {
    const double x = f.table[src];
    out.logv[i] = x > 0 ? std::log(x) : kNegInf;
    any_nonzero |= x > 0;
    for (int j = kk - 1; j >= 0; --j) {
      src -= step[j][digit[j]];
      if (++digit[j] < static_cast<int>(step[j].size())) {
        src += step[j][digit[j]];
        break;
      }
      digit[j] = 0;
      src += step[j][0];
    }
  }
  all_zero = !any_nonzero;
  return out;
}

std::string describe_zero_factor(const Network& net, const ReducedModel& m, std::size_t fi) {
  const Factor& f = net.factors[fi];
  std::ostringstream why;
  why << "factor " << fi;
  if (f.source_line > 0) why << " (" << net.source << " line " << f.source_line << ")";
  why << " is zero for every configuration";
  std::vector<int> obs;
  for (int v : f.scope)
    if (m.fixed[v] && m.orig_card[v] > 1) obs.push_back(v);
  if (!obs.empty()) {
    why << " given the evidence or the values still possible for variable"
        << (obs.size() > 1 ? "s" : "");
    for (int v : obs) why << ' ' << v << '=' << m.value[v];
  }
  return why.str();
}

// Removes from f's scope every variable the table does not vary with (exact equality, -inf
// included), slicing the table at that variable's first value. Returns how many it removed.
int drop_independent_dims(LogFactor& f, const std::vector<int>& card) {
  int dropped = 0;
  for (int j = 0; j < static_cast<int>(f.scope.size());) {
    const int k = static_cast<int>(f.scope.size());
    std::size_t stride = 1;
    for (int i = k - 1; i > j; --i) stride *= card[f.scope[i]];
    const std::size_t c = card[f.scope[j]], block = stride * c;
    bool constant = true;
    for (std::size_t hi = 0; hi < f.logv.size() && constant; hi += block)
      for (std::size_t lo = 0; lo < stride && constant; ++lo) {
        const double x = f.logv[hi + lo];
        for (std::size_t t = 1; t < c; ++t)
          if (f.logv[hi + t * stride + lo] != x) {
            constant = false;
            break;
          }
      }
    if (!constant) {
      ++j;
      continue;
    }
    std::vector<double> out;
    out.reserve(f.logv.size() / c);
    for (std::size_t hi = 0; hi < f.logv.size(); hi += block)
      out.insert(out.end(), f.logv.begin() + hi, f.logv.begin() + hi + stride);
    f.logv.swap(out);
    f.scope.erase(f.scope.begin() + j);
    ++dropped;
  }
  return dropped;
}

}  // namespace

ReducedModel reduce(const Network& net, const Evidence& ev, const ReduceOptions& opt) {
  const int n = net.num_vars();
  ReducedModel m;
  m.orig_card = net.card;
  m.card = net.card;
  m.fixed.assign(n, 0);
  m.value.assign(n, 0);
  m.kept.resize(n);
  for (auto [v, x] : ev.observed) {
    if (v < 0 || v >= n)
      throw InputError(ev.source, 0,
                       "evidence names variable " + std::to_string(v) +
                           ", expected an index below " + std::to_string(n));
    if (x < 0 || x >= net.card[v])
      throw InputError(ev.source, 0,
                       "evidence value " + std::to_string(x) + " for variable " +
                           std::to_string(v) + " is outside its domain 0.." +
                           std::to_string(net.card[v] - 1));
    m.fixed[v] = 1;
    m.value[v] = x;
    ++m.num_observed;
  }
  for (int v = 0; v < n; ++v) {
    if (net.card[v] == 1) m.fixed[v] = 1;
    if (m.fixed[v]) {
      m.card[v] = 1;
    } else {
      for (int x = 0; x < net.card[v]; ++x) m.kept[v].push_back(x);
    }
  }

  const std::size_t nf = net.factors.size();
  std::vector<LogFactor> all(nf);
  std::vector<char> dirty(nf, 1);
  std::vector<std::vector<int>> factors_of(n);
  for (std::size_t fi = 0; fi < nf; ++fi)
    for (int v : net.factors[fi].scope) factors_of[v].push_back(static_cast<int>(fi));

  for (int round = 0;; ++round) {
    // Pass 1: (re)slice the factors whose variables changed.
    for (std::size_t fi = 0; fi < nf; ++fi) {
      if (!dirty[fi]) continue;
      dirty[fi] = 0;
      bool all_zero = false;
      all[fi] = slice(net.factors[fi], m, all_zero);
      all[fi].origin = static_cast<int>(fi);
      if (all_zero && m.impossible.empty()) m.impossible = describe_zero_factor(net, m, fi);
    }
    if (!opt.value_elimination || !m.impossible.empty()) break;
    // Pass 2: a value survives only if every factor mentioning its variable has a non-zero
    // entry with it.
    std::vector<std::vector<char>> ok(n);
    for (int v = 0; v < n; ++v)
      if (!m.fixed[v]) ok[v].assign(m.card[v], 1);
    std::vector<std::vector<char>> sup;
    for (const LogFactor& f : all) {
      const int k = static_cast<int>(f.scope.size());
      if (k == 0) continue;
      sup.assign(k, {});
      for (int j = 0; j < k; ++j) sup[j].assign(m.card[f.scope[j]], 0);
      std::vector<int> digit(k, 0);
      for (std::size_t i = 0; i < f.logv.size(); ++i) {
        if (f.logv[i] != kNegInf)
          for (int j = 0; j < k; ++j) sup[j][digit[j]] = 1;
        for (int j = k - 1; j >= 0; --j) {
          if (++digit[j] < m.card[f.scope[j]]) break;
          digit[j] = 0;
        }
      }
      for (int j = 0; j < k; ++j)
        for (int x = 0; x < m.card[f.scope[j]]; ++x) ok[f.scope[j]][x] &= sup[j][x];
    }
    // A variable with no value left means P(e) = 0. Say so before shrinking any domain: the
    // tables sliced in pass 1 must keep matching the domains, so the plan computes 0 on its own.
    for (int v = 0; v < n && m.impossible.empty(); ++v)
      if (!m.fixed[v] && std::find(ok[v].begin(), ok[v].end(), 1) == ok[v].end())
        m.impossible = "variable " + std::to_string(v) + " has no value with non-zero probability";
    if (!m.impossible.empty()) break;
    // Pass 3: shrink the domains; a variable left with one value becomes fixed.
    bool changed = false;
    for (int v = 0; v < n; ++v) {
      if (m.fixed[v]) continue;
      std::vector<int> keep;
      for (int x = 0; x < m.card[v]; ++x)
        if (ok[v][x]) keep.push_back(m.kept[v][x]);
      if (keep.size() == m.kept[v].size()) continue;
      changed = true;
      m.values_removed += static_cast<int>(m.kept[v].size() - keep.size());
      for (int fi : factors_of[v]) dirty[fi] = 1;
      m.kept[v] = keep;
      m.card[v] = static_cast<int>(keep.size());
      if (keep.size() == 1) {
        m.fixed[v] = 1;
        m.value[v] = keep[0];
        m.card[v] = 1;
        m.kept[v].clear();
      }
    }
    if (!changed || !m.impossible.empty()) break;
  }

  if (opt.drop_independent && m.impossible.empty()) {
    std::vector<char> keep_shape(nf, 0);
    for (int f : opt.fixed_shape)
      if (f >= 0 && static_cast<std::size_t>(f) < nf) keep_shape[f] = 1;
    for (std::size_t fi = 0; fi < nf; ++fi)
      if (!keep_shape[fi]) m.dims_dropped += drop_independent_dims(all[fi], m.card);
  }

  std::vector<char> used(n, 0);
  for (std::size_t fi = 0; fi < nf; ++fi) {
    for (int v : all[fi].scope) used[v] = 1;
    if (all[fi].scope.empty())
      m.constants.push_back(
          {static_cast<int>(fi), all[fi].logv.empty() ? kNegInf : all[fi].logv[0]});
    else
      m.factors.push_back(std::move(all[fi]));
  }
  // A free variable that no factor mentions multiplies the sum by its number of (kept) values.
  for (int v = 0; v < n; ++v)
    if (!used[v] && !m.fixed[v]) m.free_constant += std::log(static_cast<double>(m.card[v]));
  return m;
}

}  // namespace kinfer
