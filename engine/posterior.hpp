#pragma once
// Posterior marginals and a most probable explanation on a compiled plan (engine/plan.hpp),
// over the same task tree that computes P(e), in the log domain.
//
// Marginals: the upward pass of run_plan keeps every bucket's output; a downward pass then
// visits the buckets root first. A bucket's belief is the product of its inputs and the message
// from above (a table over its output variables); it is the joint P(e, bucket's variables) up to
// the constants outside the tree. The message to a child is the belief summed onto the child's
// output variables, divided by the child's own output (exact: the child's output depends on
// those variables only; where it is zero the child's belief is zero whatever the message). Each
// variable's marginal is its bucket's belief summed onto it, normalised. The belief is never
// stored: a block of its entries at a time (the products of the inputs, as the CPU kernel forms
// them) is taken to the linear domain, shifted by ln P(e) (which no entry exceeds), and added
// onto every child and variable, the threads each keeping their own sums. When a device holds
// the upward pass's outputs (UpwardPass::on_device), the buckets it ran take their downward step
// there (DeviceOutputs::downward, scheduler/downward.hpp).
//
// MPE: the same upward pass with max in place of sum (the products a block at a time, as the CPU
// kernel forms them, maximised over the eliminated variables), every output kept; then a
// traceback root first: each bucket's output variables are fixed by the buckets above it, and its eliminated
// variables take the first configuration (lowest values, most significant variable first) that
// attains the maximum of the bucket's inputs given them, up to a relative 1e-12 in ln (so that
// the maximum computed on another device, with other rounding, gives the same assignment). A
// device that holds the outputs narrows the largest scans down (DeviceOutputs::maxima).
//
// Variables outside the tree get their answer from the reduction: observed variables and those
// left with one possible value are point masses (MPE: that value); a free variable in no factor
// is uniform (MPE: its lowest value); values removed by value elimination have probability 0.
#include <functional>
#include <span>
#include <vector>

#include "engine/condition.hpp"
#include "engine/model.hpp"
#include "engine/plan.hpp"

namespace kinfer {

struct Marginals {
  double ln_pe = 0;  // ln P(e); -inf when the evidence is impossible (then `p` is empty)
  // Per network variable, over its declared domain: P(X = x | e).
  std::vector<std::vector<double>> p;
};

// The upward pass that compute_marginals and compute_mpe run first: every bucket's output into
// pass.outputs, maximising when pass.maximise (engine/plan.hpp UpwardPass). The commands give
// the scheduler's Runner (any device and placement); empty: run_plan, every bucket on the CPU.
using UpwardRunner = std::function<void(const Plan&, const UpwardPass&)>;

// The plan must be unconditioned (a conditioned plan's inputs hold one slice only).
// `threads` <= 0: OpenMP's default (the second pass's; the upward pass's are `upward`'s).
Marginals compute_marginals(const Plan& plan, int threads = 0, const UpwardRunner& upward = {});

struct MostProbable {
  double ln_pr = 0;  // ln max_x P(x, e); -inf when the evidence is impossible (then no assignment)
  std::vector<int> assignment;  // per network variable, a value of its declared domain
};

MostProbable compute_mpe(const Plan& plan, int threads = 0, const UpwardRunner& upward = {});

// The same on a conditioned plan (engine/condition.hpp), exactly: every slice C = c runs in turn
// (its inputs refilled by fill_slice). Marginals: P(e, X = x) = sum_c P(e, C = c) P(X = x | e,
// C = c), the slices weighed in the log domain, and C's own marginals P(e, C = c) / P(e). MPE:
// the most probable slice's assignment (the first slice among equals), C at that slice's
// values. An unconditioned `cp` is one slice, the plan's own answer.
Marginals compute_marginals(ConditionedPlan& cp, int threads = 0,
                            const UpwardRunner& upward = {});
MostProbable compute_mpe(ConditionedPlan& cp, int threads = 0, const UpwardRunner& upward = {});

// Host bytes at the peak of compute_marginals (`marginals`) or compute_mpe on `plan`, counted
// like MemoryEstimate::peak_bytes: the plan's inputs, every bucket's output kept for the second
// pass, for marginals the messages from above and each thread's sums of a belief onto a bucket's
// children and variables (at most omp_get_max_threads() threads), and each thread's block buffers.
double posterior_peak_bytes(const Plan& plan, bool marginals);

// ln of the product of the network's factors at a full assignment (-inf when one is zero).
double ln_joint(const Network& net, std::span<const int> assignment);

}  // namespace kinfer
