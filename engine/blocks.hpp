#pragma once
// A pass over a bucket's configurations a block at a time, and its parts dealt to threads:
// shared by the posterior passes (engine/posterior.cpp, engine/belief_sums.cpp). Private to
// engine/.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/cpu_kernel.hpp"
#include "engine/kernel_math.hpp"

namespace kinfer::detail {

inline int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// The configurations of a bucket's variables a block at a time: a block is the configurations
// of the lowest variables (at most kBlock), block t the t-th configuration of the variables
// above them. Each input's offsets within a block are computed once, so a block's products (the
// inputs' ln values summed) are gathers and adds that vectorise, and a block's first entry in
// any table is a few multiplications away from t (no odometer to carry between threads).
constexpr std::int64_t kBlock = 4096;

class Blocks {
 public:
  Blocks(const BucketShape& shape, std::span<const InputTable> inputs)
      : shape_(shape), inputs_(inputs), st_(inputs.size()) {
    const int nv = static_cast<int>(shape.vars.size());
    first = nv;
    while (first > 0 && size * shape.card[first - 1] <= kBlock) size *= shape.card[--first];
    for (int j = 0; j < first; ++j) count *= shape.card[j];
    const std::span<const int> block_card(shape.card.data() + first, nv - first);
    reads_.resize(inputs.size());
    for (std::size_t f = 0; f < inputs.size(); ++f) {
      st_[f].assign(nv, 0);
      input_strides(shape, inputs[f].scope, st_[f].data());
      std::vector<std::int64_t> off(size);
      offsets(st_[f].data(), off.data());
      // An input over the block's variables only is the same in every block: those are summed
      // once (Markov networks put many small factors on a bucket's lowest variables).
      bool varies = false;
      for (int j = 0; j < first; ++j) varies |= st_[f][j] != 0;
      if (varies) {
        varying_.push_back(f);
        reads_[f].emplace(std::move(off), block_card);
        continue;
      }
      if (same_.empty()) same_.assign(size, 0.0);
      for (std::int64_t k = 0; k < size; ++k) same_[k] += inputs[f].data[off[k]];
    }
  }
  int first = 0;           // shape.vars[first..] are a block's variables
  std::int64_t size = 1;   // configurations of a block
  std::int64_t count = 1;  // blocks
  // The offset within a block of each of its entries, in a table of strides `st` (over every
  // variable of the shape; 0 where the table does not vary with it).
  void offsets(const std::int64_t* st, std::int64_t* off) const {
    block_offsets(shape_, st, first, off);
  }
  // The offset of block t's first entry in a table of strides `st`.
  std::int64_t base(std::int64_t t, const std::int64_t* st) const {
    std::int64_t b = 0;
    for (int j = first - 1; j >= 0; --j) {
      b += (t % shape_.card[j]) * st[j];
      t /= shape_.card[j];
    }
    return b;
  }
  // Block t's products into buf[0, size).
  void products(std::int64_t t, double* buf) const {
    if (varying_.empty() || !same_.empty()) {
      if (same_.empty())
        std::fill(buf, buf + size, 0.0);
      else
        std::copy(same_.begin(), same_.end(), buf);
    }
    for (std::size_t i = 0; i < varying_.size(); ++i) {
      const std::size_t f = varying_[i];
      const double* d = inputs_[f].data + base(t, st_[f].data());
      if (i == 0 && same_.empty())
        reads_[f]->add<true>(d, buf);
      else
        reads_[f]->add(d, buf);
    }
  }

 private:
  const BucketShape& shape_;
  std::span<const InputTable> inputs_;
  std::vector<std::vector<std::int64_t>> st_;     // [input][variable]
  std::vector<std::optional<BlockReads>> reads_;  // [input]: how a block reads a varying one
  std::vector<std::size_t> varying_;              // inputs that vary from block to block
  std::vector<double> same_;                      // the sum of the others, per block entry
};

// Each configuration's product of `inputs` (ln values summed) over all of shape.vars (the last
// fastest), one plain pass per input: for shapes of a few thousand configurations at most,
// where a block pass's setup costs more than the pass.
inline std::vector<double> plain_products(const BucketShape& shape,
                                          std::span<const InputTable> inputs) {
  std::int64_t n = 1;
  for (int c : shape.card) n *= c;
  std::vector<double> prod(n, 0.0);
  std::vector<std::int64_t> st(shape.vars.size()), off(n);
  for (const InputTable& in : inputs) {
    std::fill(st.begin(), st.end(), 0);  // input_strides sets the scope's variables only
    input_strides(shape, in.scope, st.data());
    block_offsets(shape, st.data(), 0, off.data());
    for (std::int64_t k = 0; k < n; ++k) prod[k] += in.data[off[k]];
  }
  return prod;
}

// Threads for a pass over `entries` bucket configurations with `inputs` inputs: one where the
// work is too small to pay for a parallel region (the CPU kernel's threshold).
inline int pass_threads(double entries, std::size_t inputs, int threads) {
  return entries * static_cast<double>(inputs + 1) < 2e5 ? 1 : thread_count(threads);
}

// body(thread, lo, hi) on `threads` contiguous parts of [0, n).
template <class Body>
void in_parts(std::int64_t n, int threads, Body&& body) {
  if (n < threads) threads = static_cast<int>(std::max<std::int64_t>(n, 1));
  if (threads == 1) {  // no parallel region for one thread (small buckets take several each)
    body(0, 0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int nt = omp_get_num_threads(), me = omp_get_thread_num();
    body(me, n * me / nt, n * (me + 1) / nt);
  }
}

}  // namespace kinfer::detail
