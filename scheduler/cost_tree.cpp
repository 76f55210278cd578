#include "scheduler/cost_tree.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kinfer::sched {

const char* to_string(Device d) { return d == Device::gpu ? "gpu" : "cpu"; }

namespace {
std::string node_name(const CostTree& t, int i) { return "node " + std::to_string(t.nodes[i].id); }
}  // namespace

void validate(const CostTree& t) {
  const int n = static_cast<int>(t.nodes.size());
  if (n == 0) throw std::invalid_argument("the tree has no nodes");
  if (t.root < 0 || t.root >= n) throw std::invalid_argument("the tree has no root");
  for (int i = 0; i < n; ++i) {
    const CostNode& v = t.nodes[i];
    const std::pair<const char*, double> costs[] = {{"cpu", v.cpu},
                                                    {"gpu", v.gpu},
                                                    {"upload", v.upload},
                                                    {"to_gpu", v.to_gpu},
                                                    {"to_cpu", v.to_cpu}};
    for (auto [name, x] : costs)
      if (std::isnan(x) || x < 0)
        throw std::invalid_argument(node_name(t, i) + ": '" + name + "' must be a non-negative " +
                                    "number of seconds, not " + std::to_string(x));
    if (std::isinf(v.cpu) && std::isinf(v.gpu))
      throw std::invalid_argument(node_name(t, i) + " can run on neither device");
    if ((v.parent < 0) != (i == t.root))
      throw std::invalid_argument(i == t.root ? node_name(t, i) + " is the root but has a parent"
                                              : node_name(t, i) + " has no parent: two roots (" +
                                                    node_name(t, t.root) + " and this one)");
    for (int c : v.children) {
      if (c < 0 || c >= n) throw std::invalid_argument(node_name(t, i) + " has an unknown child");
      if (c == t.root)
        throw std::invalid_argument("the root " + node_name(t, c) + " is a child of " +
                                    node_name(t, i) + ": a cycle");
      if (t.nodes[c].parent != i)
        throw std::invalid_argument(node_name(t, c) + " is a child of " + node_name(t, i) +
                                    " and of another node");
    }
  }
  // Every node reachable from the root exactly once: no cycle, nothing detached.
  std::vector<char> seen(n, 0);
  std::vector<int> stack = {t.root};
  int reached = 0;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (seen[v]) throw std::invalid_argument("a cycle through " + node_name(t, v));
    seen[v] = 1;
    ++reached;
    for (int c : t.nodes[v].children) stack.push_back(c);
  }
  if (reached != n)
    for (int i = 0; i < n; ++i)
      if (!seen[i])
        throw std::invalid_argument(node_name(t, i) + " is not below the root " +
                                    node_name(t, t.root) + " (a cycle, or a second tree)");
}

std::vector<int> postorder(const CostTree& t) {
  std::vector<int> order;
  order.reserve(t.nodes.size());
  // Iterative DFS: (node, next child to visit); deep chains must not overflow the stack.
  std::vector<std::pair<int, std::size_t>> stack = {{t.root, 0}};
  while (!stack.empty()) {
    auto& [v, k] = stack.back();
    if (k < t.nodes[v].children.size()) {
      const int c = t.nodes[v].children[k++];
      stack.push_back({c, 0});
    } else {
      order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

CostBreakdown cost_breakdown(const CostTree& t, std::span<const Device> a) {
  if (a.size() != t.nodes.size())
    throw std::invalid_argument("assignment size differs from the tree");
  CostBreakdown c;
  for (std::size_t v = 0; v < t.nodes.size(); ++v) {
    const CostNode& n = t.nodes[v];
    const bool gpu = a[v] == Device::gpu;
    c.compute += gpu ? n.gpu : n.cpu;
    if (gpu) c.uploads += n.upload, ++c.on_gpu;
    if (n.parent >= 0 && a[n.parent] != a[v]) {
      c.edges += gpu ? n.to_cpu : n.to_gpu;
      ++c.crossings;
    }
  }
  if (a[t.root] == Device::gpu) c.download = t.nodes[t.root].to_cpu;
  return c;
}

std::string format_seconds(double s) {
  if (std::isinf(s)) return "inf";
  char buf[32];
  if (s >= 1 || s == 0)
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

}  // namespace kinfer::sched
