#include "gpu/merge_inputs.hpp"

#include <algorithm>

#include "gpu/policy.hpp"

namespace kinfer::gpu {

namespace {

bool contains(const std::vector<int>& scope, int v) {
  return std::find(scope.begin(), scope.end(), v) != scope.end();
}

// The product of two inputs over the union of their scopes, in the bucket's variable order.
std::vector<double> product_table(const BucketShape& shape, const HostInput& a, const HostInput& b,
                                  std::vector<int>& scope) {
  BucketShape sub;
  for (std::size_t i = 0; i < shape.vars.size(); ++i) {
    const int v = shape.vars[i];
    if (contains(a.scope, v) || contains(b.scope, v))
      sub.vars.push_back(v), sub.card.push_back(shape.card[i]);
  }
  const InputTable in[] = {{a.data, a.scope}, {b.data, b.scope}};
  std::vector<double> out(sub.output_size());
  sum_product_log(sub, in, out.data(), 1);
  scope = sub.vars;
  return out;
}

}  // namespace

std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> in,
                                    const std::vector<std::vector<int>>& child_scopes,
                                    std::vector<std::vector<double>>& owned) {
  const std::vector<int> summed(shape.vars.end() - shape.n_marg, shape.vars.end());
  auto varies = [&](const std::vector<int>& sc) {
    for (int v : sc)
      if (contains(summed, v)) return true;
    return false;
  };
  int child_varying = 0;
  for (const auto& sc : child_scopes) child_varying += varies(sc);
  const int n_children = static_cast<int>(child_scopes.size());
  while (true) {
    int varying = child_varying;
    for (const HostInput& h : in) varying += varies(h.scope);
    const bool over_varying = varying > kMaxVarying;
    if (!over_varying && static_cast<int>(in.size()) + n_children <= kMaxInputs) break;
    // The pair (both varying when that is the excess) with the smallest product.
    int bi = -1, bj = -1;
    double best = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      for (std::size_t j = i + 1; j < in.size(); ++j) {
        if (over_varying && (!varies(in[i].scope) || !varies(in[j].scope))) continue;
        double entries = 1;
        for (std::size_t v = 0; v < shape.vars.size(); ++v)
          if (contains(in[i].scope, shape.vars[v]) || contains(in[j].scope, shape.vars[v]))
            entries *= shape.card[v];
        if (entries <= double(1 << 20) && (bi < 0 || entries < best))
          bi = static_cast<int>(i), bj = static_cast<int>(j), best = entries;
      }
    if (bi < 0) break;  // nothing small enough to merge: the selector says why
    std::vector<int> scope;
    owned.push_back(product_table(shape, in[bi], in[bj], scope));
    in[bi] = {owned.back().data(), static_cast<std::int64_t>(owned.back().size()), scope};
    in.erase(in.begin() + bj);
  }
  return in;
}

}  // namespace kinfer::gpu
