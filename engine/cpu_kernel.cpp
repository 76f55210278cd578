#include "engine/cpu_kernel.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/kernel_math.hpp"

namespace kinfer {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// Inner (vectorized) block: the lowest summed variables whose product stays within this.
constexpr std::int64_t kInnerMax = 4096;
}  // namespace

std::int64_t BucketShape::output_size() const {
  std::int64_t s = 1;
  for (std::size_t i = 0; i + n_marg < vars.size(); ++i) s *= card[i];
  return s;
}
std::int64_t BucketShape::marg_size() const {
  std::int64_t s = 1;
  for (std::size_t i = vars.size() - n_marg; i < vars.size(); ++i) s *= card[i];
  return s;
}

double exp_nonpositive(double x) { return exp_np(x); }

std::int64_t input_strides(const BucketShape& shape, std::span<const int> scope, std::int64_t* st) {
  std::int64_t s = 1;
  std::size_t pos = shape.vars.size();
  for (std::size_t j = scope.size(); j-- > 0;) {
    // find scope[j] among the bucket's vars, scanning towards the most significant
    do {
      if (pos == 0) throw std::logic_error("input scope is not a subsequence of the bucket");
      --pos;
    } while (shape.vars[pos] != scope[j]);
    st[pos] = s;
    s *= shape.card[pos];
  }
  return s;
}

void block_offsets(const BucketShape& shape, const std::int64_t* st, int first, std::int64_t* off) {
  // The last variable's offsets, then each variable above it repeats those found so far once
  // per further value, shifted by its stride.
  off[0] = 0;
  std::int64_t len = 1;
  for (int i = static_cast<int>(shape.vars.size()) - 1; i >= first; --i) {
    for (int j = 1; j < shape.card[i]; ++j) {
      std::int64_t* __restrict to = off + j * len;
      const std::int64_t shift = j * st[i];
#pragma omp simd
      for (std::int64_t k = 0; k < len; ++k) to[k] = off[k] + shift;
    }
    len *= shape.card[i];
  }
}

namespace {

// Per-input strides over the bucket variables (0 where the input lacks the variable).
std::vector<std::vector<std::int64_t>> strides(const BucketShape& shape,
                                               std::span<const InputTable> inputs) {
  const std::size_t nv = shape.vars.size();
  std::vector<std::vector<std::int64_t>> st(inputs.size(), std::vector<std::int64_t>(nv, 0));
  for (std::size_t f = 0; f < inputs.size(); ++f)
    input_strides(shape, inputs[f].scope, st[f].data());
  return st;
}

// Running log-sum-exp accumulator: value = mx + ln(acc).
struct Lse {
  double mx = kNegInf, acc = 0;
  void add_block(double bmx, double bsum) {  // block value = bmx + ln(bsum)
    if (bmx == kNegInf) return;
    if (bmx <= mx) {
      acc += bsum * exp_np(bmx - mx);
    } else {
      acc = acc * exp_np(mx - bmx) + bsum;
      mx = bmx;
    }
  }
  double value() const { return mx == kNegInf ? kNegInf : mx + std::log(acc); }
};

// Everything the hot loops need, flattened.
struct KernelPlan {
  int nf = 0;                       // inputs that vary with the summed variables
  std::vector<const double*> data;  // [nf]
  std::vector<BlockReads> reads;    // [nf]: how the inner block reads each
  std::int64_t inner = 1;           // configurations of the inner summed variables
  std::vector<int> hi_pos;          // outer summed variable positions (most significant first)
  std::vector<int> out_pos;         // output variable positions
  std::vector<std::vector<std::int64_t>> st;   // strides of the varying inputs [nf][nv]
  std::vector<const double*> cdata;            // inputs constant over the summed variables
  std::vector<std::vector<std::int64_t>> cst;  // and their strides
  std::vector<int> card;
};

KernelPlan make_kernel_plan(const BucketShape& shape, std::span<const InputTable> inputs) {
  KernelPlan p;
  const int nv = static_cast<int>(shape.vars.size());
  const int first_marg = nv - shape.n_marg;
  p.card = shape.card;
  auto st = strides(shape, inputs);
  // inner block: the lowest summed variables while the product stays small
  int inner_first = nv;
  while (inner_first > first_marg && p.inner * shape.card[inner_first - 1] <= kInnerMax) {
    --inner_first;
    p.inner *= shape.card[inner_first];
  }
  for (int i = first_marg; i < inner_first; ++i) p.hi_pos.push_back(i);
  for (int i = 0; i < first_marg; ++i) p.out_pos.push_back(i);
  for (std::size_t f = 0; f < inputs.size(); ++f) {
    bool varies = false;
    for (int i = first_marg; i < nv; ++i) varies |= st[f][i] != 0;
    if (varies) {
      p.data.push_back(inputs[f].data);
      p.st.push_back(st[f]);
    } else {
      p.cdata.push_back(inputs[f].data);
      p.cst.push_back(st[f]);
    }
  }
  p.nf = static_cast<int>(p.data.size());
  const std::span<const int> inner_card(shape.card.data() + inner_first, nv - inner_first);
  for (int f = 0; f < p.nf; ++f) {
    std::vector<std::int64_t> off(p.inner);
    block_offsets(shape, p.st[f].data(), inner_first, off.data());
    p.reads.emplace_back(std::move(off), inner_card);
  }
  return p;
}

// Odometer over a list of variable positions with per-input running offsets.
struct Odometer {
  const std::vector<int>* pos;
  const std::vector<int>* card;
  std::vector<int> digit;
  // Sets digits from a linear index (over `pos`, last fastest) and returns base offsets.
  void seek(std::int64_t idx, const std::vector<std::vector<std::int64_t>>& st,
            std::vector<std::int64_t>& base) {
    digit.assign(pos->size(), 0);
    for (std::size_t j = pos->size(); j-- > 0;) {
      const int c = (*card)[(*pos)[j]];
      digit[j] = static_cast<int>(idx % c);
      idx /= c;
    }
    for (std::size_t f = 0; f < st.size(); ++f) {
      std::int64_t b = 0;
      for (std::size_t j = 0; j < pos->size(); ++j) b += digit[j] * st[f][(*pos)[j]];
      base[f] = b;
    }
  }
  void next(const std::vector<std::vector<std::int64_t>>& st, std::vector<std::int64_t>& base) {
    for (std::size_t j = pos->size(); j-- > 0;) {
      const int i = (*pos)[j];
      if (++digit[j] < (*card)[i]) {
        for (std::size_t f = 0; f < st.size(); ++f) base[f] += st[f][i];
        return;
      }
      for (std::size_t f = 0; f < st.size(); ++f) base[f] -= st[f][i] * (digit[j] - 1);
      digit[j] = 0;
    }
  }
};

// Sum over the inner block for given bases: returns (block max, sum of exp(x - max)).
inline void inner_block(const KernelPlan& p, const std::int64_t* base, double add, double* buf,
                        double& bmx, double& bsum) {
  const std::int64_t n = p.inner;
  p.reads[0].add<true>(p.data[0] + base[0], buf);
  for (int f = 1; f < p.nf; ++f) p.reads[f].add(p.data[f] + base[f], buf);
  if (add != 0) {
#pragma omp simd
    for (std::int64_t k = 0; k < n; ++k) buf[k] += add;
  }
  double mx = kNegInf;
#pragma omp simd reduction(max : mx)
  for (std::int64_t k = 0; k < n; ++k) mx = buf[k] > mx ? buf[k] : mx;
  bmx = mx;
  if (mx == kNegInf) {
    bsum = 0;
    return;
  }
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t k = 0; k < n; ++k) s += exp_np(buf[k] - mx);
  bsum = s;
}

double const_part(const KernelPlan& p, const std::vector<std::int64_t>& cbase) {
  double c = 0;
  for (std::size_t f = 0; f < p.cdata.size(); ++f) c += p.cdata[f][cbase[f]];
  return c;
}

// Few summed configurations (|M| <= kInnerMax), the common case of buckets that sum out one or
// two variables. One block is the lowest bucket variables: all summed ones and as many output
// ones as fit, so a block yields G = block / |M| consecutive outputs and the per-output overhead
// (odometers, function calls) is paid once per block instead of once per output.
void small_marg(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                int threads) {
  const int nv = static_cast<int>(shape.vars.size());
  const int first_marg = nv - shape.n_marg;
  const std::int64_t M = shape.marg_size();
  const auto st = strides(shape, inputs);
  const int nf = static_cast<int>(inputs.size());
  int block_first = first_marg;
  std::int64_t block = M;
  while (block_first > 0 && block * shape.card[block_first - 1] <= kInnerMax)
    block *= shape.card[--block_first];
  const std::int64_t G = block / M;
  std::vector<BlockReads> reads;
  const std::span<const int> block_card(shape.card.data() + block_first, nv - block_first);
  for (int f = 0; f < nf; ++f) {
    std::vector<std::int64_t> off(block);
    block_offsets(shape, st[f].data(), block_first, off.data());
    reads.emplace_back(std::move(off), block_card);
  }
  std::vector<int> outer_pos;
  std::int64_t n_outer = 1;
  for (int i = 0; i < block_first; ++i) outer_pos.push_back(i), n_outer *= shape.card[i];
  if (n_outer < threads) threads = static_cast<int>(std::max<std::int64_t>(n_outer, 1));
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> buf(block), group_max(M != 2 ? G : 0), group_sum(M != 2 ? G : 0);
    std::vector<std::int64_t> base(nf);
    Odometer od{&outer_pos, &shape.card, {}};
    const int nt = omp_get_num_threads(), me = omp_get_thread_num();
    const std::int64_t lo = n_outer * me / nt, hi = n_outer * (me + 1) / nt;
    if (lo < hi) od.seek(lo, st, base);
    for (std::int64_t t = lo; t < hi; ++t) {
      reads[0].add<true>(inputs[0].data + base[0], buf.data());
      for (int f = 1; f < nf; ++f) reads[f].add(inputs[f].data + base[f], buf.data());
      double* dst = out + t * G;
      if (M == 2) {
#pragma omp simd
        for (std::int64_t g = 0; g < G; ++g) {
          const double a = buf[2 * g], b = buf[2 * g + 1];
          const double mx = a > b ? a : b, mn = a > b ? b : a;
          // ln(e^a + e^b) = mx + ln(1 + e^(mn - mx)): the exp vectorises, the log stays scalar
          buf[2 * g] = mx;
          buf[2 * g + 1] = mn == kNegInf ? 1.0 : 1.0 + exp_np(mn - mx);
        }
        for (std::int64_t g = 0; g < G; ++g)
          if (buf[2 * g] != kNegInf)
            dst[g] = buf[2 * g] + std::log(buf[2 * g + 1]);
          else
            dst[g] = kNegInf;
      } else if (G >= 8) {
        // An output's few terms are too few to vectorise: the block's outputs at once, term by
        // term (the maxima, then the sums of exp, then one log each).
        double* __restrict mx = group_max.data();
        double* __restrict sum = group_sum.data();
        const double* __restrict x = buf.data();
        max_of_runs(x, G, M, mx);
        std::fill(sum, sum + G, 0.0);
        for (std::int64_t j = 0; j < M; ++j)
#pragma omp simd
          for (std::int64_t g = 0; g < G; ++g) {
            const double m = mx[g], d = x[g * M + j] - m;
            sum[g] += m == kNegInf ? 0.0 : exp_np(d);
          }
        for (std::int64_t g = 0; g < G; ++g)
          dst[g] = mx[g] == kNegInf ? kNegInf : mx[g] + std::log(sum[g]);
      } else {
        for (std::int64_t g = 0; g < G; ++g) {
          const double* x = buf.data() + g * M;
          double mx = kNegInf;
          for (std::int64_t j = 0; j < M; ++j) mx = x[j] > mx ? x[j] : mx;
          if (mx == kNegInf) {
            dst[g] = kNegInf;
            continue;
          }
          double sum = 0;
#pragma omp simd reduction(+ : sum)
          for (std::int64_t j = 0; j < M; ++j) sum += exp_np(x[j] - mx);
          dst[g] = mx + std::log(sum);
        }
      }
      if (t + 1 < hi) od.next(st, base);
    }
  }
}

}  // namespace

namespace {

void sum_product_direct(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                        int threads);

// out = the product of `inputs` (ln values summed) over every configuration of shape.vars, which
// cover the inputs' scopes. The table is built a variable at a time: the table over
// shape.vars[0..k) is extended by variable k, then takes every input whose last variable is k,
// so an input costs the table over its variables and those before them, not the whole product
// (most inputs of a bucket of pairwise factors end before its last variables). Inputs with the
// same scope are added together first, once each.
void product_of_small(const BucketShape& shape, std::span<const InputTable> inputs, double* out) {
  const int nv = static_cast<int>(shape.vars.size());
  // Identical scopes merged: tables[i] is the sum of the inputs with scope scopes[i].
  std::vector<std::vector<int>> scopes;
  std::vector<std::vector<double>> tables;
  std::vector<int> last;  // [i]: position of the scope's last variable in shape.vars (-1: none)
  const auto position = [&](int v) {
    return static_cast<int>(std::find(shape.vars.begin(), shape.vars.end(), v) -
                            shape.vars.begin());
  };
  for (const InputTable& in : inputs) {
    const auto it = std::find(scopes.begin(), scopes.end(), in.scope);
    if (it == scopes.end()) {
      std::int64_t n = 1;
      for (int v : in.scope) n *= shape.card[position(v)];
      scopes.push_back(in.scope);
      tables.emplace_back(in.data, in.data + n);
      last.push_back(in.scope.empty() ? -1 : position(in.scope.back()));
      continue;
    }
    std::vector<double>& t = tables[it - scopes.begin()];
    for (std::size_t k = 0; k < t.size(); ++k) t[k] += in.data[k];
  }
  std::vector<std::int64_t> st(nv), off(shape.output_size());
  BucketShape prefix;
  out[0] = 0;
  std::int64_t size = 1;
  for (int k = -1; k < nv; ++k) {
    if (k >= 0) {  // extend by variable k: entry i becomes entries i * c .. i * c + c - 1
      const int c = shape.card[k];
      for (std::int64_t i = size; i-- > 0;)
        for (int x = c; x-- > 0;) out[i * c + x] = out[i];
      size *= c;
      prefix.vars.push_back(shape.vars[k]);
      prefix.card.push_back(c);
    }
    for (std::size_t t = 0; t < tables.size(); ++t) {
      if (last[t] != k) continue;
      std::fill(st.begin(), st.end(), 0);
      input_strides(prefix, scopes[t], st.data());
      block_offsets(prefix, st.data(), 0, off.data());
      const double* __restrict d = tables[t].data();
      const std::int64_t* __restrict o = off.data();
#pragma omp simd
      for (std::int64_t i = 0; i < size; ++i) out[i] += d[o[i]];
    }
  }
}

// Which inputs combine_small_inputs multiplies together: `big` read as they are, each group's
// members multiplied over the variables in its mask. nullopt where grouping would not reduce
// the number of inputs, or for four inputs or fewer.
struct SmallGroups {
  std::vector<int> big;
  std::vector<std::vector<char>> masks;   // [group][position in shape.vars]
  std::vector<std::vector<int>> members;  // [group]: input positions
};

std::optional<SmallGroups> group_small_inputs(const BucketShape& shape,
                                              std::span<const InputTable> inputs) {
  if (inputs.size() <= 4) return std::nullopt;
  const std::size_t nv = shape.vars.size();
  double states = 1;
  for (int c : shape.card) states *= c;
  const double limit = std::min(16384.0, states / 16);
  auto size_of = [&](const std::vector<char>& mask) {
    double s = 1;
    for (std::size_t i = 0; i < nv; ++i)
      if (mask[i]) s *= shape.card[i];
    return s;
  };
  auto mask_of = [&](const InputTable& t) {
    std::vector<char> m(nv, 0);
    std::size_t i = 0;
    for (int v : t.scope) {
      while (shape.vars[i] != v) ++i;
      m[i] = 1;
    }
    return m;
  };
  SmallGroups g;
  for (std::size_t f = 0; f < inputs.size(); ++f) {
    std::vector<char> m = mask_of(inputs[f]);
    if (size_of(m) > limit) {
      g.big.push_back(static_cast<int>(f));
      continue;
    }
    bool placed = false;
    for (std::size_t k = 0; k < g.masks.size(); ++k) {
      std::vector<char> u = g.masks[k];
      for (std::size_t i = 0; i < nv; ++i) u[i] |= m[i];
      if (size_of(u) <= limit) {
        g.masks[k] = std::move(u);
        g.members[k].push_back(static_cast<int>(f));
        placed = true;
        break;
      }
    }
    if (!placed) g.masks.push_back(std::move(m)), g.members.push_back({static_cast<int>(f)});
  }
  if (g.masks.size() + g.big.size() + 1 >= inputs.size()) return std::nullopt;
  return g;
}

// The shape of a group's product: the bucket's variables in its mask.
BucketShape masked(const BucketShape& shape, const std::vector<char>& mask) {
  BucketShape sub;
  for (std::size_t i = 0; i < shape.vars.size(); ++i)
    if (mask[i]) sub.vars.push_back(shape.vars[i]), sub.card.push_back(shape.card[i]);
  return sub;
}

}  // namespace

std::vector<InputTable> CombinedInputs::over(std::span<const InputTable> inputs) const {
  if (inputs.size() < n_inputs)
    throw std::logic_error("CombinedInputs: " + std::to_string(inputs.size()) + " inputs for " +
                           std::to_string(n_inputs));
  std::vector<InputTable> list;
  for (int item : items)
    if (item >= 0)
      list.push_back(inputs[item]);
    else
      list.push_back({tables[-1 - item].data(), scopes[-1 - item]});
  list.insert(list.end(), inputs.begin() + static_cast<std::ptrdiff_t>(n_inputs), inputs.end());
  return list;
}

// Buckets of Markov networks can hold hundreds of small factors, and each input costs one gather
// per bucket state. Inputs whose product over the union of their scopes stays small are first
// multiplied together (a bucket with no summation), so the bucket reads a handful of tables.
bool combine_small_inputs(const BucketShape& shape, std::span<const InputTable> inputs,
                          CombinedInputs& combined) {
  combined = {};
  const std::optional<SmallGroups> g = group_small_inputs(shape, inputs);
  if (!g) return false;
  combined.n_inputs = inputs.size();
  for (int f : g->big) combined.items.push_back(f);
  for (std::size_t k = 0; k < g->masks.size(); ++k) {
    if (g->members[k].size() == 1) {
      combined.items.push_back(g->members[k][0]);
      continue;
    }
    const BucketShape sub = masked(shape, g->masks[k]);
    std::vector<InputTable> members;
    for (int f : g->members[k]) members.push_back(inputs[f]);
    combined.tables.emplace_back(sub.output_size());
    product_of_small(sub, members, combined.tables.back().data());
    combined.scopes.push_back(sub.vars);
    combined.items.push_back(-static_cast<int>(combined.tables.size()));
  }
  return true;
}

double combined_bytes(const BucketShape& shape, std::span<const InputTable> inputs) {
  const std::optional<SmallGroups> g = group_small_inputs(shape, inputs);
  double bytes = 0;
  for (std::size_t k = 0; g && k < g->masks.size(); ++k)
    if (g->members[k].size() > 1)
      bytes += 8.0 * static_cast<double>(masked(shape, g->masks[k]).output_size());
  return bytes;
}

void sum_product_log(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                     int threads, CombinedInputs* combined) {
  // The small inputs' products (nothing summed) serve max-product buckets as well.
  auto run = [&](std::span<const InputTable> in) {
    if (shape.maximise)
      max_product_log(shape, in, out, threads);
    else
      sum_product_direct(shape, in, out, threads);
  };
  CombinedInputs own;
  CombinedInputs& c = combined ? *combined : own;
  if (combine_small_inputs(shape, inputs, c))
    run(c.over(inputs));
  else
    run(inputs);
}

namespace {

void sum_product_direct(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                        int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  if (shape.marg_size() <= kInnerMax && !inputs.empty()) {
    const double work =
        static_cast<double>(shape.output_size()) * shape.marg_size() * (inputs.size() + 1);
    small_marg(shape, inputs, out, work < 2e5 ? 1 : threads);
    return;
  }
  const KernelPlan p = make_kernel_plan(shape, inputs);
  const std::int64_t n_out = shape.output_size();
  std::int64_t n_hi = 1;
  for (int i : p.hi_pos) n_hi *= p.card[i];
  const double work = static_cast<double>(n_out) * n_hi * p.inner * (p.nf + 1);
  if (work < 2e5) threads = 1;

  if (p.nf == 0) {  // nothing varies with the summed variables: out = const + ln(#configs)
    const double lm = std::log(static_cast<double>(shape.marg_size()));
#pragma omp parallel num_threads(threads)
    {
      Odometer od{&p.out_pos, &p.card, {}};
      std::vector<std::int64_t> cb(p.cdata.size());
#pragma omp for schedule(static)
      for (std::int64_t o = 0; o < n_out; ++o) {
        od.seek(o, p.cst, cb);
        out[o] = const_part(p, cb) + lm;
      }
    }
    return;
  }

  if (n_out >= 4 * threads || n_hi == 1) {
    // Parallel over output configurations; each thread walks a contiguous range.
#pragma omp parallel num_threads(threads)
    {
      std::vector<double> buf(p.inner);
      std::vector<std::int64_t> base(p.nf), hbase(p.nf), b(p.nf), cb(p.cdata.size());
      Odometer od{&p.out_pos, &p.card, {}}, oc{&p.out_pos, &p.card, {}}, oh{&p.hi_pos, &p.card, {}};
      const int nt = omp_get_num_threads(), me = omp_get_thread_num();
      const std::int64_t lo = n_out * me / nt, hi = n_out * (me + 1) / nt;
      if (lo < hi) {
        od.seek(lo, p.st, base);
        oc.seek(lo, p.cst, cb);
        for (std::int64_t o = lo; o < hi; ++o) {
          const double c = const_part(p, cb);
          Lse lse;
          if (c != kNegInf) {
            oh.seek(0, p.st, hbase);
            for (std::int64_t h = 0; h < n_hi; ++h) {
              for (int f = 0; f < p.nf; ++f) b[f] = base[f] + hbase[f];
              double bmx, bsum;
              inner_block(p, b.data(), c, buf.data(), bmx, bsum);
              lse.add_block(bmx, bsum);
              if (h + 1 < n_hi) oh.next(p.st, hbase);
            }
          }
          out[o] = lse.value();
          if (o + 1 < hi) {
            od.next(p.st, base);
            oc.next(p.cst, cb);
          }
        }
      }
    }
    return;
  }

  // Few outputs, many summed configurations: parallel over the outer summed configurations.
  for (std::int64_t o = 0; o < n_out; ++o) {
    std::vector<std::int64_t> base(p.nf), cb(p.cdata.size());
    Odometer od{&p.out_pos, &p.card, {}}, oc{&p.out_pos, &p.card, {}};
    od.seek(o, p.st, base);
    oc.seek(o, p.cst, cb);
    const double c = const_part(p, cb);
    if (c == kNegInf) {
      out[o] = kNegInf;
      continue;
    }
    std::vector<Lse> part(threads);
#pragma omp parallel num_threads(threads)
    {
      std::vector<double> buf(p.inner);
      std::vector<std::int64_t> hbase(p.nf), b(p.nf);
      Odometer oh{&p.hi_pos, &p.card, {}};
      const int nt = omp_get_num_threads(), me = omp_get_thread_num();
      const std::int64_t lo = n_hi * me / nt, hi = n_hi * (me + 1) / nt;
      Lse lse;
      if (lo < hi) oh.seek(lo, p.st, hbase);
      for (std::int64_t h = lo; h < hi; ++h) {
        for (int f = 0; f < p.nf; ++f) b[f] = base[f] + hbase[f];
        double bmx, bsum;
        inner_block(p, b.data(), c, buf.data(), bmx, bsum);
        lse.add_block(bmx, bsum);
        if (h + 1 < hi) oh.next(p.st, hbase);
      }
      part[me] = lse;
    }
    Lse total;
    for (const Lse& l : part) total.add_block(l.mx, l.acc);
    out[o] = total.value();
  }
}

}  // namespace

void sum_product_log_reference(const BucketShape& shape, std::span<const InputTable> inputs,
                               double* out) {
  const auto st = strides(shape, inputs);
  const std::int64_t n_out = shape.output_size(), n_m = shape.marg_size();
  const int nv = static_cast<int>(shape.vars.size());
  for (std::int64_t o = 0; o < n_out; ++o) {
    std::vector<double> terms;
    for (std::int64_t m = 0; m < n_m; ++m) {
      // decode the full bucket address (o, m)
      std::int64_t addr_m = m, addr_o = o;
      double s = 0;
      std::vector<int> digit(nv);
      for (int i = nv - 1; i >= 0; --i) {
        std::int64_t& a = i >= nv - shape.n_marg ? addr_m : addr_o;
        digit[i] = static_cast<int>(a % shape.card[i]);
        a /= shape.card[i];
      }
      for (std::size_t f = 0; f < inputs.size(); ++f) {
        std::int64_t off = 0;
        for (int i = 0; i < nv; ++i) off += digit[i] * st[f][i];
        s += inputs[f].data[off];
      }
      terms.push_back(s);
    }
    double mx = kNegInf;
    for (double x : terms) mx = std::max(mx, x);
    if (mx == kNegInf || shape.maximise) {
      out[o] = mx;
      continue;
    }
    double acc = 0;
    for (double x : terms) acc += std::exp(x - mx);
    out[o] = mx + std::log(acc);
  }
}

}  // namespace kinfer
