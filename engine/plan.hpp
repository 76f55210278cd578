#pragma once
// From a network and evidence to ln P(e): reduce, order, build the task tree, estimate memory,
// then run every bucket with the CPU kernel. A Plan is computed once and can be run many times.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu_kernel.hpp"
#include "engine/model.hpp"
#include "engine/ordering.hpp"
#include "engine/reduce.hpp"
#include "engine/task_tree.hpp"

namespace kinfer {

// The one memory accountant: host bytes alive at the peak of a plan's life, by what holds them.
// Planning holds the network, the reduced model and the restructured inputs at once; running
// holds the inputs, the intermediate tables alive at the worst step of the executor (each
// bucket's output is allocated before its children's tables are freed) and the kernel's
// scratch. peak_bytes is the larger of the two phases plus the program itself. The device part
// (GPU context on the host, staging, device tables) is left to the runner that uses a device.
struct MemoryEstimate {
  double process_bytes = 0;       // the program itself: code, libraries, thread stacks, logging
  double network_bytes = 0;       // the network's tables as read (linear domain)
  double model_bytes = 0;         // the reduced model's log tables
  double input_bytes = 0;         // restructured input tables (the plan's inputs)
  double intermediate_bytes = 0;  // the most intermediate tables alive at once while running
  double scratch_bytes = 0;       // kernel scratch: per-thread buffers, offsets, combined inputs
  double source_bytes = 0;        // conditioning: the unconditioned tables each slice is cut from
  bool tables_kept = true;        // network and model tables stay alive while the plan runs
  double device_host_bytes = 0;   // filled by the runner: GPU context and staging on the host
  // Device memory at its peak when every bucket runs on a GPU: the inputs (uploaded at the
  // start) and the intermediate tables alive at the executor's worst step.
  double device_bytes = 0;
  double planning_bytes = 0;  // host total while planning
  double running_bytes = 0;   // host total while running
  double peak_bytes = 0;      // max(planning, running): what --max-memory is checked against
  double largest_table_bytes = 0;
  int largest_bucket = -1;  // bucket producing the largest table
  int threads = 0;          // the kernel threads the scratch was counted for
};

struct Plan;
struct PlanOptions {
  OrderOptions order;
  ReduceOptions reduce;
  double max_memory_bytes = 0;  // 0: no limit
  // False when the plan runs once and its caller drops the network after planning (kinfer pe):
  // the reduced model's tables are then freed once restructured, and neither is counted while
  // the plan runs. Plans that are refilled (lod, batch's shared plans) keep both.
  bool keep_tables = true;
  // When set, elimination orders are cached here, keyed by the reduced structure: jobs and runs
  // that share a network structure (e.g. the same pedigree with other evidence) share the order.
  // Empty or "none": no cache (the commands resolve --order-cache and KINFER_ORDER_CACHE).
  std::string order_cache_dir;
  // The device memory budget of the device that will run a plan (the runner's, from
  // --gpu-memory), asked of the best order's plan: 0 when it runs on the CPU. A plan whose
  // device_bytes exceed it is conditioned so that every slice fits (engine/condition.hpp).
  std::function<double(const Plan&)> device_budget;
};

struct Plan {
  Evidence evidence;
  ReduceOptions reduce_options;
  ReducedModel model;
  OrderResult order;
  TaskTree tree;
  MemoryEstimate memory;
  double network_bytes = 0;  // the network's tables when planned (for re-estimates)
  double flops = 0;          // estimated work: state space x (inputs + 2) per bucket, summed
  int components = 0;
  // Inputs in global order, grouped per bucket (restructured once).
  std::vector<std::vector<double>> input_data;  // per reduced factor
  std::vector<std::vector<int>> input_scope;    // per reduced factor
};

// Orders and builds the tree; does not allocate intermediate tables. The order is searched
// without the memory limit first (the limit must not make it keep a worse order that fits);
// only when that order does not fit is a search under the limit tried. Throws ResourceError
// when no order fits max_memory_bytes (engine/condition.hpp conditions instead of refusing).
Plan make_plan(const Network& net, const Evidence& ev, const PlanOptions& opt);

// The first half of make_plan, for planners that choose plan.order their own way
// (linkage/order.cpp): the reduced model and its component count in `plan`, the reduced
// factors' scopes, and the order options with the memory limit as a bound on table entries.
struct PlanStart {
  Plan plan;
  std::vector<std::vector<int>> scopes;
  OrderOptions order;
};
PlanStart start_plan(const Network& net, const Evidence& ev, const PlanOptions& opt);

// The reduced model of make_plan and the best order found for it without a memory limit.
struct OrderedModel {
  ReducedModel model;
  OrderResult order;
  int components = 0;
};
OrderedModel order_model(const Network& net, const Evidence& ev, const PlanOptions& opt);

// find_order through the order cache in `cache_dir` ("none" or empty: no cache), keyed by the
// reduced structure and every option of `oo` (a cached order is the one the search would find).
OrderResult find_order_cached(int num_vars, const ReducedModel& model,
                              const std::vector<std::vector<int>>& scopes, const OrderOptions& oo,
                              std::string cache_dir);

// A plan for `order` over `om.model` with its tree, statistics and memory estimate, inputs not
// yet restructured (fill_inputs does it). Cheap: used to compare candidate orders.
Plan plan_structure(const Network& net, const Evidence& ev, const PlanOptions& opt,
                    ReducedModel model, OrderResult order);

// Builds plan.tree from plan.model and plan.order; sets the tree's own statistics in
// plan.order.stats, plan.memory (the accountant) and plan.flops.
void structure(Plan& plan, const PlanOptions& opt);

// ResourceError (starting with `who` when not empty, ending with `advice`) when the plan's
// estimated peak exceeds opt.max_memory_bytes.
void check_memory(const Plan& plan, const PlanOptions& opt, const std::string& who,
                  const std::string& advice);

// ResourceError at once when opt.max_memory_bytes is below what every plan of `model` holds
// while planning (the program, the network's tables and the reduced tables): no order search
// can fit such a limit. make_plan, make_conditioned_plan and start_plan call it.
void check_memory_floor(const Network& net, const ReducedModel& model, const PlanOptions& opt);

// Restructures the plan's inputs from its model (and frees the model's tables unless
// opt.keep_tables).
void fill_inputs(Plan& plan, const PlanOptions& opt);

// The second half of make_plan, for planners that choose plan.order their own way
// (linkage/order.cpp): builds the task tree, reports the tree's own statistics in
// plan.order.stats, checks the memory estimate (ResourceError starting with `who`, when not
// empty, and ending with `advice`) and restructures the inputs.
void finish_plan(Plan& plan, const PlanOptions& opt, const std::string& who,
                 const std::string& advice);

// The accountant. `network_bytes`: the network's tables (0 when not held); `threads`: the
// kernel's threads (0: OpenMP's default).
MemoryEstimate estimate_memory(const ReducedModel& model, const TaskTree& tree,
                               double network_bytes = 0, bool keep_tables = true, int threads = 0);
// Recomputes planning_bytes, running_bytes and peak_bytes from the parts (after a runner filled
// the device part, or conditioning the source part).
void update_peak(MemoryEstimate& m);
// Bytes of a network's tables as read.
double network_table_bytes(const Network& net);
// The program's own resident memory (code, libraries, logging, thread stacks), a measured
// constant plus a little per thread.
double process_bytes(int threads);
// The CPU kernel's scratch for a bucket with `inputs` tables and 2^log2_states states.
double kernel_scratch_bytes(int inputs, double log2_states, int threads);
// Intermediate tables alive at once at the executor's worst step, for per-bucket output sizes
// (log2 entries) on `tree`'s structure.
double intermediate_peak_bytes(const TaskTree& tree, const std::vector<double>& log2_output);
// Bytes of the reduced model's tables (each a full table over its scope).
double model_table_bytes(const ReducedModel& model);
// One bucket's estimated work: its state space x (inputs + 2); estimate_flops sums it.
double bucket_flops(const Bucket& bucket);
double estimate_flops(const TaskTree& tree);

// Bucket outputs an upward pass left on a device (UpwardPass::on_device): the MPE's traceback
// reads the few entries it needs of each instead of copying every table to the host, and the
// marginals' downward pass runs on that device.
class DeviceOutputs {
 public:
  virtual ~DeviceOutputs() = default;  // releases the device's tables
  // Whether bucket b's output is held there (its entry in UpwardPass::outputs is then empty).
  virtual bool holds(int b) const = 0;
  // Entries [first, first + n) of bucket b's output, into to[0, n).
  virtual void read(int b, std::int64_t first, std::int64_t n, double* to) = 0;
  // Bucket b's factor inputs that the device added into the tables of b's children it holds,
  // as (position in b's factor list, position of the child in b's children): those tables
  // include them, so b's traceback leaves them out of b's inputs.
  virtual std::span<const std::pair<int, int>> folded(int b) const = 0;
  // The MPE traceback's large scans narrowed down on the device: out[o] = the maximum over the
  // last shape.n_marg variables of the product of `inputs`, for every configuration o of the
  // others, computed there. An input is a host table (InputTable's contract) or, where
  // held[i].bucket >= 0 (`held` empty: none is), the entries of that bucket's held output from
  // held[i].first on, as many as its scope has configurations (its data is then ignored): read
  // where it is, not copied back. false when it cannot (no kernel takes the shape, or no
  // memory): then nothing is written. The traceback asks for it where a scan has more than
  // maxima_from() entries (configurations times inputs), or reads more than held_from() entries
  // of held outputs.
  struct HeldPart {
    int bucket = -1;
    std::int64_t first = 0;
  };
  virtual double maxima_from() const = 0;
  virtual double held_from() const = 0;
  virtual bool maxima(const BucketShape& shape, std::span<const InputTable> inputs,
                      std::span<const HeldPart> held, double* out) = 0;
  // The marginals' downward pass (engine/posterior.hpp), root first, each bucket where the upward
  // pass ran it: the device's buckets there, the others by on_host(b), which reads the message
  // from above in down[b] (copied back where the device computed it) and writes its children's
  // down[c] and its eliminated variables' joint[v]. For each variable eliminated on the device,
  // joint[v] is ln of its bucket's belief summed onto it. `up`: the outputs on the host (empty
  // where held; a held one is copied there when its parent's step runs on the host). The held
  // tables are used up. false when the device lacked the memory on the way: then `up`, `down`
  // and `joint` are partly used and the caller starts again.
  virtual bool downward(const Plan& plan, std::vector<LnTable>& up, std::vector<LnTable>& down,
                        std::vector<LnTable>& joint,
                        const std::function<void(int)>& on_host, int threads) = 0;
};

// What an upward pass over a plan computes besides ln P(e), for `kinfer mar` and `kinfer mpe`
// (engine/posterior.hpp): every bucket maximises instead of summing (`maximise`: max-product,
// the MPE's pass), and every bucket's output is copied into `outputs` (one table per bucket, in
// bucket order; nullptr: none kept). Every executor takes it: run_plan, the scheduler's
// executor on any placement, its check mode.
struct UpwardPass {
  bool maximise = false;
  std::vector<LnTable>* outputs = nullptr;
  // With `outputs`: the outputs of GPU buckets whose parent is a GPU bucket may stay on the
  // device, when it has room for all of them at once (and, for the marginals, for their downward
  // pass there): the executor then puts their reader here (and leaves their host entries empty).
  // nullptr: every output to the host.
  std::unique_ptr<DeviceOutputs>* on_device = nullptr;
  // With `outputs`: each bucket's inputs as its CPU kernel combined them (CombinedInputs; empty
  // where it read them as they are, or ran on a device), for the passes after this one.
  std::vector<CombinedInputs>* combined = nullptr;
  // Bucket b's entry of `combined` where the pass keeps them (sized by the run), else nullptr.
  CombinedInputs* combined_of(int b) const {
    return outputs && combined ? &(*combined)[b] : nullptr;
  }
};

// The shape and the input scopes of bucket b (inputs: its factors, then its children).
BucketShape bucket_shape(const Plan& plan, int b);
// The same, maximising when `pass` asks.
BucketShape bucket_shape(const Plan& plan, int b, const UpwardPass& pass);

struct RunOptions {
  int threads = 0;
  UpwardPass pass;
  // Optional per-bucket hook, e.g. to run a bucket on another backend and compare.
  std::function<void(int bucket, const BucketShape&, std::span<const InputTable>,
                     const double* out)>
      after_bucket;
};

// Compile once, evaluate many: the one way to change a compiled plan's input tables. Each entry
// gives factor `factor` of plan.model a new log table (same scope, same kept values, so the
// order and the task tree hold) and restructures it into the plan's input. All tables are
// checked and restructured before any is stored: on std::logic_error (a table whose size is not
// its factor's) the plan is unchanged.
struct InputTableRefill {
  std::size_t factor;
  std::vector<double> logv;
};
void refill_inputs(Plan& plan, std::vector<InputTableRefill> tables);

// refill_inputs from a network: re-reads the tables of the network factors `changed` (whose
// scopes and the evidence are unchanged) by reducing the network afresh. Throws
// std::logic_error if the new tables change which values value elimination keeps.
void refill_factors(Plan& plan, const Network& net, std::span<const int> changed);

// Returns ln P(e) (−inf when the evidence is impossible): the root's value plus the model's
// constant; for a maximising pass (RunOptions::pass) the caller adds its own constants to the
// root's value (compute_mpe).
double run_plan(const Plan& plan, const RunOptions& opt = {});

}  // namespace kinfer
