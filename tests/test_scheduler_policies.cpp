// The four schedule policies against their definitions: hand-worked trees, and the dynamic
// program against brute-force enumeration of every assignment on random trees.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "scheduler/policies.hpp"

using namespace kinfer::sched;

namespace {

constexpr Device C = Device::cpu, G = Device::gpu;

// The cost, written out again independently of cost_tree.cpp.
double reference_cost(const CostTree& t, const std::vector<Device>& a) {
  double total = 0;
  for (std::size_t v = 0; v < t.nodes.size(); ++v) {
    const CostNode& n = t.nodes[v];
    total += a[v] == G ? n.gpu + n.upload : n.cpu;
    for (int d : n.children)
      if (a[d] != a[v]) total += a[d] == C ? t.nodes[d].to_gpu : t.nodes[d].to_cpu;
  }
  if (a[t.root] == G) total += t.nodes[t.root].to_cpu;
  return total;
}

CostTree from_parents(const std::vector<int>& parent) {
  CostTree t;
  t.nodes.resize(parent.size());
  for (std::size_t v = 0; v < parent.size(); ++v) {
    t.nodes[v].id = static_cast<long long>(v);
    t.nodes[v].parent = parent[v];
    if (parent[v] < 0)
      t.root = static_cast<int>(v);
    else
      t.nodes[parent[v]].children.push_back(static_cast<int>(v));
  }
  return t;
}

// Random tree of n nodes: node v's parent is a random node among v+1..n-1 (n-1 is the root),
// with costs spread over decades so that both devices and transfers matter.
CostTree random_tree(int n, std::mt19937_64& rng) {
  std::vector<int> parent(n, -1);
  for (int v = 0; v + 1 < n; ++v) parent[v] = std::uniform_int_distribution<int>(v + 1, n - 1)(rng);
  CostTree t = from_parents(parent);
  std::uniform_real_distribution<double> dec(-3, 1);
  auto draw = [&] { return std::pow(10.0, dec(rng)); };
  for (auto& node : t.nodes) {
    node.cpu = draw();
    node.gpu = draw();
    node.upload = draw() * 0.1;
    node.to_gpu = draw() * 0.3;
    node.to_cpu = draw() * 0.3;
    // now and then a node the GPU cannot take (e.g. more inputs than the kernel handles)
    if (std::uniform_int_distribution<int>(0, 19)(rng) == 0)
      node.gpu = std::numeric_limits<double>::infinity();
  }
  return t;
}

std::vector<Device> assignment_of(unsigned mask, int n) {
  std::vector<Device> a(n);
  for (int v = 0; v < n; ++v) a[v] = (mask >> v) & 1 ? G : C;
  return a;
}

}  // namespace

TEST_CASE("Scheduler.CostFollowsDefinitionOnHandWorkedTree", "[scheduler]") {
  // root 2 <- 1 <- 0 (a chain)
  CostTree t = from_parents({1, 2, -1});
  t.nodes[0] = {10, {}, 1, 5.0, 1.0, 0.5, 0.25, 0.125};
  t.nodes[1] = {11, {0}, 2, 4.0, 2.0, 0.5, 1.0, 1.5};
  t.nodes[2] = {12, {1}, -1, 1.0, 0.5, 0.25, 0.1, 0.2};
  // all CPU: 5 + 4 + 1
  CHECK(schedule_cost(t, std::vector<Device>{C, C, C}) == 10.0);
  // all GPU: kernels 1 + 2 + 0.5, uploads 0.5 + 0.5 + 0.25, result download 0.2
  CHECK(schedule_cost(t, std::vector<Device>{G, G, G}) == Approx(4.95));
  // 0 on GPU, 1 on CPU, 2 on GPU: kernels 1 + 4 + 0.5; uploads 0.5 + 0.25; edges: 0->1 to_cpu
  // 0.125, 1->2 to_gpu 1.0; download 0.2
  const auto b = cost_breakdown(t, std::vector<Device>{G, C, G});
  CHECK(b.compute == Approx(5.5));
  CHECK(b.uploads == Approx(0.75));
  CHECK(b.edges == Approx(1.125));
  CHECK(b.download == Approx(0.2));
  CHECK(b.on_gpu == 2);
  CHECK(b.crossings == 2);
  CHECK(b.total() == Approx(7.575));
}

TEST_CASE("Scheduler.GreedyLosesWhereTransfersMatter", "[scheduler]") {
  // Paper 001 Fig. 1 in spirit: a product kernel that is slightly faster on the CPU feeds a sum
  // kernel that is much faster on the GPU; the product's output is large.
  CostTree t = from_parents({1, -1});
  t.nodes[0] = {0, {}, 1, 30.0, 31.0, 1.0, 10.0, 10.0};  // product
  t.nodes[1] = {1, {0}, -1, 40.0, 20.0, 1.0, 1.0, 1.0};  // sum, result is small
  // greedy: product alone: cpu 30 <= 31 + 1 + 10 -> CPU; sum alone: 20 + 1 + 10 + 1 = 32 < 40
  // -> GPU; cost 30 + 20 + 1 (upload) + 10 (product output to GPU) + 1 (download) = 62
  const Schedule g = make_schedule(t, Policy::greedy);
  CHECK(g.device == std::vector<Device>{C, G});
  CHECK(g.cost.total() == Approx(62.0));
  // both on the GPU: 31 + 20 + 1 + 1 + 1 = 54 is the optimum (all CPU: 70)
  const Schedule ca = make_schedule(t, Policy::comm_aware);
  CHECK(ca.device == std::vector<Device>{G, G});
  CHECK(ca.cost.total() == Approx(54.0));
  CHECK(make_schedule(t, Policy::cpu_only).cost.total() == Approx(70.0));
  CHECK(make_schedule(t, Policy::gpu_only).cost.total() == Approx(54.0));
  for (const auto& r : ca.reason) CHECK_FALSE(r.empty());
}

TEST_CASE("Scheduler.CommAwareEqualsBruteForce", "[scheduler]") {
  std::mt19937_64 rng(20240601);
  int mixed = 0, beats_greedy = 0;  // the trees must exercise real choices
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial % 14;
    const CostTree t = random_tree(n, rng);
    REQUIRE_NOTHROW(validate(t));
    double best = std::numeric_limits<double>::infinity();
    for (unsigned mask = 0; mask < (1u << n); ++mask)
      best = std::min(best, reference_cost(t, assignment_of(mask, n)));
    const Schedule s = make_schedule(t, Policy::comm_aware);
    INFO("trial " << trial << ", " << n << " nodes");
    CHECK(s.cost.total() == Approx(best).epsilon(1e-12));
    CHECK(reference_cost(t, s.device) == Approx(best).epsilon(1e-12));
    for (Policy p : kAllPolicies)  // no policy beats the optimum; each reports its true cost
      if (p != Policy::gpu_only || std::isfinite(best)) {
        const Schedule o = make_schedule(t, p);
        CHECK(o.cost.total() == Approx(reference_cost(t, o.device)).epsilon(1e-12));
        CHECK(o.cost.total() >= best * (1 - 1e-12));
      }
    mixed += s.cost.on_gpu > 0 && s.cost.on_gpu < n;
    beats_greedy += s.cost.total() < make_schedule(t, Policy::greedy).cost.total() * (1 - 1e-9);
  }
  CHECK(mixed > 100);
  CHECK(beats_greedy > 50);
}

TEST_CASE("Scheduler.GreedyPicksFasterIsolatedKernel", "[scheduler]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const CostTree t = random_tree(2 + trial % 12, rng);
    const Schedule s = make_schedule(t, Policy::greedy);
    for (std::size_t v = 0; v < t.nodes.size(); ++v) {
      const CostNode& n = t.nodes[v];
      double round_trip = n.gpu + n.upload + n.to_cpu;
      for (int c : n.children) round_trip += t.nodes[c].to_gpu;
      CHECK(s.device[v] == (round_trip < n.cpu ? G : C));
    }
  }
}

TEST_CASE("Scheduler.SingleDevicePolicies", "[scheduler]") {
  std::mt19937_64 rng(11);
  const CostTree t = random_tree(9, rng);
  double cpu = 0;
  for (const auto& n : t.nodes) cpu += n.cpu;
  const Schedule c = make_schedule(t, Policy::cpu_only);
  CHECK(c.cost.total() == Approx(cpu));
  CHECK(c.cost.on_gpu == 0);
  const Schedule g = make_schedule(t, Policy::gpu_only);
  CHECK(g.cost.on_gpu == 9);
  CHECK(g.cost.edges == 0);
  CHECK(parse_policy("comm-aware") == Policy::comm_aware);
  CHECK_THROWS_AS(parse_policy("fastest"), std::invalid_argument);
}

TEST_CASE("Scheduler.ValidateRejectsBadTrees", "[scheduler]") {
  CostTree t = from_parents({2, 2, -1});
  REQUIRE_NOTHROW(validate(t));
  SECTION("negative cost") {
    t.nodes[1].to_gpu = -1;
    CHECK_THROWS_WITH(validate(t), Catch::Contains("node 1") && Catch::Contains("to_gpu"));
  }
  SECTION("two roots") {
    t.nodes[1].parent = -1;
    t.nodes[2].children = {0};
    CHECK_THROWS_WITH(validate(t), Catch::Contains("two roots"));
  }
  SECTION("a detached cycle") {
    t.nodes[0].parent = 1;
    t.nodes[1].parent = 0;
    t.nodes[0].children = {1};
    t.nodes[1].children = {0};
    t.nodes[2].children = {};
    CHECK_THROWS_WITH(validate(t), Catch::Contains("not below the root"));
  }
  SECTION("neither device") {
    t.nodes[0].cpu = t.nodes[0].gpu = std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH(validate(t), Catch::Contains("neither"));
  }
}

TEST_CASE("Scheduler.DeepChainDoesNotRecurse", "[scheduler]") {
  // 200000 nodes in a chain: the passes are iterative.
  const int n = 200000;
  std::vector<int> parent(n);
  for (int v = 0; v < n; ++v) parent[v] = v + 1 < n ? v + 1 : -1;
  CostTree t = from_parents(parent);
  for (auto& node : t.nodes) node.cpu = 1, node.gpu = 0.5, node.to_gpu = node.to_cpu = 0.1;
  const Schedule s = make_schedule(t, Policy::comm_aware);
  CHECK(s.cost.on_gpu == n);
  CHECK(s.cost.total() == Approx(0.5 * n + 0.1));
}
