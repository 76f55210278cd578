// run_host_bucket and measure_ceilings (host_run.hpp): one bucket from host tables, and the
// roofline's ceilings, on a CudaContext.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/detail/cuda_context.cuh"
#include "gpu/host_run.hpp"
#include "gpu/sum_product.cuh"

namespace kinfer::gpu {

using detail::CudaContext;
using detail::DevBuf;

namespace {

template <class T>
HostRunResult run_host_typed(CudaContext& ctx, const BucketShape& shape,
                             std::span<const InputTable> inputs, const HostRunOptions& opt) {
  std::vector<std::vector<int>> scopes;
  for (const auto& in : inputs) scopes.push_back(in.scope);
  const int s = 0;
  cudaStream_t st = ctx.stream(s);
  std::unique_lock lock(ctx.mutex());
  auto& pe = ctx.policy(shape, scopes, opt.variant, sizeof(T), s);
  const BucketLayout& lay = pe.lay;
  // inputs in the kernel's element type
  std::vector<std::unique_ptr<DevBuf>> bufs(inputs.size());
  for (int slot = 0; slot < lay.n_in; ++slot) {
    const int f = lay.slot_input[slot];
    const InputTable& in = inputs[f];
    const std::int64_t n = lay.in_size[slot];
    std::vector<T> host(in.data, in.data + n);
    bufs[f] = std::make_unique<DevBuf>(n * sizeof(T));
    CUDA_CHECK(cudaMemcpy(bufs[f]->p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<const T*> slots;
  for (int f : pe.p.slot_input)
    slots.push_back(f < 0 ? nullptr : static_cast<const T*>(bufs[f]->p));
  const std::int64_t n_out = lay.n_out;
  DevBuf out(n_out * sizeof(T));
  DevBuf partial(pe.p.splits > 1 ? 2 * sizeof(T) * pe.p.splits * n_out : 16);
  std::unique_ptr<DevBuf> flush;
  const std::size_t flush_bytes = static_cast<std::size_t>(ctx.l2_bytes()) * 2 + (8u << 20);
  if (opt.repeats > 0 && opt.flush_l2) flush = std::make_unique<DevBuf>(flush_bytes);
  auto run = [&] {
    launch_sum_product<T>(pe.p, pe.t, slots.data(), static_cast<T*>(out.p),
                          static_cast<T*>(partial.p), st, shape.maximise);
  };
  // checked run: the output is poisoned (all-ones bytes are NaN) so unwritten entries show
  CUDA_CHECK(cudaMemsetAsync(out.p, 0xff, n_out * sizeof(T), st));
  run();
  std::vector<T> res(n_out);
  CUDA_CHECK(cudaMemcpyAsync(res.data(), out.p, n_out * sizeof(T), cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaStreamSynchronize(st));
  HostRunResult r;
  r.out.assign(res.begin(), res.end());
  r.choice = summarize(pe.p, pe.sel);
  if (opt.repeats > 0) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<double> ms;
    for (int rep = 0; rep < opt.repeats; ++rep) {
      if (flush) CUDA_CHECK(cudaMemsetAsync(flush->p, rep & 0xff, flush_bytes, st));
      CUDA_CHECK(cudaMemsetAsync(out.p, 0xff, n_out * sizeof(T), st));
      CUDA_CHECK(cudaEventRecord(e0, st));
      run();
      CUDA_CHECK(cudaEventRecord(e1, st));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    r.ms_median = ms[ms.size() / 2];
    r.ms_min = ms.front();
  }
  return r;
}

}  // namespace

HostRunResult run_host_bucket(Context& ctx, const BucketShape& shape,
                              std::span<const InputTable> inputs, const HostRunOptions& opt) {
  auto* c = dynamic_cast<CudaContext*>(&ctx);
  if (!c) throw std::invalid_argument("run_host_bucket needs a CUDA context");
  return opt.precision == Precision::f64 ? run_host_typed<double>(*c, shape, inputs, opt)
                                         : run_host_typed<float>(*c, shape, inputs, opt);
}

Ceilings measure_ceilings(Context& ctx) {
  auto* c = dynamic_cast<CudaContext*>(&ctx);
  if (!c) throw std::invalid_argument("measure_ceilings needs a CUDA context");
  Ceilings r;
  r.sm_count = c->limits().sm_count;
  r.l2_bytes = c->l2_bytes();
  cudaStream_t st = c->stream(0);
  // bandwidth: a 2 GiB device-to-device copy, best of 5 after a warm-up
  const std::size_t bytes = std::size_t{1} << 31;
  DevBuf a(bytes), b(bytes);
  CUDA_CHECK(cudaMemsetAsync(a.p, 1, bytes, st));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int rep = 0; rep < 6; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0, st));
    CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, st));
    CUDA_CHECK(cudaEventRecord(e1, st));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0) best = std::min(best, ms);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  r.bandwidth = 2.0 * static_cast<double>(bytes) / (best * 1e-3);
  for (int nf = 1; nf <= 8; ++nf) {
    r.elem_rate_f64[nf] = measure_element_rate<double>(nf, st);
    r.elem_rate_f32[nf] = measure_element_rate<float>(nf, st);
    r.elem_rate_chunked_f64[nf] = measure_element_rate_chunked(nf, st);
  }
  return r;
}

}  // namespace kinfer::gpu
