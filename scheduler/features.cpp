#include "scheduler/features.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kinfer::sched {

const std::array<const char*, BucketFeatures::kCount>& BucketFeatures::names() {
  static const std::array<const char*, kCount> n = {"log2_states", "log2_out", "log2_marg",
                                                    "inputs",      "varying",  "log2_in",
                                                    "log2_reuse",  "log2_run", "log2_inner"};
  return n;
}

namespace {
// Position of each bucket variable, so scopes can be mapped onto the bucket.
int position(const BucketShape& s, int var) {
  auto it = std::find(s.vars.begin(), s.vars.end(), var);
  if (it == s.vars.end()) throw std::invalid_argument("an input variable is not in the bucket");
  return static_cast<int>(it - s.vars.begin());
}
}  // namespace

double input_entries(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  double total = 0;
  for (const auto& sc : scopes) {
    double n = 1;
    for (int v : sc) n *= shape.card[position(shape, v)];
    total += n;
  }
  return total;
}

BucketFeatures bucket_features(const BucketShape& shape, std::span<const std::vector<int>> scopes) {
  BucketFeatures f;
  const int nv = static_cast<int>(shape.vars.size());
  const int first_marg = nv - shape.n_marg;
  for (int i = 0; i < nv; ++i) {
    const double l = std::log2(static_cast<double>(shape.card[i]));
    f.log2_states += l;
    (i < first_marg ? f.log2_out : f.log2_marg) += l;
  }
  f.inputs = static_cast<double>(scopes.size());
  double run_sum = 0;
  for (const auto& sc : scopes) {
    double run = 0;  // log2 entries over this input's summed variables: one contiguous run
    for (int v : sc) {
      const int p = position(shape, v);
      if (p >= first_marg) run += std::log2(static_cast<double>(shape.card[p]));
    }
    if (run > 0) f.varying += 1, run_sum += run;
  }
  f.log2_run = f.varying > 0 ? run_sum / f.varying : 0;
  const double in = input_entries(shape, scopes);
  f.log2_in = in > 0 ? std::log2(in) : 0;
  f.log2_reuse = f.log2_states + std::log2(std::max(1.0, f.inputs)) - f.log2_in;
  // The CPU kernel's inner block: the lowest summed variables while their product <= 4096.
  double inner = 1;
  for (int i = nv - 1; i >= first_marg && inner * shape.card[i] <= 4096; --i)
    inner *= shape.card[i];
  f.log2_inner = std::log2(inner);
  return f;
}

}  // namespace kinfer::sched
