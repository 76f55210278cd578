#pragma once
// Launching the bucket kernels: from a plan (LaunchPlan) to the template instance compiled for
// it, with the shared-memory opt-in each needs. Private to gpu/: included by sum_product.cu only.
//
// The dispatch, outermost first: the number of varying slots (dispatch_nf: 0-8, 12, 16), the
// variant and tile (launch_nf), the one-lane kernels and the lanes per output
// (launch_plain_lanes), the short-sum kernel's families (launch_short_sum*). Every wrapper takes
// `load_only`: the kernel is loaded and its shared memory allowed, but not launched
// (load_kernels).
#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "gpu/cuda_check.cuh"
#include "gpu/detail/cached_kernel.cuh"
#include "gpu/detail/kernel_args.cuh"
#include "gpu/detail/plain_kernel.cuh"
#include "gpu/detail/short_sum_kernel.cuh"

namespace kinfer::gpu {
namespace {

// A kernel's opt-in to shared memory is an attribute per device, and a __device__ variable has
// an address per device: what is looked up once is looked up once per device (once per process
// would leave every launch needing more than 48 KiB failing on a second GPU).
constexpr int kMaxDevices = 64;
using DeviceFlags = std::array<std::once_flag, kMaxDevices>;

int current_device() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= kMaxDevices) throw std::runtime_error("more CUDA devices than kinfer takes");
  return dev;
}

int max_dynamic_shared() {
  static std::array<int, kMaxDevices> value{};
  static DeviceFlags flags;
  const int dev = current_device();
  std::call_once(flags[dev], [&] {
    int max_optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    value[dev] = max_optin - kStaticShared;
  });
  return value[dev];
}

template <class K>
void allow_shared(K kernel, int bytes, DeviceFlags& flags) {
  // opt in to all the dynamic shared memory the device allows next to the static exp table
  const int dev = current_device();
  std::call_once(flags[dev], [&] {
    int max_optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    max_optin - static_cast<int>(attr.sharedSizeBytes)));
  });
  if (bytes > max_dynamic_shared())
    throw std::invalid_argument("policy needs more shared memory than a block gets");
}

template <class T, int NF, int GC, int TD = 0, int OUTS = 1>
void launch_plain_kernel(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream,
                         bool load_only) {
  static DeviceFlags flags;
  allow_shared(plain_kernel<T, NF, GC, TD, OUTS>, p.shared_bytes, flags);
  if (load_only) return;
  plain_kernel<T, NF, GC, TD, OUTS>
      <<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, stream>>>(a);
}

template <int NF, int NIP, int OUTS, bool ALL_DIRECT, int MI = 0, int TD = 0>
void launch_short_sum_kernel(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                             bool load_only) {
  static DeviceFlags flags;
  allow_shared(short_sum_kernel<NF, NIP, OUTS, ALL_DIRECT, MI, TD>, p.shared_bytes, flags);
  if (load_only) return;
  short_sum_kernel<NF, NIP, OUTS, ALL_DIRECT, MI, TD>
      <<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, stream>>>(a);
}

// The short-sum kernel with a tile of two outputs (LaunchPlan::short_sum_tile: terms compiled in,
// direct inputs).
template <int NF, int NIP, int TD>
void launch_short_sum_tiled(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                            bool load_only) {
  switch (p.Mi) {
    case 2:
      return launch_short_sum_kernel<NF, NIP, 1, true, 2, TD>(p, a, stream, load_only);
    case 3:
      return launch_short_sum_kernel<NF, NIP, 1, true, 3, TD>(p, a, stream, load_only);
    case 4:
      return launch_short_sum_kernel<NF, NIP, 1, true, 4, TD>(p, a, stream, load_only);
    case 6:
      return launch_short_sum_kernel<NF, NIP, 1, true, 6, TD>(p, a, stream, load_only);
    case 8:
      return launch_short_sum_kernel<NF, NIP, 1, true, 8, TD>(p, a, stream, load_only);
  }
  throw std::invalid_argument("the short-sum kernel's tile: no case for this many terms");
}

template <int NF, int NIP, int OUTS, bool ALL_DIRECT>
void launch_short_sum_terms(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                            bool load_only) {
  // a case for each of kLeanFixedTerms (2 or 3 terms: one summed variable, held last by every
  // input that varies with it: direct)
  if constexpr (ALL_DIRECT) {
    if (p.lean_fixed_terms && p.Mi == 2)
      return launch_short_sum_kernel<NF, NIP, OUTS, true, 2>(p, a, stream, load_only);
    if (p.lean_fixed_terms && p.Mi == 3)
      return launch_short_sum_kernel<NF, NIP, OUTS, true, 3>(p, a, stream, load_only);
  }
  if (p.lean_fixed_terms && p.Mi == 4)
    return launch_short_sum_kernel<NF, NIP, OUTS, ALL_DIRECT, 4>(p, a, stream, load_only);
  if (p.lean_fixed_terms && p.Mi == 6)
    return launch_short_sum_kernel<NF, NIP, OUTS, ALL_DIRECT, 6>(p, a, stream, load_only);
  if (p.lean_fixed_terms && p.Mi == 8)
    return launch_short_sum_kernel<NF, NIP, OUTS, ALL_DIRECT, 8>(p, a, stream, load_only);
  launch_short_sum_kernel<NF, NIP, OUTS, ALL_DIRECT>(p, a, stream, load_only);
}

template <int NF, int NIP, int OUTS>
void launch_short_sum(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                      bool load_only) {
  if (p.direct_mask == (1u << NF) - 1)
    launch_short_sum_terms<NF, NIP, OUTS, true>(p, a, stream, load_only);
  else
    launch_short_sum_terms<NF, NIP, OUTS, false>(p, a, stream, load_only);
}

template <class T, int NF, bool ALL>
void launch_cached(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream,
                   bool load_only) {
  static DeviceFlags flags;
  allow_shared(cached_kernel<T, NF, ALL>, p.shared_bytes, flags);
  if (load_only) return;
  cached_kernel<T, NF, ALL>
      <<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, stream>>>(a);
}

// The plain kernel (TD: the tile's slots, 0 untiled) with its lanes per output known at compile
// time where they are common: 32 (large sums), 8 and 4 (M = 64-512 under the default lanes rule;
// double only, to bound the number of kernels).
template <class T, int NF, int TD = 0>
void launch_plain_lanes(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream,
                        bool load_only) {
  constexpr bool dbl = std::is_same_v<T, double>;
  if constexpr (dbl && TD > 0 && TD < NF && NF <= kLeanMaxVarying) {
    if (p.short_sum_tile) {
      if (p.nip == 4) return launch_short_sum_tiled<NF, 4, TD>(p, a, stream, load_only);
      return launch_short_sum_tiled<NF, 8, TD>(p, a, stream, load_only);
    }
  }
  if constexpr (dbl && TD == 0 && NF <= kLeanMaxVarying) {
    if (p.lean) {              // lean plans have one lane
      if constexpr (NF > 0) {  // the short-sum kernel where it takes the plan, else the
                               // plain kernel compiled for one lane
        if (p.lean_chunks) {
          if (p.nip == 4)
            return p.outs == 2 ? launch_short_sum<NF, 4, 2>(p, a, stream, load_only)
                               : launch_short_sum<NF, 4, 1>(p, a, stream, load_only);
          return p.outs == 2 ? launch_short_sum<NF, 8, 2>(p, a, stream, load_only)
                             : launch_short_sum<NF, 8, 1>(p, a, stream, load_only);
        }
      }
      return p.outs == 2 ? launch_plain_kernel<T, NF, 1, 0, 2>(p, a, stream, load_only)
                         : launch_plain_kernel<T, NF, 1, 0>(p, a, stream, load_only);
    }
  }
  // the grid of a two-outputs plan covers half its items: only the one-lane kernel takes it
  if (p.outs != 1)
    throw std::invalid_argument("two outputs per thread: one-lane double plans only");
  if (p.lanes_log2 == 5)
    launch_plain_kernel<T, NF, 32, TD>(p, a, stream, load_only);
  else if (dbl && p.lanes_log2 == 3)
    launch_plain_kernel<T, NF, dbl ? 8 : 0, TD>(p, a, stream, load_only);
  else if (dbl && p.lanes_log2 == 2)
    launch_plain_kernel<T, NF, dbl ? 4 : 0, TD>(p, a, stream, load_only);
  else
    launch_plain_kernel<T, NF, 0, TD>(p, a, stream, load_only);
}

template <class T, int NF>
void launch_nf(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream, bool load_only) {
  if (p.variant == Variant::plain && p.tile != 1) {
    // tiles of 2 (double, 1-8 or 12 varying inputs, 1 or 2 of them holding the tile variable)
    if constexpr (std::is_same_v<T, double> && NF > 0 && NF <= kMaxTiledVarying) {
      if (p.tile != 2 || p.tile_dep < 1 || p.tile_dep > 2)
        throw std::invalid_argument("no kernel takes this tile");
      if (p.tile_dep == 1)
        launch_plain_lanes<T, NF, 1>(p, a, stream, load_only);
      else if constexpr (NF >= 2)
        launch_plain_lanes<T, NF, 2>(p, a, stream, load_only);
    } else {
      throw std::invalid_argument("no kernel takes a tiled plan of this element type or size");
    }
  } else if (p.variant == Variant::plain) {
    launch_plain_lanes<T, NF>(p, a, stream, load_only);
  } else if constexpr (NF > 0 && NF <= kMaxCachedVarying) {
    if (p.cached_mask == (1u << NF) - 1)
      launch_cached<T, NF, true>(p, a, stream, load_only);
    else
      launch_cached<T, NF, false>(p, a, stream, load_only);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

__device__ double g_zero_f64 = 0;
__device__ float g_zero_f32 = 0;

// The one-entry zero table that padding slots read (its address looked up per device).
template <class T>
const T* zero_table() {
  static std::array<const T*, kMaxDevices> ptr{};
  static DeviceFlags flags;
  const int dev = current_device();
  std::call_once(flags[dev], [&] {
    void* p = nullptr;
    if constexpr (sizeof(T) == 8)
      CUDA_CHECK(cudaGetSymbolAddress(&p, g_zero_f64));
    else
      CUDA_CHECK(cudaGetSymbolAddress(&p, g_zero_f32));
    ptr[dev] = static_cast<const T*>(p);
  });
  return ptr[dev];
}

// The kernel of p's number of varying inputs.
template <class T>
void dispatch_nf(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream, bool load_only) {
  switch (p.nf) {
    case 0:
      launch_nf<T, 0>(p, a, stream, load_only);
      break;
    case 1:
      launch_nf<T, 1>(p, a, stream, load_only);
      break;
    case 2:
      launch_nf<T, 2>(p, a, stream, load_only);
      break;
    case 3:
      launch_nf<T, 3>(p, a, stream, load_only);
      break;
    case 4:
      launch_nf<T, 4>(p, a, stream, load_only);
      break;
    case 5:
      launch_nf<T, 5>(p, a, stream, load_only);
      break;
    case 6:
      launch_nf<T, 6>(p, a, stream, load_only);
      break;
    case 7:
      launch_nf<T, 7>(p, a, stream, load_only);
      break;
    case 8:
      launch_nf<T, 8>(p, a, stream, load_only);
      break;
    case 12:
      launch_nf<T, 12>(p, a, stream, load_only);
      break;
    case 16:
      launch_nf<T, 16>(p, a, stream, load_only);
      break;
    default:
      throw std::invalid_argument("more varying inputs than the kernels take");
  }
}

}  // namespace kinfer::gpu
