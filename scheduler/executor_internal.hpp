#pragma once
// The executor's parts that its source files share (executor.cpp: the run and its CPU thread;
// executor_gpu.cpp: the GPU thread; executor_check.cpp: --check); not for other folders.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/util.hpp"
#include "gpu/merge_inputs.hpp"
#include "scheduler/executor.hpp"
#include "scheduler/staging.hpp"

namespace kinfer::sched::exec {

using clock_type = std::chrono::steady_clock;

// What the two threads share. Everything here is guarded by `m`; a table pointer published
// with ready[b] = 1 is not written again, so it may be read without the lock afterwards.
struct Shared {
  Shared(const TaskTree& tree, const std::vector<Device>& dev)
      : host(tree.buckets.size(), nullptr),
        ready(tree.buckets.size(), 0),
        owned(tree.buckets.size()),
        missing(tree.buckets.size(), 0),
        tree(tree),
        dev(dev) {
    for (std::size_t b = 0; b < tree.buckets.size(); ++b) {
      missing[b] = static_cast<int>(tree.buckets[b].children.size());
      if (missing[b] == 0 && dev[b] == Device::cpu) cpu_ready.insert(static_cast<int>(b));
    }
  }
  std::mutex m;
  std::condition_variable cv;
  std::vector<const double*> host;               // [bucket] output on the host
  std::vector<char> ready;                       // [bucket] host output complete
  std::vector<std::unique_ptr<double[]>> owned;  // [bucket] outputs the CPU made
  std::vector<double*> give_back;                // pinned downloads the CPU finished reading
  std::vector<int> missing;                      // [bucket] children whose host output is not ready
  std::set<int> cpu_ready;                       // CPU buckets whose inputs are all on the host
  bool abort = false;
  std::exception_ptr error;
  const TaskTree& tree;
  const std::vector<Device>& dev;

  // With `m` held: b's output is on the host now.
  void publish(int b, const double* p) {
    host[b] = p;
    ready[b] = 1;
    const int parent = tree.buckets[b].parent;
    if (parent >= 0 && --missing[parent] == 0 && dev[parent] == Device::cpu)
      cpu_ready.insert(parent);
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(m);
      if (!error) error = e;
      abort = true;
    }
    cv.notify_all();
  }
};

struct Run {
  const Plan& plan;
  const std::vector<Device>& dev;
  const ExecOptions& opt;
  Shared& sh;
  ExecStats& st;
  const std::vector<std::vector<gpu::HostInput>>& fin;  // [GPU bucket] factor inputs to upload
  const std::vector<std::vector<int>>& fold;  // [GPU bucket][factor input] child it folds into
  const std::function<void(int)>& prepare;  // bucket b's kernel plan built (or waited for)
  // ExecOptions::pass.on_device granted: the outputs of GPU buckets with a GPU parent stay on
  // the device after their parent ran (`held`, by bucket; -1: not held)
  bool hold_on_device = false;
  std::vector<gpu::Handle>* held = nullptr;
  int root() const { return static_cast<int>(plan.tree.buckets.size()) - 1; }
  bool to_host(int b) const {  // does b's output have to reach the host?
    const int p = plan.tree.buckets[b].parent;
    return b == root() || dev[p] == Device::cpu;
  }
};

// Bucket b's factor inputs merged to fit the GPU kernels (every one uploaded), which of them
// the device folds into a child's table instead of passing to the kernel (fold_child: the
// child's index among the bucket's children, -1 for a kernel input; gpu/merge_inputs.hpp rule
// 3), and the scopes of the kernel's inputs in launch order (the kernel's factors, then the
// children).
struct MergedInputs {
  std::vector<gpu::HostInput> inputs;
  std::vector<int> fold_child;
  std::vector<std::vector<int>> scopes;
  // the bucket's factors inside folded inputs: (position in its factor list, the child index
  // whose table the device adds it into)
  std::vector<std::pair<int, int>> folded_factors;
};
MergedInputs merged_inputs(const Plan& plan, int b, const BucketShape& shape,
                           std::vector<std::vector<double>>& owned);

// Context::fold's arguments for a factor table over `factor` folded into a child's table over
// `child` (both subsequences of the bucket's variables): the child's cardinalities and, per
// child variable, the factor's stride (0 where the factor lacks it).
void fold_into(gpu::Context& ctx, const BucketShape& shape, gpu::Handle child,
               const std::vector<int>& child_scope, gpu::Handle factor,
               const std::vector<int>& factor_scope, int stream);

// The CPU execution thread: the ready CPU bucket that comes first in tree order, repeatedly.
void cpu_thread(Run& r);
// The GPU management thread: the GPU buckets in tree order on `ctx`.
void gpu_thread(Run& r, gpu::Context& ctx, StagingPool& pool);

}  // namespace kinfer::sched::exec
