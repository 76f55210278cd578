#pragma once
// Kernel plans built beside a run (the executor's upward pass, the marginals' downward pass):
// each GPU bucket's or message's plan (Context::prepare) built once, by whichever thread claims
// it first, the preparing threads in the order the run needs them or the run's own thread
// reaching it; a thread that finds it being built waits for it. The first error is kept and
// rethrown by the run.
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>

namespace kinfer::sched {

// The plans of n items (buckets, messages), 0 to n - 1: build(i, f) runs f for item i unless
// another thread did or does (then it waits for that one), or stop() was called.
class Preparation {
 public:
  explicit Preparation(int n) : state_(static_cast<std::size_t>(n)) {}
  template <class F>
  void build(int b, F&& f) {
    int expected = 0;
    if (state_[b].compare_exchange_strong(expected, 1)) {
      if (!stop_.load()) try {
          f();
        } catch (...) {
          std::lock_guard lock(m_);
          if (!error_) error_ = std::current_exception();
          failed_ = true;
        }
      {
        std::lock_guard lock(m_);
        state_[b].store(2);
      }
      cv_.notify_all();
      return;
    }
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return state_[b].load() == 2; });
  }
  bool failed() const { return failed_.load() || stop_.load(); }
  void stop() { stop_ = true; }
  void rethrow() {
    std::lock_guard lock(m_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::vector<std::atomic<int>> state_;  // 0 not started, 1 being built, 2 built (or failed)
  std::atomic<bool> failed_{false}, stop_{false};
  std::mutex m_;
  std::condition_variable cv_;
  std::exception_ptr error_;
};

}  // namespace kinfer::sched
