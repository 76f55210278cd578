#pragma once
// Pinned host buffers for staged copies, reused instead of allocated per copy (pinning memory
// costs far more than copying into it). Not thread-safe: one pool per GPU manager thread.
#include <cstdint>
#include <map>
#include <vector>

#include "gpu/device_api.hpp"

namespace kinfer::sched {

class StagingPool {
 public:
  explicit StagingPool(gpu::Context& ctx) : ctx_(ctx) {}
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  ~StagingPool() {
    for (auto& [p, cap] : all_) {
      try {
        ctx_.free_host(p);
      } catch (...) {  // a destructor must not throw; the buffers die with the process anyway
      }
    }
  }

  // The entries of the buffer a request for n pins: a power of two, so that buffers fit later
  // requests.
  static std::int64_t capacity(std::int64_t n) {
    std::int64_t cap = 512;
    while (cap < n) cap *= 2;
    return cap;
  }
  // A buffer of at least n entries; the caller gives it back once no copy uses it any more.
  double* take(std::int64_t n) {
    auto it = free_.lower_bound(n);
    if (it != free_.end()) {
      double* p = it->second;
      free_.erase(it);
      return p;
    }
    const std::int64_t cap = capacity(n);
    double* p = ctx_.alloc_host(cap);
    all_.emplace(p, cap);
    return p;
  }
  void give(double* p) { free_.emplace(all_.at(p), p); }

 private:
  gpu::Context& ctx_;
  std::map<double*, std::int64_t> all_;        // buffer -> capacity (entries)
  std::multimap<std::int64_t, double*> free_;  // capacity -> idle buffer
};

}  // namespace kinfer::sched
