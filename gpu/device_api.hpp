#pragma once
// The GPU as the rest of kinfer sees it: plain C++, no CUDA type. Implemented in gpu/*.cu when
// CUDA is compiled in, and by gpu/no_cuda.cpp otherwise (probe() then says why there is no GPU).
// Contract between the GPU kernel (gpu/) and the scheduler's executor (scheduler/): the scheduler
// drives a Context from its GPU manager thread; tables stay on the device between buckets.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"  // BucketShape

namespace kinfer::gpu {

// The GPU kernels' generation: raised whenever a change moves the kernels' times enough that a
// calibration profile fitted before it predicts them wrongly (docs/performance.md). `kinfer
// calibrate` records it in the profile; the runner warns about an older one.
inline constexpr int kKernelGeneration = 8;

struct DeviceInfo {
  bool available = false;
  std::string name;     // e.g. "NVIDIA H100 80GB HBM3"
  std::string why_not;  // when unavailable: "built without CUDA", "no CUDA device", ...
  double memory_bytes = 0;
  int count = 0;  // usable devices (CUDA_VISIBLE_DEVICES respected); the others are as device 0
  struct Device {
    std::string name;
    double memory_bytes = 0;
  };
  std::vector<Device> devices;  // every usable device, by index (`kinfer info`)
};

// The usable GPUs. Listed through NVML where it can say for certain, without starting the CUDA
// driver (gpu/detail/nvml_list.hpp); else by the CUDA runtime, which starts it. Never throws.
DeviceInfo probe();

// Whether this process has started the CUDA driver (the runtime's probe or Context::create
// began): its exit then includes the driver's release of the device (~0.1 s on an H100 machine).
bool driver_started();

// Whether this process runs under a CUDA tool (compute-sanitizer, Nsight Systems): they report
// at the context's teardown, so the process's exit is left as it is (apps/process_exit.cpp).
bool under_cuda_tool();

// Sets the CUDA driver's environment for this process before it starts: one hardware work
// queue per device (CUDA_DEVICE_MAX_CONNECTIONS=1; the driver's default 8 made the context's
// creation ~0.07 s longer and the exit ~0.03 s longer on an H100 machine, docs/performance.md),
// unless the user set it. Call first thing in main(), before any
// thread starts (setenv).
void set_driver_environment();

// Whether a usable GPU is likely, without starting the driver or loading NVML: CUDA is
// compiled in, CUDA_VISIBLE_DEVICES does not hide every device, and the NVIDIA device nodes
// exist. Deterministic on a machine; probe() or Context::create have the last word.
bool likely_present();

// Makes GPU `device` (this process's numbering) the only one the CUDA driver will see, by
// narrowing CUDA_VISIBLE_DEVICES to it, when the driver has not started yet and more than one
// GPU is visible (as CUDA_VISIBLE_DEVICES lists them, else the NVIDIA device nodes): the driver
// starts in ~0.3 s with one GPU visible against ~1.1 s with four (measured on a 4-GPU host,
// docs/performance.md), a cost every single command pays that uses one GPU. Returns whether it
// narrowed; the device is then number 0 and the only one. It sets the environment: call it before
// the thread that starts the driver starts, from a thread while no other thread reads the
// environment (the order search's threads do not).
bool see_only(int device);
// Whether see_only would narrow anything: the driver not started, more than one GPU visible.
bool several_visible();

// Does a kernel take this bucket (inputs with these scopes, in launch order), and if not, why:
// empty when one does, else the reason ("more than 16 inputs", ...). Cheap: the layout check
// alone, no device, no launch, no kernel tables; the same answer with or without CUDA.
std::string why_no_kernel(const BucketShape& shape, std::span<const std::vector<int>> scopes);

// The host bytes of the tables of the kernel's launch plan for this bucket while it is built
// (Context::prepare), from the selector's choice without building them; 0 when no kernel takes
// it. For the memory accountant. Default device limits (an H100's).
double kernel_plan_host_bytes(const BucketShape& shape, std::span<const std::vector<int>> scopes);

using Handle = std::int64_t;  // a table in device memory

struct DeviceInput {
  Handle table = -1;
  std::vector<int> scope;  // as InputTable::scope: a subsequence of the bucket's vars
};

// Kernel variants (gpu/README.md): `cached` stages input segments in shared memory under a
// CPU-computed policy (papers 000/001); `plain` reads global memory through L1/L2.
enum class Variant { automatic, cached, plain };
const char* to_string(Variant v);

// What the selector decided for a bucket, and why (for logs and --explain).
struct KernelChoice {
  Variant variant = Variant::plain;
  std::string why;
  int threads = 0, lanes = 1, splits = 1, pages_per_block = 1;
  std::int64_t blocks = 0, page_outputs = 1;
  int varying_inputs = 0, cached_inputs = 0, shared_bytes = 0;
  double hit_fraction = 0;  // element loads served from shared memory (cached variant)
  int tile = 1;  // plain: outputs or summed configurations one thread shares its loads over
};

// A GPU's quick figures (Context::quick_figures): bytes per second of a device-to-device copy
// (read and write counted) and of copies between pinned host memory and the device, each the
// best of a few after a warm-up; 0 where not measured. A profile for a GPU none of the shipped
// or cached profiles knows is derived from the shipped profile whose GPU is closest by these
// (scheduler/profile.hpp, derive_profile).
struct QuickFigures {
  double copy_bandwidth = 0, h2d_bandwidth = 0, d2h_bandwidth = 0;
  bool measured() const { return copy_bandwidth > 0 && h2d_bandwidth > 0 && d2h_bandwidth > 0; }
};

struct DeviceLimits;  // gpu/policy.hpp
// Adjusts the planner options of a Context's DeviceLimits once the device's properties are read
// into them (the kernel tests and bucket_bench run the variants besides the defaults); empty:
// the defaults, what kinfer itself uses.
using PlannerOptions = std::function<void(DeviceLimits&)>;

class Context {
 public:
  // Throws std::runtime_error when no device is usable.
  static std::unique_ptr<Context> create(int device = 0, const PlannerOptions& planner = {});
  virtual ~Context() = default;
  // Makes this context's device the calling thread's current one (CUDA's current device is per
  // thread): a thread that drives a context of a device other than 0 calls it first.
  virtual void bind() {}

  virtual Handle alloc(std::int64_t entries) = 0;  // throws ResourceError when full
  // Safe while work that reads `h` is still queued: the memory is reused only after every
  // stream has passed the point where release was called.
  virtual void release(Handle h) = 0;
  virtual double free_bytes() = 0;
  // Host buffers for asynchronous copies (pinned); free with free_host.
  virtual double* alloc_host(std::int64_t entries) = 0;
  virtual void free_host(double* p) = 0;
  // Asynchronous on `stream` (0..num_streams()-1); ordered within a stream.
  virtual void upload(Handle dst, const double* host, std::int64_t entries, int stream) = 0;
  virtual void download(Handle src, double* host, std::int64_t entries, int stream) = 0;
  // Entries [first, first + entries) of `src` into host[0, entries), returning when they are
  // there (the MPE's traceback reads a part of each bucket output kept on the device so).
  virtual void download_range(Handle src, std::int64_t first, std::int64_t entries, double* host,
                              int stream) = 0;
  // Entries [first, first + entries) of `src` into dst[0, entries), on the device, asynchronous
  // on `stream` (the MPE's traceback narrows its scans of a held output's part down so).
  virtual void copy_range(Handle dst, Handle src, std::int64_t first, std::int64_t entries,
                          int stream) = 0;
  virtual void run_bucket(const BucketShape& shape, std::span<const DeviceInput> inputs, Handle out,
                          int stream) = 0;
  virtual void synchronize(int stream) = 0;
  virtual int num_streams() const = 0;

  // Additions beyond the scheduler's contract.
  virtual std::string name() const = 0;
  // Runs one bucket with a given variant (automatic: the selector's choice).
  virtual KernelChoice run_bucket(const BucketShape& shape, std::span<const DeviceInput> inputs,
                                  Handle out, int stream, Variant variant) = 0;
  // The selector's choice for a bucket, without running it. Throws std::invalid_argument with
  // the reason when no kernel takes the bucket (more than 16 inputs, ...).
  virtual KernelChoice choose(const BucketShape& shape,
                              std::span<const std::vector<int>> scopes) = 0;
  // Makes later work on `waiter` wait for the work queued so far on `waitee`.
  virtual void stream_wait(int waiter, int waitee) = 0;
  // Adds `factor` into `child` in place on `stream` (log values): child is a table over
  // variables of cardinalities `card` (the last fastest), factor one over some of them, and
  // child[i] += factor[sum over v of digit_v(i) * factor_stride[v]] (stride 0: a variable the
  // factor lacks). At most 48 variables (gpu::kFoldMaxVars). merge_inputs.hpp's rule 3.
  virtual void fold(Handle child, std::span<const int> card,
                    std::span<const std::int64_t> factor_stride, Handle factor, int stream) = 0;
  // Writes `in` into `out` with its variables in another order, on `stream`: out is a table
  // over variables of cardinalities `card` (the last fastest), and out[i] = in[sum over v of
  // digit_v(i) * in_stride[v]] (in_stride[v]: variable v's stride in `in`; 0 repeats `in` along
  // v). At most 48 variables. The marginals' downward pass (scheduler/downward.hpp) lays a
  // bucket's inputs out in a message's order so.
  virtual void permute(Handle out, std::span<const int> card,
                       std::span<const std::int64_t> in_stride, Handle in, int stream) = 0;
  // Divides `message` by `by` in place on `stream` (log values), strided as fold:
  // message[i] -= by[...], and -inf where by[...] is -inf. The marginals' downward pass divides
  // a bucket's belief summed onto a child's output variables by that child's output so (where
  // the child's output is zero every belief below it is zero, whatever the message says there).
  virtual void divide(Handle message, std::span<const int> card,
                      std::span<const std::int64_t> by_stride, Handle by, int stream) = 0;
  // Builds the kernel's launch plan for a bucket of this shape and inputs ahead of its run and
  // queues its tables' upload on `stream` (run_bucket on any stream waits for that upload).
  // Safe to call from several threads at once: the building, the costly part, runs outside the
  // context's lock. A bucket no kernel takes is left for run_bucket to report.
  virtual void prepare(const BucketShape& shape, std::span<const std::vector<int>> scopes,
                       int stream) {
    (void)shape, (void)scopes, (void)stream;
  }
  // Whether prepare() has nothing left to do for such a bucket (its launch plan built and its
  // tables queued): a plan run again (a conditioned plan's slices, repeated jobs) needs no
  // preparing threads.
  virtual bool prepared(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
    (void)shape, (void)scopes;
    return false;
  }
  // Measures the quick figures (a few milliseconds: a 256 MiB copy on the device and 32 MiB
  // each way between pinned host memory and the device, at most a quarter of the free memory).
  // Call with no work in flight. Zeros where the device measures nothing.
  virtual QuickFigures quick_figures() { return {}; }
  // Host bytes the context keeps for itself (what the kernels' launch plans hold on the host
  // once their tables are on the device).
  virtual double own_host_bytes() const { return 0; }
  // Host seconds spent so far building shapes' kernel tables (the selector's work, once per
  // shape) and writing and queueing their images.
  virtual double own_setup_seconds() const { return 0; }
  // Diagnostics (ExecOptions::timeline_path): a timed event queued on `stream` after the work
  // queued on it so far, returning its index; once that work is done, mark_seconds() gives every
  // mark's time after the first, in seconds, and forgets them. Empty where the device keeps no
  // times.
  virtual int mark(int stream) {
    (void)stream;
    return -1;
  }
  virtual std::vector<double> mark_seconds() { return {}; }
};

}  // namespace kinfer::gpu
