#pragma once
// Kernels that build tables on the device rather than on the host: a plan's page-offset table
// (LaunchPlan::out_hi_fill, upload_table_image) and Context::fold's sum of a factor into a child
// table. Private to gpu/: included by sum_product.cu only.
#include <cuda_runtime.h>

#include <vector>

#include "gpu/sum_product.cuh"

namespace kinfer::gpu {
namespace {

// out_hi_fill's parameters as the fill kernel reads them: the page variables' cardinalities,
// then their strides [var][nip].
std::vector<long long> fill_params(const LaunchPlan& p) {
  const LaunchPlan::OffsetFill& f = p.out_hi_fill;
  std::vector<long long> v(f.card.begin(), f.card.end());
  v.insert(v.end(), f.stride.begin(), f.stride.end());
  return v;
}

// out[r][s] = sum over the nv page variables of digit_v(r) * stride[v][s] (the last variable
// fastest), a thread per row and four columns at a time; rows < 2^31 (device_fills_pages).
__global__ void fill_offsets_kernel(long long* out, long long rows, int nip, int nv,
                                    const long long* params) {
  const long long* card = params;
  const long long* stride = params + nv;
  for (long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<long long>(gridDim.x) * blockDim.x) {
    for (int s0 = 0; s0 < nip; s0 += 4) {
      long long a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      unsigned rest = static_cast<unsigned>(r);
      for (int v = nv - 1; v >= 0 && rest > 0; --v) {
        const unsigned c = static_cast<unsigned>(card[v]);
        const long long d = rest % c;
        rest /= c;
        const long long* st = stride + static_cast<long long>(v) * nip + s0;
        a0 += d * st[0];
        a1 += d * st[1];
        a2 += d * st[2];
        a3 += d * st[3];
      }
      long long* row = out + r * nip + s0;
      row[0] = a0;
      row[1] = a1;
      row[2] = a2;
      row[3] = a3;
    }
  }
}

// A thread per child entry (Context::fold, Context::permute), its digits by 64-bit division.
__global__ void fold_kernel(double* child, const double* factor, const FoldArgs a) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < a.n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long rest = static_cast<unsigned long long>(i);
    long long f = 0;
    for (int v = a.nv - 1; v >= 0 && rest > 0; --v) {
      const unsigned long long c = static_cast<unsigned long long>(a.card[v]);
      const unsigned long long d = rest % c;
      rest /= c;
      f += static_cast<long long>(d) * a.stride[v];
    }
    child[i] = a.assign ? factor[f] : child[i] + factor[f];
  }
}

}  // namespace
}  // namespace kinfer::gpu
