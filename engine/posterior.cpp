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

// ln sum (or max) of `table`, a table over every variable of `full`, onto `target` (a
// subsequence of full.vars). Max per target entry first, so that the sum is shifted by its own
// largest term and no entry underflows against another entry's scale.
void reduce_onto(const BucketShape& full, const std::vector<double>& table,
                 std::span<const int> target, std::vector<double>& out, bool sum) {
  const int nv = static_cast<int>(full.vars.size());
  std::vector<std::int64_t> st(nv, 0);
  out.assign(input_strides(full, target, st.data()), kNegInf);
  std::vector<int> digit(nv, 0);
  auto for_each_entry = [&](auto&& visit) {
    std::fill(digit.begin(), digit.end(), 0);
    std::int64_t t = 0;
    for (std::size_t i = 0; i < table.size(); ++i) {
      visit(t, table[i]);
      for (int j = nv - 1; j >= 0; --j) {
        t += st[j];
        if (++digit[j] < full.card[j]) break;
        t -= st[j] * digit[j];
        digit[j] = 0;
      }
    }
  };
  for_each_entry([&](std::int64_t t, double x) { out[t] = std::max(out[t], x); });
  if (!sum) return;
  std::vector<double> acc(out.size(), 0.0);
  for_each_entry([&](std::int64_t t, double x) {
    if (out[t] != kNegInf) acc[t] += std::exp(x - out[t]);
  });
  for (std::size_t t = 0; t < out.size(); ++t)
    if (out[t] != kNegInf) out[t] += std::log(acc[t]);
}

// The values of a bucket's inputs summed, one output configuration at a time: slice(o) gives
// sum_f in_f(o, m) for every configuration m of the eliminated variables (last fastest).
class BucketSlices {
 public:
  BucketSlices(const BucketShape& shape, std::span<const InputTable> inputs) : shape_(shape) {
    const int nv = static_cast<int>(shape.vars.size());
    first_marg_ = nv - shape.n_marg;
    st_.assign(inputs.size(), std::vector<std::int64_t>(nv, 0));
    for (std::size_t f = 0; f < inputs.size(); ++f) {
      input_strides(shape, inputs[f].scope, st_[f].data());
      data_.push_back(inputs[f].data);
    }
  }
  std::int64_t marg_size() const { return shape_.marg_size(); }

  // Fills slice[0, marg_size()) for output configuration `o`.
  void slice(std::int64_t o, double* slice) const {
    const int nv = static_cast<int>(shape_.vars.size());
    const std::size_t nf = data_.size();
    std::vector<std::int64_t> base(nf, 0);
    for (int i = first_marg_ - 1; i >= 0; --i) {
      const std::int64_t d = o % shape_.card[i];
      o /= shape_.card[i];
      for (std::size_t f = 0; f < nf; ++f) base[f] += d * st_[f][i];
    }
    std::vector<int> digit(nv, 0);
    const std::int64_t n = marg_size();
    for (std::int64_t m = 0; m < n; ++m) {
      double s = 0;
      for (std::size_t f = 0; f < nf; ++f) s += data_[f][base[f]];
      slice[m] = s;
      for (int j = nv - 1; j >= first_marg_; --j) {
        const bool carry = ++digit[j] == shape_.card[j];
        for (std::size_t f = 0; f < nf; ++f)
          base[f] += carry ? -st_[f][j] * (shape_.card[j] - 1) : st_[f][j];
        if (!carry) break;
        digit[j] = 0;
      }
    }
  }

 private:
  const BucketShape& shape_;
  int first_marg_ = 0;
  std::vector<const double*> data_;
  std::vector<std::vector<std::int64_t>> st_;
};

// The index of the configuration of `vars` (card from the model, last fastest) at `value`.
std::int64_t config_index(const std::vector<int>& vars, const std::vector<int>& card,
                          const std::vector<int>& value) {
  std::int64_t idx = 0;
  for (int v : vars) idx = idx * card[v] + value[v];
  return idx;
}

void require_unconditioned(const Plan& plan) {
  if (plan.input_data.size() != plan.model.factors.size())
    throw std::logic_error("posterior: the plan's inputs are not filled");
}

}  // namespace

Marginals compute_marginals(const Plan& plan, int threads) {
  require_unconditioned(plan);
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
    for (int c : bk.children) {
      reduce_onto(full, belief, buckets[c].output_vars(), down[c], true);
      for (std::size_t s = 0; s < down[c].size(); ++s)
        down[c][s] = up[c][s] == kNegInf ? kNegInf : down[c][s] - up[c][s];
    }
    for (std::size_t k = bk.vars.size() - bk.n_marg; k < bk.vars.size(); ++k) {
      const int v = bk.vars[k];
      reduce_onto(full, belief, {&v, 1}, joint[v], true);
    }
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
  require_unconditioned(plan);
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
    const BucketSlices slices(shape, in);
    const std::int64_t n_out = shape.output_size(), n_m = slices.marg_size();
    up[b].resize(n_out);
#pragma omp parallel num_threads(n_out > 1 ? nt : 1)
    {
      std::vector<double> s(n_m);
#pragma omp for schedule(dynamic, 16)
      for (std::int64_t o = 0; o < n_out; ++o) {
        slices.slice(o, s.data());
        up[b][o] = *std::max_element(s.begin(), s.end());
      }
    }
  }
  // A free variable in no factor multiplies P(e) by its number of values but the maximum by 1:
  // the constants without it.
  const double outside = model.log_constant() - model.free_constant;
  r.ln_pr = up.back()[0] + outside;
  if (r.ln_pr == kNegInf) return r;

  // Traceback, root first: values are indices into the reduced domains.
  std::vector<int> value(n, 0);
  std::vector<double> s;
  for (int b = nb - 1; b >= 0; --b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, b);
    const auto in = bucket_inputs(plan, b, up);
    const BucketSlices slices(shape, in);
    s.resize(slices.marg_size());
    slices.slice(config_index(bk.output_vars(), model.card, value), s.data());
    std::int64_t best = std::max_element(s.begin(), s.end()) - s.begin();  // the first maximum
    for (std::size_t k = bk.vars.size(); k-- > bk.vars.size() - bk.n_marg;) {
      const int v = bk.vars[k];
      value[v] = static_cast<int>(best % model.card[v]);
      best /= model.card[v];
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

double posterior_peak_bytes(const Plan& plan, bool marginals) {
  double outputs = 0, belief = 0;
  for (const Bucket& b : plan.tree.buckets) {
    outputs += 8.0 * std::exp2(b.log2_output);
    belief = std::max(belief, 8.0 * std::exp2(b.log2_states));
  }
  MemoryEstimate m = plan.memory;
  m.intermediate_bytes = marginals ? 2 * outputs + belief : outputs;
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
