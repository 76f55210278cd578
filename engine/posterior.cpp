#include "engine/posterior.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>

#include "engine/belief_sums.hpp"
#include "engine/blocks.hpp"
#include "engine/cpu_kernel.hpp"
#include "engine/kernel_math.hpp"

namespace kinfer {

using detail::belief_sums;
using detail::Blocks;
using detail::in_parts;
using detail::kBlock;
using detail::pass_threads;
using detail::plain_products;
using detail::thread_count;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Bucket b's inputs: its factors, then its children's outputs (`up`), then `extra`.
std::vector<InputTable> bucket_inputs(const Plan& plan, int b, const std::vector<LnTable>& up,
                                      std::span<const InputTable> extra = {}) {
  const auto& buckets = plan.tree.buckets;
  const Bucket& bk = buckets[b];
  std::vector<InputTable> in;
  for (int f : bk.factors) in.push_back({plan.input_data[f].data(), plan.input_scope[f]});
  for (int c : bk.children) in.push_back({up[c].data(), buckets[c].output_vars()});
  in.insert(in.end(), extra.begin(), extra.end());
  return in;
}

// A child output this much smaller than its bucket (log2) gives the bucket's eliminated
// variables in it their marginals at a small share of the pass over the bucket.
constexpr double kSmallChildLog2 = 4;

// first_maximum scans at most this many configurations in one plain pass.
constexpr std::int64_t kSmallScan = 256;

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
    for (std::size_t f = 0; f < inputs_.size(); ++f)
      in_[f].data = inputs_[f].data ? inputs_[f].data + base(f, l) : nullptr;
    return in_;
  }
  // The offset in input f of its entries at configuration l of the leading variables.
  std::int64_t base(std::size_t f, std::int64_t l) const {
    std::int64_t b = 0;
    for (int j = lead_ - 1; j >= 0; --j) {
      b += (l % shape_.card[j]) * st_[f][j];
      l /= shape_.card[j];
    }
    return b;
  }

 private:
  const BucketShape& shape_;
  std::span<const InputTable> inputs_;
  int lead_;
  std::vector<std::vector<std::int64_t>> st_;
  std::vector<InputTable> in_;
};

// Configurations whose ln values lie within this of the maximum (relative to max(1, |max|)) are
// ties for the traceback: the same maximum computed on another device (other rounding, inputs
// merged in another order) then gives the same assignment.
constexpr double kTieTolerance = 1e-12;

// The ln value within kTieTolerance of a maximum `best`.
double tie_bound(double best) { return best - kTieTolerance * std::max(1.0, std::abs(best)); }

// The index of the first configuration of shape.vars (n_marg is ignored) at which the product
// of `inputs` is largest, up to kTieTolerance; 0 where every product is -inf. Two passes: the
// maximum, then the first configuration within the tolerance of it. With `at_least` (not NaN),
// the first configuration whose product is at least that, -1 where none is: the threads take
// chunks of blocks in index order and stop at the first chunk after one that holds a hit, so
// that the pass ends soon after the first hit rather than at the end of the table.
std::int64_t first_maximum(const BucketShape& shape, std::span<const InputTable> inputs,
                           int threads, double at_least = std::nan("")) {
  // A scan of a few configurations (most buckets of a small network) in one plain pass: each
  // configuration's product, input by input, without blocks or a parallel region.
  if (shape.output_size() <= kSmallScan) {
    const std::vector<double> prod = plain_products(shape, inputs);
    if (std::isnan(at_least)) {
      const double best = *std::max_element(prod.begin(), prod.end());
      if (best == kNegInf) return 0;
      at_least = tie_bound(best);
    }
    const auto k = std::find_if(prod.begin(), prod.end(), [&](double x) { return x >= at_least; });
    return k == prod.end() ? -1 : k - prod.begin();
  }
  const Blocks bl(shape, inputs);
  const int nt = pass_threads(static_cast<double>(bl.size) * bl.count, inputs.size(), threads);
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  const auto first_at_least = [&] {
    const std::int64_t chunk = std::max<std::int64_t>(1, bl.count / (64 * nt));
    std::atomic<std::int64_t> next{0}, first{kNone};
#pragma omp parallel num_threads(nt)
    {
      std::vector<double> buf(bl.size);
      for (std::int64_t lo; (lo = next.fetch_add(chunk)) < bl.count;) {
        if (lo * bl.size > first.load(std::memory_order_relaxed)) break;
        const std::int64_t hi = std::min(bl.count, lo + chunk);
        for (std::int64_t b = lo; b < hi; ++b) {
          bl.products(b, buf.data());
          std::int64_t k = 0;
          while (k < bl.size && !(buf[k] >= at_least)) ++k;
          if (k < bl.size) {
            std::int64_t seen = first.load();
            while (b * bl.size + k < seen && !first.compare_exchange_weak(seen, b * bl.size + k)) {
            }
            break;
          }
        }
      }
    }
    const std::int64_t f = first.load();
    return f == kNone ? std::int64_t{-1} : f;
  };
  if (!std::isnan(at_least)) return first_at_least();
  std::vector<double> part_max(nt, kNegInf);
  in_parts(bl.count, nt, [&](int me, std::int64_t lo, std::int64_t hi) {
    std::vector<double> buf(bl.size);
    double m = kNegInf;
    for (std::int64_t b = lo; b < hi; ++b) {
      bl.products(b, buf.data());
#pragma omp simd reduction(max : m)
      for (std::int64_t k = 0; k < bl.size; ++k) m = buf[k] > m ? buf[k] : m;
    }
    part_max[me] = m;
  });
  const double best = *std::max_element(part_max.begin(), part_max.end());
  if (best == kNegInf) return 0;
  at_least = tie_bound(best);
  return first_at_least();
}

// What the traceback copied back of the outputs a device held, for the log.
struct HeldReads {
  double entries = 0, seconds = 0;
  int device_scans = 0;  // scans narrowed down on the device
};

// first_maximum with a device's help where the scan is large or reads much of the outputs the
// device holds (held[i].bucket >= 0: input i is that output's part from held[i].first on,
// DeviceOutputs::maxima): the device computes the maxima of groups of configurations (each
// configuration of the leading variables one group, at most kGroups of them), the first group
// within the tolerance of the largest is fixed, and so on within it until what is left is a
// small scan for the CPU, which copies back what it reads of the held outputs and looks for the
// first configuration within the tolerance of the device's maximum (its own first maximum if
// its rounding puts none there). Without a device, or where it declines, first_maximum alone.
// `known_max` (NaN: not known) is the maximum the upward pass computed for this scan (the
// bucket's output at the fixed values): the scan then looks for the first configuration within
// the tolerance of it in one pass, not the maximum first (a bucket whose output is one number
// scans its whole state space: 2^32 entries in linkage_11).
std::int64_t traceback_argmax(const BucketShape& shape, std::span<const InputTable> inputs,
                              std::vector<DeviceOutputs::HeldPart> held, int threads,
                              DeviceOutputs* device, HeldReads& reads, double known_max) {
  constexpr std::int64_t kGroups = 1 << 16;
  std::vector<std::unique_ptr<LeadingFixed>> levels;  // each fixes leading variables of the last
  const BucketShape* cur = &shape;
  std::span<const InputTable> in = inputs;
  std::int64_t prefix = 0;  // the fixed leading variables' configuration index
  // cur and its levels sum nothing: output_size() is all
  double at_least =
      std::isnan(known_max) || known_max == kNegInf ? std::nan("") : tie_bound(known_max);
  std::vector<std::int64_t> st(shape.vars.size());
  // The entries of held input f over cur's variables (0: a host table).
  const auto held_entries = [&](std::size_t f) -> std::int64_t {
    return held.empty() || held[f].bucket < 0 ? 0 : input_strides(*cur, in[f].scope, st.data());
  };
  const auto held_total = [&] {
    double n = 0;
    for (std::size_t f = 0; f < in.size(); ++f) n += static_cast<double>(held_entries(f));
    return n;
  };
  while (device && cur->vars.size() > 1 &&
         (static_cast<double>(cur->output_size()) * static_cast<double>(in.size()) >
              device->maxima_from() ||
          held_total() > device->held_from())) {
    const int nv = static_cast<int>(cur->vars.size());
    int lead = 0;
    std::int64_t groups = 1;
    while (lead + 1 < nv && groups * cur->card[lead] <= kGroups) groups *= cur->card[lead++];
    if (lead == 0) break;
    BucketShape grouped = *cur;
    grouped.n_marg = nv - lead;
    grouped.maximise = true;
    std::vector<double> group_max(groups);
    if (!device->maxima(grouped, in, held, group_max.data())) break;
    ++reads.device_scans;
    const double best = *std::max_element(group_max.begin(), group_max.end());
    if (best == kNegInf) break;
    if (std::isnan(at_least)) at_least = tie_bound(best);  // the first level's is the maximum
    const auto g =
        std::find_if(group_max.begin(), group_max.end(), [&](double x) { return x >= at_least; });
    if (g == group_max.end()) break;
    levels.push_back(std::make_unique<LeadingFixed>(*cur, in, lead));
    in = levels.back()->fix(g - group_max.begin());
    for (std::size_t f = 0; f < held.size(); ++f)
      held[f].first += levels.back()->base(f, g - group_max.begin());
    cur = &levels.back()->rest;
    prefix = prefix * groups + (g - group_max.begin());
  }
  if (held.empty()) {  // every table on the host
    std::int64_t arg = std::isnan(at_least) ? -1 : first_maximum(*cur, in, threads, at_least);
    if (arg < 0) arg = first_maximum(*cur, in, threads);
    return prefix * cur->output_size() + arg;
  }
  // The parts of the held inputs this scan reads, copied back (each one piece: the fixed leading
  // variables lead every table).
  std::vector<InputTable> scan(in.begin(), in.end());
  std::vector<std::vector<double>> copied(in.size());
  const auto t_read = std::chrono::steady_clock::now();
  for (std::size_t f = 0; f < in.size(); ++f) {
    const std::int64_t n = held_entries(f);
    if (n == 0) continue;
    copied[f].resize(n);
    device->read(held[f].bucket, held[f].first, n, copied[f].data());
    scan[f].data = copied[f].data();
    reads.entries += static_cast<double>(n);
  }
  reads.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_read).count();
  std::int64_t arg = std::isnan(at_least) ? -1 : first_maximum(*cur, scan, threads, at_least);
  if (arg < 0) arg = first_maximum(*cur, scan, threads);
  return prefix * cur->output_size() + arg;
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

void max_product_log(const BucketShape& shape, std::span<const InputTable> inputs, double* out,
                     int threads) {
  const Blocks bl(shape, inputs);
  const int nv = static_cast<int>(shape.vars.size());
  const std::int64_t n_out = shape.output_size(), n_m = shape.marg_size();
  const int nt = pass_threads(static_cast<double>(bl.size) * bl.count, inputs.size(), threads);
  auto block_max = [&](const double* x, std::int64_t n) {
    double m = kNegInf;
#pragma omp simd reduction(max : m)
    for (std::int64_t k = 0; k < n; ++k) m = x[k] > m ? x[k] : m;
    return m;
  };
  if (bl.first <= nv - shape.n_marg) {  // a block is whole output configurations
    const std::int64_t per_block = bl.size / n_m;
    in_parts(bl.count, nt, [&](int, std::int64_t lo, std::int64_t hi) {
      std::vector<double> buf(bl.size);
      for (std::int64_t b = lo; b < hi; ++b) {
        bl.products(b, buf.data());
        double* o = out + b * per_block;
        const double* x = buf.data();
        if (per_block < 8 || n_m > 64) {
          for (std::int64_t g = 0; g < per_block; ++g) o[g] = block_max(x + g * n_m, n_m);
          continue;
        }
        max_of_runs(x, per_block, n_m, o);  // an output's few terms are too few to vectorise
      }
    });
    return;
  }
  // A block is a part of one output configuration's summed configurations.
  const std::int64_t blocks_per_out = n_m / bl.size;
  if (n_out >= 4 * static_cast<std::int64_t>(nt)) {  // parallel over outputs
    in_parts(n_out, nt, [&](int, std::int64_t lo, std::int64_t hi) {
      std::vector<double> buf(bl.size);
      for (std::int64_t o = lo; o < hi; ++o) {
        double m = kNegInf;
        for (std::int64_t r = 0; r < blocks_per_out; ++r) {
          bl.products(o * blocks_per_out + r, buf.data());
          m = std::max(m, block_max(buf.data(), bl.size));
        }
        out[o] = m;
      }
    });
    return;
  }
  // Few outputs: parallel over blocks, each thread's own maxima, then the maximum of those.
  std::vector<std::vector<double>> part(nt);
  in_parts(bl.count, nt, [&](int me, std::int64_t lo, std::int64_t hi) {
    part[me].assign(n_out, kNegInf);
    std::vector<double> buf(bl.size);
    for (std::int64_t b = lo; b < hi; ++b) {
      bl.products(b, buf.data());
      double& m = part[me][b / blocks_per_out];
      m = std::max(m, block_max(buf.data(), bl.size));
    }
  });
  std::fill(out, out + n_out, kNegInf);
  for (const auto& p : part)
    for (std::size_t o = 0; o < p.size(); ++o) out[o] = std::max(out[o], p[o]);
}

namespace {

// Every bucket's output of the upward pass (maximising when `maximise`), by `upward` or run_plan;
// with `held`, those a device may hold (UpwardPass::on_device) are left there; with `combined`,
// the CPU kernels' combined inputs (UpwardPass::combined).
std::vector<LnTable> upward_pass(const Plan& plan, bool maximise, int threads,
                                 const UpwardRunner& upward,
                                 std::unique_ptr<DeviceOutputs>* held = nullptr,
                                 std::vector<CombinedInputs>* combined = nullptr) {
  std::vector<LnTable> up;
  const UpwardPass pass{maximise, &up, held, combined};
  if (upward) {
    upward(plan, pass);
  } else {
    RunOptions ro;
    ro.threads = threads;
    ro.pass = pass;
    run_plan(plan, ro);
  }
  if (up.size() != plan.tree.buckets.size())
    throw std::logic_error("posterior: the upward pass kept " + std::to_string(up.size()) +
                           " outputs for " + std::to_string(plan.tree.buckets.size()) + " buckets");
  return up;
}

}  // namespace

Marginals compute_marginals(const Plan& plan, int threads, const UpwardRunner& upward) {
  require_inputs_filled(plan);
  const ReducedModel& model = plan.model;
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int n = static_cast<int>(model.orig_card.size());
  Marginals r;
  r.ln_pe = kNegInf;
  if (!model.impossible.empty()) return r;
  // The outputs of GPU buckets may stay on the device, which then runs the downward pass.
  std::unique_ptr<DeviceOutputs> held;
  std::vector<CombinedInputs> combined;  // the upward kernels' products of small inputs
  std::vector<LnTable> up = upward_pass(plan, false, threads, upward, &held, &combined);
  combined.resize(nb);  // an upward runner that does not keep them leaves it empty
  r.ln_pe = up.back()[0] + model.log_constant();
  if (r.ln_pe == kNegInf) return r;

  // Downward: root first; ln P(e', X = x) of each tree variable over its reduced domain (e' the
  // tree's part of the evidence: the same for every x, removed by normalising).
  std::vector<LnTable> down(nb), joint(n);
  down[nb - 1] = {0.0};
  const double ln_tree = up.back()[0];  // every bucket's belief sums to it
  // Bucket b's step on the CPU: its belief (down[b] from above) summed onto each child's output
  // (divided by the child's own) and onto each eliminated variable: from the belief over the
  // smallest child output that has it where that output is small against the bucket (summed
  // after the pass), else in the pass over the bucket.
  const std::function<void(int)> on_host = [&](int b) {
    const Bucket& bk = buckets[b];
    const std::vector<int> out_vars = bk.output_vars();
    const InputTable from_above{down[b].data(), out_vars};
    BucketShape full = bucket_shape(plan, b);
    full.n_marg = 0;
    const auto in = bucket_inputs(plan, b, up, {&from_above, 1});
    std::vector<std::vector<int>> targets;
    std::vector<LnTable*> sums;
    std::vector<char> divide;
    for (int c : bk.children) targets.push_back(buckets[c].output_vars());
    std::vector<std::vector<int>> via_child(bk.children.size());  // eliminated variables
    for (std::size_t k = bk.vars.size() - bk.n_marg; k < bk.vars.size(); ++k) {
      const int v = bk.vars[k];
      int via = -1;
      for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
        const Bucket& c = buckets[bk.children[ci]];
        const std::vector<int> o = c.output_vars();
        if (std::find(o.begin(), o.end(), v) != o.end() &&
            c.log2_output <= bk.log2_states - kSmallChildLog2 &&
            (via < 0 || c.log2_output < buckets[bk.children[via]].log2_output))
          via = static_cast<int>(ci);
      }
      if (via >= 0)
        via_child[via].push_back(v);
      else
        targets.push_back({v});
    }
    // A child's message is written over its output, which the message replaces, unless its
    // eliminated variables' marginals still need the belief over the output (not divided).
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      const int c = bk.children[ci];
      divide.push_back(via_child[ci].empty() ? 1 : 0);
      sums.push_back(divide.back() ? &up[c] : &down[c]);
    }
    for (std::size_t t = bk.children.size(); t < targets.size(); ++t) {
      sums.push_back(&joint[targets[t][0]]);
      divide.push_back(0);
    }
    belief_sums(full, in, ln_tree, targets, sums, threads, divide, &combined[b]);
    combined[b] = {};
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      if (via_child[ci].empty()) continue;
      // The belief over the child's output (its message, not yet divided) is the only input.
      const int c = bk.children[ci];
      BucketShape over;
      over.vars = buckets[c].output_vars();
      for (int v : over.vars) over.card.push_back(model.card[v]);
      const InputTable belief{down[c].data(), over.vars};
      std::vector<std::vector<int>> onto;
      std::vector<LnTable*> to;
      for (int v : via_child[ci]) onto.push_back({v}), to.push_back(&joint[v]);
      belief_sums(over, {&belief, 1}, ln_tree, onto, to, threads);
    }
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      const int c = bk.children[ci];
      if (divide[ci]) {
        down[c] = std::move(up[c]);
        continue;
      }
      const auto size = static_cast<std::int64_t>(down[c].size());
      in_parts(size, pass_threads(static_cast<double>(size), 1, threads),
               [&](int, std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t s = lo; s < hi; ++s)
                   down[c][s] = up[c][s] == kNegInf ? kNegInf : down[c][s] - up[c][s];
               });
    }
    for (int c : bk.children) LnTable().swap(up[c]);
    LnTable().swap(down[b]);
  };
  bool done = false;
  if (held) {
    done = held->downward(plan, up, down, joint, on_host, threads);
    held.reset();
    if (!done) {  // the device ran out of memory on the way: all over on the host
      up = upward_pass(plan, false, threads, upward, nullptr, &combined);
      combined.resize(nb);
      for (auto& t : down) t.clear();
      for (auto& t : joint) t.clear();
      down[nb - 1] = {0.0};
    }
  }
  if (!done) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    std::vector<std::pair<double, int>> slowest;  // (seconds, bucket)
    for (int b = nb - 1; b >= 0; --b) {
      const auto tb = clock::now();
      on_host(b);
      slowest.emplace_back(std::chrono::duration<double>(clock::now() - tb).count(), b);
    }
    if (spdlog::should_log(spdlog::level::debug)) {
      std::sort(slowest.rbegin(), slowest.rend());
      std::string top;
      for (std::size_t i = 0; i < std::min<std::size_t>(slowest.size(), 5); ++i) {
        const int b = slowest[i].second;
        top +=
            fmt::format(" bucket {} {:.1f} ms ({} children, 2^{:.1f} states);", b,
                        1e3 * slowest[i].first, buckets[b].children.size(), buckets[b].log2_states);
      }
      spdlog::debug("downward pass on the host: {:.3f} s; the slowest:{}",
                    std::chrono::duration<double>(clock::now() - t0).count(), top);
    }
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

MostProbable compute_mpe(const Plan& plan, int threads, const UpwardRunner& upward) {
  require_inputs_filled(plan);
  const ReducedModel& model = plan.model;
  const auto& buckets = plan.tree.buckets;
  const int nb = static_cast<int>(buckets.size());
  const int n = static_cast<int>(model.orig_card.size());
  MostProbable r;
  r.ln_pr = kNegInf;
  if (!model.impossible.empty()) return r;
  // The outputs of GPU buckets may stay on the device (the traceback then copies back the part
  // of each it needs).
  std::unique_ptr<DeviceOutputs> held;
  std::vector<CombinedInputs> combined;  // the upward kernels' products of small inputs
  const std::vector<LnTable> up = upward_pass(plan, true, threads, upward, &held, &combined);
  combined.resize(nb);
  // A free variable in no factor multiplies P(e) by its number of values but the maximum by 1:
  // the constants without it.
  const double outside = model.log_constant() - model.free_constant;
  r.ln_pr = up.back()[0] + outside;
  if (r.ln_pr == kNegInf) return r;

  // Traceback, root first: values are indices into the reduced domains.
  std::vector<int> value(n, 0);
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  HeldReads reads;
  for (int b = nb - 1; b >= 0; --b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, b);
    // The bucket's inputs: its factors (but those the device added into a child's table it
    // holds), then its children's outputs (no host table for those the device holds).
    std::vector<InputTable> in;
    std::vector<std::pair<int, int>> held_child;  // (position in `in`, child)
    bool any_folded = false;
    {
      std::vector<char> folded(bk.factors.size(), 0);
      if (held)
        for (auto [k, child] : held->folded(b)) folded.at(k) = 1, any_folded = true;
      for (std::size_t k = 0; k < bk.factors.size(); ++k)
        if (!folded[k])
          in.push_back({plan.input_data[bk.factors[k]].data(), plan.input_scope[bk.factors[k]]});
      for (int c : bk.children) {
        if (held && held->holds(c)) held_child.emplace_back(static_cast<int>(in.size()), c);
        in.push_back({up[c].empty() ? nullptr : up[c].data(), buckets[c].output_vars()});
      }
    }
    // Where the upward kernel ran on the host and multiplied many small inputs together, the
    // scan reads its tables (the same inputs: nothing folded or held).
    const bool reuse = !combined[b].empty() && !any_folded && held_child.empty();
    if (reuse) in = combined[b].over(in);
    // The bucket at its output's values (fixed above), maximised over its eliminated variables:
    // the first configuration attaining the maximum. The held children's parts at those values
    // are read where they are.
    LeadingFixed at_output(shape, in, static_cast<int>(bk.vars.size()) - bk.n_marg);
    const std::int64_t l = config_index(bk.output_vars(), model.card, value);
    const auto fixed = at_output.fix(l);
    std::vector<DeviceOutputs::HeldPart> parts;
    if (!held_child.empty()) {
      parts.resize(in.size());
      for (const auto& [p, c] : held_child) parts[p] = {c, at_output.base(p, l)};
    }
    const double known = up[b].empty() ? std::nan("") : up[b][l];
    // Many small inputs on the host are multiplied together first, as the upward kernel does,
    // where the scan is larger than the tables that combining writes (at most 2^14 entries
    // each): a scan of a few configurations is cheaper alone.
    CombinedInputs own;
    const bool combine = !reuse && parts.empty() &&
                         at_output.rest.output_size() >= (std::int64_t{1} << 16) &&
                         combine_small_inputs(at_output.rest, fixed, own);
    std::int64_t arg = traceback_argmax(at_output.rest, combine ? own.over(fixed) : fixed,
                                        std::move(parts), threads, held.get(), reads, known);
    for (std::size_t k = bk.vars.size(); k-- > bk.vars.size() - bk.n_marg;) {
      const int v = bk.vars[k];
      value[v] = static_cast<int>(arg % model.card[v]);
      arg /= model.card[v];
    }
  }
  spdlog::debug(
      "mpe: traceback {:.3f} s; {:.3g} entries of tables held on the device copied in "
      "{:.3f} s; {} scans narrowed down on the device",
      std::chrono::duration<double>(clock::now() - t_start).count(), reads.entries, reads.seconds,
      reads.device_scans);
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

Marginals compute_marginals(ConditionedPlan& cp, int threads, const UpwardRunner& upward) {
  if (!cp.conditioned()) return compute_marginals(cp.plan, threads, upward);
  const ReducedModel& model = cp.plan.model;
  // Running sums of P(e, X = x) / e^top over the slices, top the largest ln P(e, C = c) so far.
  Marginals r;
  double top = kNegInf;
  for (std::int64_t s = 0; s < cp.cond.slices; ++s) {
    if (!fill_slice(cp, s)) continue;
    Marginals m = compute_marginals(cp.plan, threads, upward);
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

MostProbable compute_mpe(ConditionedPlan& cp, int threads, const UpwardRunner& upward) {
  if (!cp.conditioned()) return compute_mpe(cp.plan, threads, upward);
  MostProbable best;
  best.ln_pr = kNegInf;
  for (std::int64_t s = 0; s < cp.cond.slices; ++s) {
    if (!fill_slice(cp, s)) continue;
    MostProbable m = compute_mpe(cp.plan, threads, upward);
    if (!(m.ln_pr > best.ln_pr)) continue;
    const std::vector<int> x = slice_values(cp.cond, s);
    for (std::size_t i = 0; i < x.size(); ++i)
      m.assignment[cp.cond.vars[i]] = cp.plan.model.kept[cp.cond.vars[i]][x[i]];
    best = std::move(m);
  }
  return best;
}

double posterior_peak_bytes(const Plan& plan, bool marginals) {
  const auto& buckets = plan.tree.buckets;
  const double threads = omp_get_max_threads();
  double outputs = 0, combined = 0, pass = 0;
  for (std::size_t bi = 0; bi < buckets.size(); ++bi) {
    const Bucket& b = buckets[bi];
    outputs += 8.0 * std::exp2(b.log2_output);
    // The upward kernel's products of many small inputs, kept for the second pass.
    if (b.factors.size() + b.children.size() > 4) {
      std::vector<InputTable> scopes;
      for (int f : b.factors) scopes.push_back({nullptr, plan.input_scope[f]});
      for (int c : b.children) scopes.push_back({nullptr, buckets[c].output_vars()});
      combined += combined_bytes(bucket_shape(plan, static_cast<int>(bi)), scopes);
    }
    // A pass over the bucket (Blocks): offsets of each input within a block, the sum of the
    // inputs that are the same in every block (the downward pass also the message from above),
    // and each thread's block of products, local sums, member sums and blocks' total (under
    // four blocks). The downward pass adds the tables it sums the belief with
    // (belief_sums_bytes: the children's outputs and the eliminated variables as targets), each
    // thread's sums of the belief onto them, and their total (twice where several targets
    // share their variables: summed once, then copied); the traceback at most five
    // tables of a block's size per child and eliminated variable.
    const double tables = b.factors.size() + 2 + b.children.size();
    double onto = 0, setup = 0;
    for (int c : b.children) onto += 8.0 * std::exp2(buckets[c].log2_output);
    for (std::size_t k = b.vars.size() - b.n_marg; k < b.vars.size(); ++k)
      onto += 8.0 * plan.model.card[b.vars[k]];
    if (marginals) {
      std::vector<std::vector<int>> targets;
      for (int c : b.children) targets.push_back(buckets[c].output_vars());
      for (std::size_t k = b.vars.size() - b.n_marg; k < b.vars.size(); ++k)
        targets.push_back({b.vars[k]});
      BucketShape full = bucket_shape(plan, static_cast<int>(bi));
      full.n_marg = 0;
      setup = detail::belief_sums_bytes(full, targets) + (threads + 2) * onto;
    } else {
      setup = 8.0 * kBlock * 5.0 * static_cast<double>(b.children.size() + b.n_marg);
    }
    pass = std::max(pass, 8.0 * kBlock * (tables + 4 * threads) + setup);
  }
  MemoryEstimate m = plan.memory;
  // MPE: the upward pass's threads keep their own maxima where a bucket has fewer than 4 outputs
  // a thread.
  m.intermediate_bytes =
      combined + (marginals ? 2 * outputs + pass : outputs + pass + 32.0 * threads * threads);
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
