// --check: every bucket on the CPU (the reference) and the GPU, compared (executor.hpp
// run_checked).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "scheduler/executor.hpp"
#include "scheduler/executor_internal.hpp"

namespace kinfer::sched {

using exec::fold_into;
using exec::merged_inputs;
using exec::MergedInputs;

namespace {

// |gpu - cpu| for ln values: equal infinities agree, NaN never does.
double difference(double gpu, double cpu) {
  if (std::isnan(gpu) || std::isnan(cpu)) return INFINITY;
  if (std::isinf(gpu) || std::isinf(cpu)) return gpu == cpu ? 0.0 : INFINITY;
  return std::abs(gpu - cpu);
}

// Runs the bucket the CPU just computed on the GPU too, from the same input tables.
void check_bucket(const Plan& plan, gpu::Context& ctx, int b, const BucketShape& shape,
                  std::span<const InputTable> in, const double* cpu_out, CheckReport& r) {
  std::vector<std::vector<double>> owned;
  const MergedInputs m = merged_inputs(plan, b, shape, owned);
  const std::string why = gpu::why_no_kernel(shape, m.scopes);
  if (!why.empty()) {
    spdlog::debug("check: bucket {} has no GPU kernel: {}", b, why);
    ++r.buckets_without_kernel;
    return;
  }
  // `in`: the factors, then the children's outputs (as the CPU read them)
  const std::size_t n_factors = plan.tree.buckets[b].factors.size();
  std::vector<gpu::DeviceInput> din;
  auto upload = [&](const double* data, std::int64_t n, const std::vector<int>& scope) {
    const gpu::Handle h = ctx.alloc(n);
    ctx.upload(h, data, n, 0);
    din.push_back({h, scope});
  };
  struct Release {
    gpu::Context& ctx;
    std::vector<gpu::DeviceInput>& din;
    gpu::Handle out = -1;
    std::vector<gpu::Handle> extra;
    ~Release() {
      try {
        ctx.synchronize(0);
        for (const auto& d : din) ctx.release(d.table);
        for (gpu::Handle h : extra) ctx.release(h);
        if (out >= 0) ctx.release(out);
      } catch (...) {  // a destructor must not throw; the first error is what matters
      }
    }
  } release{ctx, din, -1, {}};
  std::vector<gpu::DeviceInput> folded;  // factor inputs the device adds into a child's table
  std::vector<int> folded_child;
  for (std::size_t k = 0; k < m.inputs.size(); ++k) {
    const gpu::HostInput& h = m.inputs[k];
    upload(h.data, h.size, h.scope);
    if (m.fold_child[k] >= 0) {
      folded.push_back(din.back());
      folded_child.push_back(m.fold_child[k]);
      din.pop_back();
      release.extra.push_back(folded.back().table);
    }
  }
  const std::size_t first_child = din.size();
  std::vector<std::int64_t> st(shape.vars.size());
  for (std::size_t k = n_factors; k < in.size(); ++k)
    upload(in[k].data, input_strides(shape, in[k].scope, st.data()), in[k].scope);
  for (std::size_t j = 0; j < folded.size(); ++j) {
    const gpu::DeviceInput& child = din.at(first_child + folded_child[j]);
    fold_into(ctx, shape, child.table, child.scope, folded[j].table, folded[j].scope, 0);
  }
  const std::int64_t n_out = shape.output_size();
  release.out = ctx.alloc(n_out);
  ctx.run_bucket(shape, din, release.out, 0);
  std::vector<double> gpu_out(n_out);
  ctx.download(release.out, gpu_out.data(), n_out, 0);
  ctx.synchronize(0);
  double worst_abs = 0, worst_rel = 0;
  for (std::int64_t i = 0; i < n_out; ++i) {
    const double d = difference(gpu_out[i], cpu_out[i]);
    worst_abs = std::max(worst_abs, d);
    const double scale = std::isfinite(cpu_out[i]) ? std::max(1.0, std::abs(cpu_out[i])) : 1.0;
    worst_rel = std::max(worst_rel, d / scale);
  }
  spdlog::debug("check: bucket {} ({} outputs): largest difference {:.3g} ({:.3g} relative)", b,
                n_out, worst_abs, worst_rel);
  ++r.buckets;
  r.bucket_rel_diff[b] = worst_rel;
  r.max_abs_diff = std::max(r.max_abs_diff, worst_abs);
  if (r.worst_bucket < 0 || worst_rel > r.max_rel_diff) {
    r.max_rel_diff = worst_rel;
    r.worst_bucket = b;
  }
  if (!(worst_rel <= r.tolerance)) {
    if (r.first_failed_bucket < 0) r.first_failed_bucket = b;
    r.passed = false;
  }
}

}  // namespace

double run_checked(const Plan& plan, gpu::Context& ctx, int threads, CheckReport& report,
                   double tolerance, const UpwardPass& pass) {
  report = CheckReport{};
  report.tolerance = tolerance;
  report.bucket_rel_diff.assign(plan.tree.buckets.size(), NAN);
  RunOptions ro;
  ro.threads = threads;
  ro.pass = pass;
  ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                        const double* out) { check_bucket(plan, ctx, b, shape, in, out, report); };
  return run_plan(plan, ro);
}

}  // namespace kinfer::sched
