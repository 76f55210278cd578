#include "scheduler/plan_costs.hpp"

#include <cmath>
#include <limits>

#include "gpu/policy.hpp"

namespace kinfer::sched {

std::vector<std::vector<int>> bucket_scopes(const Plan& plan, int b) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<std::vector<int>> sc;
  for (int f : bk.factors) sc.push_back(plan.input_scope[f]);
  for (int c : bk.children) sc.push_back(plan.tree.buckets[c].output_vars());
  return sc;
}

PlanCosts plan_costs(const Plan& plan, const Profile& profile, bool warm_gpu) {
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  PlanCosts pc;
  pc.tree.nodes.resize(nb);
  pc.tree.root = nb - 1;
  pc.features.resize(nb);
  pc.out_bytes.resize(nb);
  pc.input_bytes.resize(nb);
  pc.input_tables.resize(nb);
  for (int b = 0; b < nb; ++b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, b);
    const auto scopes = bucket_scopes(plan, b);
    const BucketFeatures f = bucket_features(shape, scopes);
    pc.features[b] = f;
    pc.out_bytes[b] = 8.0 * static_cast<double>(shape.output_size());
    CostNode& n = pc.tree.nodes[b];
    n.id = b;
    n.children = bk.children;
    n.parent = b == nb - 1 ? -1 : bk.parent;
    n.cpu = profile.cpu_seconds(f);
    n.gpu = profile.gpu_seconds(f, !warm_gpu);
    for (int fi : bk.factors) {
      const double bytes = 8.0 * static_cast<double>(plan.input_data[fi].size());
      pc.input_bytes[b] += bytes;
      // the executor queues all original inputs at once: the per-copy cost of a batch
      const TransferModel& up = profile.h2d_batch.bandwidth > 0 ? profile.h2d_batch : profile.h2d;
      n.upload += profile.has_gpu ? up.seconds(bytes) : 0;
    }
    pc.input_tables[b] = static_cast<int>(bk.factors.size());
    if (profile.has_gpu) {
      n.to_gpu = profile.h2d.seconds(pc.out_bytes[b]);
      n.to_cpu = profile.d2h.seconds(pc.out_bytes[b]);
      // A bucket whose own tables would not fit in the GPU's memory stays on the CPU.
      double need = pc.out_bytes[b] + pc.input_bytes[b];
      for (int c : bk.children) need += pc.out_bytes[c];
      if (profile.gpu.memory_bytes > 0 && need > 0.9 * profile.gpu.memory_bytes)
        n.gpu = std::numeric_limits<double>::infinity();
      // a layout no GPU kernel takes (too many inputs, too many varying inputs, ...)
      if (!gpu::describe(shape, scopes).unsupported.empty())
        n.gpu = std::numeric_limits<double>::infinity();
    }
  }
  return pc;
}

Traffic schedule_traffic(const PlanCosts& pc, std::span<const Device> a) {
  Traffic t;
  const auto& nodes = pc.tree.nodes;
  for (std::size_t v = 0; v < nodes.size(); ++v) {
    if (a[v] == Device::gpu) t.h2d += pc.input_bytes[v];
    const int p = nodes[v].parent;
    if (p >= 0 && a[p] != a[v]) (a[v] == Device::gpu ? t.d2h : t.h2d) += pc.out_bytes[v];
  }
  if (a[pc.tree.root] == Device::gpu) t.d2h += pc.out_bytes[pc.tree.root];
  return t;
}

}  // namespace kinfer::sched
