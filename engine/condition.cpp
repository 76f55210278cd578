#include "engine/condition.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/errors.hpp"
#include "engine/util.hpp"

namespace kinfer {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// More slices than this is no plan (each slice costs at least a pass over the tree).
constexpr double kMaxLog2Slices = 40;

// The accountant's figures for conditioning set `in_c` on the structure of `plan` (its tree
// is not rebuilt: a bucket loses its conditioned variables, which is what the rebuilt tree
// computes, up to merges that only lower it).
struct SliceCost {
  double running = 0;   // host bytes while a slice runs
  double planning = 0;  // host bytes while planning
  double device = 0;    // device bytes while a slice runs on a GPU (MemoryEstimate::device_bytes)
  double flops = 0;     // all slices
  double log2_slices = 0;
  double intermediate_total = 0;  // all intermediate tables of a slice (a tie-breaker)
  int peak_step = -1;             // bucket at whose allocation the intermediates peak
};

SliceCost slice_cost(const Plan& plan, const std::vector<char>& in_c) {
  const auto& card = plan.model.card;
  const auto& buckets = plan.tree.buckets;
  const MemoryEstimate& m = plan.memory;
  SliceCost c;
  for (std::size_t v = 0; v < in_c.size(); ++v)
    if (in_c[v]) c.log2_slices += std::log2(static_cast<double>(card[v]));
  double slice_inputs = 0;
  for (const auto& f : plan.model.factors) {
    double n = 1;
    for (int v : f.scope)
      if (!in_c[v]) n *= card[v];
    slice_inputs += 8.0 * n;
  }
  std::vector<double> out(buckets.size());
  double live = 0, peak = 0, scratch = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bk = buckets[b];
    double l2o = bk.log2_output, l2s = bk.log2_states, l2c = c.log2_slices;
    for (std::size_t k = 0; k < bk.vars.size(); ++k)
      if (in_c[bk.vars[k]]) {
        const double l = std::log2(static_cast<double>(card[bk.vars[k]]));
        l2s -= l;
        l2c -= l;  // this bucket does not repeat over its own conditioned variables
        if (k + bk.n_marg < bk.vars.size()) l2o -= l;
      }
    out[b] = l2o;
    scratch = std::max(
        scratch, kernel_scratch_bytes(static_cast<int>(bk.factors.size() + bk.children.size()), l2s,
                                      m.threads));
    c.flops += std::exp2(l2s + c.log2_slices) * (bk.factors.size() + bk.children.size() + 2.0);
    live += 8.0 * std::exp2(l2o);
    c.intermediate_total += 8.0 * std::exp2(l2o);
    if (live > peak) peak = live, c.peak_step = static_cast<int>(b);
    for (int ch : bk.children) live -= 8.0 * std::exp2(out[ch]);
  }
  // source: the unconditioned tables (m.input_bytes) stay alive while the slices run
  const double kept = m.tables_kept ? m.network_bytes : 0;
  c.running =
      m.process_bytes + m.input_bytes + slice_inputs + peak + scratch + m.device_host_bytes + kept;
  c.planning = m.process_bytes + m.network_bytes + m.input_bytes + slice_inputs;
  c.device = slice_inputs + peak;
  return c;
}

// Output variables of the tables alive when bucket `step` allocates its output.
std::vector<int> alive_vars(const TaskTree& tree, int step) {
  std::vector<char> done(tree.buckets.size(), 0);  // consumed by a bucket at or before step
  for (int b = 0; b < step; ++b)
    for (int ch : tree.buckets[b].children) done[ch] = 1;
  std::vector<int> vars;
  for (int b = 0; b <= step; ++b)
    if (!done[b]) {
      const auto ov = tree.buckets[b].output_vars();
      vars.insert(vars.end(), ov.begin(), ov.end());
    }
  std::sort(vars.begin(), vars.end());
  vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
  return vars;
}

}  // namespace

std::vector<int> choose_conditioning(const Plan& plan, double budget, bool& feasible,
                                     double device_budget) {
  const int n = static_cast<int>(plan.model.card.size());
  std::vector<char> in_c(n, 0);
  std::vector<int> chosen;
  SliceCost cur = slice_cost(plan, in_c);
  if (budget <= 0) budget = std::numeric_limits<double>::infinity();
  auto fits = [&](const SliceCost& c) {
    return c.running <= budget && c.planning <= budget &&
           (device_budget <= 0 || c.device <= device_budget);
  };
  // Memory measure: the host peak over its budget, or the device's, whichever is further over
  // (ties broken by all the intermediate tables of a slice).
  auto measure = [&](const SliceCost& c) {
    double over = c.running / budget;
    if (device_budget > 0) over = std::max(over, c.device / device_budget);
    return over * (std::isinf(budget) ? device_budget : budget) + 1e-3 * c.intermediate_total;
  };
  feasible = true;
  while (!fits(cur)) {
    if (cur.planning > budget) break;  // conditioning cannot shrink the tables it is cut from
    std::vector<int> cand = alive_vars(plan.tree, cur.peak_step);
    if (!plan.model.factors.empty()) {  // the largest input table's variables too
      const LogFactor* big = &plan.model.factors[0];
      double bn = 0;
      for (const auto& f : plan.model.factors) {
        double s = 1;
        for (int v : f.scope) s *= plan.model.card[v];
        if (s > bn) bn = s, big = &f;
      }
      cand.insert(cand.end(), big->scope.begin(), big->scope.end());
    }
    int best = -1;
    double best_score = 0;
    SliceCost best_cost;
    for (int v : cand) {
      if (in_c[v] || plan.model.card[v] < 2) continue;
      in_c[v] = 1;
      const SliceCost c = slice_cost(plan, in_c);
      in_c[v] = 0;
      const double freed = measure(cur) - measure(c);
      if (freed <= 0 || c.log2_slices > kMaxLog2Slices) continue;
      const double extra = std::max(c.flops - cur.flops, 1e-9 * cur.flops + 1);
      const double score = freed / extra;
      if (best < 0 || score > best_score || (score == best_score && v < best))
        best = v, best_score = score, best_cost = c;
    }
    if (best < 0) break;
    in_c[best] = 1;
    chosen.push_back(best);
    cur = best_cost;
  }
  feasible = fits(cur);
  // A variable chosen early can become unnecessary once later ones cut the same tables: drop
  // every one whose removal still fits, most expensive in extra work first.
  if (feasible && chosen.size() > 1) {
    bool dropped = true;
    while (dropped) {
      dropped = false;
      int drop = -1;
      double least = 0;
      for (int v : chosen) {
        in_c[v] = 0;
        const SliceCost c = slice_cost(plan, in_c);
        in_c[v] = 1;
        if (fits(c) && (drop < 0 || c.flops < least)) drop = v, least = c.flops;
      }
      if (drop >= 0) {
        in_c[drop] = 0;
        chosen.erase(std::find(chosen.begin(), chosen.end(), drop));
        dropped = true;
      }
    }
  }
  // slices enumerate variables in increasing id (a fixed order: answers independent of how
  // they were found)
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

ConditionedPlan condition_plan(Plan plan, const std::vector<int>& vars, const PlanOptions& opt) {
  ConditionedPlan cp;
  const double unconditioned_flops = plan.flops;
  const double unconditioned_peak = plan.memory.peak_bytes;
  if (vars.empty()) {
    cp.plan = std::move(plan);
    fill_inputs(cp.plan, opt);
    cp.cond.flops = cp.cond.unconditioned_flops = unconditioned_flops;
    cp.cond.slice_peak_bytes = cp.cond.unconditioned_peak_bytes = unconditioned_peak;
    return cp;
  }
  const int n = static_cast<int>(plan.model.card.size());
  std::vector<char> in_c(n, 0);
  for (int v : vars) in_c.at(v) = 1;
  cp.cond.vars = vars;
  cp.cond.slices = 1;
  for (int v : vars) {
    cp.cond.card.push_back(plan.model.card[v]);
    cp.cond.slices *= plan.model.card[v];
  }
  // The model with C removed: every factor loses C from its scope (its table is cut per
  // slice from the source); factors over C alone become per-slice constants.
  cp.source = std::move(plan.model.factors);
  plan.model.factors.clear();
  cp.base_constants = plan.model.constants;
  double source_bytes = 0;
  for (std::size_t i = 0; i < cp.source.size(); ++i) {
    source_bytes += 8.0 * cp.source[i].logv.size();
    LogFactor sf;
    sf.origin = cp.source[i].origin;
    for (int v : cp.source[i].scope)
      if (!in_c[v]) sf.scope.push_back(v);
    if (sf.scope.empty()) {
      cp.constant_sources.push_back(static_cast<int>(i));
    } else {
      plan.model.factors.push_back(std::move(sf));
      cp.source_of.push_back(static_cast<int>(i));
    }
  }
  std::vector<int> order;
  for (int v : plan.order.order)
    if (!in_c[v]) order.push_back(v);
  plan.order.order = std::move(order);
  structure(plan, opt);
  // The sliced model holds no tables of its own: the source does, in both phases.
  plan.memory.model_bytes = 0;
  plan.memory.source_bytes = source_bytes;
  update_peak(plan.memory);
  cp.plan = std::move(plan);
  Plan& p = cp.plan;
  p.input_data.resize(p.model.factors.size());
  p.input_scope.resize(p.model.factors.size());
  for (std::size_t j = 0; j < p.model.factors.size(); ++j) {
    p.input_scope[j] = p.model.factors[j].scope;
    sort_by_rank(p.input_scope[j], p.tree.rank);
    double sz = 1;
    for (int v : p.input_scope[j]) sz *= p.model.card[v];
    p.input_data[j].resize(static_cast<std::size_t>(sz));
  }
  cp.cond.flops = p.flops * static_cast<double>(cp.cond.slices);
  cp.cond.unconditioned_flops = unconditioned_flops;
  cp.cond.unconditioned_peak_bytes = unconditioned_peak;
  cp.cond.slice_peak_bytes = p.memory.peak_bytes;
  fill_slice(cp, 0);
  return cp;
}

ConditionedPlan fit_plan(Plan plan, const PlanOptions& opt, const std::string& who,
                         const std::string& advice) {
  const double limit = opt.max_memory_bytes;
  const double device =
      opt.device_budget && plan.model.impossible.empty() ? opt.device_budget(plan) : 0;
  const bool host_fits = limit <= 0 || plan.memory.peak_bytes <= limit;
  if ((host_fits && (device <= 0 || plan.memory.device_bytes <= device)) ||
      !plan.model.impossible.empty())
    return condition_plan(std::move(plan), {}, opt);
  bool feasible = false;
  ConditionedPlan cp = condition_to_fit(plan, limit, opt, feasible, device);
  if (!feasible) {
    check_memory(plan, opt, who, advice);  // throws, with the unconditioned numbers
    throw ResourceError((who.empty() ? "" : who + ": ") + "the plan needs " +
                        human_bytes(plan.memory.device_bytes) + " of device memory, over the " +
                        human_bytes(device) + " of --gpu-memory, and conditioning cannot fit it. " +
                        advice);
  }
  cp.cond.choice = "the order found, conditioned";
  return cp;
}

namespace {

// condition_to_fit's and recondition's loop: variables chosen on `choose_on` (whose tree has
// `fixed` out already), `cut_from` conditioned on `fixed` and them, until the compiled plan fits.
// The choice is made on the tree before conditioning; the tree rebuilt without the conditioned
// variables can merge buckets differently (more inputs in one bucket, more kernel scratch), so
// the compiled plan's own estimate decides, and the target tightens by what it missed.
// `need_new`: a choice of no variable (choose_on fits as it is) is not feasible.
ConditionedPlan fit_by_conditioning(const Plan& choose_on, const Plan& cut_from,
                                    const std::vector<int>& fixed, double budget,
                                    double device_budget, const PlanOptions& opt, bool need_new,
                                    bool& feasible) {
  double target = budget, device_target = device_budget;
  for (int round = 0; round < 6; ++round) {
    std::vector<int> vars = choose_conditioning(choose_on, target, feasible, device_target);
    if (!feasible || (need_new && vars.empty())) break;
    vars.insert(vars.begin(), fixed.begin(), fixed.end());
    ConditionedPlan cp = condition_plan(cut_from, vars, opt);
    const MemoryEstimate& m = cp.plan.memory;
    const bool host_ok = budget <= 0 || m.peak_bytes <= budget;
    const bool device_ok = device_budget <= 0 || m.device_bytes <= device_budget;
    if (host_ok && device_ok) return cp;
    if (!host_ok) target -= 1.1 * (m.peak_bytes - budget) + 4096;
    if (!device_ok) device_target -= 1.1 * (m.device_bytes - device_budget) + 4096;
  }
  feasible = false;
  return {};
}

}  // namespace

ConditionedPlan recondition(const ConditionedPlan& cp, double host_budget, double device_budget,
                            const PlanOptions& opt, bool& feasible) {
  feasible = false;
  if (!cp.plan.model.impossible.empty() || cp.plan.tree.buckets.empty()) return {};
  // The tables every slice is cut from, over the whole reduced model.
  Plan base = cp.plan;
  base.input_data.clear();
  base.input_scope.clear();
  if (cp.conditioned()) {
    base.model.factors = cp.source;
    base.model.constants = cp.base_constants;
  } else {
    if (cp.plan.input_data.size() != cp.plan.model.factors.size()) return {};
    for (std::size_t j = 0; j < cp.plan.input_data.size(); ++j) {
      base.model.factors[j].scope = cp.plan.input_scope[j];  // restructure() only permutes
      base.model.factors[j].logv = cp.plan.input_data[j];
    }
  }
  ConditionedPlan out = fit_by_conditioning(cp.plan, base, cp.cond.vars, host_budget,
                                            device_budget, opt, true, feasible);
  if (!feasible) return {};
  out.cond.unconditioned_flops = cp.conditioned() ? cp.cond.unconditioned_flops : cp.plan.flops;
  out.cond.unconditioned_peak_bytes =
      cp.conditioned() ? cp.cond.unconditioned_peak_bytes : cp.plan.memory.peak_bytes;
  out.cond.choice =
      cp.cond.choice.empty() ? std::string("the order found, conditioned") : cp.cond.choice;
  out.cond.choice += fmt::format(
      "; conditioned on {} more variable(s) at run time, for {} of device memory",
      out.cond.vars.size() - cp.cond.vars.size(), human_bytes(device_budget));
  return out;
}

const std::vector<LogFactor>& model_factors(const ConditionedPlan& cp) {
  return cp.conditioned() ? cp.source : cp.plan.model.factors;
}

std::vector<std::pair<int, double>>& model_constants(ConditionedPlan& cp) {
  return cp.conditioned() ? cp.base_constants : cp.plan.model.constants;
}

void refill_inputs(ConditionedPlan& cp, std::vector<InputTableRefill> tables) {
  if (!cp.conditioned()) return refill_inputs(cp.plan, std::move(tables));
  for (const auto& t : tables)  // all checked before any is stored
    if (t.factor >= cp.source.size() || t.logv.size() != cp.source[t.factor].logv.size())
      throw std::logic_error("refill_inputs: a new table of factor " + std::to_string(t.factor) +
                             " does not match the conditioned plan's source; build a new plan");
  for (auto& t : tables) cp.source[t.factor].logv = std::move(t.logv);
}

bool fill_slice(ConditionedPlan& cp, std::int64_t s) {
  if (!cp.conditioned()) return cp.plan.model.impossible.empty();
  Plan& p = cp.plan;
  const auto& card = p.model.card;
  const int nc = static_cast<int>(cp.cond.vars.size());
  std::vector<int> value_of(card.size(), -1);
  for (int i = nc - 1; i >= 0; --i) {
    value_of[cp.cond.vars[i]] = static_cast<int>(s % cp.cond.card[i]);
    s /= cp.cond.card[i];
  }
  // offset of the conditioned values in a source table, and strides of its other variables
  auto layout = [&](const LogFactor& f, std::vector<std::int64_t>& stride) {
    std::int64_t base = 0, st = 1;
    stride.assign(f.scope.size(), 0);
    for (std::size_t k = f.scope.size(); k-- > 0;) {
      const int v = f.scope[k];
      stride[k] = st;
      if (value_of[v] >= 0) base += value_of[v] * st;
      st *= card[v];
    }
    return base;
  };
  bool possible = true;
  p.model.constants = cp.base_constants;
  std::vector<std::int64_t> stride;
  for (int i : cp.constant_sources) {
    const LogFactor& f = cp.source[i];
    const double x = f.logv[layout(f, stride)];
    p.model.constants.push_back({f.origin, x});
    possible &= x != kNegInf;
  }
  if (!possible) return false;
  for (std::size_t j = 0; j < p.input_data.size(); ++j) {
    const LogFactor& f = cp.source[cp.source_of[j]];
    const std::int64_t base = layout(f, stride);
    const std::vector<int>& scope = p.input_scope[j];  // output order, last fastest
    const int k = static_cast<int>(scope.size());
    std::vector<std::int64_t> st(k);
    for (int a = 0; a < k; ++a)
      st[a] = stride[std::find(f.scope.begin(), f.scope.end(), scope[a]) - f.scope.begin()];
    std::vector<int> digit(k, 0);
    std::int64_t src = base;
    double* out = p.input_data[j].data();
    const std::size_t size = p.input_data[j].size();
    bool any = false;
    for (std::size_t e = 0; e < size; ++e) {
      out[e] = f.logv[src];
      any |= out[e] != kNegInf;
      for (int a = k - 1; a >= 0; --a) {
        src += st[a];
        if (++digit[a] < card[scope[a]]) break;
        src -= st[a] * digit[a];
        digit[a] = 0;
      }
    }
    if (!any) return false;  // a table zero everywhere: P(e, C = this slice) = 0
  }
  return true;
}

namespace {
// log-sum-exp in slice order: the same sum whatever ran each slice and when
double log_sum_exp_in_order(const std::vector<double>& value) {
  double mx = kNegInf;
  for (double v : value) mx = std::max(mx, v);
  if (mx == kNegInf) return kNegInf;
  double acc = 0;
  for (double v : value) acc += std::exp(v - mx);
  return mx + std::log(acc);
}
}  // namespace

double run_conditioned(ConditionedPlan& cp, const std::function<double(const Plan&)>& run_slice,
                       const std::function<void(std::int64_t, double)>& on_slice,
                       SliceDealer* dealer) {
  if (!cp.conditioned() && !dealer) {
    const double v = cp.plan.model.impossible.empty() ? run_slice(cp.plan) : kNegInf;
    if (on_slice) on_slice(0, v);
    return v;
  }
  const std::int64_t slices = cp.conditioned() ? cp.cond.slices : 1;
  std::vector<double> value(slices, kNegInf);
  std::vector<char> computed(slices, 0);
  for (std::int64_t s = 0; s < slices; ++s) {
    if (dealer && !dealer->mine(static_cast<std::uint64_t>(s))) continue;
    computed[s] = 1;
    if (!cp.conditioned())
      value[s] = cp.plan.model.impossible.empty() ? run_slice(cp.plan) : kNegInf;
    else if (fill_slice(cp, s))
      value[s] = run_slice(cp.plan);
    if (on_slice) on_slice(s, value[s]);
  }
  if (dealer) dealer->combine(value, computed);
  return log_sum_exp_in_order(value);
}

double run_conditioned_lanes(ConditionedPlan& cp, int lanes,
                             const std::function<double(int, const Plan&)>& run_slice,
                             SliceDealer* dealer, std::vector<int>* lane_slices) {
  const std::int64_t slices = cp.conditioned() ? cp.cond.slices : 1;
  if (lane_slices) lane_slices->assign(std::max(1, lanes), 0);
  if (lanes <= 1 || !cp.conditioned() || slices < 2) {
    int ran = 0;
    const double v = run_conditioned(
        cp, [&](const Plan& p) { return ++ran, run_slice(0, p); }, {}, dealer);
    if (lane_slices) (*lane_slices)[0] = ran;
    return v;
  }
  std::vector<std::int64_t> mine;  // this process's slices, in order
  for (std::int64_t s = 0; s < slices; ++s)
    if (!dealer || dealer->mine(static_cast<std::uint64_t>(s))) mine.push_back(s);
  std::vector<double> value(slices, kNegInf);
  std::vector<char> computed(slices, 0);
  for (std::int64_t s : mine) computed[s] = 1;
  // Lane 0 fills the caller's plan, the others copies (each lane's inputs are its own).
  std::vector<ConditionedPlan> copies(lanes - 1, cp);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> error(lanes);
  std::vector<int> ran(lanes, 0);
  auto lane = [&](int k) {
    ConditionedPlan& c = k == 0 ? cp : copies[k - 1];
    try {
      for (std::size_t i; !failed && (i = next++) < mine.size();) {
        const std::int64_t s = mine[i];
        ++ran[k];
        if (fill_slice(c, s)) value[s] = run_slice(k, c.plan);
      }
    } catch (...) {
      error[k] = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (int k = 1; k < lanes; ++k) threads.emplace_back(lane, k);
  lane(0);
  for (auto& t : threads) t.join();
  for (const auto& e : error)
    if (e) std::rethrow_exception(e);
  if (lane_slices) *lane_slices = ran;
  if (dealer) dealer->combine(value, computed);
  return log_sum_exp_in_order(value);
}

ConditionedPlan condition_to_fit(const Plan& plan, double budget, const PlanOptions& opt,
                                 bool& feasible, double device_budget) {
  return fit_by_conditioning(plan, plan, {}, budget, device_budget, opt, false, feasible);
}

ConditionedPlan make_conditioned_plan(const Network& net, const Evidence& ev,
                                      const PlanOptions& opt) {
  using clock = std::chrono::steady_clock;
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  OrderedModel om = order_model(net, ev, opt);
  const auto t0 = clock::now();
  const std::vector<std::vector<int>> scopes = [&] {
    std::vector<std::vector<int>> s;
    for (const auto& f : om.model.factors) s.push_back(f.scope);
    return s;
  }();
  const double limit = opt.max_memory_bytes;
  Plan best = plan_structure(net, ev, opt, om.model, std::move(om.order));
  const auto t1 = clock::now();
  const double device =
      opt.device_budget && best.model.impossible.empty() ? opt.device_budget(best) : 0;
  auto fits = [&](const Plan& p) {
    return (limit <= 0 || p.memory.peak_bytes <= limit) &&
           (device <= 0 || p.memory.device_bytes <= device);
  };
  if (fits(best) || !best.model.impossible.empty()) {
    ConditionedPlan cp = condition_plan(std::move(best), {}, opt);
    spdlog::debug("plan: task tree and estimate {:.3f} s, inputs {:.3f} s", secs(t0, t1),
                  secs(t1, clock::now()));
    return cp;
  }

  // The best order does not fit. Candidate 1: it, conditioned to fit.
  const double unlimited_flops = best.flops, unlimited_peak = best.memory.peak_bytes;
  const MemoryEstimate unlimited_memory = best.memory;
  struct Candidate {
    ConditionedPlan cp;
    bool feasible = false;
    double flops = std::numeric_limits<double>::infinity();
  };
  auto fit = [&](const Plan& p) {
    Candidate c;
    c.cp = condition_to_fit(p, limit, opt, c.feasible, device);
    if (c.feasible) c.flops = c.cp.cond.flops;
    return c;
  };
  const auto ta = clock::now();
  Candidate a = fit(best);
  const auto tb = clock::now();
  spdlog::debug("plan: the best order conditioned to fit in {:.3f} s ({})", secs(ta, tb),
                a.feasible ? fmt::format("{:.3g} FLOP", a.flops) : std::string("does not fit"));
  // Candidate 3, for a device whose speed the search predicted (OrderOptions::predict_seconds):
  // the order the engine's own objective (total state space) finds. The device's objective
  // favours fewer, larger buckets, and such an order can keep many large tables alive at once:
  // on linkage_11 the H200's order needs 6.1 GiB where the state-space order needs 1.2 GiB, so
  // under --gpu-memory 256M the first took 2048 slices (44x its work) and this one 8 (its
  // compute as short as the unconditioned plan's, BENCHMARKS.md multi-gpu). It is the search
  // `--device cpu` runs, with its full effort (the same options, so the same order cache entry).
  // That search takes seconds on a large network (pedigree50 on the H200: 2-9 s more planning),
  // so it runs only when conditioning the device's order at least kStateSpaceOverhead-folds its
  // work, the sign that the device's order keeps too much alive for the budget (linkage_11 under
  // 256M: 45-fold; pedigree50 under the H200's own memory: 0.1%).
  constexpr double kStateSpaceOverhead = 4;
  Candidate d;
  const bool search_state_space =
      device > 0 && static_cast<bool>(opt.order.predict_seconds) &&
      (!a.feasible || a.flops > kStateSpaceOverhead * unlimited_flops);
  if (search_state_space) {
    const auto td = clock::now();
    OrderOptions oo = opt.order;
    oo.predict_seconds = nullptr;
    oo.predict_key.clear();
    oo.max_table_entries = std::numeric_limits<double>::infinity();
    OrderResult r = find_order_cached(net.num_vars(), om.model, scopes, oo, opt.order_cache_dir);
    d = fit(plan_structure(net, ev, opt, om.model, std::move(r)));
    spdlog::debug("plan: a search by total state space {:.3f} s, conditioned to fit ({})",
                  secs(td, clock::now()),
                  d.feasible ? fmt::format("{:.3g} FLOP", d.flops) : std::string("does not fit"));
  }
  // Candidate 2: the order a search under the limit finds (largest table bounded by it),
  // conditioned too when its other tables still do not fit. Not searched when candidate 1 or 3
  // costs at most kConditionedSlack more than the unconditioned order: that search runs over a
  // subset of the orders the first one searched, with the same effort, so it has little to win,
  // and it is as long as the first (pedigree50 under 60G on the H100 machine: candidate 1 0.1%
  // over, and a 0.8 s search under the limit that found no order within it).
  constexpr double kConditionedSlack = 0.05;
  const bool search_limited = std::min(a.flops, d.flops) > (1 + kConditionedSlack) * unlimited_flops;
  Candidate b;
  if (search_limited) {
    OrderOptions oo = opt.order;
    const double bound = limit > 0 && device > 0 ? std::min(limit, device)
                         : limit > 0             ? limit
                                                 : device;
    oo.max_table_entries = bound / 8.0;
    OrderResult r = find_order_cached(net.num_vars(), om.model, scopes, oo, opt.order_cache_dir);
    const auto tc = clock::now();
    if (r.fits) b = fit(plan_structure(net, ev, opt, om.model, std::move(r)));
    spdlog::debug("plan: a search under the limit {:.3f} s ({}), conditioned to fit {:.3f} s ({})",
                  secs(tb, tc), r.fits ? "found one" : "none fits", secs(tc, clock::now()),
                  b.feasible ? fmt::format("{:.3g} FLOP", b.flops) : std::string("does not fit"));
  }
  if (!a.feasible && !b.feasible && !d.feasible) {
    const MemoryEstimate& m = unlimited_memory;
    if (device > 0 && (limit <= 0 || unlimited_peak <= limit))
      throw ResourceError("the plan needs " + human_bytes(m.device_bytes) +
                          " of device memory, over the " + human_bytes(device) +
                          " of --gpu-memory, and conditioning cannot fit it: raise --gpu-memory "
                          "or run with --device cpu");
    std::ostringstream s;
    s << "estimated peak memory " << human_bytes(unlimited_peak) << " exceeds the limit "
      << human_bytes(limit) << ", and conditioning cannot fit it: the program ("
      << human_bytes(m.process_bytes) << "), the network's tables (" << human_bytes(m.network_bytes)
      << ") and the reduced tables every slice is cut from (" << human_bytes(m.input_bytes)
      << ") alone need " << human_bytes(m.process_bytes + m.network_bytes + m.input_bytes)
      << " before any slice's inputs and tables; raise --max-memory or run on a machine with "
         "more memory";
    throw ResourceError(s.str());
  }
  // The least estimated work wins (ties: the earlier candidate).
  struct Named {
    Candidate* c;
    const char* name;
    bool tried;
  };
  std::vector<Named> all = {{&a, "best order without a limit", true},
                            {&d, "order searched by total state space", search_state_space},
                            {&b, "order searched under the limit", search_limited}};
  std::size_t w = 0;
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i].c->flops < all[w].c->flops) w = i;
  Candidate& c = *all[w].c;
  std::ostringstream why;
  why << all[w].name << (c.cp.conditioned() ? ", conditioned" : "") << " (estimated " << c.flops
      << " FLOP; ";
  bool first = true;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i == w || !all[i].tried) continue;
    why << (first ? "" : "; ") << all[i].name << ": ";
    first = false;
    if (all[i].c->feasible)
      why << all[i].c->flops << " FLOP" << (all[i].c->cp.conditioned() ? " conditioned" : "");
    else
      why << "does not fit";
  }
  if (!search_limited)
    why << (first ? "" : "; ") << "the order under the limit not searched: this one is within "
        << fmt::format("{:.0f}% of the order without conditioning, {:+.1f}%",
                       100 * kConditionedSlack, 100 * (c.flops / unlimited_flops - 1));
  why << ")";
  ConditionedPlan cp = std::move(c.cp);
  cp.cond.unconditioned_flops = unlimited_flops;
  cp.cond.unconditioned_peak_bytes = unlimited_peak;
  cp.cond.choice = why.str();
  return cp;
}

ConditionedPlan rebuild_conditioned_plan(const Network& net, const Evidence& ev,
                                         const PlanOptions& opt, std::vector<int> order,
                                         const std::vector<int>& vars,
                                         const std::string& heuristic) {
  ReducedModel model = reduce(net, ev, opt.reduce);
  // A conditioned plan's order lacks the conditioned variables; condition_plan removes them
  // from the order again wherever they stand, so they go last.
  for (int v : vars)
    if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
  std::vector<std::vector<int>> scopes;
  for (const auto& f : model.factors) scopes.push_back(f.scope);
  const int n = static_cast<int>(model.card.size());
  std::vector<char> scoped(n, 0), seen(n, 0);
  std::size_t n_scoped = 0;
  for (const auto& sc : scopes)
    for (int v : sc)
      if (!scoped[v]) scoped[v] = 1, ++n_scoped;
  bool valid = order.size() == n_scoped;
  for (int v : order) {
    valid = valid && v >= 0 && v < n && scoped[v] && !seen[v];
    if (valid) seen[v] = 1;
  }
  for (int v : vars) valid = valid && v >= 0 && v < n;
  if (!valid)
    throw ResourceError("the order given (" + heuristic + ", " + std::to_string(order.size()) +
                        " variables) is not one of this network's reduced model (" +
                        std::to_string(n_scoped) + " variables): not the same network or evidence");
  OrderResult r;
  r.stats = evaluate_order(n, model.card, scopes, order);
  r.order = std::move(order);
  r.heuristic = heuristic;
  return condition_plan(plan_structure(net, ev, opt, std::move(model), std::move(r)), vars, opt);
}

}  // namespace kinfer
