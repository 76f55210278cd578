#pragma once
// Random buckets in the ranges of paper 000 section 7.2.2 (2-4 functions, 1-10 values per
// variable, 2-32 summed configurations, up to 25 variables per function), for the
// cross-backend test and the kernel benchmark. Plain C++.
#include <cstdint>
#include <random>
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

}  // namespace kinfer::gpu
