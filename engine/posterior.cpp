#include "engine/posterior.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/cpu_kernel.hpp"

namespace kinfer {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// Bucket b's inputs: its factors, then its children's outputs (`up`), then `extra`.
std::vector<InputTable> bucket_inputs(const Plan& plan, int b,
                                      const std::vector<std::vector<double>>& up,
                                      std::span<const InputTable> extra = {}) {
  const auto& buckets = plan.tree.buckets;
  const Bucket& bk = buckets[b];
  std::vector<InputTable> in;
  for (int f : bk.factors) in.push_back({plan.input_data[f].data(), plan.input_scope[f]});
  for (int c : bk.children) in.push_back({up[c].data(), buckets[c].output_vars()});
  in.insert(in.end(), extra.begin(), extra.end());
  return in;
}

// ln sum of `table`, a table over every variable of `full`, onto each of `targets` (each a
// subsequence of full.vars), in one pass. The sums run in the linear domain, shifted by the
// table's largest entry: a target entry whose terms are all below e^-708 of it (of P(e) times at
// most the table's size) comes out as -inf, a probability no double holds next to 1.
void sum_onto(const BucketShape& full, std::vector<double>& table,
              const std::vector<std::vector<int>>& targets, std::vector<std::vector<double>*> out,
              int threads) {
  const int nv = static_cast<int>(full.vars.size());
  const std::size_t nt = targets.size();
  std::vector<std::vector<std::int64_t>> st(nt, std::vector<std::int64_t>(nv, 0));
  for (std::size_t t = 0; t < nt; ++t)
    out[t]->assign(input_strides(full, targets[t], st[t].data()), 0.0);
  const double mx = *std::max_element(table.begin(), table.end());
  if (mx == kNegInf) {
    for (auto* o : out) std::fill(o->begin(), o->end(), kNegInf);
    return;
  }
  const auto n = static_cast<std::int64_t>(table.size());
#pragma omp parallel for num_threads(thread_count(threads)) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) table[i] = std::exp(table[i] - mx);  // now linear
  // An inner block of the least significant variables (at most kBlock entries) with each
  // target's offsets precomputed, and an odometer over the variables above it.
  constexpr std::int64_t kBlock = 4096;
  int inner_first = nv;
  std::int64_t block = 1;
  while (inner_first > 0 && block * full.card[inner_first - 1] <= kBlock)
    block *= full.card[--inner_first];
  std::vector<std::vector<std::int64_t>> off(nt, std::vector<std::int64_t>(block, 0));
  for (std::size_t t = 0; t < nt; ++t) {
    std::vector<int> digit(nv, 0);
    std::int64_t o = 0;
    for (std::int64_t k = 0; k < block; ++k) {
      off[t][k] = o;
      for (int j = nv - 1; j >= inner_first; --j) {
        o += st[t][j];
        if (++digit[j] < full.card[j]) break;
        o -= st[t][j] * digit[j];
        digit[j] = 0;
      }
    }
  }
  std::vector<std::int64_t> base(nt, 0);
  std::vector<int> digit(nv, 0);
  for (std::int64_t i = 0; i < n; i += block) {
    for (std::size_t t = 0; t < nt; ++t) {
      double* acc = out[t]->data() + base[t];
      const std::int64_t* ot = off[t].data();
      for (std::int64_t k = 0; k < block; ++k) acc[ot[k]] += table[i + k];
    }
    for (int j = inner_first - 1; j >= 0; --j) {
      const bool carry = ++digit[j] == full.card[j];
      for (std::size_t t = 0; t < nt; ++t)
        base[t] += carry ? -st[t][j] * (full.card[j] - 1) : st[t][j];
      if (!carry) break;
      digit[j] = 0;
    }
  }
  for (auto* o : out)
    for (double& x : *o) x = x > 0 ? mx + std::log(x) : kNegInf;
}

// The largest chunk of for_each_product_chunk (entries).
constexpr std::int64_t kChunk = std::int64_t{1} << 20;

// A bucket with its `lead` most significant variables fixed: the rest of the shape, and inputs
// over the rest (the inputs are row-major in the bucket's order, so fixing leading variables is
// an offset into each). fix(l) points the inputs at configuration l of the leading variables.
class LeadingFixed {
 public:
  LeadingFixed(const BucketShape& shape, std::span<const InputTable> inputs, int lead)
      : shape_(shape), inputs_(inputs), lead_(lead), st_(inputs.size()), in_(inputs.size()) {
    const int nv = static_cast<int>(shape.vars.size());
    rest.vars.assign(shape.vars.begin() + lead, shape.vars.end());
    rest.card.assign(shape.card.begin() + lead, shape.card.end());
    for (std::size_t f = 0; f < inputs.size(); ++f) {
      st_[f].assign(nv, 0);
      input_strides(shape, inputs[f].scope, st_[f].data());
      for (int v : inputs[f].scope)
        if (std::find(rest.vars.begin(), rest.vars.end(), v) != rest.vars.end())
          in_[f].scope.push_back(v);
    }
  }
  BucketShape rest;  // n_marg 0
  std::span<const InputTable> fix(std::int64_t l) {
    for (std::size_t f = 0; f < inputs_.size(); ++f) {
      std::int64_t base = 0, x = l;
      for (int j = lead_ - 1; j >= 0; --j) {
        base += (x % shape_.card[j]) * st_[f][j];
        x /= shape_.card[j];
      }
      in_[f].data = inputs_[f].data + base;
    }
    return in_;
  }

 private:
  const BucketShape& shape_;
  std::span<const InputTable> inputs_;
  int lead_;
  std::vector<std::vector<std::int64_t>> st_;
  std::vector<InputTable> in_;
};

// The product of `inputs` (their ln values summed) at every configuration of shape.vars
// (n_marg is ignored), a chunk at a time: the most significant variables are fixed per chunk so
// that a chunk holds at most kChunk entries. visit(first, chunk) gets the index of the chunk's
// first configuration; a chunk is whole blocks of the last variables' configurations, or a part
// of one such block.
template <class Visit>
void for_each_product_chunk(const BucketShape& shape, std::span<const InputTable> inputs,
                            int threads, Visit&& visit) {
  const int nv = static_cast<int>(shape.vars.size());
  std::int64_t rest = 1;
  for (int c : shape.card) rest *= c;
  int lead = 0;
  while (lead < nv && rest > kChunk) rest /= shape.card[lead++];
  LeadingFixed fixed(shape, inputs, lead);
  std::int64_t n_lead = 1;
  for (int j = 0; j < lead; ++j) n_lead *= shape.card[j];
  std::vector<double> chunk(rest);
  for (std::int64_t l = 0; l < n_lead; ++l) {
    sum_product_log(fixed.rest, fixed.fix(l), chunk.data(), threads);
    visit(l * rest, chunk);
  }
}

// The index of the configuration of `vars` (card from the model, last fastest) at `value`.
std::int64_t config_index(const std::vector<int>& vars, const std::vector<int>& card,
                          const std::vector<int>& value) {
  std::int64_t idx = 0;
  for (int v : vars) idx = idx * card[v] + value[v];
  return idx;
}

void require_inputs_filled(const Plan& plan) {
  if (plan.input_data.size() != plan.model.factors.size())
    throw std::logic_error("posterior: the plan's inputs are not filled");
}

}  // namespace

Marginals compute_marginals(const Plan& plan, int threads) {
  require_inputs_filled(plan);
  const ReducedModel& model = plan.model;
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int n = static_cast<int>(model.orig_card.size());
  Marginals r;
  r.ln_pe = kNegInf;
  if (!model.impossible.empty()) return r;
  std::vector<std::vector<double>> up(nb);
  for (int b = 0; b < nb; ++b) {
    const BucketShape shape = bucket_shape(plan, b);
    const auto in = bucket_inputs(plan, b, up);
    up[b].resize(shape.output_size());
    sum_product_log(shape, in, up[b].data(), threads);
  }
  r.ln_pe = up.back()[0] + model.log_constant();
  if (r.ln_pe == kNegInf) return r;

  // Downward: root first; ln P(e', X = x) of each tree variable over its reduced domain (e' the
  // tree's part of the evidence: the same for every x, removed by normalising).
  std::vector<std::vector<double>> down(nb), joint(n);
  down[nb - 1] = {0.0};
  std::vector<double> belief;
  for (int b = nb - 1; b >= 0; --b) {
    const Bucket& bk = buckets[b];
    const std::vector<int> out_vars = bk.output_vars();
    const InputTable from_above{down[b].data(), out_vars};
    BucketShape full = bucket_shape(plan, b);
    full.n_marg = 0;
    const auto in = bucket_inputs(plan, b, up, {&from_above, 1});
    belief.resize(full.output_size());
    sum_product_log(full, in, belief.data(), threads);
    std::vector<std::vector<int>> targets;
    std::vector<std::vector<double>*> sums;
    for (int c : bk.children) targets.push_back(buckets[c].output_vars()), sums.push_back(&down[c]);
    for (std::size_t k = bk.vars.size() - bk.n_marg; k < bk.vars.size(); ++k)
      targets.push_back({bk.vars[k]}), sums.push_back(&joint[bk.vars[k]]);
    sum_onto(full, belief, targets, sums, threads);
    for (int c : bk.children)
      for (std::size_t s = 0; s < down[c].size(); ++s)
        down[c][s] = up[c][s] == kNegInf ? kNegInf : down[c][s] - up[c][s];
    for (int c : bk.children) std::vector<double>().swap(up[c]);
    std::vector<double>().swap(down[b]);
  }

  r.p.resize(n);
  for (int v = 0; v < n; ++v) {
    std::vector<double>& p = r.p[v];
    p.assign(model.orig_card[v], 0.0);
    if (model.fixed[v]) {
      p[model.value[v]] = 1.0;
    } else if (joint[v].empty()) {  // a free variable in no factor
      for (int x : model.kept[v]) p[x] = 1.0 / model.kept[v].size();
    } else {
      const double mx = *std::max_element(joint[v].begin(), joint[v].end());
      double z = 0;
      for (double x : joint[v]) z += std::exp(x - mx);
      for (std::size_t x = 0; x < joint[v].size(); ++x)
        p[model.kept[v][x]] = std::exp(joint[v][x] - mx) / z;
    }
  }
  return r;
}

MostProbable compute_mpe(const Plan& plan, int threads) {
  require_inputs_filled(plan);
  const ReducedModel& model = plan.model;
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int n = static_cast<int>(model.orig_card.size());
  MostProbable r;
  r.ln_pr = kNegInf;
  if (!model.impossible.empty()) return r;
  const int nt = thread_count(threads);
  std::vector<std::vector<double>> up(nb);
  for (int b = 0; b < nb; ++b) {
    const BucketShape shape = bucket_shape(plan, b);
    const auto in = bucket_inputs(plan, b, up);
    const std::int64_t n_m = shape.marg_size();
    up[b].assign(shape.output_size(), kNegInf);
    auto keep_maxima = [&](std::int64_t first, const std::vector<double>& c) {
      const auto n_q = static_cast<std::int64_t>(c.size()) / n_m;
      if (n_q == 0) {  // a part of one output configuration's block
        double& o = up[b][first / n_m];
        o = std::max(o, *std::max_element(c.begin(), c.end()));
        return;
      }
#pragma omp parallel for num_threads(n_q > 1 ? nt : 1) schedule(static)
      for (std::int64_t q = 0; q < n_q; ++q)
        up[b][first / n_m + q] = *std::max_element(c.begin() + q * n_m, c.begin() + (q + 1) * n_m);
    };
    for_each_product_chunk(shape, in, threads, keep_maxima);
  }
  // A free variable in no factor multiplies P(e) by its number of values but the maximum by 1:
  // the constants without it.
  const double outside = model.log_constant() - model.free_constant;
  r.ln_pr = up.back()[0] + outside;
  if (r.ln_pr == kNegInf) return r;

  // Traceback, root first: values are indices into the reduced domains.
  std::vector<int> value(n, 0);
  for (int b = nb - 1; b >= 0; --b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, b);
    const auto in = bucket_inputs(plan, b, up);
    // The bucket at its output's values (fixed above), maximised over its eliminated variables:
    // the first configuration attaining the maximum.
    LeadingFixed at_output(shape, in, static_cast<int>(bk.vars.size()) - bk.n_marg);
    double best = kNegInf;
    std::int64_t arg = 0;
    for_each_product_chunk(at_output.rest,
                           at_output.fix(config_index(bk.output_vars(), model.card, value)),
                           threads, [&](std::int64_t first, const std::vector<double>& c) {
                             const auto it = std::max_element(c.begin(), c.end());
                             if (*it > best) best = *it, arg = first + (it - c.begin());
                           });
    for (std::size_t k = bk.vars.size(); k-- > bk.vars.size() - bk.n_marg;) {
      const int v = bk.vars[k];
      value[v] = static_cast<int>(arg % model.card[v]);
      arg /= model.card[v];
    }
  }
  r.assignment.resize(n);
  for (int v = 0; v < n; ++v) {
    if (model.fixed[v])
      r.assignment[v] = model.value[v];
    else if (plan.tree.rank[v] >= 0)
      r.assignment[v] = model.kept[v][value[v]];
    else
      r.assignment[v] = model.kept[v].front();  // a free variable in no factor
  }
  return r;
}

namespace {

// The reduced value index of each conditioned variable in slice `s` (the slice index runs over
// cond.vars, last fastest).
std::vector<int> slice_values(const Conditioning& cond, std::int64_t s) {
  std::vector<int> x(cond.vars.size());
  for (std::size_t i = cond.vars.size(); i-- > 0;) {
    x[i] = static_cast<int>(s % cond.card[i]);
    s /= cond.card[i];
  }
  return x;
}

}  // namespace

Marginals compute_marginals(ConditionedPlan& cp, int threads) {
  if (!cp.conditioned()) return compute_marginals(cp.plan, threads);
  const ReducedModel& model = cp.plan.model;
  // Running sums of P(e, X = x) / e^top over the slices, top the largest ln P(e, C = c) so far.
  Marginals r;
  double top = kNegInf;
  for (std::int64_t s = 0; s < cp.cond.slices; ++s) {
    if (!fill_slice(cp, s)) continue;
    Marginals m = compute_marginals(cp.plan, threads);
    if (m.ln_pe == kNegInf) continue;
    const std::vector<int> x = slice_values(cp.cond, s);
    for (std::size_t i = 0; i < x.size(); ++i) {  // C is a point mass within its slice
      const int v = cp.cond.vars[i];
      std::fill(m.p[v].begin(), m.p[v].end(), 0.0);
      m.p[v][model.kept[v][x[i]]] = 1.0;
    }
    if (r.p.empty()) {
      r.p.resize(m.p.size());
      for (std::size_t v = 0; v < m.p.size(); ++v) r.p[v].assign(m.p[v].size(), 0.0);
    }
    if (m.ln_pe > top) {
      const double scale = top == kNegInf ? 0.0 : std::exp(top - m.ln_pe);
      for (auto& p : r.p)
        for (double& y : p) y *= scale;
      top = m.ln_pe;
    }
    const double w = std::exp(m.ln_pe - top);
    for (std::size_t v = 0; v < m.p.size(); ++v)
      for (std::size_t k = 0; k < m.p[v].size(); ++k) r.p[v][k] += w * m.p[v][k];
  }
  if (top == kNegInf) {
    r.ln_pe = kNegInf;
    r.p.clear();
    return r;
  }
  // Every variable's sums add up to the same P(e) / e^top: normalise by one of them.
  double z = 0;
  for (double y : r.p.front()) z += y;
  r.ln_pe = top + std::log(z);
  for (auto& p : r.p)
    for (double& y : p) y /= z;
  return r;
}

MostProbable compute_mpe(ConditionedPlan& cp, int threads) {
  if (!cp.conditioned()) return compute_mpe(cp.plan, threads);
  MostProbable best;
  best.ln_pr = kNegInf;
  for (std::int64_t s = 0; s < cp.cond.slices; ++s) {
    if (!fill_slice(cp, s)) continue;
    MostProbable m = compute_mpe(cp.plan, threads);
    if (!(m.ln_pr > best.ln_pr)) continue;
    const std::vector<int> x = slice_values(cp.cond, s);
    for (std::size_t i = 0; i < x.size(); ++i)
      m.assignment[cp.cond.vars[i]] = cp.plan.model.kept[cp.cond.vars[i]][x[i]];
    best = std::move(m);
  }
  return best;
}

double posterior_peak_bytes(const Plan& plan, bool marginals) {
  double outputs = 0, belief = 0;
  for (const Bucket& b : plan.tree.buckets) {
    outputs += 8.0 * std::exp2(b.log2_output);
    belief = std::max(belief, 8.0 * std::exp2(b.log2_states));
  }
  MemoryEstimate m = plan.memory;
  m.intermediate_bytes =
      marginals ? 2 * outputs + belief : outputs + std::min(8.0 * kChunk, belief);
  update_peak(m);
  return m.peak_bytes;
}

double ln_joint(const Network& net, std::span<const int> assignment) {
  double s = 0;
  for (const Factor& f : net.factors) {
    std::int64_t idx = 0;
    for (int v : f.scope) idx = idx * net.card[v] + assignment[v];
    s += std::log(f.table[idx]);
  }
  return s;
}

}  // namespace kinfer
