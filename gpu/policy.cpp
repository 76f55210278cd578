#include "gpu/policy.hpp"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

// policy.hpp's planner lives in several files: this one (the bucket's layout, fast division, what
// a plan reports), plan_tables.cpp (the offset tables), plain_plan.cpp and cached_plan.cpp (each
// variant's launch), selector.cpp (which variant runs a bucket) and emulate.cpp (the kernels'
// table walk on the host).
namespace kinfer::gpu {

FastDiv64::FastDiv64(std::uint32_t divisor) : d(divisor) {
  if (divisor == 0) throw std::invalid_argument("FastDiv64 by zero");
  while ((std::uint64_t{1} << shift) < divisor) ++shift;
  // mul = floor(2^64 * (2^shift - d) / d) + 1 (< 2^64)
  using u128 = unsigned __int128;
  mul =
      static_cast<std::uint64_t>(((u128{1} << 64) * ((u128{1} << shift) - divisor)) / divisor + 1);
}

FastDiv::FastDiv(std::uint32_t divisor) : d(divisor) {
  if (divisor == 0) throw std::invalid_argument("FastDiv by zero");
  shift = 0;
  while ((std::uint64_t{1} << shift) < divisor) ++shift;
  // mul = floor(2^32 * (2^shift - d) / d) + 1
  mul = static_cast<std::uint32_t>(
      ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - divisor)) / divisor + 1);
}

const char* to_string(Variant v) {
  switch (v) {
    case Variant::automatic:
      return "automatic";
    case Variant::cached:
      return "cached";
    case Variant::plain:
      return "plain";
  }
  return "?";
}

double LaunchPlan::table_bytes() const {
  double b = 0;
  for_each_device_table(*this, [&](const auto& t) { b += sizeof(t[0]) * t.size(); });
  return b;
}

BucketLayout describe(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  BucketLayout lay;
  const int nv = static_cast<int>(shape.vars.size());
  lay.card = shape.card;
  lay.k = nv - shape.n_marg;
  lay.n_in = static_cast<int>(scopes.size());
  lay.n_out = shape.output_size();
  lay.M = shape.marg_size();
  std::vector<std::vector<std::int64_t>> st(scopes.size(), std::vector<std::int64_t>(nv, 0));
  std::vector<std::int64_t> size(scopes.size(), 1);
  for (std::size_t f = 0; f < scopes.size(); ++f)
    size[f] = input_strides(shape, scopes[f], st[f].data());
  std::vector<int> varying, constant;
  for (std::size_t f = 0; f < scopes.size(); ++f) {
    bool v = false;
    for (int i = lay.k; i < nv; ++i) v |= st[f][i] != 0;
    (v ? varying : constant).push_back(static_cast<int>(f));
  }
  lay.nf = static_cast<int>(varying.size());
  lay.slot_input = varying;
  lay.slot_input.insert(lay.slot_input.end(), constant.begin(), constant.end());
  for (int f : lay.slot_input) {
    lay.stride.push_back(st[f]);
    lay.in_size.push_back(size[f]);
  }
  for (int s = 0; s < lay.nf; ++s) {
    std::int64_t m = 1;
    for (int i = lay.k; i < nv; ++i)
      if (lay.stride[s][i] != 0) m *= lay.card[i];
    lay.m_f.push_back(m);
  }
  lay.out_stride.assign(nv, 0);
  for (std::int64_t i = lay.k - 1, so = 1; i >= 0; --i) {
    lay.out_stride[i] = so;
    so *= lay.card[i];
  }
  std::ostringstream why;
  if (lay.n_in > kMaxInputs)
    why << lay.n_in << " inputs (the GPU kernels take at most " << kMaxInputs << ")";
  else if (lay.nf > kMaxVarying)
    why << lay.nf << " inputs vary with the summed variables (the GPU kernels take at most "
        << kMaxVarying << ")";
  lay.unsupported = why.str();
  return lay;
}

void log_plan_prepared(const LaunchPlan& p, double table_bytes, double build_ms, double wait_ms,
                       double upload_ms) {
  spdlog::debug(
      "kernel plan of {} outputs x {} terms ({}, {} varying inputs, Mi {}, Mh {} = {} x {}): "
      "built in {:.1f} ms, {:.1f} MB of tables, lock waited {:.1f} ms, uploaded in {:.1f} ms",
      p.n_out, p.M, to_string(p.variant), p.nf_inputs, p.Mi, p.Mh, p.Mh / p.Mh2, p.Mh2, build_ms,
      table_bytes / 1e6, wait_ms, upload_ms);
}

KernelChoice summarize(const LaunchPlan& p, const Selection& s) {
  KernelChoice k;
  k.variant = p.variant;
  k.why = s.why;
  k.threads = p.threads;
  k.lanes = 1 << p.lanes_log2;
  k.splits = p.splits;
  k.pages_per_block = p.pages_per_block;
  k.blocks = p.blocks;
  k.page_outputs = p.P;
  k.varying_inputs = p.nf_inputs;
  k.tile = p.tile;
  k.cached_inputs = __builtin_popcount(p.cached_mask);
  k.shared_bytes = p.shared_bytes;
  k.hit_fraction = p.hit_fraction;
  return k;
}

}  // namespace kinfer::gpu
