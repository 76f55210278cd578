#include "engine/reduce.hpp"

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

LogFactor reduce_factor(const Factor& f, const ReducedModel& m, bool& all_zero) {
  const auto& card = m.card;
  const int k = static_cast<int>(f.scope.size());
  // Row-major strides of the source table.
  std::vector<std::int64_t> stride(k);
  std::int64_t s = 1;
  for (int j = k - 1; j >= 0; --j) {
    stride[j] = s;
    s *= card[f.scope[j]];
  }
  LogFactor out;
  std::vector<std::int64_t> out_stride;  // source stride of each kept variable
  std::int64_t base = 0;
  for (int j = 0; j < k; ++j) {
    const int v = f.scope[j];
    if (m.fixed[v]) {
      base += m.value[v] * stride[j];
    } else {
      out.scope.push_back(v);
      out_stride.push_back(stride[j]);
    }
  }
  const std::int64_t size = table_size(out.scope, card);
  out.logv.resize(size);
  // Odometer over the kept variables, last fastest.
  std::vector<int> digit(out.scope.size(), 0);
  std::int64_t src = base;
  bool any_nonzero = false;
  for (std::int64_t i = 0; i < size; ++i) {
    const double x = f.table[src];
    out.logv[i] = x > 0 ? std::log(x) : -std::numeric_limits<double>::infinity();
    any_nonzero |= x > 0;
    for (int j = static_cast<int>(digit.size()) - 1; j >= 0; --j) {
      src += out_stride[j];
      if (++digit[j] < card[out.scope[j]]) break;
      src -= out_stride[j] * digit[j];
      digit[j] = 0;
    }
  }
  all_zero = !any_nonzero;
  return out;
}

ReducedModel reduce(const Network& net, const Evidence& ev) {
  const int n = net.num_vars();
  ReducedModel m;
  m.card = net.card;
  m.fixed.assign(n, 0);
  std::vector<int> value(n, 0);
  for (auto [v, x] : ev.observed) {
    if (v < 0 || v >= n)
      throw InputError(ev.source, 0, "evidence names variable " + std::to_string(v) +
                                         ", expected an index below " + std::to_string(n));
    if (x < 0 || x >= net.card[v])
      throw InputError(ev.source, 0, "evidence value " + std::to_string(x) + " for variable " +
                                         std::to_string(v) + " is outside its domain 0.." +
                                         std::to_string(net.card[v] - 1));
    m.fixed[v] = 1;
    value[v] = x;
    ++m.num_observed;
  }
  for (int v = 0; v < n; ++v)
    if (net.card[v] == 1) m.fixed[v] = 1;

  m.value = value;
  std::vector<char> used(n, 0);
  for (std::size_t fi = 0; fi < net.factors.size(); ++fi) {
    const Factor& f = net.factors[fi];
    for (int v : f.scope) used[v] = 1;
    bool all_zero = false;
    LogFactor out = reduce_factor(f, m, all_zero);
    out.origin = static_cast<int>(fi);
    if (all_zero && m.impossible.empty()) {
      std::ostringstream why;
      why << "factor " << fi;
      if (f.source_line > 0) why << " (" << net.source << " line " << f.source_line << ")";
      why << " is zero for every configuration";
      std::vector<int> obs;
      for (int v : f.scope)
        if (m.fixed[v] && net.card[v] > 1) obs.push_back(v);
      if (!obs.empty()) {
        why << " given the evidence on variable" << (obs.size() > 1 ? "s" : "");
        for (int v : obs) why << ' ' << v << '=' << value[v];
      }
      m.impossible = why.str();
    }
    if (out.scope.empty())
      m.constants.push_back({static_cast<int>(fi), out.logv[0]});
    else
      m.factors.push_back(std::move(out));
  }
  // A free variable that no factor mentions multiplies the sum by its cardinality.
  for (int v = 0; v < n; ++v)
    if (!used[v] && !m.fixed[v]) m.free_constant += std::log(static_cast<double>(net.card[v]));
  return m;
}

}  // namespace kinfer
