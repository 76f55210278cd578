#pragma once
// Kernels that build tables on the device rather than on the host: a plan's page-offset table
// (LaunchPlan::out_hi_fill, upload_table_image) and Context::fold's sum of a factor into a child
// table. Private to gpu/: included by sum_product.cu only.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <vector>

#include "gpu/detail/kernel_args.cuh"
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

// The next mixed-radix digit of an index: rest's remainder by dimension dv's size, rest then
// divided by it (by a multiplication, FastDiv64). Called the last dimension first.
__device__ __forceinline__ long long next_digit(unsigned long long& rest, const FastDiv64& dv) {
  const unsigned long long q = fdiv64(rest, DevDiv64{dv.mul, dv.shift});
  const long long d = static_cast<long long>(rest - q * dv.d);
  rest = q;
  return d;
}

__device__ __forceinline__ void fold_one(double& to, double x, FoldMode mode) {
  switch (mode) {
    case FoldMode::add:
      to += x;
      break;
    case FoldMode::assign:
      to = x;
      break;
    case FoldMode::divide:
      to = x == -CUDART_INF ? -CUDART_INF : to - x;
      break;
  }
}

// FoldArgs::tiled: a block per tile of kFoldTile x kFoldTile entries over the factor's innermost
// entries (t: the tile dimensions' combined index, which is the factor's offset among them) and
// the child's last dimension (l), the other dimensions fixed by the tile's index; the block reads
// the tile along t and writes it along l through shared memory.
constexpr int kFoldTile = 32, kFoldTileRows = 8;
__global__ void fold_tiled_kernel(double* child, const double* factor, const FoldArgs a) {
  __shared__ double tile[kFoldTile][kFoldTile + 1];
  const int l = a.nv - 1;
  unsigned long long in_tile = 0;  // the tile dimensions as bits
  long long nt = 1;
  for (int g = 0; g < a.tiled; ++g) {
    in_tile |= 1ull << a.tile_dims[g];
    nt *= static_cast<long long>(a.div[a.tile_dims[g]].d);
  }
  const long long nl = static_cast<long long>(a.div[l].d);
  const long long tiles_t = (nt + kFoldTile - 1) / kFoldTile;
  const long long tiles_l = (nl + kFoldTile - 1) / kFoldTile;
  const long long tiles = tiles_t * tiles_l * (a.n / (nt * nl));
  const long long stride_l = a.stride[l];
  for (long long k = blockIdx.x; k < tiles; k += gridDim.x) {
    const long long tl = k % tiles_l, rest_k = k / tiles_l;
    const long long tt = rest_k % tiles_t;
    unsigned long long rest = static_cast<unsigned long long>(rest_k / tiles_t);
    long long f0 = 0, c0 = 0;
    for (int v = l - 1; v >= 0; --v) {  // the other dimensions' digits, the last fastest
      if (in_tile >> v & 1) continue;
      const long long d = next_digit(rest, a.div[v]);
      f0 += d * a.stride[v];
      c0 += d * a.child_stride[v];
    }
    __syncthreads();  // the previous tile's writes have read the shared tile
    for (int r = threadIdx.y; r < kFoldTile; r += kFoldTileRows) {
      const long long xt = tt * kFoldTile + threadIdx.x, xl = tl * kFoldTile + r;
      if (xt < nt && xl < nl) tile[r][threadIdx.x] = factor[f0 + xt + xl * stride_l];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kFoldTile; r += kFoldTileRows) {
      const long long xl = tl * kFoldTile + threadIdx.x, xt = tt * kFoldTile + r;
      if (xt >= nt || xl >= nl) continue;
      // xt's digits over the tile dimensions, the factor's innermost first
      unsigned long long x = static_cast<unsigned long long>(xt);
      long long c = c0 + xl;
      for (int g = 0; g < a.tiled; ++g)
        c += next_digit(x, a.div[a.tile_dims[g]]) * a.child_stride[a.tile_dims[g]];
      fold_one(child[c], tile[threadIdx.x][r], a.mode);
    }
  }
}

// FoldArgs::set_dims: a block per tile (the other dimensions' digits fixed). Each block first
// works out, for each of the set's entries in the factor's order (w), its factor offset and its
// position in the child's order (u), and for each u its child offset; a tile is then read by w
// (in runs along the factor) into shared memory at u, and written by u (in runs along the
// child). Offsets in 32 bits: the child has fewer than 2^31 entries, the factor no more.
__global__ void fold_set_kernel(double* child, const double* factor, const FoldArgs a) {
  __shared__ double tile[kFoldSetMax];
  __shared__ int factor_at[kFoldSetMax], u_of[kFoldSetMax], child_at[kFoldSetMax];
  unsigned long long in_set = 0;
  for (int g = 0; g < a.set_dims; ++g) in_set |= 1ull << a.set_dim[g];
  const auto digit = [&](unsigned& rest, int v) {
    const unsigned q = fdiv(rest, DevDiv{a.div32[v].mul, a.div32[v].shift});
    const int d = static_cast<int>(rest - q * a.div32[v].d);
    rest = q;
    return d;
  };
  for (int u = threadIdx.x; u < a.set; u += blockDim.x) {
    unsigned rest = static_cast<unsigned>(u);
    int c = 0, f = 0, w = 0;
    for (int g = a.set_dims - 1; g >= 0; --g) {  // the child's order, the last fastest
      const int v = a.set_dim[g];
      const int d = digit(rest, v);
      c += d * static_cast<int>(a.child_stride[v]);
      f += d * static_cast<int>(a.stride[v]);
      w += d * a.set_fstride[g];
    }
    child_at[u] = c;
    factor_at[w] = f;
    u_of[w] = u;
  }
  const unsigned tiles = static_cast<unsigned>(a.n / a.set);
  for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
    unsigned rest = t;
    int f0 = 0, c0 = 0;
    for (int v = a.nv - 1; v >= 0; --v) {  // the other dimensions, the last fastest
      if (in_set >> v & 1) continue;
      const int d = digit(rest, v);
      f0 += d * static_cast<int>(a.stride[v]);
      c0 += d * static_cast<int>(a.child_stride[v]);
    }
    __syncthreads();  // the tables written; the previous tile written out
    for (int w = threadIdx.x; w < a.set; w += blockDim.x) tile[u_of[w]] = factor[f0 + factor_at[w]];
    __syncthreads();
    for (int u = threadIdx.x; u < a.set; u += blockDim.x)
      fold_one(child[c0 + child_at[u]], tile[u], a.mode);
  }
}

// FoldArgs::low_dims: the low dimensions' factor offsets in shared memory (lo), then a block per
// run of `low` child entries (t), its factor offset f0 over the other dimensions worked out by
// each thread once per run.
__global__ void fold_low_kernel(double* child, const double* factor, const FoldArgs a) {
  __shared__ long long lo[kFoldLowMax];
  const int high = a.nv - a.low_dims;  // the low dimensions are high..nv-1
  for (int j = threadIdx.x; j < a.low; j += blockDim.x) {
    unsigned long long rest = static_cast<unsigned long long>(j);
    long long f = 0;
    for (int v = a.nv - 1; v >= high; --v) f += next_digit(rest, a.div[v]) * a.stride[v];
    lo[j] = f;
  }
  __syncthreads();
  const long long runs = a.n / a.low;
  for (long long t = blockIdx.x; t < runs; t += gridDim.x) {
    unsigned long long rest = static_cast<unsigned long long>(t);
    long long f0 = 0;
    for (int v = high - 1; v >= 0 && rest > 0; --v) f0 += next_digit(rest, a.div[v]) * a.stride[v];
    double* c = child + t * a.low;
    const double* f = factor + f0;
    for (int j = threadIdx.x; j < a.low; j += blockDim.x) fold_one(c[j], f[lo[j]], a.mode);
  }
}

// A thread per child entry (Context::fold, Context::permute, Context::divide), its digits by
// multiplications (FoldArgs::div).
__global__ void fold_kernel(double* child, const double* factor, const FoldArgs a) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < a.n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long rest = static_cast<unsigned long long>(i);
    long long f = 0;
    for (int v = a.nv - 1; v >= 0 && rest > 0; --v) f += next_digit(rest, a.div[v]) * a.stride[v];
    fold_one(child[i], factor[f], a.mode);
  }
}

}  // namespace
}  // namespace kinfer::gpu
