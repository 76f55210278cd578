#include "engine/task_tree.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kinfer {

void sort_by_rank(std::vector<int>& scope, const std::vector<int>& rank) {
  std::sort(scope.begin(), scope.end(), [&](int a, int b) { return rank[a] > rank[b]; });
}

TaskTree build_task_tree(const ReducedModel& model, const std::vector<int>& order) {
  const int n = static_cast<int>(model.card.size());
  TaskTree t;
  t.rank.assign(n, -1);
  for (std::size_t i = 0; i < order.size(); ++i) t.rank[order[i]] = static_cast<int>(i);

  // Pass 1: symbolic elimination; bucket i eliminates order[i], its clique is order[i] plus its
  // neighbours at that time. Scopes are kept sorted by rank (ascending here).
  const int m = static_cast<int>(order.size());
  std::vector<std::vector<int>> clique(m);
  std::vector<std::vector<int>> pending(m);  // scopes (as rank lists) waiting at each bucket
  std::vector<std::vector<int>> factors_at(m);
  std::vector<int> parent(m, -1);
  std::vector<std::vector<int>> children(m);
  for (std::size_t fi = 0; fi < model.factors.size(); ++fi) {
    std::vector<int> r;
    for (int v : model.factors[fi].scope) {
      if (t.rank[v] < 0) throw std::invalid_argument("order misses a scoped variable");
      r.push_back(t.rank[v]);
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    factors_at[r[0]].push_back(static_cast<int>(fi));
    pending[r[0]].insert(pending[r[0]].end(), r.begin(), r.end());
  }
  std::vector<int> roots;
  for (int i = 0; i < m; ++i) {
    auto& c = pending[i];
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    if (c.empty() || c[0] != i) c.insert(c.begin(), i);  // a variable all of whose factors merged
    clique[i] = c;
    std::vector<int> out(c.begin() + 1, c.end());
    if (out.empty()) {
      roots.push_back(i);
    } else {
      parent[i] = out[0];
      children[out[0]].push_back(i);
      pending[out[0]].insert(pending[out[0]].end(), out.begin(), out.end());
    }
    std::vector<int>().swap(pending[i]);
  }

  // Pass 2: merge a child into its parent when the parent's clique is the child's output.
  std::vector<int> marg_count(m, 1);  // summed variables: the lowest ranks of the clique
  std::vector<char> absorbed(m, 0);   // bucket merged into its parent
  std::vector<char> took_child(m, 0);
  for (int i = 0; i < m; ++i) {
    const int p = parent[i];
    if (p < 0 || took_child[p]) continue;
    if (clique[p].size() + marg_count[i] == clique[i].size()) {  // clique[p] == output of i
      took_child[p] = 1;
      absorbed[i] = 1;
      clique[p] = clique[i];
      marg_count[p] += marg_count[i];
      factors_at[p].insert(factors_at[p].end(), factors_at[i].begin(), factors_at[i].end());
      children[p].erase(std::find(children[p].begin(), children[p].end(), i));
      for (int c : children[i]) parent[c] = p;
      children[p].insert(children[p].end(), children[i].begin(), children[i].end());
    }
  }

  // Pass 3: the order buckets run in, a post-order of the tree (children before parents).
  // Every child's output stays alive until its parent runs, so the intermediate tables alive
  // at once depend on which child subtree runs first: run first the child whose own peak
  // exceeds what it leaves behind by the most (Sethi-Ullman; Liu's order for trees). The peak
  // of a subtree counts, as the executor allocates, a bucket's output next to its children's.
  std::vector<double> out_n(m, 0), peak_n(m, 0);  // entries: output and subtree peak
  auto by_need = [&](std::vector<int>& kids) {    // largest need first; ties: elimination order
    std::stable_sort(kids.begin(), kids.end(),
                     [&](int a, int b) { return peak_n[a] - out_n[a] > peak_n[b] - out_n[b]; });
  };
  for (int i = 0; i < m; ++i) {  // children are eliminated before their parents
    if (absorbed[i]) continue;
    double o = 1;
    for (std::size_t k = marg_count[i]; k < clique[i].size(); ++k)
      o *= model.card[order[clique[i][k]]];
    out_n[i] = o;
    by_need(children[i]);
    double running = 0, pk = 0;
    for (int c : children[i]) pk = std::max(pk, running + peak_n[c]), running += out_n[c];
    peak_n[i] = std::max(pk, running + o);
  }
  by_need(roots);
  std::vector<int> id(m, -1), run_order;
  run_order.reserve(m);
  {
    std::vector<std::pair<int, std::size_t>> stack;  // (bucket, next child to visit)
    for (int r : roots) {
      if (absorbed[r]) continue;
      stack.push_back({r, 0});
      while (!stack.empty()) {
        auto& [b, next] = stack.back();
        if (next < children[b].size()) {
          const int c = children[b][next++];
          stack.push_back({c, 0});
          continue;
        }
        run_order.push_back(b);
        stack.pop_back();
      }
    }
  }
  for (int i : run_order) id[i] = static_cast<int>(t.buckets.size()), t.buckets.emplace_back();
  Bucket root;
  const int root_id = static_cast<int>(t.buckets.size());
  for (int i : run_order) {
    Bucket& b = t.buckets[id[i]];
    for (auto it = clique[i].rbegin(); it != clique[i].rend(); ++it) b.vars.push_back(order[*it]);
    b.n_marg = marg_count[i];
    b.factors = factors_at[i];
    for (int c : children[i]) b.children.push_back(id[c]);
    std::sort(b.children.begin(), b.children.end());
    b.parent = parent[i] >= 0 ? id[parent[i]] : root_id;
    if (parent[i] < 0) root.children.push_back(id[i]);
    for (int v : b.vars) b.log2_states += std::log2(static_cast<double>(model.card[v]));
    for (std::size_t k = 0; k + b.n_marg < b.vars.size(); ++k)
      b.log2_output += std::log2(static_cast<double>(model.card[b.vars[k]]));
  }
  t.buckets.push_back(std::move(root));
  return t;
}

std::vector<double> restructure(const LogFactor& f, const std::vector<int>& card,
                                const std::vector<int>& rank, std::vector<int>& scope_out) {
  scope_out = f.scope;
  sort_by_rank(scope_out, rank);
  const int k = static_cast<int>(f.scope.size());
  // stride of each output variable in the source table
  std::vector<std::int64_t> src_stride(k), stride_of(k);
  std::int64_t s = 1;
  for (int j = k - 1; j >= 0; --j) src_stride[j] = s, s *= card[f.scope[j]];
  for (int j = 0; j < k; ++j)
    stride_of[j] =
        src_stride[std::find(f.scope.begin(), f.scope.end(), scope_out[j]) - f.scope.begin()];
  std::vector<double> out(f.logv.size());
  std::vector<int> digit(k, 0);
  std::int64_t src = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = f.logv[src];
    for (int j = k - 1; j >= 0; --j) {
      src += stride_of[j];
      if (++digit[j] < card[scope_out[j]]) break;
      src -= stride_of[j] * digit[j];
      digit[j] = 0;
    }
  }
  return out;
}

}  // namespace kinfer
