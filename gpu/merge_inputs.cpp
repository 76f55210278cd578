#include "gpu/merge_inputs.hpp"

#include <algorithm>

#include "gpu/policy.hpp"

namespace kinfer::gpu {

namespace {

bool contains(const std::vector<int>& scope, int v) {
  return std::find(scope.begin(), scope.end(), v) != scope.end();
}

// The union of two scopes in the bucket's variable order, and its entries.
std::vector<int> union_scope(const BucketShape& shape, const std::vector<int>& a,
                             const std::vector<int>& b, double& entries) {
  std::vector<int> u;
  entries = 1;
  for (std::size_t i = 0; i < shape.vars.size(); ++i) {
    const int v = shape.vars[i];
    if (contains(a, v) || contains(b, v)) u.push_back(v), entries *= shape.card[i];
  }
  return u;
}

}  // namespace

bool MergePlan::merged() const {
  for (const auto& g : groups)
    if (g.size() > 1) return true;
  return false;
}

MergePlan merge_plan(const BucketShape& shape, const std::vector<std::vector<int>>& factor_scopes,
                     const std::vector<std::vector<int>>& child_scopes) {
  return merge_plan(shape, factor_scopes, child_scopes, true);
}

MergePlan merge_plan(const BucketShape& shape, const std::vector<std::vector<int>>& factor_scopes,
                     const std::vector<std::vector<int>>& child_scopes, bool small_products) {
  const std::vector<int> summed(shape.vars.end() - shape.n_marg, shape.vars.end());
  auto varies = [&](const std::vector<int>& sc) {
    for (int v : sc)
      if (contains(summed, v)) return true;
    return false;
  };
  MergePlan p;
  for (std::size_t i = 0; i < factor_scopes.size(); ++i) {
    p.groups.push_back({static_cast<int>(i)});
    double entries;
    p.scopes.push_back(union_scope(shape, factor_scopes[i], {}, entries));
    p.sizes.push_back(static_cast<std::int64_t>(entries));
  }
  // Merges kernel inputs i < j into i.
  auto merge = [&](int i, int j) {
    double entries;
    p.scopes[i] = union_scope(shape, p.scopes[i], p.scopes[j], entries);
    p.sizes[i] = static_cast<std::int64_t>(entries);
    p.groups[i].insert(p.groups[i].end(), p.groups[j].begin(), p.groups[j].end());
    p.groups.erase(p.groups.begin() + j);
    p.scopes.erase(p.scopes.begin() + j);
    p.sizes.erase(p.sizes.begin() + j);
  };
  // The pair with the smallest product of at most `limit` entries among those `ok` allows.
  auto best_pair = [&](double limit, auto ok, int& bi, int& bj) {
    bi = bj = -1;
    double best = 0;
    for (std::size_t i = 0; i < p.scopes.size(); ++i)
      for (std::size_t j = i + 1; j < p.scopes.size(); ++j) {
        if (!ok(p.scopes[i], p.scopes[j])) continue;
        double entries;
        union_scope(shape, p.scopes[i], p.scopes[j], entries);
        if (entries <= limit && (bi < 0 || entries < best))
          bi = static_cast<int>(i), bj = static_cast<int>(j), best = entries;
      }
    return bi >= 0;
  };
  int bi, bj;
  // Rule 1: small products within a class (an input constant over the summed block is added
  // once per output; merged with a varying one it would be added once per term).
  if (small_products)
    while (best_pair(
        static_cast<double>(kSmallProduct),
        [&](const auto& a, const auto& b) { return varies(a) == varies(b); }, bi, bj))
      merge(bi, bj);
  // Rule 2: the kernels' limits.
  int child_varying = 0;
  for (const auto& sc : child_scopes) child_varying += varies(sc);
  const int n_children = static_cast<int>(child_scopes.size());
  while (true) {
    int varying = child_varying;
    for (const auto& sc : p.scopes) varying += varies(sc);
    const bool over_varying = varying > kMaxVarying;
    if (!over_varying && static_cast<int>(p.scopes.size()) + n_children <= kMaxInputs) break;
    // the pair (both varying when that is the excess) with the smallest product
    if (!best_pair(
            static_cast<double>(kLimitProduct),
            [&](const auto& a, const auto& b) { return !over_varying || (varies(a) && varies(b)); },
            bi, bj))
      break;  // nothing small enough to merge: the selector says why
    merge(bi, bj);
  }
  return p;
}

std::vector<int> fold_targets(const BucketShape& shape, const MergePlan& p,
                              const std::vector<std::vector<int>>& child_scopes) {
  std::vector<int> to(p.groups.size(), -1);
  for (std::size_t k = 0; k < p.groups.size(); ++k) {
    double best = 0;
    for (std::size_t c = 0; c < child_scopes.size(); ++c) {
      const auto& cs = child_scopes[c];
      if (cs.empty() || static_cast<int>(cs.size()) > kFoldMaxVars) continue;
      bool inside = true;
      for (int v : p.scopes[k]) inside = inside && contains(cs, v);
      if (!inside) continue;
      double e;
      union_scope(shape, cs, {}, e);  // the child's entries
      if (to[k] < 0 || e < best) to[k] = static_cast<int>(c), best = e;
    }
  }
  return to;
}

std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> in,
                                    const std::vector<std::vector<int>>& child_scopes,
                                    std::vector<std::vector<double>>& owned) {
  return merge_inputs(shape, std::move(in), child_scopes, owned, true);
}

std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> in,
                                    const std::vector<std::vector<int>>& child_scopes,
                                    std::vector<std::vector<double>>& owned, bool small_products) {
  std::vector<std::vector<int>> scopes;
  for (const HostInput& h : in) scopes.push_back(h.scope);
  return merge_inputs(shape, std::move(in), merge_plan(shape, scopes, child_scopes, small_products),
                      owned);
}

std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> in,
                                    const MergePlan& p, std::vector<std::vector<double>>& owned) {
  if (!p.merged()) return in;
  std::vector<HostInput> out;
  for (std::size_t k = 0; k < p.groups.size(); ++k) {
    const auto& g = p.groups[k];
    if (g.size() == 1) {
      out.push_back(std::move(in[g[0]]));
      continue;
    }
    // the product over the union of the group's scopes, nothing summed
    BucketShape sub;
    for (std::size_t i = 0; i < shape.vars.size(); ++i)
      if (contains(p.scopes[k], shape.vars[i]))
        sub.vars.push_back(shape.vars[i]), sub.card.push_back(shape.card[i]);
    std::vector<InputTable> group_in;
    for (int f : g) group_in.push_back({in[f].data, in[f].scope});
    std::vector<double> table(sub.output_size());
    sum_product_log(sub, group_in, table.data(), 1);
    owned.push_back(std::move(table));
    out.push_back({owned.back().data(), static_cast<std::int64_t>(owned.back().size()),
                   p.scopes[k]});
  }
  return out;
}

}  // namespace kinfer::gpu
