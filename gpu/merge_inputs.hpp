#pragma once
// Fitting a bucket's factor inputs to what the GPU kernels take (plain C++): a bucket with more
// inputs than a launch takes (kMaxInputs), or more inputs varying with the summed variables than
// the kernels have cases for (kMaxVarying), gets its smallest factor inputs multiplied together
// on the host, as long as the products stay small (2^20 entries). Exact: only the grouping of
// the product changes. The products come from the CPU kernel (sum_product_log) on the bucket
// restricted to the union of the two scopes, with nothing summed.
#include <cstdint>
#include <vector>

#include "engine/cpu_kernel.hpp"

namespace kinfer::gpu {

// A factor input as the GPU path feeds it: a table of the plan, or a product owned by the caller.
struct HostInput {
  const double* data = nullptr;
  std::int64_t size = 0;
  std::vector<int> scope;  // a subsequence of the bucket's vars
};

// `factors`: the bucket's factor inputs; `child_scopes`: the scopes of its children's outputs
// (they are not merged: they are computed on either device). Returns the factor inputs to upload;
// merged products are appended to `owned`, which must outlive the returned inputs (they point
// into its tables; moving `owned` keeps them valid). When nothing small
// enough can be merged, returns what it has: the kernel selector then says why the bucket is not
// taken.
std::vector<HostInput> merge_inputs(const BucketShape& shape, std::vector<HostInput> factors,
                                    const std::vector<std::vector<int>>& child_scopes,
                                    std::vector<std::vector<double>>& owned);

}  // namespace kinfer::gpu
