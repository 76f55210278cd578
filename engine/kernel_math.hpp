#pragma once
// The inline pieces of the CPU kernels' hot loops (engine/cpu_kernel.cpp, engine/posterior.cpp),
// written so that the compiler vectorises them: exp for non-positive arguments, the maxima of
// short runs of values, and a table's entries read along a block of a bucket's configurations.
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

namespace kinfer {

// exp(x) for x <= 0 (x may be -inf), within 2 ulp of std::exp where the result is a normal
// double; x below -708 (and -inf) gives e^-708, not 0.
#pragma omp declare simd notinbranch
inline double exp_np(double x) {
  // exp(x) = 2^n * exp(r), r = x - n ln2, |r| <= ln2/2; Taylor to degree 13 (error < 1e-17).
  x = x < -708.0 ? -708.0 : x;                // also maps -inf to a harmless tiny value
  const double shifter = 6755399441055744.0;  // 1.5 * 2^52: rounds to an integer
  double t = x * 1.4426950408889634 + shifter;
  double n = t - shifter;
  double r = x - n * 0.6931471805599453;
  r = r - n * 2.3190468138462996e-17;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // Scale by 2^n through the exponent bits (n >= -1022 here, so the result is normal). t's
  // bits are the shifter's plus n, and the shifter's bits shifted left by 52 are 0: the
  // exponent's bits are (t's bits + 1023) << 52, integer arithmetic that vectorises (AVX2 has
  // no packed conversion of doubles to 64-bit integers).
  std::uint64_t t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const std::uint64_t bits = (t_bits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// out[g] = the largest of x[g * terms + j] over j < terms, for each g < runs (terms >= 1): term
// by term across the runs, which vectorises where one run is too short to.
inline void max_of_runs(const double* __restrict x, std::int64_t runs, std::int64_t terms,
                        double* __restrict out) {
  for (std::int64_t g = 0; g < runs; ++g) out[g] = x[g * terms];
  for (std::int64_t j = 1; j < terms; ++j)
#pragma omp simd
    for (std::int64_t g = 0; g < runs; ++g) {
      const double v = x[g * terms + j];
      out[g] = v > out[g] ? v : out[g];
    }
}

// How a block of a bucket's configurations (its lowest variables, the last fastest) reads one
// input table: block entry k is entry off[k] of the table's part for the block. Where the table
// ends with the block's last variables, in their order, the entries come in runs of consecutive
// table entries; where it lacks the block's last variables, in runs of one entry repeated. A run
// of at least kMinRun entries is read as vector loads or one broadcast instead of a gather per
// entry (on the linkage networks nearly every input of a large bucket has runs of 9 to 4096).
class BlockReads {
 public:
  static constexpr std::int64_t kMinRun = 8;
  // off: the offset of each entry of the block; card: the domain sizes of the block's variables,
  // most significant first.
  BlockReads(std::vector<std::int64_t>&& off, std::span<const int> card)
      : size_(static_cast<std::int64_t>(off.size())) {
    const std::int64_t size = size_;
    std::int64_t len = 1;
    for (std::size_t j = card.size(); j-- > 0;) {
      len *= card[j];
      bool consecutive = true, repeated = true;
      for (std::int64_t r = 0; r < size && (consecutive || repeated); r += len)
        for (std::int64_t i = 0; i < len; ++i) {
          const std::int64_t d = off[r + i] - off[r];
          consecutive &= d == i;
          repeated &= d == 0;
        }
      if (!consecutive && !repeated) break;
      run_ = len;
      repeated_ = repeated;
    }
    if (run_ >= kMinRun) {
      for (std::int64_t k = 0; k < size; k += run_) start_.push_back(off[k]);
    } else {
      run_ = 1;
      off_ = std::move(off);
    }
  }
  // x[k] += d[off[k]] for each entry k of the block (x[k] = d[off[k]] with kAssign).
  template <bool kAssign = false>
  void add(const double* d, double* __restrict x) const {
    const std::int64_t n = size_, len = run_;
    if (len == 1) {
      const std::int64_t* o = off_.data();
#pragma omp simd
      for (std::int64_t k = 0; k < n; ++k) x[k] = kAssign ? d[o[k]] : x[k] + d[o[k]];
      return;
    }
    for (std::size_t r = 0; r < start_.size(); ++r) {
      double* __restrict y = x + static_cast<std::int64_t>(r) * len;
      const double* s = d + start_[r];
      if (repeated_) {
        const double v = *s;
#pragma omp simd
        for (std::int64_t i = 0; i < len; ++i) y[i] = kAssign ? v : y[i] + v;
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < len; ++i) y[i] = kAssign ? s[i] : y[i] + s[i];
      }
    }
  }

  // Whether the block reads the table in runs (else entry by entry).
  bool in_runs() const { return run_ > 1; }
  // y[off[k]] += x[k] for each entry k of the block: the block summed onto the table, a run at
  // a time (a run of consecutive entries as one vector add, a repeated entry's run summed first).
  void scatter_add(const double* __restrict x, double* y) const {
    const std::int64_t n = size_, len = run_;
    if (len == 1) {
      for (std::int64_t k = 0; k < n; ++k) y[off_[k]] += x[k];
      return;
    }
    for (std::size_t r = 0; r < start_.size(); ++r) {
      const double* __restrict s = x + static_cast<std::int64_t>(r) * len;
      double* __restrict z = y + start_[r];
      if (repeated_) {
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t i = 0; i < len; ++i) sum += s[i];
        *z += sum;
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < len; ++i) z[i] += s[i];
      }
    }
  }

 private:
  std::int64_t size_;
  std::int64_t run_ = 1;             // entries per run (1: read entry by entry through off_)
  bool repeated_ = false;            // runs of one entry repeated, else of consecutive entries
  std::vector<std::int64_t> start_;  // [size / run]: each run's first offset
  std::vector<std::int64_t> off_;    // [size] where the runs are too short
};

}  // namespace kinfer
