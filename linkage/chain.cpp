#include "linkage/chain.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KINFER_CHAIN_AVX2 1
#else
#define KINFER_CHAIN_AVX2 0
#endif

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace kinfer::linkage {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

inline std::uint64_t pext_sw(std::uint64_t x, std::uint64_t m) {
  std::uint64_t r = 0;
  for (int k = 0; m; m &= m - 1, ++k) r |= ((x >> __builtin_ctzll(m)) & 1) << k;
  return r;
}

// The recombination kernel's butterflies inside one contiguous buffer of n doubles: a level of
// stride s mixes x[i] and x[i + s] (i with bit s clear) by theta t:
//   x[i] += t (x[i + s] - x[i]),  x[i + s] -= the same.
// Strides of 4 and more run as vector loops, two levels per sweep (radix 4); strides 1, 2
// (the lowest state bits of region 0) as a radix-8 sweep in registers.
inline void level1(double* __restrict x, long n, long s, double t) {
  for (long base = 0; base < n; base += 2 * s) {
    double* __restrict u = x + base;
    double* __restrict w = x + base + s;
    for (long i = 0; i < s; ++i) {
      const double d = t * (w[i] - u[i]);
      u[i] += d;
      w[i] -= d;
    }
  }
}
inline void level2(double* __restrict x, long n, long s, double t1, double t2) {
  for (long base = 0; base < n; base += 4 * s) {
    double* __restrict p0 = x + base;
    double* __restrict p1 = p0 + s;
    double* __restrict p2 = p0 + 2 * s;
    double* __restrict p3 = p0 + 3 * s;
    for (long i = 0; i < s; ++i) {
      double a = p0[i], b = p1[i], c = p2[i], e = p3[i];
      double d = t1 * (b - a);
      a += d, b -= d;
      d = t1 * (e - c);
      c += d, e -= d;
      d = t2 * (c - a);
      a += d, c -= d;
      d = t2 * (e - b);
      b += d, e -= d;
      p0[i] = a, p1[i] = b, p2[i] = c, p3[i] = e;
    }
  }
}
// Levels of stride 1, 2 and 4 (k of them, k <= 3) on groups of 8.
#if KINFER_CHAIN_AVX2
// x[i] and x[i ^ m] for the lane bits m of a 4-double vector: a permutation in registers.
template <int m>
inline __m256d lane_xor(__m256d v) {
  if constexpr (m == 1) return _mm256_permute_pd(v, 0b0101);
  if constexpr (m == 2) return _mm256_permute2f128_pd(v, v, 1);
  if constexpr (m == 3) return _mm256_permute4x64_pd(v, 0b00011011);
  return v;
}
// One level on pairs inside a vector: v[i] += t (v[i ^ m] - v[i]) for every lane at once
// (the partner lane gets the mirror update, so each pair is mixed once).
template <int m>
inline __m256d mix_lanes(__m256d v, __m256d t) {
  return _mm256_fmadd_pd(t, _mm256_sub_pd(lane_xor<m>(v), v), v);
}
inline void low_levels(double* __restrict x, long n, int k, const double* t) {
  const __m256d t0 = _mm256_set1_pd(t[0]), t1 = _mm256_set1_pd(k > 1 ? t[1] : 0),
                t2 = _mm256_set1_pd(k > 2 ? t[2] : 0);
  for (long g = 0; g < n; g += 8) {
    __m256d a = _mm256_loadu_pd(x + g), b = _mm256_loadu_pd(x + g + 4);
    a = mix_lanes<1>(a, t0), b = mix_lanes<1>(b, t0);
    if (k > 1) a = mix_lanes<2>(a, t1), b = mix_lanes<2>(b, t1);
    if (k > 2) {
      const __m256d d = _mm256_sub_pd(b, a);
      a = _mm256_fmadd_pd(t2, d, a);
      b = _mm256_fnmadd_pd(t2, d, b);
    }
    _mm256_storeu_pd(x + g, a);
    _mm256_storeu_pd(x + g + 4, b);
  }
}
// x[w] and x[w ^ M] mixed by theta t for every w (a founder group's flip, or one bit's
// butterfly) in a buffer of n doubles, n a multiple of 4 and M < n: the mask's two lowest bits
// permute lanes, the rest pairs vectors (contiguous runs of `low`, the lowest of those bits).
template <int m>
void xor_mix_lanes(double* x, long n, long high, double t) {
  const __m256d tv = _mm256_set1_pd(t);
  if (high == 0) {
    for (long i = 0; i < n; i += 4)
      _mm256_storeu_pd(x + i, mix_lanes<m>(_mm256_loadu_pd(x + i), tv));
    return;
  }
  const long low = high & -high;
  for (long base = 0; base < n; base += 2 * low) {
    double* __restrict u = x + base;
    double* __restrict w = x + (base ^ high);
    for (long i = 0; i < low; i += 4) {
      const __m256d a = _mm256_loadu_pd(u + i), b = _mm256_loadu_pd(w + i);
      _mm256_storeu_pd(u + i, _mm256_fmadd_pd(tv, _mm256_sub_pd(lane_xor<m>(b), a), a));
      _mm256_storeu_pd(w + i, _mm256_fmadd_pd(tv, _mm256_sub_pd(lane_xor<m>(a), b), b));
    }
  }
}
inline void xor_mix(double* x, long n, long M, double t) {
  const long high = M & ~3L;
  switch (M & 3) {
    case 0:
      return xor_mix_lanes<0>(x, n, high, t);
    case 1:
      return xor_mix_lanes<1>(x, n, high, t);
    case 2:
      return xor_mix_lanes<2>(x, n, high, t);
    default:
      return xor_mix_lanes<3>(x, n, high, t);
  }
}
#else
inline void low_levels(double* __restrict x, long n, int k, const double* t) {
  const double t0 = t[0], t1 = k > 1 ? t[1] : 0, t2 = k > 2 ? t[2] : 0;
  for (long g = 0; g < n; g += 8) {
    double v[8];
    for (int i = 0; i < 8; ++i) v[i] = x[g + i];
    for (int i = 0; i < 8; i += 2) {
      const double d = t0 * (v[i + 1] - v[i]);
      v[i] += d, v[i + 1] -= d;
    }
    if (k > 1)
      for (int i : {0, 1, 4, 5}) {
        const double d = t1 * (v[i + 2] - v[i]);
        v[i] += d, v[i + 2] -= d;
      }
    if (k > 2)
      for (int i = 0; i < 4; ++i) {
        const double d = t2 * (v[i + 4] - v[i]);
        v[i] += d, v[i + 4] -= d;
      }
    for (int i = 0; i < 8; ++i) x[g + i] = v[i];
  }
}
#endif
// Every level of strides C, 2C, ..., C 2^(levels - 1) (thetas th[0..levels)) on n doubles.
inline void butterflies(double* x, long n, long C, int levels, const double* th) {
  int q = 0;
  if (C == 1 && levels > 0) {
    if (n >= 8) {
      const int k = std::min(levels, 3);
      low_levels(x, n, k, th);
      q = k;
    } else {
      for (; q < levels; ++q) level1(x, n, 1L << q, th[q]);
      return;
    }
  }
  for (; q + 1 < levels; q += 2) {
    const long s = C << q;
    if (s >= 2)
      level2(x, n, s, th[q], th[q + 1]);
    else
      level1(x, n, s, th[q]), level1(x, n, 2 * s, th[q + 1]);
  }
  if (q < levels) level1(x, n, C << q, th[q]);
}
// A founder group's flip: x[w] and x[w ^ M] mixed by theta t (M in buffer offsets, rows of C).
inline void group_mix(double* x, long n, long M, long C, double t) {
#if KINFER_CHAIN_AVX2
  if (C == 1 && n >= 4) return xor_mix(x, n, M, t);
#endif
  const long low = M & -M;
  for (long r = 0; r < n; r += C) {
    if (r & low) continue;
    double* __restrict u = x + r;
    double* __restrict w = x + (r ^ M);
    for (long i = 0; i < C; ++i) {
      const double d = t * (w[i] - u[i]);
      u[i] += d;
      w[i] -= d;
    }
  }
}

// The maximum of n >= 0 doubles (no NaN), in four independent vector lanes: the plain loop is one
// dependent max per element (the compiler may not reorder it).
inline double block_max(const double* y, long n) {
  double m = 0;
  long i = 0;
#if KINFER_CHAIN_AVX2
  __m256d a = _mm256_setzero_pd(), b = a, c = a, d = a;
  for (; i + 16 <= n; i += 16) {
    a = _mm256_max_pd(a, _mm256_loadu_pd(y + i));
    b = _mm256_max_pd(b, _mm256_loadu_pd(y + i + 4));
    c = _mm256_max_pd(c, _mm256_loadu_pd(y + i + 8));
    d = _mm256_max_pd(d, _mm256_loadu_pd(y + i + 12));
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, _mm256_max_pd(_mm256_max_pd(a, b), _mm256_max_pd(c, d)));
  m = std::max(std::max(l[0], l[1]), std::max(l[2], l[3]));
#endif
  for (; i < n; ++i) m = std::max(m, y[i]);
  return m;
}

// sum_i x[i] y[i] and sum_i x[i] e[i] y[i] over n >= 0 doubles, in four vector lanes of partial
// sums (one dependent add per element otherwise).
inline double block_dot(const double* x, const double* y, long n) {
  double s = 0;
  long i = 0;
#if KINFER_CHAIN_AVX2
  __m256d a = _mm256_setzero_pd(), b = a;
  for (; i + 8 <= n; i += 8) {
    a = _mm256_fmadd_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i), a);
    b = _mm256_fmadd_pd(_mm256_loadu_pd(x + i + 4), _mm256_loadu_pd(y + i + 4), b);
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, _mm256_add_pd(a, b));
  s = (l[0] + l[1]) + (l[2] + l[3]);
#endif
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}
inline double block_dot3(const double* x, const double* e, const double* y, long n) {
  double s = 0;
  long i = 0;
#if KINFER_CHAIN_AVX2
  __m256d a = _mm256_setzero_pd(), b = a;
  for (; i + 8 <= n; i += 8) {
    a = _mm256_fmadd_pd(_mm256_mul_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(e + i)),
                        _mm256_loadu_pd(y + i), a);
    b = _mm256_fmadd_pd(_mm256_mul_pd(_mm256_loadu_pd(x + i + 4), _mm256_loadu_pd(e + i + 4)),
                        _mm256_loadu_pd(y + i + 4), b);
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, _mm256_add_pd(a, b));
  s = (l[0] + l[1]) + (l[2] + l[3]);
#endif
  for (; i < n; ++i) s += x[i] * e[i] * y[i];
  return s;
}

class CpuChain final : public ChainBackend {
 public:
  CpuChain(const ChainLayout& layout, double max_bytes)
      : L_(layout),
        N_(1L << layout.bits),
        threads_(static_cast<int>(
            std::clamp<long>(N_ / kStatesPerThread, 1, omp_get_max_threads()))),
        max_bytes_(max_bytes) {
    low_bits_ = L_.regions.empty() ? 0 : L_.regions[0].second;
    block_ = 1L << low_bits_;
    // Regions above 0 in passes of at most 6 positions (tiles of 64 states or more per row),
    // cut where no founder group straddles the cut when possible.
    auto inside = [](std::uint64_t m, int a, int b) {
      const std::uint64_t r = ((b >= 64 ? ~0ull : (1ull << b) - 1)) & ~((1ull << a) - 1);
      return (m & ~r) == 0;
    };
    for (std::size_t r = 1; r < L_.regions.size(); ++r) {
      int a = L_.regions[r].first;
      const int b = L_.regions[r].second;
      while (a < b) {
        int cut = std::min(b, a + 6);
        if (cut < b)
          for (int c = cut; c > a + 2; --c) {
            bool ok = true;
            for (const auto& g : L_.groups)
              if (g.region == static_cast<int>(r) && !inside(g.mask, a, c) &&
                  !inside(g.mask, c, b) && inside(g.mask, a, b))
                ok = false;
            if (ok) {
              cut = c;
              break;
            }
          }
        passes_.push_back({a, cut, {}});
        a = cut;
      }
    }
    for (const auto& g : L_.groups) {
      if (__builtin_popcountll(g.mask) == 1) {
        folded_.push_back(__builtin_ctzll(g.mask));
        continue;
      }
      if (g.region == 0) continue;
      bool placed = false;
      for (Pass& ps : passes_)
        if (inside(g.mask, ps.a, ps.b)) ps.groups.push_back(g.mask), placed = true;
      if (!placed) wide_.push_back(g.mask);
    }
  }
  bool forget(const Emission* e) override {
    if (e) prepared_.erase(e);
    return true;
  }
  std::string name() const override { return "cpu"; }
  long vectors_fast() const override {
    if (max_bytes_ <= 0) return 1L << 30;
    return std::max(0L, static_cast<long>(max_bytes_ / (8.0 * N_)) - live_);
  }
  long vectors_total() const override { return vectors_fast(); }
  int alloc(bool) override {
    for (std::size_t i = 0; i < vecs_.size(); ++i)
      if (!vecs_[i].used) {
        vecs_[i].used = true;
        if (static_cast<long>(vecs_[i].data.size()) != N_) vecs_[i].data.resize(N_);
        ++live_;
        return static_cast<int>(i);
      }
    vecs_.push_back({std::vector<double>(N_), 1.0, true});
    ++live_;
    return static_cast<int>(vecs_.size()) - 1;
  }
  void release(int v) override {  // the memory stays for the next alloc (no page faults)
    vecs_.at(v).used = false;
    --live_;
  }
  void fill(int v, double x) override {
    std::fill(vecs_.at(v).data.begin(), vecs_[v].data.end(), x);
    vecs_[v].pending = 1;
  }
  void copy(int dst, int src) override {
    if (dst == src) return;
    const double* s = vecs_.at(src).data.data();
    double* d = vecs_.at(dst).data.data();
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (long i = 0; i < N_; ++i) d[i] = s[i];
    vecs_[dst].pending = vecs_[src].pending;
  }
  const double* host_data(int v, double* ln_factor) override {
    *ln_factor = std::log(vecs_.at(v).pending);
    return vecs_[v].data.data();
  }
  double step(int v, bool kernel, double male, double female, const Emission* e) override;
  double step_from(int dst, int src, bool kernel, double male, double female,
                   const Emission* e) override;
  double ln_dot(int a, const Emission* e, int b) override;
  double ln_score(int a, const Side& left, const Emission* e, int b, const Side& right, int va,
                  int vb) override;

 private:
  struct Vec {
    std::vector<double> data;
    double pending = 1;  // the vector's value is data * pending (scaling deferred to a pass)
    bool used = false;
  };
  // An emission prepared for blocks of 2^low_bits states (region 0).
  struct Prepared {
    bool zero = false;
    double ln_scale = 0;
    std::vector<double> low;  // the factors inside one block, multiplied (empty: 1)
    struct Mixed {
      const double* table;
      std::uint64_t mask_hi;           // the mask above the block
      int shift;                       // set bits of the mask inside the block
      std::vector<std::uint32_t> lut;  // pext of the block offset (empty: none inside)
      // When the mask's bits inside the block start with a run of bits 0..run-1 (run >= 2):
      // the block is chunks of 2^run states that read 2^run consecutive entries, at chunk_off.
      int run = 0;
      std::vector<std::uint32_t> chunk_off;
    };
    std::vector<Mixed> mixed;
    const EmissionProgram* program = nullptr;  // evaluated per state (null: none)
  };
  const Prepared& prepare(const Emission& e);
  // The founder groups of region 0 (more than one bit) and their thetas, appended.
  void region0_groups(const std::vector<double>& th, std::vector<std::uint64_t>& gm,
                      std::vector<double>& gt) const;
  // A point whose two sides both have a kernel, after both sides' upper passes: each block of
  // both gets its region-0 butterflies and groups (times pre), the right one the emission, and
  // the sum of their product is returned.
  double score_pass(double* yb, double pb, const std::vector<double>& tr, const Prepared* p,
                    double* ya, double pa, const std::vector<double>& tl);
  // sum_w x(w) e(w) y(w) (p null: e = 1; y null: y = 1), no pending factors.
  double dot(const double* x, const Prepared* p, const double* y);
  // The emission at the states of block `blk` into out (block_ doubles).
  void emission_block(const Prepared& p, long blk, double* out) const;
  // The same multiplied into y (one sweep per factor, no buffer).
  void emission_into(const Prepared& p, long blk, double* y) const;
  void check_program() const {
    if (program_failed_)
      throw std::runtime_error(
          "an emission evaluated per state met a core of the founder-allele graph too large to "
          "enumerate");
  }
  mutable std::atomic<bool> program_failed_{
      false};  // set by emission_block (any thread), read after
  // A kernel pass over positions [a, b) of a region above region 0, with its founder groups.
  struct Pass {
    int a, b;
    std::vector<std::uint64_t> groups;
  };
  void tile_pass(const double* src, double* x, const Pass& ps, const std::vector<double>& th,
                 double pre);
  // The kernel's passes above region 0 (and the wide groups), reading `src` (times `pre`) and
  // leaving the result in x (src == x: in place). Returns the factor still to apply.
  double upper_passes(const double* src, double* x, const std::vector<double>& th, double pre);
  // Region 0 in place, block by block: its butterflies (when `kernel`), its founder groups, the
  // emission; returns the maximum, or with `other` the sum of y * other.
  double region0(double* x, double pre, bool kernel, const std::vector<double>& th,
                 const Prepared* p, const double* other);
  // Per state position p: th[p] the theta of its butterfly, th[bits + p] the theta of a founder
  // group whose lowest position is p. A group of one bit (a founder with two children kept)
  // mixes the same pair again with the same theta: the two butterflies are one, of theta
  // 2t(1 - t), and the group has no pass of its own.
  std::vector<double> thetas(double male, double female) const {
    std::vector<double> th(2 * L_.bits);
    for (int i = 0; i < L_.bits; ++i) th[i] = th[L_.bits + i] = L_.female[i] ? female : male;
    for (int p : folded_) th[p] = 2 * th[p] * (1 - th[p]);
    return th;
  }
  std::vector<Pass> passes_;
  std::vector<std::uint64_t> wide_;  // groups in no single pass
  std::vector<int> folded_;          // positions whose one-bit group rides on their butterfly

  ChainLayout L_;
  long N_;
  // A thread per kStatesPerThread states of a vector, at most the team: each operation is a
  // pass over a vector, and more threads than that spend longer starting and waiting at the
  // pass's end than computing.
  static constexpr long kStatesPerThread = 65536;
  int threads_;
  double max_bytes_;
  int low_bits_ = 0;
  long block_ = 1;
  long live_ = 0;
  std::vector<Vec> vecs_;
  std::unordered_map<const Emission*, Prepared> prepared_;
};

const CpuChain::Prepared& CpuChain::prepare(const Emission& e) {
  auto it = prepared_.find(&e);
  if (it != prepared_.end()) return it->second;
  Prepared p;
  p.zero = e.zero;
  p.ln_scale = e.ln_scale;
  if (e.program.n > 0) p.program = &e.program;
  const std::uint64_t in_block = static_cast<std::uint64_t>(block_) - 1;
  for (const EmissionFactor& f : e.factors) {
    const std::uint64_t lo = f.mask & in_block, hi = f.mask >> low_bits_;
    if (hi == 0) {
      if (p.low.empty()) p.low.assign(block_, 1.0);
      for (long t = 0; t < block_; ++t) p.low[t] *= f.table[pext_sw(t, lo)];
      continue;
    }
    Prepared::Mixed m{f.table.data(), hi, __builtin_popcountll(lo), {}, 0, {}};
    if (lo) {
      m.lut.resize(block_);
      for (long t = 0; t < block_; ++t) m.lut[t] = static_cast<std::uint32_t>(pext_sw(t, lo));
      const int run = __builtin_ctzll(~lo);
      if (run >= 2) {
        m.run = run;
        for (long t = 0; t < block_; t += 1L << run) m.chunk_off.push_back(m.lut[t]);
      }
    }
    p.mixed.push_back(std::move(m));
  }
  return prepared_.emplace(&e, std::move(p)).first->second;
}

void CpuChain::emission_block(const Prepared& p, long blk, double* out) const {
  double c = 1;
  for (const auto& m : p.mixed)
    if (m.lut.empty()) c *= m.table[pext_sw(blk, m.mask_hi)];
  if (p.low.empty())
    std::fill(out, out + block_, c);
  else
    for (long t = 0; t < block_; ++t) out[t] = p.low[t] * c;
  for (const auto& m : p.mixed) {
    if (m.lut.empty()) continue;
    const double* base = m.table + (pext_sw(blk, m.mask_hi) << m.shift);
    if (m.run > 0) {
      const long len = 1L << m.run;
      for (std::size_t c = 0; c < m.chunk_off.size(); ++c) {
        double* __restrict o = out + (static_cast<long>(c) << m.run);
        const double* __restrict b = base + m.chunk_off[c];
        for (long i = 0; i < len; ++i) o[i] *= b[i];
      }
      continue;
    }
    const std::uint32_t* lut = m.lut.data();
    for (long t = 0; t < block_; ++t) out[t] *= base[lut[t]];
  }
  if (p.program) {
    const EmissionProgram& g = *p.program;
    const std::uint64_t first = static_cast<std::uint64_t>(blk) << low_bits_;
    const int np = static_cast<int>(g.people.size());
    for (long t = 0; t < block_; ++t) {
      const double v = evaluate_program(g.n, g.people.data(), np, g.freq.data(), g.weights.data(),
                                        first + static_cast<std::uint64_t>(t));
      if (v < 0) {
        out[t] = std::nan("");
        program_failed_.store(true, std::memory_order_relaxed);
      } else {
        out[t] *= v;
      }
    }
  }
}

void CpuChain::emission_into(const Prepared& p, long blk, double* __restrict y) const {
  double c = 1;
  for (const auto& m : p.mixed)
    if (m.lut.empty()) c *= m.table[pext_sw(blk, m.mask_hi)];
  if (!p.low.empty()) {
    const double* __restrict low = p.low.data();
    for (long t = 0; t < block_; ++t) y[t] *= low[t] * c;
  } else if (c != 1) {
    for (long t = 0; t < block_; ++t) y[t] *= c;
  }
  for (const auto& m : p.mixed) {
    if (m.lut.empty()) continue;
    const double* base = m.table + (pext_sw(blk, m.mask_hi) << m.shift);
    if (m.run > 0) {
      const long len = 1L << m.run;
      for (std::size_t c = 0; c < m.chunk_off.size(); ++c) {
        double* __restrict o = y + (static_cast<long>(c) << m.run);
        const double* __restrict b = base + m.chunk_off[c];
        for (long i = 0; i < len; ++i) o[i] *= b[i];
      }
      continue;
    }
    const std::uint32_t* lut = m.lut.data();
    for (long t = 0; t < block_; ++t) y[t] *= base[lut[t]];
  }
  if (p.program) {
    const EmissionProgram& g = *p.program;
    const std::uint64_t first = static_cast<std::uint64_t>(blk) << low_bits_;
    const int np = static_cast<int>(g.people.size());
    for (long t = 0; t < block_; ++t) {
      const double v = evaluate_program(g.n, g.people.data(), np, g.freq.data(), g.weights.data(),
                                        first + static_cast<std::uint64_t>(t));
      if (v < 0) {
        y[t] = std::nan("");
        program_failed_.store(true, std::memory_order_relaxed);
      } else {
        y[t] *= v;
      }
    }
  }
}

// The kernel's butterflies for positions [a, b) (a > 0) and the founder groups inside them:
// tiles of 2^(b - a) rows of C consecutive states (32 KiB in all, so the tile stays in L1 while
// every level is applied), copied in and out of a buffer.
void CpuChain::tile_pass(const double* src_all, double* x, const Pass& ps,
                         const std::vector<double>& th, double pre) {
  const int a = ps.a, b = ps.b;
  const long rows = 1L << (b - a), inner = 1L << a;
  const long C = std::min<long>(inner, std::max<long>(1, 4096 / rows));
  const long chunks = inner / C, ntiles = (N_ >> b) * chunks, n = rows * C;
  std::vector<double> lt(th.begin() + a, th.begin() + b);
  std::vector<double> gt;
  for (std::uint64_t m : ps.groups) gt.push_back(th[L_.bits + __builtin_ctzll(m)]);
#pragma omp parallel num_threads(threads_)
  {
    std::vector<double> buf(n);
#pragma omp for schedule(dynamic, 16)
    for (long tile = 0; tile < ntiles; ++tile) {
      const long off = ((tile / chunks) << b) + (tile % chunks) * C;
      double* base = x + off;
      for (long r = 0; r < rows; ++r) {
        const double* src = src_all + off + (r << a);
        double* dst = buf.data() + r * C;
        for (long k = 0; k < C; ++k) dst[k] = src[k] * pre;
      }
      butterflies(buf.data(), n, C, b - a, lt.data());
      for (std::size_t g = 0; g < ps.groups.size(); ++g)
        group_mix(buf.data(), n, static_cast<long>(ps.groups[g] >> a) * C, C, gt[g]);
      for (long r = 0; r < rows; ++r) {
        const double* src = buf.data() + r * C;
        double* dst = base + (r << a);
        for (long k = 0; k < C; ++k) dst[k] = src[k];
      }
    }
  }
}

double CpuChain::upper_passes(const double* src, double* x, const std::vector<double>& th,
                              double pre) {
  for (const Pass& ps : passes_) {
    tile_pass(src, x, ps, th, pre);
    src = x;
    pre = 1;
  }
  if (src != x) {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (long i = 0; i < N_; ++i) x[i] = src[i];
  }
  for (std::uint64_t mask : wide_) {
    // A founder group across passes: one pass of its own.
    const double t = th[L_.bits + __builtin_ctzll(mask)];
    const long m = static_cast<long>(mask), low = m & -m;
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (long w = 0; w < N_; ++w) {
      if (w & low) continue;
      const double a = x[w] * pre, b = x[w ^ m] * pre, d = t * (b - a);
      x[w] = a + d;
      x[w ^ m] = b - d;
    }
    pre = 1;
  }
  return pre;
}

double CpuChain::region0(double* x, double pre, bool kernel, const std::vector<double>& th,
                         const Prepared* p, const double* other) {
  std::vector<std::uint64_t> gm;
  std::vector<double> gt;
  if (kernel)
    for (const auto& g : L_.groups)
      if (g.region == 0 && __builtin_popcountll(g.mask) > 1)
        gm.push_back(g.mask), gt.push_back(th[L_.bits + __builtin_ctzll(g.mask)]);
  const long blocks = N_ / block_;
  double mx = 0, sum = 0;
#pragma omp parallel num_threads(threads_) reduction(max : mx) reduction(+ : sum)
  {
#pragma omp for schedule(dynamic, 16)
    for (long blk = 0; blk < blocks; ++blk) {
      double* y = x + blk * block_;
      if (pre != 1)
        for (long i = 0; i < block_; ++i) y[i] *= pre;
      if (kernel) {
        butterflies(y, block_, 1, low_bits_, th.data());
        for (std::size_t g = 0; g < gm.size(); ++g)
          group_mix(y, block_, static_cast<long>(gm[g]), 1, gt[g]);
      }
      if (p) emission_into(*p, blk, y);
      if (other) {
        sum += block_dot(y, other + blk * block_, block_);
      } else {
        mx = std::max(mx, block_max(y, block_));
      }
    }
  }
  return other ? sum : mx;
}

void CpuChain::region0_groups(const std::vector<double>& th, std::vector<std::uint64_t>& gm,
                              std::vector<double>& gt) const {
  for (const auto& g : L_.groups)
    if (g.region == 0 && __builtin_popcountll(g.mask) > 1)
      gm.push_back(g.mask), gt.push_back(th[L_.bits + __builtin_ctzll(g.mask)]);
}

double CpuChain::score_pass(double* yb, double pb, const std::vector<double>& tr, const Prepared* p,
                            double* ya, double pa, const std::vector<double>& tl) {
  std::vector<std::uint64_t> gm;
  std::vector<double> gr, gl;
  region0_groups(tr, gm, gr);
  gm.clear();
  region0_groups(tl, gm, gl);
  const long blocks = N_ / block_;
  double sum = 0;
#pragma omp parallel num_threads(threads_) reduction(+ : sum)
  {
#pragma omp for schedule(dynamic, 16)
    for (long blk = 0; blk < blocks; ++blk) {
      double* y = yb + blk * block_;
      double* o = ya + blk * block_;
      for (auto [v, pre, th, gt] : {std::tuple{y, pb, &tr, &gr}, std::tuple{o, pa, &tl, &gl}}) {
        if (pre != 1)
          for (long i = 0; i < block_; ++i) v[i] *= pre;
        butterflies(v, block_, 1, low_bits_, th->data());
        for (std::size_t g = 0; g < gm.size(); ++g)
          group_mix(v, block_, static_cast<long>(gm[g]), 1, (*gt)[g]);
      }
      if (p) emission_into(*p, blk, y);
      sum += block_dot(y, o, block_);
    }
  }
  return sum;
}

double CpuChain::step_from(int v, int src, bool kernel, double male, double female,
                           const Emission* e) {
  if (!kernel || src == v) return ChainBackend::step_from(v, src, kernel, male, female, e);
  Vec& X = vecs_.at(v);
  const Vec& S = vecs_.at(src);
  double* x = X.data.data();
  const Prepared* p = e ? &prepare(*e) : nullptr;
  if (p && p->zero) {
    fill(v, 0.0);
    return kNegInf;
  }
  const std::vector<double> th = thetas(male, female);
  // The upper passes read src and write x (with no upper pass: a copy).
  const double mx = region0(x, upper_passes(S.data.data(), x, th, S.pending), true, th, p, nullptr);
  check_program();
  if (!(mx > 0)) {
    X.pending = 1;
    return kNegInf;
  }
  X.pending = 1 / mx;
  return std::log(mx) + (p ? p->ln_scale : 0.0);
}

double CpuChain::step(int v, bool kernel, double male, double female, const Emission* e) {
  Vec& X = vecs_.at(v);
  double* x = X.data.data();
  double pre = X.pending;
  const Prepared* p = e ? &prepare(*e) : nullptr;
  if (p && p->zero) {
    fill(v, 0.0);
    return kNegInf;
  }
  const std::vector<double> th = thetas(male, female);
  if (kernel) pre = upper_passes(x, x, th, pre);
  const double mx = region0(x, pre, kernel, th, p, nullptr);
  check_program();
  if (!(mx > 0)) {
    X.pending = 1;
    return kNegInf;
  }
  X.pending = 1 / mx;
  return std::log(mx) + (p ? p->ln_scale : 0.0);
}

double CpuChain::ln_score(int a, const Side& left, const Emission* e, int b, const Side& right,
                          int va, int vb) {
  const Prepared* p = e ? &prepare(*e) : nullptr;
  if (p && p->zero) return kNegInf;
  // A side with a kernel: K(s) into the scratch vector (its upper passes read s and write the
  // scratch, no separate copy). A side without: s itself, read in place (its pending factor
  // goes to the log).
  const Vec& A = vecs_.at(a);
  const Vec& B = vecs_.at(b);
  const double* left_y = A.data.data();
  double ln_s = (p ? p->ln_scale : 0.0);
  double s;
  if (left.kernel && right.kernel) {
    // Both sides' upper passes, then one pass over region 0 that applies both sides' region-0
    // butterflies block by block, the emission to the right one, and the sum.
    double* ya = vecs_.at(va).data.data();
    double* yb = vecs_.at(vb).data.data();
    const std::vector<double> tl = thetas(left.male, left.female);
    const std::vector<double> tr = thetas(right.male, right.female);
    const double pa = upper_passes(A.data.data(), ya, tl, A.pending);
    const double pb = upper_passes(B.data.data(), yb, tr, B.pending);
    s = score_pass(yb, pb, tr, p, ya, pa, tl);
    vecs_[va].pending = vecs_[vb].pending = 1;
    check_program();
    if (!(s > 0)) return kNegInf;
    return std::log(s) + ln_s;
  }
  if (left.kernel) {
    double* ya = vecs_.at(va).data.data();
    const std::vector<double> tl = thetas(left.male, left.female);
    region0(ya, upper_passes(A.data.data(), ya, tl, A.pending), true, tl, nullptr, nullptr);
    vecs_[va].pending = 1;
    left_y = ya;
  } else {
    ln_s += std::log(A.pending);
  }
  if (right.kernel) {
    // The right side's region-0 pass fused with the emission and the sum against the left.
    double* yb = vecs_.at(vb).data.data();
    const std::vector<double> tr = thetas(right.male, right.female);
    s = region0(yb, upper_passes(B.data.data(), yb, tr, B.pending), true, tr, p, left_y);
    vecs_[vb].pending = 1;
  } else {
    s = dot(left_y, p, B.data.data());
    ln_s += std::log(B.pending);
  }
  check_program();
  if (!(s > 0)) return kNegInf;
  return std::log(s) + ln_s;
}

double CpuChain::dot(const double* x, const Prepared* p, const double* y) {
  const long blocks = N_ / block_;
  double s = 0;
#pragma omp parallel num_threads(threads_) reduction(+ : s)
  {
    std::vector<double> eb(block_, 1.0);
#pragma omp for schedule(dynamic, 16)
    for (long blk = 0; blk < blocks; ++blk) {
      if (p) emission_block(*p, blk, eb.data());
      const double* u = x + blk * block_;
      const double* w = y ? y + blk * block_ : nullptr;
      s += w ? block_dot3(u, eb.data(), w, block_) : block_dot(u, eb.data(), block_);
    }
  }
  return s;
}

double CpuChain::ln_dot(int a, const Emission* e, int b) {
  const Vec& A = vecs_.at(a);
  const Vec* B = b >= 0 ? &vecs_.at(b) : nullptr;
  const Prepared* p = e ? &prepare(*e) : nullptr;
  if (p && p->zero) return kNegInf;
  const double s = dot(A.data.data(), p, B ? B->data.data() : nullptr);
  check_program();
  if (!(s > 0)) return kNegInf;
  return std::log(s) + std::log(A.pending) + (B ? std::log(B->pending) : 0.0) +
         (p ? p->ln_scale : 0.0);
}

}  // namespace

std::unique_ptr<ChainBackend> make_cpu_chain(const ChainLayout& layout, double max_bytes) {
  if (layout.bits > 40) throw std::logic_error("make_cpu_chain: too many bits");
  return std::make_unique<CpuChain>(layout, max_bytes);
}

}  // namespace kinfer::linkage
