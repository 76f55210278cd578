#include "scheduler/plan_costs.hpp"

#include <cmath>
#include <limits>

#include "gpu/merge_inputs.hpp"
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
    if (!profile.has_gpu) {
      for (int fi : bk.factors)
        pc.input_bytes[b] += 8.0 * static_cast<double>(plan.input_data[fi].size());
      pc.input_tables[b] = static_cast<int>(bk.factors.size());
      n.gpu = profile.gpu_seconds(f, !warm_gpu);
      continue;
    }
    // On the GPU the kernel takes the factor inputs as the executor merges them
    // (gpu/merge_inputs.hpp): its features, uploads and layout are those of the merged inputs.
    const std::vector<std::vector<int>> factor_scopes(scopes.begin(),
                                                      scopes.begin() + bk.factors.size());
    const std::vector<std::vector<int>> child_scopes(scopes.begin() + bk.factors.size(),
                                                     scopes.end());
    const gpu::MergePlan mp = gpu::merge_plan(shape, factor_scopes, child_scopes);
    // (rule 3: the inputs the device folds into a child's table are no kernel inputs)
    const std::vector<int> fold = gpu::fold_targets(shape, mp, child_scopes);
    std::vector<std::vector<int>> kernel_scopes;
    bool folded = false;
    for (std::size_t k = 0; k < mp.scopes.size(); ++k)
      if (fold[k] < 0)
        kernel_scopes.push_back(mp.scopes[k]);
      else
        folded = true;
    kernel_scopes.insert(kernel_scopes.end(), child_scopes.begin(), child_scopes.end());
    n.gpu = profile.gpu_seconds(
        mp.merged() || folded ? bucket_features(shape, kernel_scopes) : f, !warm_gpu);
    // the executor queues all inputs at once: the per-copy cost of a batch
    const TransferModel& up = profile.h2d_batch.bandwidth > 0 ? profile.h2d_batch : profile.h2d;
    for (std::int64_t entries : mp.sizes) {
      const double bytes = 8.0 * static_cast<double>(entries);
      pc.input_bytes[b] += bytes;
      n.upload += up.seconds(bytes);
    }
    pc.input_tables[b] = static_cast<int>(mp.sizes.size());
    n.to_gpu = profile.h2d.seconds(pc.out_bytes[b]);
    n.to_cpu = profile.d2h.seconds(pc.out_bytes[b]) + profile.pin_seconds(pc.out_bytes[b]);
    // A bucket whose own tables would not fit in the GPU's memory stays on the CPU.
    double need = pc.out_bytes[b] + pc.input_bytes[b];
    for (int c : bk.children) need += pc.out_bytes[c];
    if (profile.gpu.memory_bytes > 0 && need > 0.9 * profile.gpu.memory_bytes)
      n.gpu = std::numeric_limits<double>::infinity();
    // a layout no GPU kernel takes (too many inputs, too many varying inputs, ...)
    if (!gpu::describe(shape, kernel_scopes).unsupported.empty())
      n.gpu = std::numeric_limits<double>::infinity();
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
