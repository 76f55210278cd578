#pragma once
// The scheduling problem of paper 001 section 3.3: a task tree whose nodes carry a predicted
// runtime on each device and the times to move their tables, and the cost of an assignment.
//
// Cost of an assignment A (the "acceleration schedule" model: CPU and GPU never overlap):
//   sum over nodes v of P_v[A_v]
// + for every edge child d -> parent v with A_d != A_v: moving d's output (to_gpu or to_cpu)
// + for every node on the GPU: uploading its original (non-intermediate) input tables
// + downloading the root's result when the root is on the GPU.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kinfer::sched {

enum class Device : std::uint8_t { cpu = 0, gpu = 1 };
const char* to_string(Device d);

// Seconds. A device that cannot run a node has an infinite time there.
struct CostNode {
  long long id = 0;           // the caller's name for the node (bucket index, TREE.json id)
  std::vector<int> children;  // indices into CostTree::nodes
  int parent = -1;            // index; -1 for the root
  double cpu = 0, gpu = 0;    // kernel time on each device
  double upload = 0;          // its original input tables, host -> GPU
  double to_gpu = 0;          // its output, host -> GPU
  double to_cpu = 0;          // its output, GPU -> host
};

struct CostTree {
  std::vector<CostNode> nodes;
  int root = -1;
};

// Checks the structure (one root, parents and children agree, every node reachable, no cycle)
// and the costs (no negative or NaN value). Throws std::invalid_argument naming the node.
void validate(const CostTree& t);

// Nodes children-first (a postfix DFS order from the root). Assumes a valid tree.
std::vector<int> postorder(const CostTree& t);

// The parts of a schedule's cost, seconds.
struct CostBreakdown {
  double compute = 0;   // kernels
  double edges = 0;     // intermediate tables moved between devices
  double uploads = 0;   // original inputs of GPU nodes
  double download = 0;  // the root's result
  int on_gpu = 0;
  int crossings = 0;  // edges whose ends are on different devices
  double total() const { return compute + edges + uploads + download; }
};

CostBreakdown cost_breakdown(const CostTree& t, std::span<const Device> a);
inline double schedule_cost(const CostTree& t, std::span<const Device> a) {
  return cost_breakdown(t, a).total();
}

// "12.3 ms", "4.56 s", "inf": for reasons and tables.
std::string format_seconds(double s);

}  // namespace kinfer::sched
