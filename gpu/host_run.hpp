#pragma once
// Running single buckets from host tables, for the cross-backend test and the benchmarks:
// uploads, poisons the output, runs a chosen variant in double or single precision, times it
// with events (L2 flushed between runs) and brings the result back. Plain C++.
#include <span>
#include <vector>

#include "gpu/device_api.hpp"

namespace kinfer::gpu {

enum class Precision { f64, f32 };

struct HostRunOptions {
  Variant variant = Variant::automatic;
  Precision precision = Precision::f64;
  int repeats = 0;       // timed runs after the checked one (0: no timing)
  bool flush_l2 = true;  // write a buffer larger than L2 before each timed run
};

struct HostRunResult {
  std::vector<double> out;  // from the first (untimed) run; NaN where nothing was written
  KernelChoice choice;
  double ms_median = 0, ms_min = 0;
};

// Throws std::invalid_argument when no kernel takes the bucket, std::runtime_error on CUDA
// errors, and (built without CUDA) always.
HostRunResult run_host_bucket(Context& ctx, const BucketShape& shape,
                              std::span<const InputTable> inputs, const HostRunOptions& opt);

// Ceilings measured on the device, for the roofline: bytes/s of a device-to-device copy
// (read + write counted), and elements/s of the kernels' inner arithmetic with operands in
// registers, per number of varying inputs (index 1..8): one term at a time, and in the bucket
// kernels' chunks of four (measure_element_rate, measure_element_rate_chunked).
struct Ceilings {
  double bandwidth = 0;
  double elem_rate_f64[9] = {};
  double elem_rate_f32[9] = {};
  double elem_rate_chunked_f64[9] = {};
  int sm_count = 0;
  double l2_bytes = 0;
};
Ceilings measure_ceilings(Context& ctx);

}  // namespace kinfer::gpu
