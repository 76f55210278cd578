#pragma once
// The Lander-Green chain's steps (linkage/chain.hpp's ChainBackend) on the GPU: the state
// vectors in device memory, the recombination kernel one region per pass in shared memory, the
// emission product and the maximum fused into the region-0 pass. Plain C++, no CUDA type;
// implemented in gpu/chain.cu, and by gpu/no_cuda.cpp (throws) without CUDA.
#include <memory>

#include "linkage/chain.hpp"

namespace kinfer::gpu {

// Throws std::runtime_error when no device is usable. Checkpoints that do not fit in device
// memory go to pinned host memory, up to `host_bytes` (0: none).
std::unique_ptr<linkage::ChainBackend> make_gpu_chain(const linkage::ChainLayout& layout,
                                                      double host_bytes);

}  // namespace kinfer::gpu
