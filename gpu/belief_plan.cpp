#include "gpu/belief_plan.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace kinfer::gpu {

namespace {

// The offsets, in a table of strides st, of each configuration of shape.vars[first, last) (the
// last fastest).
std::vector<std::int64_t> range_offsets(const BucketShape& shape, const std::int64_t* st, int first,
                                        int last) {
  std::vector<std::int64_t> off{0};
  for (int v = first; v < last; ++v) {
    std::vector<std::int64_t> next;
    next.reserve(off.size() * shape.card[v]);
    for (std::int64_t o : off)
      for (int d = 0; d < shape.card[v]; ++d) next.push_back(o + d * st[v]);
    off = std::move(next);
  }
  return off;
}

std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

std::string why_no_belief_sums(const BucketShape& shape,
                               std::span<const std::vector<int>> input_scopes,
                               std::span<const std::vector<int>> target_scopes) {
  if (target_scopes.empty()) return "no target";
  if (input_scopes.size() + target_scopes.size() > static_cast<std::size_t>(kBeliefMaxTables))
    return "more than " + std::to_string(kBeliefMaxTables) + " inputs and targets";
  if (!shape.vars.empty() && shape.card.back() > kBeliefInner)
    return "a last variable of more than " + std::to_string(kBeliefInner) + " states";
  std::vector<std::int64_t> st(shape.vars.size());
  for (const auto* scopes : {&input_scopes, &target_scopes})
    for (const std::vector<int>& s : *scopes)
      if (input_strides(shape, s, st.data()) > std::numeric_limits<std::int32_t>::max())
        return "a table of 2^31 entries or more";
  return {};
}

BeliefPlan make_belief_plan(const BucketShape& shape,
                            std::span<const std::vector<int>> input_scopes,
                            std::span<const std::vector<int>> target_scopes) {
  if (const std::string why = why_no_belief_sums(shape, input_scopes, target_scopes); !why.empty())
    throw std::invalid_argument("belief sums: " + why);
  const int nv = static_cast<int>(shape.vars.size());
  BeliefPlan p;
  p.n_in = static_cast<int>(input_scopes.size());
  p.n_t = static_cast<int>(target_scopes.size());
  const int n_tab = p.n_in + p.n_t;
  int first_inner = nv;
  while (first_inner > 0 && p.inner * shape.card[first_inner - 1] <= kBeliefInner)
    p.inner *= shape.card[--first_inner];
  int first_lo = first_inner;
  while (first_lo > 0 && p.lo * shape.card[first_lo - 1] <= kBeliefLo)
    p.lo *= shape.card[--first_lo];
  p.outer = p.lo;
  for (int v = 0; v < first_lo; ++v) {
    p.hi_card.push_back(shape.card[v]);
    p.outer *= shape.card[v];
  }
  const auto n_hi = static_cast<std::size_t>(first_lo);
  std::vector<std::vector<std::int64_t>> st(n_tab, std::vector<std::int64_t>(nv));
  for (int k = 0; k < n_tab; ++k) {
    const std::vector<int>& scope = k < p.n_in ? input_scopes[k] : target_scopes[k - p.n_in];
    const std::int64_t size = input_strides(shape, scope, st[k].data());
    if (k >= p.n_in) p.target_size.push_back(size);
    for (std::size_t v = 0; v < n_hi; ++v) p.hi_stride.push_back(st[k][v]);
    for (std::int64_t o : range_offsets(shape, st[k].data(), first_lo, first_inner))
      p.lo_off.push_back(static_cast<std::int32_t>(o));
    if (k < p.n_in)
      for (std::int64_t o : range_offsets(shape, st[k].data(), first_inner, nv))
        p.in_off.push_back(static_cast<std::int32_t>(o));
  }
  for (int t = 0; t < p.n_t; ++t) {
    const std::vector<std::int64_t>& s = st[p.n_in + t];
    // Its configurations of the inner variables (keys), each tile entry's, and each key's
    // offset in the target.
    std::vector<std::int64_t> key_stride(nv, 0);
    std::int64_t keys = 1;
    for (int v = nv - 1; v >= first_inner; --v)
      if (s[v] != 0) key_stride[v] = keys, keys *= shape.card[v];
    const std::vector<std::int64_t> key = range_offsets(shape, key_stride.data(), first_inner, nv);
    const std::vector<std::int64_t> off = range_offsets(shape, s.data(), first_inner, nv);
    const std::int64_t per = p.inner / keys;
    p.per.push_back(static_cast<std::int32_t>(per));
    p.at_first.push_back(static_cast<std::int32_t>(p.at.size()));
    std::vector<std::int32_t> at(keys, 0);
    std::vector<std::int16_t> order(p.inner);
    std::vector<std::int64_t> filled(keys, 0);
    for (std::int64_t j = 0; j < p.inner; ++j) {
      at[key[j]] = static_cast<std::int32_t>(off[j]);
      order[key[j] * per + filled[key[j]]++] = static_cast<std::int16_t>(j);
    }
    p.at.insert(p.at.end(), at.begin(), at.end());
    p.order.insert(p.order.end(), order.begin(), order.end());
    bool inner_only = true;
    for (int v = 0; v < first_inner; ++v) inner_only = inner_only && s[v] == 0;
    const std::int64_t size = p.target_size[t];
    if (inner_only && p.shared_entries + size <= kBeliefSharedMax) {
      p.shared_at.push_back(p.shared_entries);
      p.shared_entries += static_cast<int>(size);
    } else {
      p.shared_at.push_back(-1);
    }
  }
  return p;
}

std::vector<std::byte> belief_image(const BeliefPlan& p, std::vector<std::size_t>& offsets) {
  std::vector<std::byte> image;
  offsets.clear();
  const auto put = [&](const auto& v) {
    offsets.push_back(image.size());
    const std::size_t bytes = v.size() * sizeof(v[0]);
    image.resize(align16(image.size() + bytes));
    if (bytes > 0) std::memcpy(image.data() + offsets.back(), v.data(), bytes);
  };
  put(p.hi_stride);
  put(p.hi_card);
  put(p.lo_off);
  put(p.in_off);
  put(p.order);
  put(p.per);
  put(p.at_first);
  put(p.at);
  put(p.shared_at);
  return image;
}

void emulate_belief_sums(const BeliefPlan& p, std::span<const double* const> inputs,
                         double ln_total, std::span<double* const> targets) {
  const int n_tab = p.n_in + p.n_t;
  const auto n_hi = p.hi_card.size();
  for (int t = 0; t < p.n_t; ++t) std::fill(targets[t], targets[t] + p.target_size[t], 0.0);
  std::vector<std::int64_t> base(n_tab);
  std::vector<double> belief(p.inner), kept(p.shared_entries, 0.0);
  for (std::int64_t o = 0; o < p.outer; ++o) {
    const std::int64_t h = o / p.lo, l = o % p.lo;
    for (int k = 0; k < n_tab; ++k) {
      std::int64_t rest = h, b = 0;
      for (std::size_t v = n_hi; v-- > 0;) {
        b += (rest % p.hi_card[v]) * p.hi_stride[k * n_hi + v];
        rest /= p.hi_card[v];
      }
      base[k] = b + p.lo_off[k * p.lo + l];
    }
    for (std::int64_t j = 0; j < p.inner; ++j) {
      double x = 0;
      for (int s = 0; s < p.n_in; ++s) x += inputs[s][base[s] + p.in_off[s * p.inner + j]];
      belief[j] = std::exp(x - ln_total);
    }
    for (int t = 0; t < p.n_t; ++t) {
      double* to =
          p.shared_at[t] >= 0 ? kept.data() + p.shared_at[t] : targets[t] + base[p.n_in + t];
      const std::int32_t* at = p.at.data() + p.at_first[t];
      const std::int16_t* order = p.order.data() + t * p.inner;
      for (std::int64_t q = 0; q < p.inner; ++q) to[at[q / p.per[t]]] += belief[order[q]];
    }
  }
  for (int t = 0; t < p.n_t;
       ++t)  // the targets kept apart, as the kernel keeps them in shared memory
    if (p.shared_at[t] >= 0) {
      if (p.shared_at[t] + p.target_size[t] > p.shared_entries)
        throw std::logic_error("belief sums: a target beyond the shared accumulators");
      for (std::int64_t i = 0; i < p.target_size[t]; ++i) targets[t][i] += kept[p.shared_at[t] + i];
    }
  for (int t = 0; t < p.n_t; ++t)
    for (std::int64_t i = 0; i < p.target_size[t]; ++i) {
      double& x = targets[t][i];
      x = x > 0 ? std::log(x) + ln_total : -std::numeric_limits<double>::infinity();
    }
}

}  // namespace kinfer::gpu
