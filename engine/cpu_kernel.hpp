#pragma once
// The CPU sum-product kernel of one bucket (paper 000 Fig. 3), in the log domain:
//   out(o) = ln sum_m exp( sum_f in_f(o, m) )
// with a max-shifted log-sum-exp, OpenMP over output configurations (or over the summed
// configurations when there are few outputs), and sequential access along the global order.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace kinfer {

// One input table of a bucket: its scope lists bucket variables in the bucket's order
// (a subsequence of BucketShape::vars); data is row-major, last variable fastest.
struct InputTable {
  const double* data = nullptr;
  std::vector<int> scope;
};

// A bucket's table of ln values that a kernel writes in full before anything reads it: its
// entries are left uninitialised when it grows (std::vector<double> would have one thread write
// zeros over it first: a serial pass over gigabytes for the posterior passes' tables, where the
// kernels' threads then touch each page first themselves).
template <class T>
struct UninitialisedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  UninitialisedAllocator() = default;
  template <class U>
  UninitialisedAllocator(const UninitialisedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using LnTable = std::vector<double, UninitialisedAllocator<double>>;

struct BucketShape {
  std::vector<int> vars;  // most significant first
  std::vector<int> card;  // cardinality of each entry of vars
  int n_marg = 0;         // the last n_marg vars are summed out
  // Max-product: the last n_marg vars are maximised over instead of summed (the upward pass of
  // `kinfer mpe`, engine/posterior.hpp). Every kernel, CPU and GPU, takes both.
  bool maximise = false;
  std::int64_t output_size() const;
  std::int64_t marg_size() const;
};

// The strides of an input over the bucket's variables: st[i] for shape.vars[i], 0 where the
// input does not vary with it. `scope` is a subsequence of shape.vars (std::logic_error if not).
// Returns the input's number of entries. Shared by the CPU kernel and the GPU launch plans.
std::int64_t input_strides(const BucketShape& shape, std::span<const int> scope, std::int64_t* st);

// The offset, in a table of strides `st` (as input_strides gives), of each configuration of the
// bucket's variables from shape.vars[first] on (the last fastest), written to `off`: how a
// block of those configurations reads the table.
void block_offsets(const BucketShape& shape, const std::int64_t* st, int first, std::int64_t* off);

// How combine_small_inputs multiplied a bucket's inputs together: the list a pass then reads,
// each item an input read as it is (its position in the bucket's input list) or the product of
// several (tables[-1 - item], over scopes[-1 - item]). A later pass over the same inputs (the
// posterior passes after the upward one) reads the same tables instead of multiplying again.
struct CombinedInputs {
  std::vector<int> items;
  std::vector<std::vector<double>> tables;
  std::vector<std::vector<int>> scopes;
  std::size_t n_inputs = 0;  // the bucket's inputs
  bool empty() const { return items.empty(); }
  // The list over `inputs`: the bucket's inputs in the same order, optionally followed by more
  // (read as they are, after the combined ones).
  std::vector<InputTable> over(std::span<const InputTable> inputs) const;
};

// Writes output_size() log values to `out`. `threads` <= 0 uses OpenMP's default. A
// `maximise` shape runs max_product_log. With `combined`: how the inputs were combined (empty
// where they were read as they are), for the passes after this one.
void sum_product_log(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                     int threads = 0, CombinedInputs* combined = nullptr);

// out(o) = max over the summed variables of the product of the inputs (ln values summed): the
// bucket with max in place of sum, a block of products at a time (engine/posterior.cpp).
void max_product_log(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                     int threads = 0);

// Inputs whose product over the union of their scopes stays small (at most 16384 entries and a
// sixteenth of the bucket's states) multiplied together, so that a bucket with hundreds of small
// factors reads a handful of tables: combined.over(inputs) is the same product as `inputs`.
// False (`combined` left empty) where grouping would not reduce the number of inputs, or for four
// inputs or fewer.
bool combine_small_inputs(const BucketShape& shape, std::span<const InputTable> inputs,
                          CombinedInputs& combined);

// The bytes of the tables combine_small_inputs writes for inputs of these scopes (their data is
// not read).
double combined_bytes(const BucketShape& shape, std::span<const InputTable> inputs);

// Straightforward reference (one configuration at a time, no tricks), for tests.
void sum_product_log_reference(const BucketShape& shape, std::span<const InputTable> inputs,
                               double* out);

// exp(x) for x <= 0 (x may be -inf), vectorizable, within 2 ulp of std::exp where the result
// is a normal double; results below ~1e-307 are approximate (they never matter next to 1).
double exp_nonpositive(double x);

}  // namespace kinfer
