// The Lander-Green chain on the GPU (gpu/chain_api.hpp). One pass per kernel region: a thread
// block loads a tile of 2^(hi - lo) rows of kCols consecutive states into shared memory, applies
// every butterfly of the region's bits and its founder groups there, and writes it back; the
// region-0 pass (contiguous blocks) also multiplies the emission in and takes the maximum.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "gpu/chain_api.hpp"
#include "gpu/cuda_check.cuh"

namespace kinfer::gpu {

namespace {

using linkage::ChainLayout;
using linkage::Emission;

constexpr int kMaxRegion = ChainLayout::kRegionBits;
constexpr int kThreads = 256;

struct RegionArgs {
  int a, b;  // positions [a, b)
  int groups;
  double th[kMaxRegion];
  unsigned long long gmask[kMaxRegion];  // relative to a
  double gth[kMaxRegion];
};

struct FactorDesc {
  unsigned long long mask;
  long long offset;  // into the concatenated tables
};

// An emission evaluated per state (linkage/emission_program.hpp), in device memory.
struct ProgramArgs {
  const linkage::ProgramPerson* people = nullptr;
  const double* freq = nullptr;
  const double* weights = nullptr;
  int np = 0, n = 0;
  int* failed = nullptr;  // set when a state's core is too large to enumerate
};

__device__ inline unsigned long long pext_dev(unsigned long long x, unsigned long long m) {
  unsigned long long r = 0;
  for (int k = 0; m; m &= m - 1, ++k)
    r |= ((x >> (__ffsll(static_cast<long long>(m)) - 1)) & 1ull) << k;
  return r;
}

__device__ inline double tables_at(unsigned long long st, const FactorDesc* f, int nf,
                                   const double* tables) {
  double e = 1;
  for (int i = 0; i < nf; ++i) e *= tables[f[i].offset + pext_dev(st, f[i].mask)];
  return e;
}

// The tables times the program evaluated at this state (kernels of their own, so that the
// table-only passes keep a small stack frame).
// One kernel per number of alleles N: the stack frame (edge tables of N x N) is sized for it.
template <int N>
__device__ inline double emission_at(unsigned long long st, const FactorDesc* f, int nf,
                                     const double* tables, const ProgramArgs& g) {
  double e = tables_at(st, f, nf, tables);
  {
    const double v = linkage::evaluate_program<N>(g.people, g.np, g.freq, g.weights, st);
    if (v < 0) {
      atomicOr(g.failed, 1);
      return 0;
    }
    e *= v;
  }
  return e;
}

__device__ inline void atomic_max_nonneg(double* addr, double v) {
  // Non-negative doubles order as their bit patterns.
  atomicMax(reinterpret_cast<unsigned long long*>(addr), __double_as_longlong(v));
}

// C columns per row; region 0 (a == 0) uses C = 1 and fuses the emission and the maximum.
template <int C>
__global__ void region_pass(double* x, RegionArgs r, double pre, bool kernel, const FactorDesc* f,
                            int nf, const double* tables, double* maxv) {
  extern __shared__ double buf[];
  const long long rows = 1LL << (r.b - r.a), inner = 1LL << r.a;
  const long long chunks = inner / C;
  const long long tile = blockIdx.x;
  const long long base = ((tile / chunks) << r.b) + (tile % chunks) * C;
  const int n = static_cast<int>(rows * C);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const long long row = i / C, k = i % C;
    buf[i] = x[base + (row << r.a) + k] * pre;
  }
  __syncthreads();
  if (kernel) {
    for (int q = 0; q < r.b - r.a; ++q) {
      const double t = r.th[q], c = 1 - t;
      const long long h = 1LL << q;
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        const long long pi = i / C, k = i % C;
        const long long j = ((pi >> q) << (q + 1)) | (pi & (h - 1));
        double& u = buf[j * C + k];
        double& w = buf[(j + h) * C + k];
        const double p = u, s = w;
        u = c * p + t * s;
        w = t * p + c * s;
      }
      __syncthreads();
    }
    for (int g = 0; g < r.groups; ++g) {
      const unsigned long long m = r.gmask[g];
      const int lb = __ffsll(static_cast<long long>(m)) - 1;
      const double t = r.gth[g], c = 1 - t;
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        const long long pi = i / C, k = i % C;
        const long long row = ((pi >> lb) << (lb + 1)) | (pi & ((1LL << lb) - 1));
        const long long row2 = row ^ static_cast<long long>(m);
        double& u = buf[row * C + k];
        double& w = buf[row2 * C + k];
        const double p = u, s = w;
        u = c * p + t * s;
        w = t * p + c * s;
      }
      __syncthreads();
    }
  }
  double mx = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const long long row = i / C, k = i % C;
    double y = buf[i];
    if (maxv) {
      if (nf > 0)
        y *= tables_at(static_cast<unsigned long long>(base + (row << r.a) + k), f, nf, tables);
      mx = fmax(mx, y);
    }
    x[base + (row << r.a) + k] = y;
  }
  if (maxv) {
    for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_down_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0) atomic_max_nonneg(maxv, mx);
  }
}

// A founder group wider than a region: pairs w, w ^ mask over the whole vector.
__global__ void group_pass(double* x, long long half, unsigned long long m, double t, double pre) {
  const int lb = __ffsll(static_cast<long long>(m)) - 1;
  const double c = 1 - t;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < half;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long w = ((i >> lb) << (lb + 1)) | (i & ((1LL << lb) - 1));
    const long long w2 = w ^ static_cast<long long>(m);
    const double a = x[w] * pre, b = x[w2] * pre;
    x[w] = c * a + t * b;
    x[w2] = t * a + c * b;
  }
}

__global__ void fill_kernel(double* x, long long n, double v) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    x[i] = v;
}

__global__ void dot_kernel(const double* a, const double* b, long long n, const FactorDesc* f,
                           int nf, const double* tables, double* out) {
  double s = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    double y = a[i];
    if (b) y *= b[i];
    if (nf > 0) y *= tables_at(static_cast<unsigned long long>(i), f, nf, tables);
    s += y;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

// An emission with a per-state program: x <- x * e and the maximum (after the region-0 pass).
template <int N>
__global__ void program_pass(double* x, long long n, const FactorDesc* f, int nf,
                             const double* tables, ProgramArgs g, double* maxv) {
  double mx = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double y = x[i] * emission_at<N>(static_cast<unsigned long long>(i), f, nf, tables, g);
    x[i] = y;
    mx = fmax(mx, y);
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_down_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) atomic_max_nonneg(maxv, mx);
}

template <int N>
__global__ void program_dot(const double* a, const double* b, long long n, const FactorDesc* f,
                            int nf, const double* tables, ProgramArgs g, double* out) {
  double s = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    double y = a[i];
    if (b) y *= b[i];
    s += y * emission_at<N>(static_cast<unsigned long long>(i), f, nf, tables, g);
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

class GpuChain final : public linkage::ChainBackend {
 public:
  GpuChain(const ChainLayout& layout, double host_bytes)
      : L_(layout), N_(1LL << layout.bits), host_bytes_(host_bytes) {
    int n = 0;
    mark_driver_started();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();
      throw std::runtime_error("no CUDA device");
    }
    CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    name_ = std::string("gpu (") + prop.name + ")";
    for (auto [a, b] : L_.regions)
      if (b - a > kMaxRegion) throw std::logic_error("GpuChain: region wider than kRegionBits");
    CUDA_CHECK(cudaMalloc(&scratch_, 3 * sizeof(double)));  // max, dot, the program's flag
    CUDA_CHECK(cudaMemset(scratch_, 0, 3 * sizeof(double)));
    // Up to 2^11 rows of 4 doubles: 64 KiB of shared memory per block.
    const int smem = (1 << kMaxRegion) * 4 * static_cast<int>(sizeof(double));
    CUDA_CHECK(
        cudaFuncSetAttribute(region_pass<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(
        cudaFuncSetAttribute(region_pass<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(
        cudaFuncSetAttribute(region_pass<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  ~GpuChain() override {
    for (auto& v : vecs_) free_vec(v);
    for (auto& [k, e] : emissions_) {
      cudaFree(e.desc);
      cudaFree(e.tables);
      cudaFree(e.program_mem);
    }
    cudaFree(scratch_);
  }
  std::string name() const override { return name_; }
  long vectors_fast() const override {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    // Emissions, scratch, the runtime, and the local memory of kernels that evaluate an emission
    // per state (a few KB per resident thread).
    const double margin = 4.0 * 1024 * 1024 * 1024.0;
    return std::max(0L, static_cast<long>((static_cast<double>(free_b) - margin) / bytes()));
  }
  long vectors_total() const override {
    return vectors_fast() + std::max(0L, static_cast<long>((host_bytes_ - host_used_) / bytes()));
  }
  int alloc(bool fast) override {
    Vec v;
    if (vectors_fast() >= (fast ? 1 : 1 + reserve_fast())) {
      CUDA_CHECK(cudaMalloc(&v.p, N_ * sizeof(double)));
    } else if (!fast && host_used_ + bytes() <= host_bytes_) {
      if (cudaHostAlloc(&v.p, N_ * sizeof(double), cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        throw std::runtime_error("cannot pin host memory for a chain checkpoint");
      }
      v.host = true;
      host_used_ += bytes();
    } else {
      throw std::runtime_error("GPU chain: out of memory for a state vector");
    }
    v.used = true;
    for (std::size_t i = 0; i < vecs_.size(); ++i)
      if (!vecs_[i].used) {
        vecs_[i] = v;
        return static_cast<int>(i);
      }
    vecs_.push_back(v);
    return static_cast<int>(vecs_.size()) - 1;
  }
  void release(int i) override {
    free_vec(vecs_.at(i));
    vecs_[i] = Vec{};
  }
  void fill(int i, double x) override {
    Vec& v = dev(i);
    fill_kernel<<<grid(N_), kThreads>>>(v.p, N_, x);
    CUDA_CHECK(cudaGetLastError());
    v.pending = 1;
  }
  void copy(int dst, int src) override {
    if (dst == src) return;
    Vec& d = vecs_.at(dst);
    const Vec& s = vecs_.at(src);
    const cudaMemcpyKind kind = s.host
                                    ? (d.host ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                                    : (d.host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
    CUDA_CHECK(cudaMemcpy(d.p, s.p, N_ * sizeof(double), kind));
    d.pending = s.pending;
  }
  double step(int i, bool kernel, double male, double female, const Emission* e) override;
  double ln_dot(int a, const Emission* e, int b) override;

 private:
  struct Vec {
    double* p = nullptr;
    double pending = 1;
    bool host = false, used = false;
  };
  struct DevEmission {
    FactorDesc* desc = nullptr;
    double* tables = nullptr;
    int nf = 0;
    bool zero = false;
    double ln_scale = 0;
    ProgramArgs program;  // np == 0: none
    void* program_mem = nullptr;
  };
  double bytes() const { return 8.0 * static_cast<double>(N_); }
  void check_program() {
    int failed = 0;
    CUDA_CHECK(cudaMemcpy(&failed, scratch_ + 2, sizeof(int), cudaMemcpyDeviceToHost));
    if (failed)
      throw std::runtime_error(
          "an emission evaluated per state met a core of the founder-allele graph too large to "
          "enumerate");
  }
  long reserve_fast() const { return 4 - std::min(4L, fast_live()); }
  long fast_live() const {
    long n = 0;
    for (const auto& v : vecs_) n += v.used && !v.host;
    return n;
  }
  static int grid(long long n) {
    return static_cast<int>(std::min<long long>((n + kThreads - 1) / kThreads, 65536));
  }
  Vec& dev(int i) {
    Vec& v = vecs_.at(i);
    if (v.host) throw std::logic_error("GPU chain: a step on a host checkpoint");
    return v;
  }
  void free_vec(Vec& v) {
    if (!v.used) return;
    if (v.host) {
      cudaFreeHost(v.p);
      host_used_ -= bytes();
    } else {
      cudaFree(v.p);
    }
    v.used = false;
  }
  const DevEmission& upload(const Emission& e) {
    auto it = emissions_.find(&e);
    if (it != emissions_.end()) return it->second;
    DevEmission d;
    d.zero = e.zero;
    d.ln_scale = e.ln_scale;
    d.nf = static_cast<int>(e.factors.size());
    if (d.nf > 0) {
      std::vector<FactorDesc> desc;
      std::vector<double> tables;
      for (const auto& f : e.factors) {
        desc.push_back({f.mask, static_cast<long long>(tables.size())});
        tables.insert(tables.end(), f.table.begin(), f.table.end());
      }
      CUDA_CHECK(cudaMalloc(&d.desc, desc.size() * sizeof(FactorDesc)));
      CUDA_CHECK(cudaMalloc(&d.tables, tables.size() * sizeof(double)));
      CUDA_CHECK(cudaMemcpy(d.desc, desc.data(), desc.size() * sizeof(FactorDesc),
                            cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(d.tables, tables.data(), tables.size() * sizeof(double),
                            cudaMemcpyHostToDevice));
    }
    if (e.program.n > 0) {
      // One allocation: people, then freq and weights (doubles, aligned after the people).
      const auto& g = e.program;
      const size_t pb = (g.people.size() * sizeof(linkage::ProgramPerson) + 15) / 16 * 16;
      const size_t fb = g.freq.size() * sizeof(double), wb = g.weights.size() * sizeof(double);
      char* mem = nullptr;
      CUDA_CHECK(cudaMalloc(&mem, pb + fb + wb));
      CUDA_CHECK(cudaMemcpy(mem, g.people.data(), g.people.size() * sizeof(linkage::ProgramPerson),
                            cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(mem + pb, g.freq.data(), fb, cudaMemcpyHostToDevice));
      if (wb) CUDA_CHECK(cudaMemcpy(mem + pb + fb, g.weights.data(), wb, cudaMemcpyHostToDevice));
      d.program_mem = mem;
      d.program.people = reinterpret_cast<const linkage::ProgramPerson*>(mem);
      d.program.freq = reinterpret_cast<const double*>(mem + pb);
      d.program.weights = reinterpret_cast<const double*>(mem + pb + fb);
      d.program.np = static_cast<int>(g.people.size());
      d.program.n = g.n;
      d.program.failed = reinterpret_cast<int*>(scratch_ + 2);
    }
    return emissions_.emplace(&e, d).first->second;
  }
  void launch(double* x, int region, const std::vector<double>& th, double pre, bool kernel,
              const DevEmission* e, double* maxv) {
    RegionArgs r{};
    r.a = L_.regions[region].first;
    r.b = L_.regions[region].second;
    for (int q = 0; q < r.b - r.a; ++q) r.th[q] = th[r.a + q];
    for (const auto& g : L_.groups)
      if (g.region == region) {
        r.gmask[r.groups] = g.mask >> r.a;
        r.gth[r.groups] = th[__builtin_ctzll(g.mask)];
        ++r.groups;
      }
    const long long rows = 1LL << (r.b - r.a), inner = 1LL << r.a;
    const int C = static_cast<int>(std::min<long long>(inner, region == 0 ? 1 : 4));
    const long long tiles = N_ / (rows * C);
    const int threads =
        static_cast<int>(std::min<long long>(kThreads, std::max(32LL, rows * C / 2)));
    const size_t smem = static_cast<size_t>(rows * C) * sizeof(double);
    const FactorDesc* fd = e ? e->desc : nullptr;
    const double* tb = e ? e->tables : nullptr;
    const int nf = e ? e->nf : 0;

    if (C == 4)
      region_pass<4>
          <<<static_cast<unsigned>(tiles), threads, smem>>>(x, r, pre, kernel, fd, nf, tb, maxv);
    else if (C == 2)
      region_pass<2>
          <<<static_cast<unsigned>(tiles), threads, smem>>>(x, r, pre, kernel, fd, nf, tb, maxv);
    else
      region_pass<1>
          <<<static_cast<unsigned>(tiles), threads, smem>>>(x, r, pre, kernel, fd, nf, tb, maxv);
    CUDA_CHECK(cudaGetLastError());
  }

  ChainLayout L_;
  long long N_;
  double host_bytes_, host_used_ = 0;
  std::string name_;
  std::vector<Vec> vecs_;
  std::unordered_map<const Emission*, DevEmission> emissions_;
  double* scratch_ = nullptr;
};

double GpuChain::step(int i, bool kernel, double male, double female, const Emission* e) {
  Vec& v = dev(i);
  const DevEmission* de = e ? &upload(*e) : nullptr;
  if (de && de->zero) {
    fill(i, 0.0);
    return -std::numeric_limits<double>::infinity();
  }
  std::vector<double> th(L_.bits);
  for (int q = 0; q < L_.bits; ++q) th[q] = L_.female[q] ? female : male;
  double pre = v.pending;
  if (kernel) {
    for (std::size_t r = 1; r < L_.regions.size(); ++r) {
      launch(v.p, static_cast<int>(r), th, pre, true, nullptr, nullptr);
      pre = 1;
    }
    for (const auto& g : L_.groups) {
      if (g.region >= 0) continue;
      group_pass<<<grid(N_ / 2), kThreads>>>(v.p, N_ / 2, g.mask, th[__builtin_ctzll(g.mask)], pre);
      CUDA_CHECK(cudaGetLastError());
      pre = 1;
    }
  }
  CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(double)));
  if (de && de->program.np > 0) {  // region 0's butterflies, then the emission in its own pass
    launch(v.p, 0, th, pre, kernel, nullptr, nullptr);
    const auto k = de->program.n == 1   ? program_pass<1>
                   : de->program.n == 2 ? program_pass<2>
                   : de->program.n == 3 ? program_pass<3>
                                        : program_pass<4>;
    k<<<grid(N_), kThreads>>>(v.p, N_, de->desc, de->nf, de->tables, de->program, scratch_);
    CUDA_CHECK(cudaGetLastError());
  } else {
    launch(v.p, 0, th, pre, kernel, de, scratch_);
  }
  double mx = 0;
  CUDA_CHECK(cudaMemcpy(&mx, scratch_, sizeof(double), cudaMemcpyDeviceToHost));
  if (de && de->program.np > 0) check_program();
  if (!(mx > 0)) {
    v.pending = 1;
    return -std::numeric_limits<double>::infinity();
  }
  v.pending = 1 / mx;
  return std::log(mx) + (de ? de->ln_scale : 0.0);
}

double GpuChain::ln_dot(int a, const Emission* e, int b) {
  const Vec& A = dev(a);
  const Vec* B = b >= 0 ? &dev(b) : nullptr;
  const DevEmission* de = e ? &upload(*e) : nullptr;
  if (de && de->zero) return -std::numeric_limits<double>::infinity();
  CUDA_CHECK(cudaMemset(scratch_ + 1, 0, sizeof(double)));
  if (de && de->program.np > 0) {
    const auto k = de->program.n == 1   ? program_dot<1>
                   : de->program.n == 2 ? program_dot<2>
                   : de->program.n == 3 ? program_dot<3>
                                        : program_dot<4>;
    k<<<grid(N_), kThreads>>>(A.p, B ? B->p : nullptr, N_, de->desc, de->nf, de->tables,
                              de->program, scratch_ + 1);
  } else {
    dot_kernel<<<grid(N_), kThreads>>>(A.p, B ? B->p : nullptr, N_, de ? de->desc : nullptr,
                                       de ? de->nf : 0, de ? de->tables : nullptr, scratch_ + 1);
  }
  CUDA_CHECK(cudaGetLastError());
  double s = 0;
  CUDA_CHECK(cudaMemcpy(&s, scratch_ + 1, sizeof(double), cudaMemcpyDeviceToHost));
  if (de && de->program.np > 0) check_program();
  if (!(s > 0)) return -std::numeric_limits<double>::infinity();
  return std::log(s) + std::log(A.pending) + (B ? std::log(B->pending) : 0.0) +
         (de ? de->ln_scale : 0.0);
}

}  // namespace

std::unique_ptr<linkage::ChainBackend> make_gpu_chain(const linkage::ChainLayout& layout,
                                                      double host_bytes) {
  return std::make_unique<GpuChain>(layout, host_bytes);
}

}  // namespace kinfer::gpu
