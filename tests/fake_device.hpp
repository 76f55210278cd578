#pragma once
// A "GPU" in host memory for testing the scheduler's executor without a device: a
// gpu::Context whose streams are worker threads that run queued copies and kernels
// (sum_product_log) in order, asynchronously, after a random delay. It checks the contract as
// it goes: device memory is poisoned (NaN) when allocated, an asynchronous copy reads its host
// buffer when it runs (not when queued), and any use of a table queued after its release, or
// of a released host buffer, is an error reported by the next synchronize(). For the check mode's
// tests it can be made wrong on purpose (`corrupt`).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "engine/errors.hpp"
#include "gpu/device_api.hpp"

namespace kinfer::test {

class FakeDevice final : public gpu::Context {
 public:
  explicit FakeDevice(int streams = 2, int max_delay_us = 300, std::uint64_t seed = 1)
      : max_delay_us_(max_delay_us), rng_(seed) {
    for (int s = 0; s < streams; ++s) streams_.push_back(std::make_unique<Stream>());
    for (int s = 0; s < streams; ++s) workers_.emplace_back([this, s] { work(s); });
  }
  ~FakeDevice() override {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    for (auto& [p, n] : host_) delete[] p;
  }

  // Counters for the tests.
  std::atomic<int> kernels{0};
  std::atomic<double> h2d_bytes{0}, d2h_bytes{0};
  int alloc_limit = std::numeric_limits<int>::max();  // allocations before "memory full"
  double memory_bytes = 1e12;                         // what free_bytes() reports
  // When set and true for a bucket's shape, its output entries get `corrupt_by` added.
  std::function<bool(const BucketShape&)> corrupt;
  double corrupt_by = 1e-3;

  gpu::Handle alloc(std::int64_t entries) override {
    std::lock_guard lock(m_);
    if (allocs_++ >= alloc_limit) throw DeviceMemoryError("fake GPU memory full");
    const gpu::Handle h = next_++;
    live_bytes_ += 8.0 * static_cast<double>(entries);
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    tables_[h].assign(static_cast<std::size_t>(entries), std::numeric_limits<double>::quiet_NaN());
    return h;
  }
  void release(gpu::Handle h) override {
    std::lock_guard lock(m_);
    if (!tables_.count(h) || released_.count(h)) fail("release of an unknown or released table");
    // work queued so far may still read it; anything queued later must not
    std::vector<std::uint64_t> at;
    for (auto& s : streams_) at.push_back(s->queued);
    released_[h] = at;
    live_bytes_ -= 8.0 * static_cast<double>(tables_[h].size());
  }
  double free_bytes() override { return memory_bytes; }
  double* alloc_host(std::int64_t entries) override {
    std::lock_guard lock(m_);
    double* p = new double[std::max<std::int64_t>(entries, 1)];
    host_[p] = entries;
    return p;
  }
  void free_host(double* p) override {
    std::lock_guard lock(m_);
    auto it = host_.find(p);
    if (it == host_.end()) return fail("free_host of an unknown buffer");
    for (auto& s : streams_)
      if (s->executed < s->queued) fail("free_host while copies are still queued");
    delete[] p;
    host_.erase(it);
  }
  void upload(gpu::Handle dst, const double* src, std::int64_t n, int s) override {
    h2d_bytes = h2d_bytes + 8.0 * n;
    enqueue(s, {dst}, [this, dst, src, n] {
      auto& t = tables_.at(dst);
      if (static_cast<std::int64_t>(t.size()) < n) fail("upload past the end of a table");
      std::memcpy(t.data(), src, 8 * n);
    });
  }
  void download(gpu::Handle src, double* dst, std::int64_t n, int s) override {
    d2h_bytes = d2h_bytes + 8.0 * n;
    enqueue(s, {src}, [this, src, dst, n] { std::memcpy(dst, tables_.at(src).data(), 8 * n); });
  }
  void download_range(gpu::Handle src, std::int64_t first, std::int64_t n, double* dst,
                      int s) override {
    d2h_bytes = d2h_bytes + 8.0 * static_cast<double>(n);
    enqueue(s, {src}, [this, src, first, n, dst] {
      const auto& t = tables_.at(src);
      if (first < 0 || first + n > static_cast<std::int64_t>(t.size()))
        return fail("download_range beyond the table");
      std::memcpy(dst, t.data() + first, 8 * n);
    });
    synchronize(s);
  }
  std::atomic<int> range_copies{0};
  void copy_range(gpu::Handle dst, gpu::Handle src, std::int64_t first, std::int64_t n,
                  int s) override {
    ++range_copies;
    enqueue(s, {dst, src}, [this, dst, src, first, n] {
      const auto& from = tables_.at(src);
      auto& to = tables_.at(dst);
      if (first < 0 || first + n > static_cast<std::int64_t>(from.size()) ||
          n > static_cast<std::int64_t>(to.size()))
        return fail("copy_range beyond a table");
      std::memcpy(to.data(), from.data() + first, 8 * n);
    });
  }
  void run_bucket(const BucketShape& shape, std::span<const gpu::DeviceInput> inputs,
                  gpu::Handle out, int s) override {
    std::vector<gpu::Handle> used = {out};
    for (const auto& in : inputs) used.push_back(in.table);
    std::vector<gpu::DeviceInput> copy(inputs.begin(), inputs.end());
    enqueue(s, used, [this, shape, copy, out] {
      std::vector<InputTable> in;
      for (const auto& d : copy) in.push_back({tables_.at(d.table).data(), d.scope});
      auto& t = tables_.at(out);
      sum_product_log(shape, in, t.data(), 1);
      if (corrupt && corrupt(shape))
        for (double& x : t) x += corrupt_by;
      ++kernels;
    });
  }
  std::atomic<int> folds{0}, permutes{0}, divides{0};
  void fold(gpu::Handle child, std::span<const int> card,
            std::span<const std::int64_t> factor_stride, gpu::Handle factor, int s) override {
    ++folds;
    strided(child, card, factor_stride, factor, Mode::add, s);
  }
  void permute(gpu::Handle out, std::span<const int> card, std::span<const std::int64_t> in_stride,
               gpu::Handle in, int s) override {
    ++permutes;
    strided(out, card, in_stride, in, Mode::assign, s);
  }
  void divide(gpu::Handle message, std::span<const int> card,
              std::span<const std::int64_t> by_stride, gpu::Handle by, int s) override {
    ++divides;
    strided(message, card, by_stride, by, Mode::divide, s);
  }
  void synchronize(int s) override {
    std::unique_lock lock(m_);
    Stream& st = *streams_.at(s);
    const std::uint64_t target = st.queued;
    cv_.wait(lock, [&] { return st.executed >= target; });
    if (!error_.empty()) throw std::runtime_error("fake GPU: " + error_);
  }
  int num_streams() const override { return static_cast<int>(streams_.size()); }
  std::string name() const override { return "fake GPU (host memory)"; }
  // What quick_figures() reports (zeros: a device that measures nothing), and its calls.
  gpu::QuickFigures quick;
  std::atomic<int> quick_calls{0};
  gpu::QuickFigures quick_figures() override {
    ++quick_calls;
    return quick;
  }
  gpu::KernelChoice run_bucket(const BucketShape& shape, std::span<const gpu::DeviceInput> inputs,
                               gpu::Handle out, int s, gpu::Variant) override {
    run_bucket(shape, inputs, out, s);
    return {};
  }
  gpu::KernelChoice choose(const BucketShape&, std::span<const std::vector<int>> scopes) override {
    if (scopes.size() > 16) throw std::invalid_argument("more than 16 inputs");
    return {};
  }
  void stream_wait(int waiter, int waitee) override {
    std::uint64_t target;
    {
      std::lock_guard lock(m_);
      target = streams_.at(waitee)->queued;
    }
    Stream* w = streams_.at(waitee).get();
    enqueue(
        waiter, {},
        [this, w, target] {
          std::unique_lock lock(m_);
          cv_.wait(lock, [&] { return w->executed >= target; });
        },
        false);
  }

  std::string error() {
    std::lock_guard lock(m_);
    return error_;
  }
  // Device bytes allocated and not yet released: the most at once (what a budget must bound).
  double peak_live_bytes() {
    std::lock_guard lock(m_);
    return peak_live_bytes_;
  }
  std::size_t live_tables() {
    std::lock_guard lock(m_);
    return tables_.size() - released_.size();
  }

 private:
  double live_bytes_ = 0, peak_live_bytes_ = 0;
  struct Op {
    std::uint64_t seq;
    std::vector<gpu::Handle> uses;
    std::function<void()> run;
    bool locked;  // run while holding the device lock (table maps are not thread-safe)
  };
  struct Stream {
    std::deque<Op> q;
    std::uint64_t queued = 0, executed = 0;
  };

  void fail(const std::string& e) {
    if (error_.empty()) error_ = e;
  }

  // fold (to[i] += from[...]), permute (to[i] = from[...]) and divide (to[i] -= from[...], -inf
  // where from[...] is -inf).
  enum class Mode { add, assign, divide };
  void strided(gpu::Handle to, std::span<const int> card, std::span<const std::int64_t> stride,
               gpu::Handle from, Mode mode, int s) {
    std::vector<int> c(card.begin(), card.end());
    std::vector<std::int64_t> st(stride.begin(), stride.end());
    enqueue(s, {to, from}, [this, to, from, c, st, mode] {
      auto& t = tables_.at(to);
      const auto& f = tables_.at(from);
      std::int64_t n = 1;
      for (int x : c) n *= x;
      if (static_cast<std::int64_t>(t.size()) < n) fail("a fold or permute past a table's end");
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t rest = i, at = 0;
        for (std::size_t v = c.size(); v-- > 0;) {
          at += (rest % c[v]) * st[v];
          rest /= c[v];
        }
        if (at >= static_cast<std::int64_t>(f.size()))
          return fail("a fold or permute reads past its source");
        const double x = f[at];
        t[i] = mode == Mode::assign                            ? x
               : mode == Mode::add                             ? t[i] + x
               : x == -std::numeric_limits<double>::infinity() ? x
                                                               : t[i] - x;
      }
    });
  }

  void enqueue(int s, std::vector<gpu::Handle> uses, std::function<void()> run,
               bool locked = true) {
    {
      std::lock_guard lock(m_);
      Stream& st = *streams_.at(s);
      for (gpu::Handle h : uses) {
        if (!tables_.count(h))
          fail("use of an unknown table");
        else if (released_.count(h))
          fail("work queued on a table after its release");
      }
      st.q.push_back({st.queued++, std::move(uses), std::move(run), locked});
    }
    cv_.notify_all();
  }

  void work(int s) {
    Stream& st = *streams_[s];
    std::unique_lock lock(m_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !st.q.empty(); });
      if (st.q.empty()) return;
      Op op = std::move(st.q.front());
      st.q.pop_front();
      const int delay = std::uniform_int_distribution<int>(0, max_delay_us_)(rng_);
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
      lock.lock();
      if (op.locked)
        op.run();
      else {
        lock.unlock();
        op.run();
        lock.lock();
      }
      ++st.executed;
      reclaim();
      cv_.notify_all();
    }
  }

  // Frees released tables once every stream has passed its release point.
  void reclaim() {
    for (auto it = released_.begin(); it != released_.end();) {
      bool done = true;
      for (std::size_t s = 0; s < streams_.size(); ++s)
        done = done && streams_[s]->executed >= it->second[s];
      if (done) {
        tables_.erase(it->first);
        it = released_.erase(it);
      } else {
        ++it;
      }
    }
  }

  int max_delay_us_;
  std::mt19937_64 rng_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::thread> workers_;
  std::map<gpu::Handle, std::vector<double>> tables_;
  std::map<gpu::Handle, std::vector<std::uint64_t>> released_;
  std::map<double*, std::int64_t> host_;
  gpu::Handle next_ = 1;
  int allocs_ = 0;
  std::string error_;
};

}  // namespace kinfer::test
