#pragma once
// Random buckets in the ranges of paper 000 section 7.2.2 (2-4 functions, 1-10 values per
// variable, 2-32 summed configurations, up to 25 variables per function), for the
// cross-backend test and the kernel benchmark. Plain C++.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"

namespace kinfer::gpu {

struct RandomBucket {
  BucketShape shape;
  std::vector<std::vector<int>> scopes;
  std::vector<std::vector<double>> data;  // log values; some -inf (zeros), wide ranges
  std::vector<InputTable> inputs() const;
  double states() const;  // output_size * marg_size
};

struct RandomBucketOptions {
  double min_log2_states = 4, max_log2_states = 20;  // drawn log-uniformly in between
  int min_functions = 2, max_functions = 4;
  int min_marg = 2, max_marg = 32;  // summed configurations
  int max_card = 10;
  int max_vars_per_function = 25;
  double zero_fraction = 0.03;  // entries that are -inf
};

RandomBucket random_bucket(std::mt19937_64& rng, const RandomBucketOptions& opt = {});

// A bucket's shape as text (bench/gpu/bucket_bench --shape and --print-shapes):
// CARDS/N_MARG/INPUT/INPUT..., the bucket's cardinalities most significant first (the summed
// ones last), then each input as the comma-separated positions of its variables, increasing,
// e.g. "6,2,3/1/0,2/1,2". Variables are numbered by position.
struct BucketSpec {
  BucketShape shape;
  std::vector<std::vector<int>> scopes;
};
// Throws std::invalid_argument naming the spec and what it expected.
BucketSpec parse_bucket_spec(const std::string& spec);
// The spec of a bucket whose input scopes are subsequences of shape.vars.
std::string bucket_spec(const BucketShape& shape, const std::vector<std::vector<int>>& scopes);
// A bucket of that shape with its own inputs: log values in [-4, 0] drawn from a hash of (seed,
// input, entry), 1% of them -inf, filled on every thread (inputs of GBs for the benchmark).
RandomBucket spec_bucket(const std::string& spec, std::uint64_t seed);

}  // namespace kinfer::gpu
