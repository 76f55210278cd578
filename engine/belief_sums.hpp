#pragma once
// The CPU's downward step of `kinfer mar` (engine/posterior.hpp): a bucket's belief summed onto
// its children's outputs and its variables in one pass. Private to engine/.
#include <span>
#include <vector>

#include "engine/cpu_kernel.hpp"

namespace kinfer::detail {

// ln of the sums of exp(belief) onto each of `targets` (each a subsequence of full.vars), where
// the belief is the product of `inputs` over every variable of `full`, in one pass that never
// stores the belief (but for a bucket of at most 4096 configurations): a block's
// products are shifted by `ln_total` (the belief's total, which no entry exceeds), taken to the
// linear domain and added onto every target. An entry below
// e^-708 of the total is taken as 0 (a probability no double holds next to 1), so a target
// entry whose terms all are comes out as -inf. Where divide[t] is set, out[t] holds on entry a
// table over target t, and the sums are divided by it in place (its -inf entries stay -inf): a
// child's message written over the child's own output, which it replaces.
void belief_sums(const BucketShape& full, std::span<const InputTable> inputs, double ln_total,
                 const std::vector<std::vector<int>>& targets, const std::vector<LnTable*>& out,
                 int threads, const std::vector<char>& divide = {},
                 const CombinedInputs* combined_before = nullptr);

// At most the bytes of the tables belief_sums builds to sum a bucket of shape `full` onto
// `targets` (its offsets, groups, local maps and deal keys), besides each thread's buffers of a
// block, the input offsets of its block pass and the targets' own sums: for the memory estimate
// of `kinfer mar` (posterior_peak_bytes).
double belief_sums_bytes(const BucketShape& full, const std::vector<std::vector<int>>& targets);

}  // namespace kinfer::detail
