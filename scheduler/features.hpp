#pragma once
// What a bucket looks like to a runtime predictor (paper 001 section 3.3.1): its operations,
// output and input sizes, number of functions, and how its inputs are reused and laid out
// (cache behaviour). Computed from the shape and the input scopes alone, so the same features
// come from a Plan, from a calibration sweep, or from a laptop planning for a GPU machine.
#include <array>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"

namespace kinfer::sched {

// All sizes are log2 of a number of table entries.
struct BucketFeatures {
  double log2_states = 0;  // output configurations x summed configurations
  double log2_out = 0;     // output table
  double log2_marg = 0;    // summed configurations per output
  double inputs = 0;       // functions entering the bucket
  double varying = 0;      // of which vary with the summed variables (read per summed state)
  double log2_in = 0;      // all input tables together
  double log2_reuse = 0;   // reads per input entry: log2(states x inputs / input entries)
  double log2_run = 0;     // mean contiguous summed run of the varying inputs (coalescing)
  double log2_inner = 0;   // the CPU kernel's vectorized inner block of summed states

  static constexpr int kCount = 9;
  std::array<double, kCount> values() const {
    return {log2_states, log2_out,   log2_marg, inputs,    varying,
            log2_in,     log2_reuse, log2_run,  log2_inner};
  }
  static const std::array<const char*, kCount>& names();
};

BucketFeatures bucket_features(const BucketShape& shape, std::span<const std::vector<int>> scopes);

// Total entries of the input tables (for transfer sizes).
double input_entries(const BucketShape& shape, std::span<const std::vector<int>> scopes);

}  // namespace kinfer::sched
