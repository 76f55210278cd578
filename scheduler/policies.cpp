#include "scheduler/policies.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace kinfer::sched {

const char* to_string(Policy p) {
  switch (p) {
    case Policy::cpu_only:
      return "cpu-only";
    case Policy::gpu_only:
      return "gpu-only";
    case Policy::greedy:
      return "greedy";
    case Policy::comm_aware:
      return "comm-aware";
    case Policy::whole_plan:
      return "whole-plan";
  }
  return "?";
}

bool needs_profile(Policy p) { return p == Policy::greedy || p == Policy::comm_aware; }

Policy parse_policy(const std::string& name) {
  for (Policy p : kAllPolicies)
    if (name == to_string(p)) return p;
  if (name == to_string(Policy::whole_plan)) return Policy::whole_plan;
  throw std::invalid_argument("unknown schedule policy '" + name +
                              "' (expected cpu-only, gpu-only, greedy, comm-aware or whole-plan)");
}

namespace {

constexpr int kCpu = 0, kGpu = 1;
constexpr Device kDev[2] = {Device::cpu, Device::gpu};

// Time to bring node v's output from device `from` to device `to` (0 when they agree).
double move(const CostNode& v, int from, int to) {
  return from == to ? 0.0 : (to == kGpu ? v.to_gpu : v.to_cpu);
}

// Kernel time of v on device `dev`, with its original inputs uploaded when that is the GPU.
double own(const CostNode& v, int dev) { return dev == kGpu ? v.gpu + v.upload : v.cpu; }

void single_device(const CostTree& t, Schedule& s, Device d) {
  s.device.assign(t.nodes.size(), d);
  const std::string why = std::string("policy ") + to_string(s.policy);
  s.reason.assign(t.nodes.size(), why);
  for (std::size_t v = 0; v < t.nodes.size(); ++v)
    if (d == Device::gpu && std::isinf(t.nodes[v].gpu))
      s.reason[v] = why + " (the GPU cannot run this node: the schedule is infeasible)";
}

void greedy(const CostTree& t, Schedule& s) {
  s.device.resize(t.nodes.size());
  s.reason.resize(t.nodes.size());
  for (std::size_t v = 0; v < t.nodes.size(); ++v) {
    const CostNode& n = t.nodes[v];
    // As an isolated kernel on the GPU: upload every input, run, bring the output back.
    double children_in = 0;
    for (int c : n.children) children_in += t.nodes[c].to_gpu;
    const double on_gpu = n.gpu + n.upload + children_in + n.to_cpu;
    const bool gpu = on_gpu < n.cpu;
    s.device[v] = gpu ? Device::gpu : Device::cpu;
    s.reason[v] = "alone on " + std::string(gpu ? "gpu" : "cpu") + ": cpu kernel " +
                  format_seconds(n.cpu) + (gpu ? " > " : " <= ") + "gpu round trip " +
                  format_seconds(on_gpu) + " (kernel " + format_seconds(n.gpu) + ", inputs in " +
                  format_seconds(n.upload + children_in) + ", output out " +
                  format_seconds(n.to_cpu) + ")";
  }
}

// Paper 001 Fig. 4, with the cost of cost_tree.hpp.
void comm_aware(const CostTree& t, Schedule& s) {
  const std::size_t n = t.nodes.size();
  // pass 1: a postfix DFS order (children before parents)
  const std::vector<int> post = postorder(t);

  // pass 2: forward traversal. S[v][dev]: best time of v's subtree with v on dev;
  // best_child[v][dev]: the device of v's subtree root that achieves it (O_v^d of the paper,
  // stored at the child d because each child has one parent).
  std::vector<std::array<double, 2>> S(n);
  std::vector<std::array<int, 2>> best_child(n);  // [d][device of parent] -> device of d
  for (int v : post) {
    const CostNode& nv = t.nodes[v];
    for (int dev : {kCpu, kGpu}) {
      double total = own(nv, dev);
      for (int d : nv.children) {
        const double cpu_cost = S[d][kCpu] + move(t.nodes[d], kCpu, dev);
        const double gpu_cost = S[d][kGpu] + move(t.nodes[d], kGpu, dev);
        const bool pick_gpu = cpu_cost > gpu_cost;  // ties to the CPU, as in Fig. 4
        best_child[d][dev] = pick_gpu ? kGpu : kCpu;
        total += pick_gpu ? gpu_cost : cpu_cost;
      }
      S[v][dev] = total;
    }
  }

  // pass 3: the root's device, counting the download of the result from the GPU
  const int r = t.root;
  const double root_cpu = S[r][kCpu], root_gpu = S[r][kGpu] + t.nodes[r].to_cpu;
  std::vector<int> a(n, kCpu);
  a[r] = root_cpu > root_gpu ? kGpu : kCpu;

  // pass 4: backtrack in prefix order (reverse postfix): each child takes the device that
  // gave its parent's chosen cost
  for (auto it = post.rbegin(); it != post.rend(); ++it)
    for (int d : t.nodes[*it].children) a[d] = best_child[d][a[*it]];

  // pass 5: reasons, from the same numbers the decisions used
  s.device.resize(n);
  s.reason.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    const CostNode& nv = t.nodes[v];
    s.device[v] = kDev[a[v]];
    const std::string here = to_string(kDev[a[v]]), other = to_string(kDev[1 - a[v]]);
    if (static_cast<int>(v) == r) {
      const double mine = a[v] == kGpu ? root_gpu : root_cpu;
      const double alt = a[v] == kGpu ? root_cpu : root_gpu;
      s.reason[v] = "root: whole tree " + format_seconds(mine) + " with it on " + here + " vs " +
                    format_seconds(alt) + " on " + other +
                    (a[v] == kGpu ? " (including the result's download)" : "");
      continue;
    }
    const int p = a[nv.parent];
    const double mine = S[v][a[v]] + move(nv, a[v], p);
    const double alt = S[v][1 - a[v]] + move(nv, 1 - a[v], p);
    std::string r2 = "parent on " + std::string(to_string(kDev[p])) + ": subtree " +
                     format_seconds(mine) + " on " + here + " vs " + format_seconds(alt) + " on " +
                     other + " (kernel " + format_seconds(a[v] == kGpu ? nv.gpu : nv.cpu) + " vs " +
                     format_seconds(a[v] == kGpu ? nv.cpu : nv.gpu);
    if (a[v] != p)
      r2 += ", output moved to " + std::string(to_string(kDev[p])) + " " +
            format_seconds(move(nv, a[v], p));
    else if (move(nv, 1 - a[v], p) > 0)
      r2 += ", saves moving the output " + format_seconds(move(nv, 1 - a[v], p));
    s.reason[v] = r2 + ")";
  }
}

}  // namespace

Schedule make_schedule(const CostTree& t, Policy p) {
  Schedule s;
  s.policy = p;
  switch (p) {
    case Policy::cpu_only:
      single_device(t, s, Device::cpu);
      break;
    case Policy::gpu_only:
      single_device(t, s, Device::gpu);
      break;
    case Policy::greedy:
      greedy(t, s);
      break;
    case Policy::comm_aware:
      comm_aware(t, s);
      break;
    case Policy::whole_plan:
      throw std::invalid_argument(
          "whole-plan places buckets by their size, not by predicted cost: whole_plan_schedule");
  }
  s.cost = cost_breakdown(t, s.device);
  return s;
}

Schedule whole_plan_schedule(const TaskTree& tree, double min_gpu_states) {
  Schedule s;
  s.policy = Policy::whole_plan;
  const std::size_t n = tree.buckets.size();
  s.device.assign(n, Device::gpu);
  s.reason.resize(n);
  char states[32];
  for (std::size_t b = 0; b < n; ++b) {  // children come before their parent
    const Bucket& bk = tree.buckets[b];
    bool child_on_gpu = false;
    for (int c : bk.children) child_on_gpu = child_on_gpu || s.device[c] == Device::gpu;
    std::snprintf(states, sizeof states, "2^%.1f", bk.log2_states);
    if (!child_on_gpu && std::exp2(bk.log2_states) < min_gpu_states) {
      s.device[b] = Device::cpu;
      s.reason[b] = std::string("whole-plan: ") + states +
                    " states and every input on the host: the CPU finishes before a launch would";
    } else {
      s.reason[b] = std::string("whole-plan: ") + states + " states" +
                    (child_on_gpu ? ", a child's table already on the GPU" : "") + ": on the GPU";
    }
  }
  return s;
}

}  // namespace kinfer::sched
