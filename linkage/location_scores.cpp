// InheritanceModel::location_scores: the Lander-Green walk along the map (the model and its
// emissions: inheritance.cpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/util.hpp"
#include "linkage/inheritance.hpp"

namespace kinfer::linkage {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
}  // namespace

// location_scores's walk along the map on one backend: the emissions computed once (under a
// memory limit in chunks, the largest tables dropped and recomputed when needed), the backward
// pass kept at checkpoints, the betas the points need rebuilt from them (a block at a time when
// there is room), and the forward pass scoring each point.
struct InheritanceModel::Walk {
  using Clock = std::chrono::steady_clock;
  // A locus being computed holds its elimination's intermediate tables too: kScratchTimes its
  // own (measured on c250: 1.5 exceeded --max-memory by 4-7%).
  static constexpr double kScratchTimes = 3;

  Walk(InheritanceModel& model, ChainBackend& backend, const std::vector<int>& markers,
       const std::vector<double>& male, const std::vector<double>& female)
      : m(model),
        B(backend),
        markers(markers),
        male(male),
        female(female),
        M(static_cast<int>(markers.size())),
        vec(8.0 * std::exp2(model.bits_)),
        bounded(model.memory_limit_ > 0),
        em(M),
        kept(M, 1),
        may_drop(backend.forget(nullptr)) {}

  InheritanceModel& m;
  ChainBackend& B;
  const std::vector<int>& markers;
  const std::vector<double>& male;
  const std::vector<double>& female;
  const int M;
  const double vec;    // bytes of one state vector
  const bool bounded;  // under a memory limit (set_memory_limit)

  // The emissions: the trait's, the markers' (`kept` 0: dropped, recomputed into `scratch`).
  double room0 = 0;    // bytes for the tables after the state vectors
  double limit = -1;   // a factor's entries at most (-1: the model's table limit)
  Emission et;
  std::vector<Emission> em;
  std::vector<char> kept;
  double kept_bytes = 0, dropped_max = 0;
  // Only a backend that can forget an emission (the CPU) lets a locus be dropped: the GPU keeps
  // each emission's device copy by its address, which `scratch` reuses.
  const bool may_drop;
  Emission scratch;
  int scratch_k = -1;

  // The vectors: the four working ones, the checkpoints of beta every `every` markers, and the
  // betas of one block of markers (`cached`, block `have_block`).
  int every = 1;
  bool block_cache = false, direct = false;
  int alpha = -1, beta = -1, va = -1, vb = -1;
  std::vector<int> check;
  std::vector<double> check_scale;
  int have_block = -1;
  std::vector<int> cached;
  std::vector<double> cached_scale;

  static double bytes_of(const Emission& e) {
    double b = 0;
    for (const EmissionFactor& f : e.factors) b += 8.0 * static_cast<double>(f.table.size());
    return b;
  }
  std::length_error too_much(double tables) const {
    auto mib = [](double b) { return std::to_string(static_cast<long>(std::ceil(b / 1048576))); };
    return std::length_error("emission tables of " + mib(tables) +
                             " MiB and four state vectors of " + mib(vec) +
                             " MiB exceed the chain's memory, " + mib(m.memory_limit_) + " MiB");
  }

  void compute_emissions(int trait);
  // Drops the largest kept table among loci [a, b) while the tables do not fit; false when
  // nothing is left to drop there.
  bool fit(int a, int b);
  // Locus k's emission: kept, or recomputed (the same tables: emission() is deterministic).
  const Emission* E(int k);
  void count_emissions();
  void plan_checkpoints();
  double timed_step(int v, bool kernel, double ml, double fl, const Emission* e);
  // beta_k = E_k * K_k(beta_k+1) into `dst` from `src` (which holds beta_{k+1}; unchanged when
  // it is another vector).
  void step_back_from(int k, int dst, int src, double& s);
  // beta_k = E_k * K_k(beta_k+1); `v` holds beta_{k+1} (nothing for k = M - 1).
  void step_back(int k, int v, double& s);
  void backward_pass();
  // beta_k into `target` from the first checkpoint at or after k (or from the end of the map).
  void rebuild(int k, int target, double& s);
  // The betas of block b, stepped from the next checkpoint: into vectors of their own (direct)
  // or copied out of `beta`.
  void cache_block_direct(int b);
  void cache_block_copied(int b);
  // beta_k (with its ln scale): the vector that holds it, `beta` or (direct) a cached one.
  int beta_at(int k, double& s);
  // sum_w [K_left alpha](w) E_T(w) [K_right beta](w)
  double score(bool have_alpha, double as, int bv, double bs, const Point& pt);
  std::vector<double> forward_pass(const std::vector<Point>& points, double* markers_only);
  // walk_markers's forward pass: K(alpha_k-1) and K(beta_k+1) at each marker k.
  void visit_markers(const MarkerVisitor& visit);
  void release_all();
};

void InheritanceModel::Walk::compute_emissions(int trait) {
  // `room0`: bytes for the tables after the state vectors: the block cache's (2 sqrt(M) + 4, the
  // walk's 734 steps on c250) while that is at most half of the memory, else at least four
  // (with fewer checkpoints each point's beta is rebuilt from further away: 16375 steps on c250
  // under 1500M when the tables took all but four). A factor of at most room0 / 8
  // bytes (a locus beyond goes per state on the fly); loci computed in chunks that fit in what
  // is free (the first chunk one locus, then as many as fit at kScratchTimes the largest so far,
  // at most kEmissionChunk), each chunk followed by dropping the largest tables until the kept
  // ones and one dropped locus (recomputed into `scratch` when a step needs it) fit.
  const double vectors_wanted = (2 * std::ceil(std::sqrt(static_cast<double>(M))) + 4) * vec;
  room0 = bounded ? m.memory_limit_ -
                        std::max(4 * vec, std::min(vectors_wanted, m.memory_limit_ / 2))
                  : 0;
  if (bounded && room0 < 0) throw too_much(0);
  limit = bounded ? std::min(m.table_limit_, room0 / 8 / 8) : -1.0;
  et = trait >= 0 ? m.emission(trait, limit) : Emission{};
  kept_bytes = bytes_of(et);
  double largest = 0;  // the largest locus's tables so far
  for (int c0 = 0, chunk = 1; c0 < M; c0 += chunk) {
    if (!bounded)
      chunk = M;
    else if (c0 > 0)
      chunk = static_cast<int>(std::clamp((room0 - kept_bytes - kScratchTimes * dropped_max) /
                                              std::max(kScratchTimes * largest, 1048576.0),
                                          1.0, static_cast<double>(kEmissionChunk)));
    const int c1 = std::min(M, c0 + chunk);
    std::exception_ptr failed;  // the first locus that failed (no exception leaves the loop)
#pragma omp parallel for schedule(dynamic)
    for (int k = c0; k < c1; ++k) {
      try {
        em[k] = m.emission(markers[k], limit);
      } catch (...) {
#pragma omp critical
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    for (int k = c0; k < c1; ++k) {
      kept_bytes += bytes_of(em[k]);
      largest = std::max(largest, bytes_of(em[k]));
    }
    if (bounded && !fit(c0, c1) && !may_drop) throw too_much(kept_bytes);
  }
  if (bounded && !fit(0, M)) throw too_much(kept_bytes + kScratchTimes * dropped_max);
}

bool InheritanceModel::Walk::fit(int a, int b) {
  while (kept_bytes + kScratchTimes * dropped_max > room0) {
    if (!may_drop) return false;
    int worst = -1;
    for (int k = a; k < b; ++k)
      if (kept[k] && bytes_of(em[k]) > 0 && (worst < 0 || bytes_of(em[k]) > bytes_of(em[worst])))
        worst = k;
    if (worst < 0) return false;
    const double w = bytes_of(em[worst]);
    kept_bytes -= w;
    dropped_max = std::max(dropped_max, w);
    kept[worst] = 0;
    em[worst] = Emission{};
  }
  return true;
}

const Emission* InheritanceModel::Walk::E(int k) {
  if (kept[k]) return &em[k];
  if (scratch_k != k) {
    B.forget(&scratch);
    scratch = Emission{};  // its tables go before the next are built
    scratch = m.emission(markers[k], limit);
    scratch_k = k;
    ++m.profile_.recomputed;
  }
  return &scratch;
}

void InheritanceModel::Walk::count_emissions() {
  Profile& p = m.profile_;
  p.dropped = static_cast<long>(std::count(kept.begin(), kept.end(), 0));
  p.programs += et.program.n > 0;
  for (const Emission& e : em) {
    p.factors += static_cast<long>(e.factors.size());
    p.programs += e.program.n > 0;
    p.table_bytes += bytes_of(e);
    const std::uint64_t low = (std::uint64_t(1) << m.layout_.regions[0].second) - 1;
    for (const EmissionFactor& f : e.factors) p.mixed_factors += (f.mask & ~low) != 0;
  }
}

void InheritanceModel::Walk::plan_checkpoints() {
  // Memory: four working vectors (alpha, beta, and the two sides of a point) in fast memory;
  // beta_k kept at checkpoints every `every` markers. With room, the betas of one block of
  // markers are rebuilt once from the next checkpoint and kept (about 2 sqrt(M) vectors in
  // all); without, each beta a point needs is rebuilt from the next checkpoint.
  long fast = B.vectors_fast(), total = B.vectors_total();
  if (bounded) {  // the checkpoints get what the tables leave
    total = std::min(total, static_cast<long>((m.memory_limit_ - kept_bytes -
                                               kScratchTimes * dropped_max) /
                                              vec));
    fast = std::min(fast, total);
  }
  if (fast < 4 || total < 4)
    throw std::runtime_error("the inheritance chain needs four state vectors in memory (" +
                             std::to_string(m.bits_) + " bits)");
  every = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(M)))));
  block_cache = (M + every - 1) / every + every + 4 <= total;
  if (!block_cache) {
    const long room = total - 4;
    every = room > 0 ? std::max(1, static_cast<int>((M + room - 1) / room)) : M + 1;
    if (room <= 0) every = M + 1;  // no checkpoint: every beta rebuilt from the end
  }
  m.profile_.checkpoint_every = every;
  m.profile_.block_cache = block_cache;
  // When the checkpoints and the block all fit in fast memory (the CPU: always), they are read
  // in place: a rebuilt beta is stepped from the next one into its own vector (step_from), and
  // a point reads the cached beta itself; otherwise (a GPU with checkpoints in host memory)
  // each is copied into `beta` first.
  direct = block_cache && static_cast<long>((M + every - 1) / every) + every + 4 <= fast;
  m.profile_.direct = direct;
  alpha = B.alloc(true), beta = B.alloc(true), va = B.alloc(true), vb = B.alloc(true);
  check.assign(every <= M ? (M + every - 1) / every : 0, -1);
  check_scale.assign(check.size(), 0);
}

double InheritanceModel::Walk::timed_step(int v, bool kernel, double ml, double fl,
                                          const Emission* e) {
  const auto t = Clock::now();
  const double s = B.step(v, kernel, ml, fl, e);
  m.profile_.step_s += since(t);
  ++m.profile_.steps;
  return s;
}

void InheritanceModel::Walk::step_back_from(int k, int dst, int src, double& s) {
  if (k == M - 1) {
    B.fill(dst, 1.0);
    s = timed_step(dst, false, 0, 0, E(k));
    return;
  }
  if (dst == src) {
    s += timed_step(dst, true, male[k], female[k], E(k));
    return;
  }
  const auto t = Clock::now();
  s += B.step_from(dst, src, true, male[k], female[k], E(k));
  m.profile_.step_s += since(t);
  ++m.profile_.steps;
}

void InheritanceModel::Walk::step_back(int k, int v, double& s) {
  if (k == M - 1) {
    B.fill(v, 1.0);
    s = timed_step(v, false, 0, 0, E(k));
  } else {
    s += timed_step(v, true, male[k], female[k], E(k));
  }
}

void InheritanceModel::Walk::backward_pass() {
  if (M > 0 && direct) {
    double s = 0;
    int cur = beta;
    for (int k = M - 1; k >= 0; --k) {
      const bool at_check = k % every == 0 && k / every < static_cast<int>(check.size());
      const int dst = at_check ? B.alloc(true) : beta;
      step_back_from(k, dst, cur, s);
      if (at_check) {
        check[k / every] = dst;
        check_scale[k / every] = s;
      }
      cur = dst;
    }
  } else if (M > 0) {
    double s = 0;
    for (int k = M - 1; k >= 0; --k) {
      step_back(k, beta, s);
      if (k % every == 0 && k / every < static_cast<int>(check.size())) {
        const int c = B.alloc(false);
        B.copy(c, beta);
        check[k / every] = c;
        check_scale[k / every] = s;
      }
    }
  }
}

void InheritanceModel::Walk::rebuild(int k, int target, double& s) {
  int from = M;
  const int c = (k + every - 1) / every;
  if (c < static_cast<int>(check.size())) from = c * every;
  if (from < M) {
    B.copy(target, check[from / every]);
    s = check_scale[from / every];
  }
  for (int j = (from < M ? from - 1 : M - 1); j >= k; --j) step_back(j, target, s);
}

void InheritanceModel::Walk::cache_block_direct(int b) {
  const int lo = b * every, hi = std::min(M, lo + every);
  for (int v : cached)
    if (v >= 0) B.release(v);
  cached.assign(hi - lo, -1);
  cached_scale.assign(hi - lo, 0);
  int prev = hi < M ? check[hi / every] : -1;
  double bs = hi < M ? check_scale[hi / every] : 0;
  for (int j = hi - 1; j > lo; --j) {
    const int v = B.alloc(true);
    step_back_from(j, v, prev, bs);
    cached[j - lo] = v;
    cached_scale[j - lo] = bs;
    prev = v;
  }
  have_block = b;
}

void InheritanceModel::Walk::cache_block_copied(int b) {
  const int lo = b * every, hi = std::min(M, lo + every);
  for (int v : cached)
    if (v >= 0) B.release(v);
  cached.assign(hi - lo, -1);
  cached_scale.assign(hi - lo, 0);
  double bs = 0;
  int from = hi;
  if (hi < M) {
    B.copy(beta, check[hi / every]);
    bs = check_scale[hi / every];
  }
  for (int j = from - 1; j >= lo; --j) {
    if (j == lo) {
      cached[0] = -1;  // the checkpoint itself
      break;
    }
    step_back(j, beta, bs);
    cached[j - lo] = B.alloc(false);
    B.copy(cached[j - lo], beta);
    cached_scale[j - lo] = bs;
  }
  have_block = b;
}

int InheritanceModel::Walk::beta_at(int k, double& s) {
  if (!block_cache) {
    rebuild(k, beta, s);
    return beta;
  }
  const int b = k / every;
  if (direct) {
    if (b != have_block) cache_block_direct(b);
    s = k == b * every ? check_scale[b] : cached_scale[k - b * every];
    return k == b * every ? check[b] : cached[k - b * every];
  }
  if (b != have_block) cache_block_copied(b);
  if (k == b * every) {
    B.copy(beta, check[b]);
    s = check_scale[b];
  } else {
    B.copy(beta, cached[k - b * every]);
    s = cached_scale[k - b * every];
  }
  return beta;
}

double InheritanceModel::Walk::score(bool have_alpha, double as, int bv, double bs,
                                     const Point& pt) {
  const bool have_beta = bv >= 0;
  const auto t = Clock::now();
  double s = as + bs;
  // A point at a marker (theta 0 on that side) needs no kernel there.
  // (Thetas below 1e-12, a point at a marker up to rounding, change no digit that matters.)
  const bool kl = have_alpha && (pt.male_left > 1e-12 || pt.female_left > 1e-12);
  const bool kr = have_beta && (pt.male_right > 1e-12 || pt.female_right > 1e-12);
  if (have_alpha && have_beta) {
    s += B.ln_score(alpha, {kl, pt.male_left, pt.female_left}, &et, bv,
                    {kr, pt.male_right, pt.female_right}, va, vb);
    m.profile_.score_steps += kl + kr;
    m.profile_.score_s += since(t);
    return std::isinf(s) ? kNegInf : s;
  }
  if (have_alpha) {
    B.copy(va, alpha);
    if (kl) s += B.step(va, true, pt.male_left, pt.female_left, nullptr);
  } else {
    B.fill(va, 1.0);
  }
  if (have_beta) {
    B.copy(vb, bv);
    if (kr) s += B.step(vb, true, pt.male_right, pt.female_right, nullptr);
  } else {
    B.fill(vb, 1.0);
  }
  m.profile_.score_steps += kl + kr;
  const double d = B.ln_dot(va, &et, vb);
  m.profile_.score_s += since(t);
  return std::isinf(d) || std::isinf(s) ? kNegInf : d + s;
}

std::vector<double> InheritanceModel::Walk::forward_pass(const std::vector<Point>& points,
                                                         double* markers_only) {
  // Which intervals have points: the forward pass stops there.
  std::vector<std::vector<int>> at(M + 1);  // at[left + 1]: the points after marker `left`
  for (std::size_t p = 0; p < points.size(); ++p)
    at[points[p].left + 1].push_back(static_cast<int>(p));
  const double ln_prior = -m.bits_ * std::log(2.0);  // each class of vectors: 2^-bits
  std::vector<double> out(points.size(), kNegInf);
  // alpha_k = E_k * K_{k-1}(alpha_k-1), alpha_0 = prior * E_0.
  double as = ln_prior;
  for (int k = -1; k < M; ++k) {
    if (k == 0) {
      B.fill(alpha, 1.0);
      as += timed_step(alpha, false, 0, 0, E(0));
    } else if (k > 0) {
      as += timed_step(alpha, true, male[k - 1], female[k - 1], E(k));
    }
    if (at[k + 1].empty()) continue;
    double bs = 0;
    const int bv = k + 1 < M ? beta_at(k + 1, bs) : -1;
    for (int p : at[k + 1]) out[p] = score(k >= 0, k >= 0 ? as : ln_prior, bv, bs, points[p]);
  }
  if (markers_only) *markers_only = M > 0 ? as + B.ln_dot(alpha, nullptr, -1) : 0.0;
  return out;
}

void InheritanceModel::Walk::visit_markers(const MarkerVisitor& visit) {
  // alpha_k = E_k * va, va = K(alpha_k-1) (1 at k = 0); each scaled, its ln factor in `as`.
  const double ln_prior = -m.bits_ * std::log(2.0);
  double as = ln_prior;
  for (int k = 0; k < M; ++k) {
    // vb first: rebuilding a beta may recompute a dropped emission into the one scratch
    // emission that E(k) below may return.
    double sb = 0;
    if (k + 1 < M) {
      const int bv = beta_at(k + 1, sb);
      const auto t = Clock::now();
      sb += B.step_from(vb, bv, true, male[k], female[k], nullptr);
      m.profile_.step_s += since(t);
      ++m.profile_.steps;
    } else {
      B.fill(vb, 1.0);
    }
    double sa = as;
    if (k == 0) {
      B.fill(va, 1.0);
    } else {
      const auto t = Clock::now();
      sa += B.step_from(va, alpha, true, male[k - 1], female[k - 1], nullptr);
      m.profile_.step_s += since(t);
      ++m.profile_.steps;
    }
    const Emission* ek = E(k);
    const auto t = Clock::now();
    as = sa + B.step_from(alpha, va, false, 0, 0, ek);
    m.profile_.step_s += since(t);
    ++m.profile_.steps;
    visit(k, B, va, vb, sa + sb, *ek);
  }
}

void InheritanceModel::Walk::release_all() {
  for (int v : cached)
    if (v >= 0) B.release(v);
  for (int v : check)
    if (v >= 0) B.release(v);
  for (int v : {alpha, beta, va, vb}) B.release(v);
}

void InheritanceModel::walk(const std::vector<int>& markers, const std::vector<double>& male,
                            const std::vector<double>& female, int trait, ChainBackend* backend,
                            const std::function<void(Walk&)>& pass) {
  profile_ = {};
  if (bits_ > kMaxBits)
    throw std::length_error("an inheritance vector of " + std::to_string(bits_) +
                            " bits is beyond the chain's " + std::to_string(kMaxBits));
  std::unique_ptr<ChainBackend> own;
  if (!backend) {
    own = make_cpu_chain(layout_, 0);
    backend = own.get();
  }
  Walk w(*this, *backend, markers, male, female);
  // Every emission once, as factor tables (kept for the whole walk). Under a memory limit, in
  // chunks of loci, each locus's factors limited to its share of what is left for tables after
  // four state vectors (set_memory_limit); beyond it a locus goes per state on the fly.
  const auto t0 = Walk::Clock::now();
  w.compute_emissions(trait);
  w.count_emissions();
  profile_.emission_s = since(t0);
  w.plan_checkpoints();
  w.backward_pass();
  pass(w);
  w.release_all();
}

std::vector<double> InheritanceModel::location_scores(const std::vector<int>& markers,
                                                      const std::vector<double>& male,
                                                      const std::vector<double>& female, int trait,
                                                      const std::vector<Point>& points,
                                                      double* markers_only, ChainBackend* backend) {
  for (const Point& pt : points)
    if (pt.left < -1 || pt.left >= static_cast<int>(markers.size()))
      throw std::logic_error("location_scores: point outside the map");
  std::vector<double> out;
  walk(markers, male, female, trait, backend,
       [&](Walk& w) { out = w.forward_pass(points, markers_only); });
  return out;
}

void InheritanceModel::walk_markers(const std::vector<int>& markers,
                                    const std::vector<double>& male,
                                    const std::vector<double>& female, const MarkerVisitor& visit,
                                    ChainBackend* backend) {
  walk(markers, male, female, -1, backend, [&](Walk& w) { w.visit_markers(visit); });
}

}  // namespace kinfer::linkage
