#pragma once
// CudaContext, the device behind gpu::Context: streams, a caching allocator whose released blocks
// are reused only after every stream has passed the release point, pinned host buffers, and
// per-shape policy tables that stay on the device (computed once per bucket shape, reused by
// every later bucket and evaluation with that shape). Private to gpu/: context.cu makes it,
// host_run.cu runs single buckets and the ceilings' probes on it.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "engine/errors.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/host_run.hpp"
#include "gpu/merge_inputs.hpp"
#include "gpu/sum_product.cuh"

namespace kinfer::gpu::detail {

constexpr int kStreams = 4;

inline std::string shape_key(const BucketShape& s, std::span<const std::vector<int>> scopes,
                             Variant v, int eb) {
  std::ostringstream k;
  k << static_cast<int>(v) << ':' << eb << ':' << s.n_marg << '|';
  for (std::size_t i = 0; i < s.vars.size(); ++i) k << s.vars[i] << ',' << s.card[i] << ';';
  for (const auto& sc : scopes) {
    k << '|';
    for (int x : sc) k << x << ',';
  }
  return k.str();
}

// The tables of a launch plan that only the device reads once its image is uploaded.
inline void release_device_only_tables(LaunchPlan& p) {
  LaunchPlan::for_each_device_table(p, [](auto& t) { std::decay_t<decltype(t)>().swap(t); });
}

// Host bytes a launch plan still holds.
inline double plan_host_bytes(const LaunchPlan& p) {
  auto b = [](const auto& v) { return static_cast<double>(v.capacity() * sizeof(v[0])); };
  double tables = 0;
  LaunchPlan::for_each_device_table(p, [&](const auto& t) { tables += b(t); });
  return b(p.slot_input) + b(p.tile_vars) + b(p.tile_off) + b(p.tile_all) + b(p.seg_off) +
         b(p.seg_size) + b(p.pitch) + tables;
}

class CudaContext final : public Context {
 public:
  CudaContext(int device, const PlannerOptions& planner) : device_(device) {
    const DeviceInfo info = probe();
    if (!info.available) throw std::runtime_error(info.why_not);
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaGetDeviceProperties(&prop_, device_));
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
    lim_.sm_count = prop_.multiProcessorCount;
    lim_.max_threads_per_sm = prop_.maxThreadsPerMultiProcessor;
    lim_.shared_per_block = optin - kStaticShared;
    lim_.shared_per_sm = static_cast<int>(prop_.sharedMemPerMultiprocessor);
    if (planner) planner(lim_);
    streams_.resize(kStreams);
    // non-blocking: no implicit ordering with the legacy default stream
    for (auto& s : streams_) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    scratch_.assign(kStreams, {nullptr, 0});
    // The kernels' module loaded beside whatever the caller does next (planning, the kernel
    // plans), not at the first launch (load_module).
    loader_ = std::thread([dev = device_] {
      try {
        CUDA_CHECK(cudaSetDevice(dev));
        load_module();
      } catch (...) {  // not loaded now: the first launch loads it, and reports what fails
      }
    });
  }

  ~CudaContext() override {
    // Destructors must not throw: errors here are ignored on purpose.
    if (loader_.joinable()) loader_.join();
    cudaDeviceSynchronize();
    for (auto& [h, b] : live_)
      if (!b.small) cudaFree(b.ptr);
    for (auto& [bytes, p] : free_) cudaFree(p);
    for (auto& pe : pending_) {
      if (!pe.small) cudaFree(pe.ptr);
      for (auto e : pe.events) cudaEventDestroy(e);
    }
    for (void* p : slabs_) cudaFree(p);
    for (void* p : dev_chunks_) cudaFree(p);
    for (auto e : event_pool_) cudaEventDestroy(e);
    for (auto e : marks_) cudaEventDestroy(e);
    for (auto& [k, pol] : policies_)
      if (pol->ready) cudaEventDestroy(pol->ready);
    for (auto& s : scratch_) cudaFree(s.first);
    for (auto s : streams_) cudaStreamDestroy(s);
    for (auto& [bytes, p] : pinned_free_) cudaFreeHost(p);
  }

  std::string name() const override { return prop_.name; }
  void bind() override { CUDA_CHECK(cudaSetDevice(device_)); }
  double l2_bytes() const { return prop_.l2CacheSize; }
  int num_streams() const override { return kStreams; }
  const DeviceLimits& limits() const { return lim_; }
  cudaStream_t stream(int s) const { return streams_.at(s); }

  Handle alloc(std::int64_t entries) override {
    std::lock_guard lock(mu_);
    return alloc_bytes(static_cast<std::size_t>(std::max<std::int64_t>(entries, 1)) * 8);
  }

  void* ptr(Handle h) const {
    auto it = live_.find(h);
    if (it == live_.end()) throw std::logic_error("unknown GPU table handle " + std::to_string(h));
    return it->second.ptr;
  }

  void release(Handle h) override {
    std::lock_guard lock(mu_);
    auto it = live_.find(h);
    if (it == live_.end()) return;
    Pending pe{it->second.ptr, it->second.bytes, it->second.small, {}};
    for (auto s : streams_) {
      cudaEvent_t e = take_event();
      CUDA_CHECK(cudaEventRecord(e, s));
      pe.events.push_back(e);
    }
    pending_.push_back(std::move(pe));
    live_.erase(it);
  }

  double free_bytes() override {
    std::lock_guard lock(mu_);
    std::size_t f = 0, t = 0;
    CUDA_CHECK(cudaMemGetInfo(&f, &t));
    double cached = slab_left_;
    for (auto& [bytes, p] : free_) cached += static_cast<double>(bytes);
    for (auto& pe : pending_) cached += static_cast<double>(pe.bytes);
    for (auto& [cls, list] : small_free_) cached += static_cast<double>(cls) * list.size();
    return static_cast<double>(f) + cached;
  }

  // Pinned buffers are kept for the next executor run (a conditioned plan's next slice, lod's
  // and batch's next plan): cudaMallocHost and cudaFreeHost cost milliseconds each, at every
  // slice (docs/performance.md). A freed buffer of at most
  // kPinnedKeepMax bytes is kept while the kept ones total at most kPinnedKeepTotal (a run's
  // staging, which the accountant counts, reuses them; at most that much sits unused when the
  // next run's sizes differ); the context's streams are synchronized first
  // (cudaFreeHost synchronizes the device), so that no copy still uses it when it is handed out
  // again.
  static constexpr std::size_t kPinnedKeepMax = std::size_t{16} << 20;
  static constexpr std::size_t kPinnedKeepTotal = std::size_t{32} << 20;
  double* alloc_host(std::int64_t entries) override {
    std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(entries, 1)) * 8;
    {
      std::lock_guard lock(pinned_mu_);
      auto it = pinned_free_.lower_bound(bytes);
      if (it != pinned_free_.end() && it->first <= 2 * bytes + (std::size_t{64} << 10)) {
        void* p = it->second;
        pinned_kept_ -= it->first;
        pinned_free_.erase(it);
        return static_cast<double*>(p);
      }
    }
    bytes = (bytes + 4095) & ~std::size_t{4095};
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    std::lock_guard lock(pinned_mu_);
    pinned_size_[p] = bytes;
    return static_cast<double*>(p);
  }
  void free_host(double* p) override {
    std::size_t bytes = 0;
    {
      std::lock_guard lock(pinned_mu_);
      auto it = pinned_size_.find(p);
      if (it != pinned_size_.end()) bytes = it->second;
    }
    if (bytes > 0 && bytes <= kPinnedKeepMax) {
      for (cudaStream_t st : streams_) CUDA_CHECK(cudaStreamSynchronize(st));  // its copies done
      std::lock_guard lock(pinned_mu_);
      if (pinned_kept_ + bytes <= kPinnedKeepTotal) {
        pinned_free_.emplace(bytes, p);
        pinned_kept_ += bytes;
        return;
      }
    }
    {
      std::lock_guard lock(pinned_mu_);
      pinned_size_.erase(p);
    }
    CUDA_CHECK(cudaFreeHost(p));
  }

  void upload(Handle dst, const double* host, std::int64_t entries, int s) override {
    std::lock_guard lock(mu_);
    CUDA_CHECK(cudaMemcpyAsync(ptr(dst), host, static_cast<std::size_t>(entries) * 8,
                               cudaMemcpyHostToDevice, stream(s)));
  }
  void download(Handle src, double* host, std::int64_t entries, int s) override {
    std::lock_guard lock(mu_);
    CUDA_CHECK(cudaMemcpyAsync(host, ptr(src), static_cast<std::size_t>(entries) * 8,
                               cudaMemcpyDeviceToHost, stream(s)));
  }
  void download_range(Handle src, std::int64_t first, std::int64_t entries, double* host,
                      int s) override {
    {
      std::lock_guard lock(mu_);
      CUDA_CHECK(cudaMemcpyAsync(host, static_cast<const double*>(ptr(src)) + first,
                                 static_cast<std::size_t>(entries) * 8, cudaMemcpyDeviceToHost,
                                 stream(s)));
    }
    synchronize(s);
  }
  void copy_range(Handle dst, Handle src, std::int64_t first, std::int64_t entries,
                  int s) override {
    std::lock_guard lock(mu_);
    CUDA_CHECK(cudaMemcpyAsync(ptr(dst), static_cast<const double*>(ptr(src)) + first,
                               static_cast<std::size_t>(entries) * 8, cudaMemcpyDeviceToDevice,
                               stream(s)));
  }
  void synchronize(int s) override { CUDA_CHECK(cudaStreamSynchronize(stream(s))); }
  static_assert(std::size(FoldArgs{}.stride) >= kFoldMaxVars, "FoldArgs holds a fold's variables");
  void fold(Handle child, std::span<const int> card, std::span<const std::int64_t> factor_stride,
            Handle factor, int s) override {
    strided(child, card, factor_stride, factor, FoldMode::add, s);
  }
  void permute(Handle out, std::span<const int> card, std::span<const std::int64_t> in_stride,
               Handle in, int s) override {
    strided(out, card, in_stride, in, FoldMode::assign, s);
  }
  void divide(Handle message, std::span<const int> card, std::span<const std::int64_t> by_stride,
              Handle by, int s) override {
    strided(message, card, by_stride, by, FoldMode::divide, s);
  }

  double own_host_bytes() const override {
    double b = 0;
    for (const auto& [key, pe] : policies_) b += plan_host_bytes(pe->p);
    return b;
  }
  double own_setup_seconds() const override { return own_setup_seconds_; }

  QuickFigures quick_figures() override;

  void stream_wait(int waiter, int waitee) override {
    if (waiter == waitee) return;
    std::lock_guard lock(mu_);
    cudaEvent_t e = take_event();
    CUDA_CHECK(cudaEventRecord(e, stream(waitee)));
    CUDA_CHECK(cudaStreamWaitEvent(stream(waiter), e, 0));
    recycle_.push_back(e);  // reusable once recorded work passed; recycled at the next sweep
  }

  int mark(int s) override {
    std::lock_guard lock(mu_);
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(e, stream(s)));
    marks_.push_back(e);
    return static_cast<int>(marks_.size()) - 1;
  }
  std::vector<double> mark_seconds() override {
    std::lock_guard lock(mu_);
    std::vector<double> t;
    for (cudaEvent_t e : marks_) {
      CUDA_CHECK(cudaEventSynchronize(e));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, marks_.front(), e));
      t.push_back(1e-3 * ms);
    }
    for (cudaEvent_t e : marks_) cudaEventDestroy(e);
    marks_.clear();
    return t;
  }

  void run_bucket(const BucketShape& shape, std::span<const DeviceInput> inputs, Handle out,
                  int s) override {
    run_bucket(shape, inputs, out, s, Variant::automatic);
  }

  KernelChoice run_bucket(const BucketShape& shape, std::span<const DeviceInput> inputs, Handle out,
                          int s, Variant variant) override {
    std::lock_guard lock(mu_);
    std::vector<std::vector<int>> scopes;
    for (const auto& in : inputs) scopes.push_back(in.scope);
    PolicyEntry& pe = policy(shape, scopes, variant, 8, s);
    std::vector<const double*> slots;
    for (int f : pe.p.slot_input)
      slots.push_back(f < 0 ? nullptr : static_cast<const double*>(ptr(inputs[f].table)));
    double* partial = pe.p.splits > 1
                          ? static_cast<double*>(scratch(s, 2 * 8 * pe.p.splits * pe.p.n_out))
                          : nullptr;
    launch_sum_product<double>(pe.p, pe.t, slots.data(), static_cast<double*>(ptr(out)), partial,
                               stream(s), shape.maximise);
    return summarize(pe.p, pe.sel);
  }

  void prepare(const BucketShape& shape, std::span<const std::vector<int>> scopes, int s) override {
    const auto t0 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaSetDevice(device_));  // the calling thread may not have bound the device
    const std::string key = shape_key(shape, scopes, Variant::automatic, 8);
    {
      std::lock_guard lock(mu_);
      if (policies_.count(key)) return;
    }
    std::unique_ptr<PolicyEntry> pe;
    try {
      pe = build_policy(shape, scopes, Variant::automatic, 8);  // outside the lock
    } catch (const std::invalid_argument&) {
      return;  // no kernel takes it: run_bucket says why
    }
    try {
      load_kernels<double>(pe->p);  // its kernels loaded now rather than at their launch
    } catch (...) {                 // the launch loads them, and reports what fails
    }
    const auto t1 = std::chrono::steady_clock::now();
    const double table_bytes = pe->p.table_bytes();
    std::lock_guard lock(mu_);
    if (policies_.count(key)) return;  // another thread built it meanwhile
    const auto t2 = std::chrono::steady_clock::now();
    upload_policy(*pe, s);
    const auto t3 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return 1e3 * std::chrono::duration<double>(b - a).count(); };
    if (ms(t0, t3) > 5)  // where a GPU run's preparation goes
      log_plan_prepared(pe->p, table_bytes, ms(t0, t1), ms(t1, t2), ms(t2, t3));
    policies_.emplace(key, std::move(pe));
    own_setup_seconds_ += ms(t0, t3) / 1e3;
  }

  bool prepared(const BucketShape& shape, std::span<const std::vector<int>> scopes) override {
    const std::string key = shape_key(shape, scopes, Variant::automatic, 8);
    std::lock_guard lock(mu_);
    return policies_.count(key) > 0;
  }

  KernelChoice choose(const BucketShape& shape, std::span<const std::vector<int>> scopes) override {
    std::lock_guard lock(mu_);
    const PolicyEntry& pe = policy(shape, scopes, Variant::automatic, 8, -1);
    return summarize(pe.p, pe.sel);
  }

  // ---- for run_host_bucket ----
  struct PolicyEntry {
    BucketLayout lay;
    LaunchPlan p;
    Selection sel;
    void* dev = nullptr;
    DeviceTables t;
    cudaEvent_t ready = nullptr;
  };

  // A shape's launch plan: the selector's work (no lock needed).
  std::unique_ptr<PolicyEntry> build_policy(const BucketShape& shape,
                                            std::span<const std::vector<int>> scopes, Variant v,
                                            int eb) const {
    auto pe = std::make_unique<PolicyEntry>();
    pe->lay = describe(shape, scopes);
    DeviceLimits lim = lim_;
    if (eb != 8) {  // the tiled kernels and the one-lane ones are double only
      lim.tiles = false;
      lim.lean_two_min_items = 0;
      lim.lean_chunks = false;
    }
    pe->p = make_launch_plan(pe->lay, v, lim, eb, &pe->sel);
    return pe;
  }

  // Under mu_: the plan's tables to the device on stream s, straight from the plan (copies from
  // pageable memory return once the driver has staged them), then the plan's device-only tables
  // dropped: a shape's tables live on the device alone. Users on other streams wait for `ready`.
  void upload_policy(PolicyEntry& pe, int s) {
    pe.dev = arena(std::max<std::size_t>(table_image_bytes(pe.p), 16));
    pe.t = upload_table_image(pe.p, pe.dev, stream(s));
    release_device_only_tables(pe.p);
    CUDA_CHECK(cudaEventCreateWithFlags(&pe.ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(pe.ready, stream(s)));
  }

  // The policy of a shape (under mu_): built on first use, its tables uploaded on the first
  // stream s >= 0 that needs them; users on other streams wait for that upload.
  PolicyEntry& policy(const BucketShape& shape, std::span<const std::vector<int>> scopes, Variant v,
                      int eb, int s) {
    const auto t0 = std::chrono::steady_clock::now();
    struct AddSeconds {
      std::chrono::steady_clock::time_point t0;
      double& to;
      ~AddSeconds() {
        to += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    } add_seconds{t0, own_setup_seconds_};
    const std::string key = shape_key(shape, scopes, v, eb);
    auto it = policies_.find(key);
    if (it == policies_.end())
      it = policies_.emplace(key, build_policy(shape, scopes, v, eb)).first;
    PolicyEntry& pe = *it->second;
    if (s < 0) return pe;
    if (!pe.dev)
      upload_policy(pe, s);
    else
      CUDA_CHECK(cudaStreamWaitEvent(stream(s), pe.ready, 0));
    return pe;
  }

  void* scratch(int s, std::size_t bytes) {
    auto& [p, size] = scratch_[s];
    if (size < bytes) {
      CUDA_CHECK(cudaStreamSynchronize(stream(s)));  // the old buffer may still be in use
      if (p) CUDA_CHECK(cudaFree(p));
      p = nullptr;
      CUDA_CHECK(cudaMalloc(&p, bytes));
      size = bytes;
    }
    return p;
  }

  std::mutex& mutex() { return mu_; }

  // Tables of up to 1 MiB come from power-of-two classes carved out of 64 MiB slabs (a plan
  // allocates hundreds of small tables: one cudaMalloc each would cost more than the kernels);
  // larger ones are cudaMalloc'ed and cached best-fit. Released memory is reused only after every
  // stream has passed the release (see release()).
  Handle alloc_bytes(std::size_t bytes) {
    constexpr std::size_t kSmallMax = std::size_t{1} << 20, kSlab = std::size_t{64} << 20;
    sweep();
    void* p = nullptr;
    bool small = false;
    if (bytes <= kSmallMax) {
      small = true;
      std::size_t cls = 256;
      while (cls < bytes) cls <<= 1;
      bytes = cls;
      auto& list = small_free_[cls];
      if (!list.empty()) {
        p = list.back();
        list.pop_back();
      } else {
        if (slab_left_ < cls) {
          void* slab = device_malloc(kSlab);
          slabs_.push_back(slab);
          slab_next_ = static_cast<char*>(slab);
          slab_left_ = kSlab;
        }
        p = slab_next_;
        slab_next_ += cls;
        slab_left_ -= cls;
      }
    } else {
      bytes = (bytes + 4095) / 4096 * 4096;
      p = take_free(bytes);
      if (!p) p = device_malloc(bytes);
    }
    const Handle h = next_handle_++;
    live_[h] = {p, bytes, small};
    return h;
  }

 private:
  // Context::fold, permute and divide (`mode`): one launch of fold_kernel.
  void strided(Handle to, std::span<const int> card, std::span<const std::int64_t> from_stride,
               Handle from, FoldMode mode, int s) {
    const FoldArgs a = fold_args(card, from_stride, mode);
    std::lock_guard lock(mu_);
    launch_fold(static_cast<double*>(ptr(to)), static_cast<const double*>(ptr(from)), a,
                stream(s));
  }
  struct Block {
    void* ptr;
    std::size_t bytes;
    bool small;
  };
  struct Pending {
    void* ptr;
    std::size_t bytes;
    bool small;
    std::vector<cudaEvent_t> events;
  };

  // cudaMalloc; when the device is full, gives the cached large blocks back and tries again.
  void* device_malloc(std::size_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    cudaGetLastError();
    CUDA_CHECK(cudaDeviceSynchronize());
    sweep();
    for (auto& [b, q] : free_) CUDA_CHECK(cudaFree(q));
    free_.clear();
    e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    cudaGetLastError();
    std::size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    throw DeviceMemoryError("GPU memory full: cannot allocate " + std::to_string(bytes >> 20) +
                            " MiB (" + std::to_string(f >> 20) + " MiB free of " +
                            std::to_string(t >> 20) + " MiB)");
  }

  // Bump allocation for policy tables on the device, which live as long as the context: 16-byte
  // aligned pieces of 8 MiB chunks, a dedicated chunk for larger images.
  void* arena(std::size_t bytes) {
    constexpr std::size_t kChunk = std::size_t{8} << 20;
    bytes = (bytes + 15) / 16 * 16;
    auto get = [&](std::size_t n) {
      void* p = device_malloc(n);
      dev_chunks_.push_back(p);
      return p;
    };
    if (bytes > kChunk / 4) return get(bytes);
    if (dev_left_ < bytes) {
      dev_next_ = static_cast<char*>(get(kChunk));
      dev_left_ = kChunk;
    }
    void* p = dev_next_;
    dev_next_ += bytes;
    dev_left_ -= bytes;
    return p;
  }

  cudaEvent_t take_event() {
    if (event_pool_.empty()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      return e;
    }
    cudaEvent_t e = event_pool_.back();
    event_pool_.pop_back();
    return e;
  }

  // Moves released blocks whose streams have all passed the release point to the free list.
  void sweep() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (auto e : it->events) {
        const cudaError_t q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) {
          done = false;
          break;
        }
        CUDA_CHECK(q);
      }
      if (done) {
        for (auto e : it->events) event_pool_.push_back(e);
        if (it->small)
          small_free_[it->bytes].push_back(it->ptr);
        else
          free_.emplace(it->bytes, it->ptr);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = recycle_.begin(); it != recycle_.end();) {
      const cudaError_t q = cudaEventQuery(*it);
      if (q == cudaErrorNotReady) {
        ++it;
        continue;
      }
      CUDA_CHECK(q);
      event_pool_.push_back(*it);
      it = recycle_.erase(it);
    }
  }

  // Best fit among cached blocks, wasting at most half of the block.
  void* take_free(std::size_t bytes) {
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > 2 * bytes + (1u << 20)) return nullptr;
    void* p = it->second;
    free_.erase(it);
    return p;
  }

  int device_;
  cudaDeviceProp prop_{};
  DeviceLimits lim_;
  std::vector<cudaStream_t> streams_;
  std::mutex mu_;
  std::unordered_map<Handle, Block> live_;
  std::multimap<std::size_t, void*> free_;
  std::map<std::size_t, std::vector<void*>> small_free_;  // by class
  std::vector<void*> slabs_, dev_chunks_;
  double own_setup_seconds_ = 0;  // in policy() and prepare()
  char* slab_next_ = nullptr;
  std::size_t slab_left_ = 0;
  char* dev_next_ = nullptr;
  std::size_t dev_left_ = 0;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> event_pool_, recycle_;
  std::vector<cudaEvent_t> marks_;  // mark(): timed events, for diagnostics
  std::thread loader_;              // loads the kernels' module after the context is made
  std::unordered_map<std::string, std::unique_ptr<PolicyEntry>> policies_;
  std::vector<std::pair<void*, std::size_t>> scratch_;
  Handle next_handle_ = 1;
  // pinned host buffers (alloc_host): their sizes, and the freed ones kept for reuse
  std::mutex pinned_mu_;
  std::unordered_map<void*, std::size_t> pinned_size_;
  std::multimap<std::size_t, void*> pinned_free_;
  std::size_t pinned_kept_ = 0;
};

// A device buffer, freed when it goes (run_host_bucket, the quick figures, the ceilings).
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(std::size_t bytes) {
    CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

}  // namespace kinfer::gpu::detail
