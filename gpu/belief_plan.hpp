#pragma once
// The launch plan of Context::belief_sums (the marginals' downward pass, scheduler/downward.hpp):
// a bucket's belief, the product of its inputs over all its variables, summed onto several
// targets (tables over some of its variables) in one pass over its configurations, where one
// sum-product kernel per target would pass over them once each. Plain C++: built and tested
// without CUDA; emulate_belief_sums walks the tables as the kernel does.
//
// A configuration i of the bucket is split into three parts, the last variables fastest:
//   i = (h * lo + l) * inner + j
// j over the `inner` configurations of the bucket's last variables (a tile, one per block step),
// l over the `lo` configurations of the variables before them, h over the rest. A table's entry
// for i (inputs and targets alike) is
//   hi_base(h) + lo_off[l] + in_off[j]
// with hi_base from the hi variables' digits and strides (once per h), lo_off and in_off from the
// plan's tables. A tile's beliefs are exponentiated against ln_total (the belief's total: no entry
// exceeds it; an entry below e^-708 of it counts as 0) and added onto each target: a target's
// entries in a tile (`keys`: its configurations of the inner variables, `per` tile entries each)
// are taken in the order `order`, so that each key's entries are adjacent and a warp adds them up
// before one atomic add per key. A target over inner variables only, of at most
// kBeliefSharedMax entries, is summed in shared memory through the block's whole range first.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"  // BucketShape

namespace kinfer::gpu {

inline constexpr int kBeliefMaxTables = 32;             // inputs and targets together
inline constexpr std::int64_t kBeliefInner = 1024;      // a tile's configurations, at most
inline constexpr std::int64_t kBeliefLo = 1024;         // the lo table's rows, at most
inline constexpr std::int64_t kBeliefSharedMax = 1024;  // shared accumulators, all targets

struct BeliefPlan {
  int n_in = 0, n_t = 0;
  std::int64_t inner = 1, lo = 1;
  std::int64_t outer = 1;                 // tiles: h * lo + l over every h and l
  std::vector<int> hi_card;               // the hi variables' cardinalities, most significant first
  std::vector<std::int64_t> hi_stride;    // [table][hi variable]; tables: inputs, then targets
  std::vector<std::int32_t> lo_off;       // [table][l]
  std::vector<std::int32_t> in_off;       // [input][j]
  std::vector<std::int16_t> order;        // [target][q]: the tile entry taken at position q
  std::vector<std::int32_t> per;          // [target]: tile entries per key (key = q / per)
  std::vector<std::int32_t> at_first;     // [target]: where its `at` rows start
  std::vector<std::int32_t> at;           // [at_first[t] + key]: the key's offset in target t
  std::vector<std::int32_t> shared_at;    // [target]: its accumulators in shared memory, or -1
  std::vector<std::int64_t> target_size;  // [target]: its entries
  int shared_entries = 0;
};

// Why belief_sums does not take a bucket with these inputs and targets (each a subsequence of
// shape.vars): empty when it does.
std::string why_no_belief_sums(const BucketShape& shape,
                               std::span<const std::vector<int>> input_scopes,
                               std::span<const std::vector<int>> target_scopes);

// The plan; std::invalid_argument with why_no_belief_sums's reason where it does not take them.
BeliefPlan make_belief_plan(const BucketShape& shape,
                            std::span<const std::vector<int>> input_scopes,
                            std::span<const std::vector<int>> target_scopes);

// The plan's tables as the device reads them: one image, each table 16-byte aligned, in the
// order hi_stride, hi_card, lo_off, in_off, order, per, at_first, at, shared_at; `offsets` gets
// each table's byte offset in the image.
std::vector<std::byte> belief_image(const BeliefPlan& p, std::vector<std::size_t>& offsets);

// The kernel's walk on the host, in the same order of tiles, keys and additions: targets[t]
// (target_size[t] entries each) get ln of their sums, -inf where a sum is 0.
void emulate_belief_sums(const BeliefPlan& p, std::span<const double* const> inputs,
                         double ln_total, std::span<double* const> targets);

}  // namespace kinfer::gpu
