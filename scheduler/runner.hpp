#pragma once
// The one path from a Plan to its answer, for every command (`kinfer pe`, the plans of
// `kinfer lod`, the batch worker's jobs): where the plan runs (the --device decision and its one
// auto threshold), which buckets go where (a policy of policies.hpp, from the profile read once,
// with the one fallback when there is none), and the executor (executor.hpp) that runs it, or
// its check mode. The GPU is opened once, lazily, by the first plan that uses it; a Runner is
// meant to live as long as the command and to run many plans.
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/condition.hpp"
#include "engine/errors.hpp"
#include "engine/plan.hpp"
#include "scheduler/devices.hpp"
#include "scheduler/executor.hpp"
#include "scheduler/policies.hpp"
#include "scheduler/profile.hpp"

namespace kinfer::sched {

// `--device auto` decides from the profile of the machine's GPU (auto_choice); without one, and
// for the batch's GPU slots, it uses the GPU for plans of at least this many FLOP: below it,
// starting the device costs more than the whole CPU computation.
inline constexpr double kAutoGpuMinFlops = 1e9;
inline bool auto_wants_gpu(double plan_flops) { return plan_flops >= kAutoGpuMinFlops; }
// Seconds to start the GPU (driver and context) in a fresh process when the profile does not
// say (docs/performance.md).
inline constexpr double kGpuStartSeconds = 0.2;

// With a GPU in use and no policy asked for. Chosen by measurement on the GPU machine
// (docs/performance.md).
inline constexpr Policy kDefaultGpuPolicy = Policy::comm_aware;

struct RunRequest {
  DeviceChoice device = DeviceChoice::automatic;
  std::optional<Policy> policy;  // none: kDefaultGpuPolicy when the GPU is used
  // Empty: the profile for the machine's GPU (profile.hpp find_profile_for_gpu: the user's, an
  // automatic calibration's, or a shipped one); when there is none, whole-plan, or, with
  // auto_calibrate_seconds > 0 and the GPU used for a plan of at least kAutoGpuMinFlops, a
  // calibration that long cached for the next runs. Off by default (the commands set it from
  // $KINFER_AUTO_CALIBRATE, apps/environment.hpp): short calibrations placed worse than
  // whole-plan (docs/performance.md).
  std::string profile_path;
  double auto_calibrate_seconds = 0;
  bool check = false;    // every bucket on the CPU and the GPU, compared (executor.hpp)
  bool explain = false;  // log each bucket's device and reason
  int threads = 0;       // CPU kernel threads (0: OpenMP's default)
  int repeat = 0;        // compute this many more times with the same placement (timing)
  // The plans run are refills of one plan (lod: per theta): after the first GPU run the
  // schedule does not charge the first use of a kernel shape again.
  bool repeated_plans = false;
  // Which visible GPU this runner opens (several GPUs in one process: one runner per GPU).
  int gpu_index = 0;
  // --gpu-memory: device memory a plan's tables may use at once (0: 90% of the device's free
  // memory when it opens). Plans whose device estimate exceeds it are conditioned
  // (device_budget), and the executor keeps its live device bytes under it.
  double gpu_memory_bytes = 0;
  // --max-memory: with several GPUs each runs its own copy of a conditioned plan (slice_lanes);
  // 0: no limit.
  double host_memory_bytes = 0;
  // Diagnostics of the GPU runs (ExecOptions::timeline_path, shapes_path); empty: none.
  std::string gpu_timeline_path, gpu_shapes_path;
};

// The CUDA context's own host memory (driver, runtime and kernel images mapped into the
// process), measured on the GPU machine as RSS of `kinfer pe --device auto` less the estimate's
// other parts: 94 MiB before kernel 3 and the chain kernels, 119 MiB after (Pedigree_11
// --device gpu 135 MiB against 16 MiB); with kernel 9's compiled terms up to 143 MiB under the
// driver's 8 work queues and 54-73 MiB under the one that kinfer's main() asks for (linkage_11/
// 12/13, pedigree50; docs/performance.md):
// 80 MiB and 10 MiB per further queue (CUDA_DEVICE_MAX_CONNECTIONS; the driver's 8 when unset).
double gpu_context_host_bytes();

struct BucketRun {
  Device device = Device::cpu;  // where it ran
  std::string reason;           // why: the policy's reason, then any fallback of the executor
};

struct RunResult {
  double ln_pr = 0;
  std::string device;       // "cpu", "gpu", "gpu+cpu", or "cpu+gpu" for a check
  std::string requested;    // the policy asked for (or its default)
  std::string policy;       // the policy that ran, after fallbacks
  std::string profile;      // the profile it predicted from, if any
  std::string note;         // fallbacks taken
  std::string gpu_name;     // the GPU used, if any
  std::string why_not_gpu;  // why not, when the request could have used one
  int gpu_buckets = 0, cpu_buckets = 0, merged_buckets = 0;
  double h2d_bytes = 0, d2h_bytes = 0;  // what crossed
  double device_peak_bytes = 0;         // the most device bytes held at once (max over slices)
  double predicted_seconds = NAN;       // the schedule's predicted cost (profile policies)
  double device_seconds = 0;            // waiting for the GPU to open (first GPU run only)
  double schedule_seconds = 0;          // reading the profile, predicting, assigning
  double first_seconds = 0;             // the computation (scheduling included)
  std::vector<double> repeats;          // RunRequest::repeat: the computations after it
  std::vector<BucketRun> buckets;       // per bucket
  std::optional<CheckReport> check;     // --check with a GPU
  std::string check_not_run;            // --check without a GPU: why
  // run(ConditionedPlan&): per lane (one per GPU sharing the slices; one lane without), the
  // device of its first slice ("cpu" when it ran on the CPU, empty when it ran none) and how
  // many slices it ran.
  struct Lane {
    std::string name;
    int slices = 0;
  };
  std::vector<Lane> lanes;
};

// How many GPUs of this process share a conditioned plan's slices: all `gpus` of them, as many as
// the plan's copies fit `host_memory_bytes` (each GPU's runner fills a copy of the plan's inputs:
// counted at the plan's whole estimated peak, which overstates it; 0: no limit) and no more than
// the slices. 1 for an unconditioned plan or fewer than 2 GPUs.
int slice_lanes(int gpus, const ConditionedPlan& cp, double host_memory_bytes);

// Of `lanes` GPUs that could share a conditioned plan's slices, how many pay for their start:
// each GPU more (started one after another, kGpuStartSeconds each) must save more than the
// starts before it cost, by the predicted seconds of the slices (kGpuSliceBaseSeconds each plus
// their states at kGpuStatesPerSecond).
int lanes_that_pay(const ConditionedPlan& cp, int lanes);
// A slice's fixed cost on the GPU (its inputs refilled and uploaded, the plan's kernels
// launched): 8 ms per slice for pedigree50 under --gpu-memory 2G (72 slices in 0.58 s) and 12 ms
// for linkage_11's 8 slices under --gpu-memory 256M, on one H200 (BENCHMARKS.md multi-gpu).
inline constexpr double kGpuSliceBaseSeconds = 0.008;

// `--device auto` from a profile: the plan's predicted time on the CPU alone against its best
// placement with the GPU (`policy`'s schedule, plus `start_seconds` to start the device). The
// GPU only when it is predicted faster, so auto is never predicted slower than the CPU.
struct AutoChoice {
  bool gpu = false;
  double cpu_seconds = 0, gpu_seconds = 0;  // predicted, the GPU's with its start
  std::string why;
};
// `gpu_schedule`, when given, receives `policy`'s schedule (the placement run() would use).
AutoChoice auto_choice(const Plan& plan, const Profile& profile, Policy policy,
                       double start_seconds, Schedule* gpu_schedule = nullptr);

// The "schedule", "gpu" and "check" members of `kinfer pe --json` (and of a batch pe job's
// result), from a run.
nlohmann::json run_json(const RunResult& r, bool explain);
// The "check" object of --json for one check report (pe: one run; lod: every plan run).
nlohmann::json check_json(const CheckReport& c);
// "check: passed (...)" / "check: FAILED at bucket N (...)" / "check: not run (...)".
std::string check_verdict(const RunResult& r);
std::string check_report_verdict(const CheckReport& c);

// The order search's prediction with a GPU in the machine: the smaller of the CPU's and the
// GPU's, in the search's unit, nominal core-seconds (fixed rates, so that the same seed gives the
// same order whatever the thread count). Searching 2 s for an order the GPU computes in 0.1 s
// loses.
double gpu_sized_prediction(const OrderStats& s);
// Its rates, measured on the H100 (docs/performance.md):
// the GPU computes a plan in about kGpuComputeBase + states / kGpuStatesPerSecond once started,
// and the search does kSearchCoreSecondsPerSecond nominal core-seconds per second on 16 cores
// (5.7-7.6 with rounds of 32 restarts + 12 chains, order_bench on the H100 machine).
// The GPU's part is at least kGpuSearchFloorStarts x kGpuStartSeconds (0.9 nominal core-s of
// search, 0.15-0.17 s on the H100 machine's 16 cores): the search runs while the device starts
// in the background (open 0.24-0.30 s into a cold run there), so it costs little. Measured
// against 2, 4 and 6 starts: 2 stopped the search at ~0.1 s and 3 gave better orders on
// linkage_13/17/18 (GPU compute of linkage_17 0.057 -> 0.040 s) at the same cold end to end
// within noise; 4 cost linkage_14, whose search is slower per core-s, 0.05 s (docs/performance.md).
// Searching on until the device was open (unseeded runs) cost more in rounds past its opening
// than the better orders saved, and would make the order depend on timing.
inline constexpr double kGpuSearchFloorStarts = 3;
inline constexpr double kGpuComputeBase = 0.03;
// 1.6e11: pedigree50's conditioned plan (2^37.3 states in 1.02 s); the linkage networks run at
// 2.5-4e11. Against 8e10 the shorter search pays (pedigree50 1.16 -> 1.00-1.06 s end to end at
// the same compute); 3.2e11 gave 0.93 s with seed 1 but 2^0.6 more states on the mean over
// seeds at that work; the linkage networks stop at the floor either way.
inline constexpr double kGpuStatesPerSecond = 1.6e11;
// The name of gpu_sized_prediction in the order cache's key (kGpuSizedPredictionKey).
std::string gpu_sized_prediction_key();
inline constexpr double kSearchCoreSecondsPerSecond = 6;
// One core's CPU kernel rate (states per second) in the decisions about starting the GPU
// before the profile is read (order_prediction's background start, start_if_likely, auto_gpu's
// small plans): low on purpose (measured 7e7-1.1e8 on the linkage networks), so that a plan
// near the line starts the device. The search's sizing has its own, kCpuSearchStatesPerSecond.
inline constexpr double kCpuCoreStatesGuess = 5e7;
// The order_prediction's first calls (the search's first rounds) predict for the CPU alone.
inline constexpr int kCpuSizedRounds = 2;
// Names gpu_sized_prediction in the order cache's key (OrderOptions::predict_key).
inline constexpr const char* kGpuSizedPredictionKey = "gpu-sized-7";

class Runner {
 public:
  // A named profile is read here: a bad file is an InputError whether or not a GPU is used.
  explicit Runner(RunRequest req);
  // For tests: `device` instead of the machine's GPU (not owned; nullptr: none) and optionally
  // a profile instead of the file.
  Runner(RunRequest req, gpu::Context* device, std::optional<Profile> profile = {});
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Starts opening the GPU in the background when the request will use it whatever the plan
  // (--device gpu, --check), to overlap reading and planning. Optional.
  void start_early();
  // The order search's compute prediction for the plans this runner will run (OrderOptions::
  // predict_seconds): unless --device cpu, after kCpuSizedRounds calls, the GPU-sized one
  // (gpu_sized_prediction) when the GPU's part wins clearly against kCpuCoreStatesGuess and
  // there is a GPU (gpu::likely_present); the engine's own CPU prediction otherwise; empty with
  // --device cpu.
  // With --device auto it also starts the GPU in the background once the search's best order
  // looks like a GPU plan (start_if_likely; in the first rounds, with 2^6 fewer states), so
  // that the device's start overlaps the planning.
  std::function<double(const OrderStats&)> order_prediction();
  // Whether a GPU context is open or opening.
  bool holds_gpu() const;
  // Whether run(plan) would use the GPU (if there is one); for --device auto, reads the
  // profile (and may calibrate: see run).
  bool wants_gpu(const Plan& plan);
  RunResult run(const Plan& plan);
  // Every slice of a plan that may be conditioned (one call when it is not) through run(plan):
  // the device opens once; with several GPUs wanted for it (lanes(): not for --check), one
  // runner per GPU, the slices spread over them (engine/condition.hpp run_conditioned_lanes);
  // with a `dealer` (mpi/: MPI ranks), only this process's slices run here and the others'
  // values come from it. The answer is the slices' log-sum-exp in slice order whatever ran them;
  // a failed check in any slice is the run's check; device seconds are summed, the device peak
  // is the largest; the rest of the result is GPU 0's last slice's ("none" when this process ran
  // no slice), and `lanes` says what each GPU did.
  RunResult run(ConditionedPlan& cp, SliceDealer* dealer = nullptr);
  // The options the plans run(cp) gets were made with: with them, run(cp) conditions a plan on
  // more variables when the GPU has less usable memory when the plan runs than when it was
  // planned (another process took some: several jobs on one GPU), and when an allocation fails
  // during the run it does so with the memory then usable and runs the slices again, before
  // falling back to the CPU (fit_to_free_device). Not under MPI (a dealer: every rank must cut
  // the same slices) nor with --check.
  void set_plan_options(PlanOptions po);
  // How many GPUs run(cp) spreads the slices over (slice_lanes over the visible GPUs; 1 when the
  // plan is not conditioned, with --check, or when the plan stays on the CPU).
  int lanes(const ConditionedPlan& cp);
  // For tests (with the test constructor): the devices of GPUs 1, 2, ... for lanes.
  void set_lane_devices(std::vector<gpu::Context*> devices) { lane_devices_ = std::move(devices); }
  // The device memory budget for `plan` when run(plan) would put it on a GPU (opening it), else
  // 0: --gpu-memory, at most 90% of the device's free memory. For PlanOptions::device_budget.
  double device_budget(const Plan& plan);
  // The plan options that depend on the device this runner will use, set once for every
  // command that plans (pe, info, the batch's order searches): the order search's prediction
  // (order_prediction; its key names it, so that a cached order is the one this device's search
  // finds) and the device memory budget (device_budget). `describe_only`: the plan is described,
  // not run (kinfer info): the GPU is never opened nor started in the background, and its budget
  // is --gpu-memory, at most 90% of the probed device memory.
  void plan_for_device(PlanOptions& po, bool describe_only = false);
  // The device memory budget alone (device_budget), for a command that plans with the engine's
  // own order prediction (`kinfer lod`): unless --device cpu, whose plans are sized for the host
  // even when --check compares them on a GPU.
  void budget_for_device(PlanOptions& po);
  // The accountant's estimate for the device that will run `plan`: on the CPU, plan.memory; on
  // a GPU, the host holds the inputs, their pinned staging copy and the CUDA context instead of
  // the intermediate tables (those live on the device), and device_bytes is the device's part.
  MemoryEstimate estimate(const Plan& plan);
  // The assignment run(plan) would choose (the policy asked, from the profile when it needs
  // one): what estimate() counts the host part over.
  std::vector<Device> planned_assignment(const Plan& plan);

  // The posterior commands' upward pass (engine/plan.hpp UpwardPass) for the next runs of
  // run(plan): max-product buckets and every bucket's output kept, on whatever device and
  // placement run(plan) chooses, its check mode included. A default UpwardPass: P(e) alone.
  void set_upward_pass(const UpwardPass& pass) { pass_ = pass; }

  const RunRequest& request() const { return req_; }
  void set_threads(int threads) { req_.threads = threads; }  // for the next runs (batch jobs)
  struct Totals {
    int runs = 0, gpu_runs = 0, cpu_runs = 0, checked = 0;
    CheckReport check;   // over every checked run: the worst bucket, the first failure
    int check_run = -1;  // the run (0-based) of check.worst_bucket / first_failed_bucket
  };
  const Totals& totals() const { return totals_; }

 private:
  struct Gpu;
  // The GPU, opened on first call (for `plan`, see_one_gpu, when not started in the background);
  // nullptr when there is none.
  gpu::Context* open(const Plan* plan = nullptr);
  // Starts the GPU in the background when a plan of `s`'s states less `discount_log2` (the
  // search's answer is smaller than its early rounds' best) would clearly win on it.
  void start_if_likely(const OrderStats& s, double discount_log2);
  // Before this process starts the GPU's driver: when a plan whose largest table is
  // 2^log2_max_table entries clearly fits one GPU (so its slices will not spread over several)
  // and no --gpu-memory asks for slices, only the GPU it uses is made visible (gpu::see_only):
  // the driver then starts in ~0.3 s instead of ~1.1 s on a 4-GPU host.
  void see_one_gpu(double log2_max_table);
  // Starts opening the GPU in the background (open_gpu on another thread).
  void start_in_background();
  // The profile for the machine's GPU, read once: the user's, a cached one, a shipped one
  // matched by the GPU's name; none of them for an open GPU, one derived from the closest
  // shipped profile by the GPU's quick figures (derive_for_open_gpu). nullptr: none.
  const Profile* profile(std::string& path);
  // A GPU no profile knows, open: measures its quick figures (a few ms), derives a profile
  // from the shipped one closest to them (derive_profile) and caches it where an automatic
  // calibration goes (auto_profile_path: later runs read it). Not with auto_calibrate_seconds
  // (the longer calibration then runs instead).
  void derive_for_open_gpu();
  // The profile's CPU part scaled to this run's thread count (cpu_for_threads).
  void fit_cpu_to_threads();
  bool derive_tried_ = false;
  UpwardPass pass_;  // set_upward_pass
  bool describe_only_ = false;  // plan_for_device(describe_only): never open the GPU
  // The GPU's name without opening it (probed once); empty when there is none.
  const std::string& gpu_name();
  // The schedule policy `p` gives `plan`: from `prof` for the profile policies (greedy,
  // comm-aware), whole-plan instead when there is no profile with a GPU part (Schedule::policy
  // says what it is). run() and planned_assignment() both place through it; the last profile
  // schedule is kept for its plan (auto_gpu's too: a schedule takes ~5 ms on a large network).
  Schedule placement(const Plan& plan, Policy p, const Profile* prof);
  struct Placed;
  std::unique_ptr<Placed> placed_;
  // --device auto: whether this plan goes to the GPU, and why not when it does not.
  bool auto_gpu(const Plan& plan, std::string& why_not);

  // run(plan)'s steps. The GPU it runs on (opened now), or nullptr and `why_not`.
  gpu::Context* device_for(const Plan& plan, RunResult& r, std::string& why_not);
  // Every bucket on the CPU, through the engine's reference executor (run_plan), for `why`.
  void run_on_cpu(const Plan& plan, const std::string& why, RunResult& r);
  // --check: every bucket on the CPU and the GPU, compared (the CPU alone without a GPU).
  void run_check(const Plan& plan, gpu::Context* ctx, const std::string& why_not, RunResult& r);
  void add_to_check_totals(const CheckReport& rep);
  // Which buckets go where (placement), with the profile the policy needs.
  Schedule schedule_for(const Plan& plan, Policy asked, gpu::Context& ctx, RunResult& r);
  // No profile for a new GPU and RunRequest::auto_calibrate_seconds: calibrates it that long,
  // caches the profile for later runs and returns it (`path`: where it is kept).
  const Profile* calibrate_briefly(gpu::Context& ctx, std::string& path);
  // The executor on the placement `s`; `t_sched`: when the scheduling began.
  void run_placed(const Plan& plan, const Schedule& s, gpu::Context* ctx,
                  std::chrono::steady_clock::time_point t_sched, RunResult& r);
  // The device's memory ran out during the run: the CPU instead when the host limit allows.
  void run_on_cpu_after(const Plan& plan, const DeviceMemoryError& e, RunResult& r);
  // The executor's statistics and each bucket's device and reason into `r`, logged.
  void record_placed(const Plan& plan, const Schedule& s, const ExecStats& st, RunResult& r);

  // run(cp)'s conditioning at run time (set_plan_options): when the plan's device estimate
  // exceeds the usable device memory now (or `after_failure`: an allocation failed), cp is
  // conditioned further to fit it (engine recondition), logged; left as it is when nothing fits.
  // Returns whether cp changed.
  bool fit_to_free_device(ConditionedPlan& cp, bool after_failure);
  // run(cp) without fit_to_free_device: the slices over the lanes.
  RunResult run_slices(ConditionedPlan& cp, SliceDealer* dealer);
  std::optional<PlanOptions> plan_options_;
  bool rethrow_device_full_ = false;  // run(plan) rethrows DeviceMemoryError for run(cp)

  RunRequest req_;
  std::unique_ptr<Gpu> gpu_;
  std::optional<Profile> profile_;
  bool profile_read_ = false;
  std::string profile_path_;  // where profile_ came from (or was looked for)
  std::string profile_note_;
  std::optional<std::string> gpu_name_;
  bool gpu_warm_ = false;
  bool check_warned_ = false;  // "--check: no GPU" said once
  Totals totals_;
  std::optional<int> gpu_count_;                // visible GPUs, probed once
  // The machine's GPUs as the driver lists them, probed once (gpu_name, lanes, a described
  // plan's device budget), without opening one.
  const gpu::DeviceInfo& probed();
  std::optional<gpu::DeviceInfo> probed_;
  std::vector<std::unique_ptr<Runner>> lanes_;  // the runners of GPUs 1, 2, ... (run(cp))
  std::vector<gpu::Context*> lane_devices_;     // tests: their devices
  int lanes_said_ = 0;                          // the lane count last logged
};

}  // namespace kinfer::sched
