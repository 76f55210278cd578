#include "linkage/viterbi.hpp"

#include <omp.h>

#if defined(__AVX2__)
#include <immintrin.h>
#define KINFER_VITERBI_AVX2 1
#else
#define KINFER_VITERBI_AVX2 0
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/util.hpp"

namespace kinfer::linkage {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A founder's meioses kept: the group of state positions flipped with its phase (empty when
// only the fixed meiosis is kept), its theta's sex.
struct FounderGroup {
  int founder;
  std::uint64_t mask;
  bool female;
  int region;  // the layout region holding the mask, -1: it spans regions (its own pass)
};

// x[a], x[b] <- max((1-t) x[a], t x[b]), max(t x[a], (1-t) x[b]) over runs of n doubles.
inline void max_mix(double* __restrict a, double* __restrict b, long n, double t) {
  const double u = 1 - t;
  for (long i = 0; i < n; ++i) {
    const double p = a[i], q = b[i];
    a[i] = std::max(u * p, t * q);
    b[i] = std::max(t * p, u * q);
  }
}

#if KINFER_VITERBI_AVX2
// v[j ^ L] in lane j of a 4-double vector.
template <int L>
inline __m256d lane_xor(__m256d v) {
  if constexpr (L == 1) return _mm256_permute_pd(v, 0b0101);
  if constexpr (L == 2) return _mm256_permute2f128_pd(v, v, 1);
  if constexpr (L == 3) return _mm256_permute4x64_pd(v, 0b00011011);
  return v;
}
// xor_max for a mask whose two lowest bits are L and the rest `hi`: lanes permuted, vectors
// paired (runs of the lowest bit of hi).
template <int L>
void xor_max_lanes(double* x, long n, long hi, double t) {
  const __m256d tv = _mm256_set1_pd(t), uv = _mm256_set1_pd(1 - t);
  if (hi == 0) {
    for (long i = 0; i < n; i += 4) {
      const __m256d v = _mm256_loadu_pd(x + i);
      _mm256_storeu_pd(x + i, _mm256_max_pd(_mm256_mul_pd(uv, v),
                                            _mm256_mul_pd(tv, lane_xor<L>(v))));
    }
    return;
  }
  const long low = hi & -hi;
  for (long base = 0; base < n; base += 2 * low)
    for (long i = 0; i < low; i += 4) {
      double* p = x + base + i;
      double* q = x + ((base + i) ^ hi);
      const __m256d a = _mm256_loadu_pd(p), b = _mm256_loadu_pd(q);
      _mm256_storeu_pd(p, _mm256_max_pd(_mm256_mul_pd(uv, a), _mm256_mul_pd(tv, lane_xor<L>(b))));
      _mm256_storeu_pd(q, _mm256_max_pd(_mm256_mul_pd(uv, b), _mm256_mul_pd(tv, lane_xor<L>(a))));
    }
}
#endif

// x[w] <- max((1-t) x[w], t x[w ^ m]) for every w in [0, n) at once (n a power of two, m < n):
// one bit's max-times butterfly (m a single bit) or a founder group's flip.
void xor_max(double* x, long n, long m, double t) {
#if KINFER_VITERBI_AVX2
  if (n >= 4) {
    const long hi = m & ~3L;
    switch (m & 3) {
      case 0:
        return xor_max_lanes<0>(x, n, hi, t);
      case 1:
        return xor_max_lanes<1>(x, n, hi, t);
      case 2:
        return xor_max_lanes<2>(x, n, hi, t);
      default:
        return xor_max_lanes<3>(x, n, hi, t);
    }
  }
#endif
  const long low = m & -m;
  for (long w = 0; w < n; ++w)
    if (!(w & low)) max_mix(x + w, x + (w ^ m), 1, t);
}

// The max-times kernel on R rows of W contiguous doubles (row r at b + r W, W a power of two):
// every bit q of the row index by theta bt[q], then every group (mask over row bits) by its
// theta. A row mask M is the element mask M W.
void mix_rows(double* b, long R, long W, const std::vector<double>& bt,
              const std::vector<std::pair<std::uint64_t, double>>& groups) {
  for (std::size_t q = 0; q < bt.size(); ++q) xor_max(b, R * W, (1L << q) * W, bt[q]);
  for (const auto& [M, t] : groups) xor_max(b, R * W, static_cast<long>(M) * W, t);
}

class MaxChain {
 public:
  MaxChain(const InheritanceModel& im, const Pedigree& ped, bool sex_linked)
      : layout_(im.layout()), bits_(im.bits()), n_(1L << im.bits()) {
    const int np = static_cast<int>(ped.people.size());
    std::vector<int> group_of(np, -1);
    for (const auto& m : im.meiosis_positions()) {
      const Person& q = ped.people[m.parent];
      if (!q.founder()) {
        if (m.position >= 0) ungrouped_[layout_.female[m.position] ? 1 : 0] |= bit(m.position);
        continue;
      }
      if (group_of[m.parent] < 0) {
        group_of[m.parent] = static_cast<int>(groups_.size());
        groups_.push_back({m.parent, 0, !(q.sex == 1 && !sex_linked), -1});
      }
      if (m.position >= 0) groups_[group_of[m.parent]].mask |= bit(m.position);
      if (m.position < 0) ++fixed_;
    }
    if (fixed_ != static_cast<int>(groups_.size()))
      throw std::logic_error("viterbi: a founder's meioses have no fixed phase");
    for (FounderGroup& g : groups_)
      for (std::size_t r = 0; r < layout_.regions.size() && g.mask; ++r) {
        const auto [lo, hi] = layout_.regions[r];
        const std::uint64_t in = ((std::uint64_t(1) << (hi - lo)) - 1) << lo;
        if ((g.mask & ~in) == 0) g.region = static_cast<int>(r);
      }
  }
  long states() const { return n_; }
  const std::vector<FounderGroup>& groups() const { return groups_; }

  // One step: x <- factor e K(x) (K the max-times kernel at these thetas when `kernel`; factor:
  // the previous step's scaling, deferred to this pass). The regions above 0 and the groups
  // spanning regions first, each its own pass; then one pass over region 0's contiguous blocks
  // applies their butterflies and the emission while a block is in cache (the kernel's stages
  // commute: each is a function of s' xor s). Returns the maximum of x (0: x is 0); `ln_const`
  // receives the ln of the constant factor of the founders with an empty group. e's own
  // ln_scale is the caller's.
  double step(double* x, bool kernel, double tm, double tf, const Emission* e, double factor,
              double* ln_const) const {
    *ln_const = 0;
    if (e && e->zero) return 0;
    auto region_data = [&](std::size_t r, std::vector<double>& bt,
                           std::vector<std::pair<std::uint64_t, double>>& gm) {
      const auto [lo, hi] = layout_.regions[r];
      for (int p = lo; p < hi; ++p) bt.push_back(layout_.female[p] ? tf : tm);
      for (const FounderGroup& g : groups_)
        if (g.mask && g.region == static_cast<int>(r))
          gm.push_back({g.mask >> lo, g.female ? tf : tm});
    };
    std::vector<double> bt0;
    std::vector<std::pair<std::uint64_t, double>> gm0;
    if (kernel) {
      for (std::size_t r = 1; r < layout_.regions.size(); ++r) {
        std::vector<double> bt;
        std::vector<std::pair<std::uint64_t, double>> gm;
        region_data(r, bt, gm);
        region_pass(x, layout_.regions[r].first, layout_.regions[r].second, bt, gm);
      }
      for (const FounderGroup& g : groups_) {
        const double t = g.female ? tf : tm;
        if (!g.mask) {
          *ln_const += std::log(std::max(t, 1 - t));
        } else if (g.region < 0) {
          const long M = static_cast<long>(g.mask), low = M & -M;
#pragma omp parallel for schedule(static)
          for (long w = 0; w < n_; ++w)
            if (!(w & low)) max_mix(x + w, x + (w ^ M), 1, t);
        }
      }
      region_data(0, bt0, gm0);
    }
    struct Lut {
      std::vector<std::uint32_t> lo, hi;
      const double* t;
      bool direct;
    };
    const int lb = std::min(bits_, 12);
    std::vector<Lut> luts;
    if (e)
      for (const EmissionFactor& f : e->factors) {
        Lut l;
        l.t = f.table.data();
        l.direct = f.mask == static_cast<std::uint64_t>(n_ - 1);
        if (!l.direct) {
          l.lo.resize(std::size_t(1) << lb);
          l.hi.resize(std::size_t(1) << (bits_ - lb));
          for (std::size_t i = 0; i < l.lo.size(); ++i) l.lo[i] = pext(i, f.mask);
          for (std::size_t i = 0; i < l.hi.size(); ++i) l.hi[i] = pext(i << lb, f.mask);
        }
        luts.push_back(std::move(l));
      }
    const long lmask = (1L << lb) - 1;
    const long R0 = 1L << layout_.regions.at(0).second;
    double mx = 0;
#pragma omp parallel for schedule(static) reduction(max : mx)
    for (long h = 0; h < n_ / R0; ++h) {
      if (kernel) mix_rows(x + h * R0, R0, 1, bt0, gm0);
      for (long s = h * R0; s < (h + 1) * R0; ++s) {
        double v = x[s] * factor;
        for (const Lut& l : luts) v *= l.direct ? l.t[s] : l.t[l.lo[s & lmask] | l.hi[s >> lb]];
        x[s] = v;
        mx = std::max(mx, v);
      }
    }
    return mx;
  }

  // The state at the previous marker maximising d(s') K(s', s) (the first among equals), and
  // per group the phase change attaining it (1: the founder's phase flips).
  long argmax_previous(const double* d, long s, double tm, double tf,
                       std::vector<int>& flips) const {
    const int ng = static_cast<int>(groups_.size());
    std::vector<std::vector<double>> gv(ng);
    std::vector<std::vector<char>> gd(ng);
    for (int g = 0; g < ng; ++g) {
      const double t = groups_[g].female ? tf : tm;
      const int n = __builtin_popcountll(groups_[g].mask);
      for (int c = 0; c <= n; ++c) {
        // d = 0: the group's bits change where they differ; d = 1: where they agree
        const double a = (1 - t) * std::pow(t, c) * std::pow(1 - t, n - c);
        const double b = t * std::pow(t, n - c) * std::pow(1 - t, c);
        gv[g].push_back(std::max(a, b));
        gd[g].push_back(b > a);
      }
    }
    // K(s', s) as a product of one table per region (its bits and the groups inside it, read
    // at the region's bits of s' xor s) and the groups that span regions.
    struct Table {
      int lo;
      long mask;
      std::vector<double> t;
    };
    std::vector<Table> tables;
    for (std::size_t r = 0; r < layout_.regions.size(); ++r) {
      const auto [lo, hi] = layout_.regions[r];
      if (hi <= lo) continue;
      Table tb{lo, (1L << (hi - lo)) - 1, std::vector<double>(std::size_t(1) << (hi - lo), 1.0)};
      for (long y = 0; y <= tb.mask; ++y) {
        const std::uint64_t x = static_cast<std::uint64_t>(y) << lo;
        double v = 1;
        for (int p = lo; p < hi; ++p)
          for (int sex = 0; sex < 2; ++sex)
            if ((ungrouped_[sex] >> p) & 1) {
              const double t = sex ? tf : tm;
              v *= (x >> p) & 1 ? t : 1 - t;
            }
        for (int g = 0; g < ng; ++g)
          if (groups_[g].mask && groups_[g].region == static_cast<int>(r))
            v *= gv[g][__builtin_popcountll(x & groups_[g].mask)];
        tb.t[y] = v;
      }
      tables.push_back(std::move(tb));
    }
    std::vector<int> spanning;
    for (int g = 0; g < ng; ++g)
      if (groups_[g].mask && groups_[g].region < 0) spanning.push_back(g);
    double best = -1;
    long arg = 0;
#pragma omp parallel
    {
      double tb = -1;
      long ta = 0;
#pragma omp for schedule(static) nowait
      for (long w = 0; w < n_; ++w) {
        const long x = w ^ s;
        double v = d[w];
        for (const Table& t : tables) v *= t.t[(x >> t.lo) & t.mask];
        for (int g : spanning)
          v *= gv[g][__builtin_popcountll(static_cast<std::uint64_t>(x) & groups_[g].mask)];
        if (v > tb) tb = v, ta = w;
      }
#pragma omp critical
      if (tb > best || (tb == best && ta < arg)) best = tb, arg = ta;
    }
    flips.assign(ng, 0);
    const std::uint64_t x = static_cast<std::uint64_t>(arg ^ s);
    for (int g = 0; g < ng; ++g) flips[g] = gd[g][__builtin_popcountll(x & groups_[g].mask)];
    return arg;
  }

 private:
  static std::uint64_t bit(int p) { return std::uint64_t(1) << p; }
  static std::uint32_t pext(std::uint64_t x, std::uint64_t m) {
    std::uint32_t r = 0;
    for (int k = 0; m; m &= m - 1, ++k)
      r |= static_cast<std::uint32_t>((x >> __builtin_ctzll(m)) & 1) << k;
    return r;
  }
  // One region's bits and groups, a region above 0 (lo > 0): by tiles of up to 8 columns
  // gathered into a buffer so that its butterflies stay in cache.
  void region_pass(double* x, int lo, int hi, const std::vector<double>& bt,
                   const std::vector<std::pair<std::uint64_t, double>>& gm) const {
    if (hi <= lo) return;
    const long R = 1L << (hi - lo), C = 1L << lo, H = n_ / (R * C);
    const long W = std::min(C, 8L), tiles = H * (C / W);
#pragma omp parallel
    {
      std::vector<double> buf(R * W);
#pragma omp for schedule(static)
      for (long t = 0; t < tiles; ++t) {
        double* base = x + (t / (C / W)) * R * C + (t % (C / W)) * W;
        for (long r = 0; r < R; ++r)
          for (long w = 0; w < W; ++w) buf[r * W + w] = base[r * C + w];
        mix_rows(buf.data(), R, W, bt, gm);
        for (long r = 0; r < R; ++r)
          for (long w = 0; w < W; ++w) base[r * C + w] = buf[r * W + w];
      }
    }
  }

  const ChainLayout& layout_;
  int bits_;
  long n_;
  std::uint64_t ungrouped_[2] = {0, 0};  // state positions of non-founders' meioses: male, female
  std::vector<FounderGroup> groups_;
  int fixed_ = 0;
};

}  // namespace

ViterbiPath viterbi_path(const InheritanceModel& im, const Pedigree& ped, int markers,
                         const std::vector<double>& male, const std::vector<double>& female,
                         bool sex_linked, double max_bytes) {
  const int M = markers;
  MaxChain chain(im, ped, sex_linked);
  const long N = chain.states();
  const double vec = 8.0 * static_cast<double>(N);
  const int threads = std::max(1, omp_get_max_threads());
  ViterbiPath out;
  // Vectors: every marker's delta when they fit a quarter of the limit (beyond, touching that
  // much fresh memory costs about what the traceback's recomputation does), else checkpoints every
  // C = sqrt(M) markers and one block of C (the fewest vectors), within three quarters of it.
  const double budget = max_bytes > 0 ? max_bytes : std::numeric_limits<double>::infinity();
  int C = 1;
  if (static_cast<double>(M + 1) * vec > budget / 4) {
    C = std::max(2, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(M)))));
    const double need = static_cast<double>((M + C - 1) / C + C + 1) * vec;
    if (need > budget * 0.75)
      throw std::length_error("the Viterbi chain needs " +
                              std::to_string(static_cast<long>(need / 1048576)) +
                              " MiB of state vectors (" + std::to_string(im.bits()) +
                              " bits, checkpoints every " + std::to_string(C) +
                              " markers), more than three quarters of the memory limit");
  }
  out.checkpoint_every = C;
  const long n_vectors = C == 1 ? M : (M + C - 1) / C + C + 1;
  // Emissions: what the vectors leave (at least a quarter of the limit); a chunk of 2 per
  // thread is alive at once, each with its elimination's intermediates, so a factor is at most
  // a quarter of that per thread (and 2^26 entries); those that fit half of it are kept for the
  // traceback's recomputation.
  const double left = std::max(budget - static_cast<double>(n_vectors) * vec, 0.0);
  const double table_limit = std::min(67108864.0, left / (8.0 * 4 * threads));
  std::vector<std::unique_ptr<Emission>> cache(M);
  double cached = 0;
  auto bytes_of = [](const Emission& e) {
    double b = 0;
    for (const EmissionFactor& f : e.factors) b += 8.0 * static_cast<double>(f.table.size());
    return b;
  };
  // The emissions of markers [k0, k1) not in the cache, computed in parallel.
  auto compute = [&](int k0, int k1) {
    std::vector<std::unique_ptr<Emission>> chunk(k1 - k0);
    std::string error;
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = k0; k < k1; ++k) {
      if (cache[k]) continue;
      try {
        chunk[k - k0] = std::make_unique<Emission>(im.max_emission(k, table_limit));
      } catch (const std::exception& e) {
#pragma omp critical
        error = e.what();
      }
    }
    if (!error.empty()) throw std::length_error(error);
    return chunk;
  };

  // Forward pass: delta_k kept (C = 1) or at checkpoints.
  std::vector<std::vector<double>> stored(C == 1 ? M : (M + C - 1) / C);
  std::vector<double> cur(N, 1.0);
  double ln = -static_cast<double>(im.meioses()) * std::log(2.0);
  // Each vector is scaled to a maximum of 1 by the next pass over it (the emission's): the
  // factor each marker's pass applied, kept so that the traceback's recomputation repeats the
  // same operations (the same values, so the same ties).
  std::vector<double> factor(M, 1.0);
  double next_factor = 1;
  const int chunk_size = 2 * threads;
  for (int k0 = 0; k0 < M; k0 += chunk_size) {
    const int k1 = std::min(M, k0 + chunk_size);
    auto t0 = Clock::now();
    std::vector<std::unique_ptr<Emission>> chunk = compute(k0, k1);
    out.emission_s += since(t0);
    t0 = Clock::now();
    for (int k = k0; k < k1; ++k) {
      const Emission* e = chunk[k - k0].get();
      factor[k] = next_factor;
      double ln_const = 0;
      const double mx = chain.step(cur.data(), k > 0, k > 0 ? male[k - 1] : 0.5,
                                   k > 0 ? female[k - 1] : 0.5, e, factor[k], &ln_const);
      ln += ln_const;
      if (!(mx > 0)) {
        out.ln_max = kNegInf;
        return out;
      }
      ln += std::log(mx) + e->ln_scale;
      next_factor = 1 / mx;
      if (C == 1)
        stored[k] = cur;
      else if (k % C == 0)
        stored[k / C] = cur;
      if (C == 1) continue;  // every delta is kept: the traceback needs no emission
      const double b = bytes_of(*e);
      if (cached + b <= left / 2) cache[k] = std::move(chunk[k - k0]), cached += b;
    }
    out.forward_s += since(t0);
  }
  out.ln_max = ln;

  // Traceback.
  auto t0 = Clock::now();
  std::vector<long> state(M);
  {
    long arg = 0;
    for (long s = 1; s < N; ++s)
      if (cur[s] > cur[arg]) arg = s;
    state[M - 1] = arg;
  }
  // The block of deltas being read (C > 1): markers [block * C, block * C + C).
  std::vector<std::vector<double>> block(C > 1 ? C : 0);
  int current = -1;
  auto delta = [&](int k) -> const double* {
    if (C == 1) return stored[k].data();
    const int b = k / C;
    if (b != current) {
      const auto r0 = Clock::now();
      block[0] = stored[b];
      const int end = std::min(M, (b + 1) * C);
      for (int j0 = b * C + 1; j0 < end; j0 += chunk_size) {
        const int j1 = std::min(end, j0 + chunk_size);
        const std::vector<std::unique_ptr<Emission>> e = compute(j0, j1);
        for (int j = j0; j < j1; ++j) {
          std::vector<double>& v = block[j - b * C];
          v = block[j - b * C - 1];
          if (!cache[j]) ++out.emissions_recomputed;
          double ln_const;
          chain.step(v.data(), true, male[j - 1], female[j - 1],
                     cache[j] ? cache[j].get() : e[j - j0].get(), factor[j], &ln_const);
        }
      }
      current = b;
      out.recompute_s += since(r0);
    }
    return block[k - b * C].data();
  };
  const int ng = static_cast<int>(chain.groups().size());
  std::vector<std::vector<int>> flips(M, std::vector<int>(ng, 0));  // [k]: from k - 1 to k
  for (int k = M - 1; k > 0; --k)
    state[k - 1] = chain.argmax_previous(delta(k - 1), state[k], male[k - 1], female[k - 1],
                                         flips[k]);
  out.traceback_s = since(t0);

  // The selectors: a founder's meioses flip with its phase (0 at the first marker).
  const int np = static_cast<int>(ped.people.size());
  std::vector<int> group_of(np, -1);
  for (int g = 0; g < ng; ++g) group_of[chain.groups()[g].founder] = g;
  std::vector<int> phase(ng, 0);
  out.selectors.assign(M, std::vector<std::array<int, 2>>(np, {-1, -1}));
  const auto meioses = im.meiosis_positions();
  for (int k = 0; k < M; ++k) {
    for (int g = 0; g < ng; ++g) phase[g] ^= flips[k][g];
    for (const auto& m : meioses) {
      int v = m.position >= 0 ? static_cast<int>((state[k] >> m.position) & 1) : 0;
      if (group_of[m.parent] >= 0) v ^= phase[group_of[m.parent]];
      out.selectors[k][m.child][m.side] = v;
    }
  }
  return out;
}

}  // namespace kinfer::linkage
