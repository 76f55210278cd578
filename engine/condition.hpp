#pragma once
// Conditioning (Superlink's way to trade time for memory; cotengra calls it slicing): when the
// best order's tables do not fit the memory budget, fix a few variables C to each of their
// joint values in turn. The plan is compiled once with C removed from the tree (as if
// observed); each slice refills its inputs with C's values fixed, runs, and the slices' ln
// values are combined by log-sum-exp in slice order, so the answer does not depend on timing:
//   ln P(e) = ln sum_{x_C} P(e, C = x_C).
// Variables are chosen greedily by the peak memory they remove per unit of extra work.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/plan.hpp"

namespace kinfer {

struct Conditioning {
  std::vector<int> vars;  // conditioned variables; the slice index runs over them, last fastest
  std::vector<int> card;  // their cardinalities after value elimination
  std::int64_t slices = 1;
  double slice_peak_bytes = 0;     // the accountant's host peak while the slices run
  double flops = 0;                // estimated work of all slices together
  double unconditioned_flops = 0;  // of the same order without conditioning
  double unconditioned_peak_bytes = 0;
  // Why this plan: which order (unlimited search or the search under the limit) and the work
  // of the alternative, for the log and `kinfer info`.
  std::string choice;
  double overhead() const { return unconditioned_flops > 0 ? flops / unconditioned_flops - 1 : 0; }
};

struct ConditionedPlan {
  Plan plan;          // compiled once; when conditioned its inputs hold the current slice
  Conditioning cond;  // empty vars: an ordinary plan, one slice
  // Conditioned plans only: the reduced model's factors with C still in their scopes (the
  // source every slice is cut from), and per plan input its source factor.
  std::vector<LogFactor> source;
  std::vector<int> source_of;         // per plan factor: index into source
  std::vector<int> constant_sources;  // source factors over C only: per-slice constants
  std::vector<std::pair<int, double>> base_constants;  // the reduced model's own constants
  bool conditioned() const { return !cond.vars.empty(); }
};

// Chooses conditioning variables for `plan` (inputs need not be filled) so that the host peak
// while a slice runs fits `budget_bytes`; returns them (empty when the plan fits). `feasible`
// is set false when no choice fits (e.g. an input table alone exceeds the budget).
// With device_budget > 0, every slice's device estimate (MemoryEstimate::device_bytes) must
// fit it too; budget_bytes <= 0: no host limit.
std::vector<int> choose_conditioning(const Plan& plan, double budget_bytes, bool& feasible,
                                     double device_budget = 0);

// From a plan whose inputs are not filled yet (plan_structure) and conditioning variables:
// the plan compiled once over the model with `vars` removed, inputs of slice 0 filled.
ConditionedPlan condition_plan(Plan plan, const std::vector<int>& vars, const PlanOptions& opt);

// choose_conditioning and condition_plan until the compiled plan's own estimate fits `budget`
// (the tree rebuilt without the conditioned variables can differ from the estimate the choice
// was made on). feasible = false (and an empty result) when nothing fits.
ConditionedPlan condition_to_fit(const Plan& plan, double budget, const PlanOptions& opt,
                                 bool& feasible, double device_budget = 0);

// make_plan's counterpart that conditions instead of refusing: the best order found without a
// memory filter, conditioned to fit opt.max_memory_bytes (and opt.device_budget's answer for
// it, the device that will run it) when it does not, compared with the
// order a search under the limit finds (conditioned too if need be); keeps the one with less
// total work. Throws ResourceError, with the numbers, only when even conditioning cannot fit.
ConditionedPlan make_conditioned_plan(const Network& net, const Evidence& ev,
                                      const PlanOptions& opt);

// make_conditioned_plan's choice built again without searching (under mpirun the other ranks
// build rank 0's plan: ranks on other hardware, whose searches were sized differently, cannot
// disagree): the reduced model, `order` (every variable of a reduced factor once, those of
// `vars` may be left out as a conditioned plan's order leaves them; ResourceError when it is
// not, e.g. another network on this node) and conditioning on `vars`. The order's
// statistics are recomputed; `heuristic` says where it came from.
ConditionedPlan rebuild_conditioned_plan(const Network& net, const Evidence& ev,
                                         const PlanOptions& opt, std::vector<int> order,
                                         const std::vector<int>& vars,
                                         const std::string& heuristic);

// finish_plan's counterpart that conditions instead of refusing: `plan` (a structure from
// plan_structure or structure(), inputs not filled) compiled as is when it fits
// opt.max_memory_bytes, else conditioned to fit it. Throws ResourceError (check_memory's
// message: starting with `who`, ending with `advice`) only when even conditioning cannot fit.
ConditionedPlan fit_plan(Plan plan, const PlanOptions& opt, const std::string& who,
                         const std::string& advice);

// A compiled plan (conditioned or not, inputs filled) conditioned on more variables so that a
// slice fits `device_budget` (and `host_budget`, <= 0: none) when the device has less free memory
// at run time than when it was planned (another process took some). The extra variables are
// chosen on the compiled plan (its own conditioned variables already out); the new plan keeps
// them, then the extra ones, slowest first, and is cut from the same tables (the source, or an
// unconditioned plan's inputs, whose tables are its model's factors permuted). feasible = false
// (and an empty result) when nothing fits.
ConditionedPlan recondition(const ConditionedPlan& cp, double host_budget, double device_budget,
                            const PlanOptions& opt, bool& feasible);

// The reduced model's factors and constants of a compiled plan, conditioned or not: what a
// refill (lod's per-theta tables) rewrites. A conditioned plan holds them as its source.
const std::vector<LogFactor>& model_factors(const ConditionedPlan& cp);
std::vector<std::pair<int, double>>& model_constants(ConditionedPlan& cp);

// refill_inputs (engine/plan.hpp) for a plan that may be conditioned: new tables of factors of
// model_factors(cp) (same scope and size). An unconditioned plan restructures them now; a
// conditioned one stores them in its source, and every slice is cut from them by fill_slice.
void refill_inputs(ConditionedPlan& cp, std::vector<InputTableRefill> tables);

// Fills cp.plan's inputs and constants for slice `s` (0 <= s < cond.slices). Returns false
// when the slice is evidently impossible (a constant or an input that is zero everywhere):
// it contributes P = 0 and need not run.
bool fill_slice(ConditionedPlan& cp, std::int64_t s);

// Which work items (the slices of a plan, or any list that every process numbers alike) this
// process computes, when several share a command (mpi/: MPI ranks). An item may be computed by
// more than one process (verification). combine() gets the values of the next computed.size()
// items (`width` values per item, item after item) with `computed` set where this process
// computed them, and fills in the others from the processes that did, so that every process
// ends with the same vector.
struct SliceDealer {
  virtual ~SliceDealer() = default;
  virtual bool mine(std::uint64_t item) = 0;
  virtual void combine(std::vector<double>& value, const std::vector<char>& computed,
                       std::size_t width = 1) = 0;
};

// The seam for executors: runs every slice, one after another, through `run_slice` (which
// returns ln of the plan's value, e.g. run_plan or a runner's GPU execution) and combines them
// by log-sum-exp in slice order. An unconditioned plan is one call of run_slice. `on_slice`,
// when set, is told each slice's value (-inf for skipped ones). With a `dealer`, only the
// slices it deals to this process run here (an unconditioned plan is slice 0), the others'
// values come from its combine(), and every process returns the same ln P(e).
double run_conditioned(ConditionedPlan& cp, const std::function<double(const Plan&)>& run_slice,
                       const std::function<void(std::int64_t, double)>& on_slice = {},
                       SliceDealer* dealer = nullptr);

// run_conditioned over `lanes` devices of this process at once (several GPUs): each lane takes
// the next of this process's slices (a shared counter) and runs it on its own copy of the plan
// through run_slice(lane, plan); the values meet in slice order as above, so the answer does not
// depend on the number of lanes or which lane finished first. `lane_slices`, when given, gets
// how many slices each lane ran. lanes <= 1 is run_conditioned. An exception in a lane is
// rethrown after every lane stopped.
double run_conditioned_lanes(ConditionedPlan& cp, int lanes,
                             const std::function<double(int, const Plan&)>& run_slice,
                             SliceDealer* dealer = nullptr,
                             std::vector<int>* lane_slices = nullptr);

}  // namespace kinfer
