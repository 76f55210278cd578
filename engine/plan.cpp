#include "engine/plan.hpp"

#include <cmath>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <omp.h>
#include <spdlog/spdlog.h>

#include "engine/errors.hpp"
#include "engine/memory_limit.hpp"
#include "engine/util.hpp"

namespace kinfer {

namespace {
// A key for everything the elimination order depends on: the reduced structure (domain sizes
// and factor scopes after evidence and value elimination) and the heuristic.
// The order cache's key: the reduced structure and every option the search's answer depends on
// (the search is reproducible, so a cached order is the one it would find again).
std::string structure_key(const ReducedModel& m, const OrderOptions& o) {
  std::uint64_t x = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) x = (x ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  auto mix_double = [&](double d) { mix(std::bit_cast<std::uint64_t>(d)); };
  mix(m.card.size());
  for (int c : m.card) mix(static_cast<std::uint64_t>(c));
  mix(m.factors.size());
  for (const auto& f : m.factors) {
    mix(f.scope.size());
    for (int v : f.scope) mix(static_cast<std::uint64_t>(v));
  }
  mix(static_cast<std::uint64_t>(o.heuristic));
  if (o.heuristic == OrderHeuristic::Stochastic) {
    mix(kOrderSearchVersion);
    mix(o.seed);
    mix_double(o.time_budget);
    mix_double(o.states_per_second);
    mix_double(o.search_fraction);
    mix_double(o.min_search_seconds);
    mix(o.refine);
    mix(static_cast<std::uint64_t>(o.round_restarts));
    mix(static_cast<std::uint64_t>(o.round_chains));
    mix(static_cast<std::uint64_t>(o.round_moves));
    mix(o.predict_seconds ? 1 : 0);
    for (char ch : o.predict_key) mix(static_cast<unsigned char>(ch));
  }
  // A search under a memory limit is another search (without one, the key is as it always was).
  if (std::isfinite(o.max_table_entries)) mix_double(o.max_table_entries);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

// Reads an order saved by save_order; accepts it only if it eliminates exactly the scoped
// variables. One found under a memory limit is kept under a key of its own (structure_key): it
// is the search's answer under that limit whether or not its largest table fits (out.fits), so
// a search that found none within the limit is not run again.
bool load_order(const std::string& path, const ReducedModel& m,
                const std::vector<std::vector<int>>& scopes, const OrderOptions& oo,
                OrderResult& out) {
  std::ifstream f(path);
  std::string magic, heuristic;
  int version = 0;
  if (!(f >> magic >> version) || magic != "kinfer-order" || version != 1) return false;
  std::getline(f >> std::ws, heuristic);  // the rest of the line: names hold spaces
  if (heuristic.empty()) return false;
  std::vector<int> order;
  for (int v; f >> v;) order.push_back(v);
  std::vector<char> scoped(m.card.size(), 0), seen(m.card.size(), 0);
  std::size_t n_scoped = 0;
  for (const auto& s : scopes)
    for (int v : s)
      if (!scoped[v]) scoped[v] = 1, ++n_scoped;
  if (order.size() != n_scoped) return false;
  for (int v : order) {
    if (v < 0 || v >= static_cast<int>(m.card.size()) || !scoped[v] || seen[v]) return false;
    seen[v] = 1;
  }
  out = OrderResult{};
  out.order = std::move(order);
  out.stats = evaluate_order(static_cast<int>(m.card.size()), m.card, scopes, out.order);
  out.fits = out.stats.log2_max_table <= std::log2(oo.max_table_entries);
  out.heuristic = "cached " + heuristic;
  return true;
}

void save_order(const std::string& path, const OrderResult& r) {
  std::ostringstream f;
  f << "kinfer-order 1 " << r.heuristic << "\n";
  for (std::size_t i = 0; i < r.order.size(); ++i)
    f << r.order[i] << (i + 1 < r.order.size() ? ' ' : '\n');
  try {
    write_file_atomically(path, f.str());
  } catch (const InputError&) {
    // a cache that cannot be written is only a missed saving
  }
}

}  // namespace

double network_table_bytes(const Network& net) {
  double b = 0;
  for (const auto& f : net.factors) b += 8.0 * f.table.size() + 4.0 * f.scope.size() + 64;
  return b;
}

double process_bytes(int threads) {
  // Measured (wait4 peak RSS of `kinfer pe` on networks with tables of a few kB): 10.7 MiB
  // with 2 threads on a 2-core machine, 16 MiB with 16 threads and the CUDA libraries on the GPU
  // machine; the base includes the GPU kernels' code in the binary (about 0.5 MiB).
  return (10.5 + 0.4 * threads) * 1024 * 1024;
}

double kernel_scratch_bytes(int inputs, double log2_states, int threads) {
  // engine/cpu_kernel.cpp: a block of at most 4096 configurations per thread and one offset
  // array per input over the block; more than four inputs are first multiplied in groups of at
  // most min(16384, states / 16) entries (at most one group per two inputs)
  const double states = std::exp2(log2_states);
  const double block = std::min(4096.0, states);
  double b = 8.0 * block * (inputs + threads) + 1024.0 * threads;
  if (inputs > 4) b += 8.0 * std::min(16384.0, states / 16) * std::ceil(inputs / 2.0);
  return b;
}

double intermediate_peak_bytes(const TaskTree& tree, const std::vector<double>& log2_output) {
  double live = 0, peak = 0;
  for (std::size_t b = 0; b < tree.buckets.size(); ++b) {
    live += 8.0 * std::exp2(log2_output[b]);  // allocated while the children's are still alive
    peak = std::max(peak, live);
    for (int c : tree.buckets[b].children) live -= 8.0 * std::exp2(log2_output[c]);
  }
  return peak;
}

MemoryEstimate estimate_memory(const ReducedModel& model, const TaskTree& tree,
                               double network_bytes, bool keep_tables, int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  MemoryEstimate m;
  m.threads = threads;
  m.process_bytes = process_bytes(threads);
  m.network_bytes = network_bytes;
  m.tables_kept = keep_tables;
  m.input_bytes = model_table_bytes(model);
  m.model_bytes = m.input_bytes;  // the same tables before restructuring
  std::vector<double> out(tree.buckets.size());
  for (std::size_t b = 0; b < tree.buckets.size(); ++b) {
    const Bucket& bk = tree.buckets[b];
    out[b] = bk.log2_output;
    const double bytes = 8.0 * std::exp2(bk.log2_output);
    if (bytes > m.largest_table_bytes)
      m.largest_table_bytes = bytes, m.largest_bucket = static_cast<int>(b);
    m.scratch_bytes =
        std::max(m.scratch_bytes,
                 kernel_scratch_bytes(static_cast<int>(bk.factors.size() + bk.children.size()),
                                      bk.log2_states, threads));
  }
  m.intermediate_bytes = intermediate_peak_bytes(tree, out);
  m.device_bytes = m.input_bytes + m.intermediate_bytes;
  update_peak(m);
  return m;
}

void update_peak(MemoryEstimate& m) {
  // planning: the network, the reduced model and the inputs restructured from it
  m.planning_bytes =
      m.process_bytes + m.network_bytes + m.model_bytes + m.input_bytes + m.source_bytes;
  m.running_bytes = m.process_bytes + m.input_bytes + m.source_bytes + m.intermediate_bytes +
                    m.scratch_bytes + m.device_host_bytes +
                    (m.tables_kept ? m.network_bytes + m.model_bytes : 0);
  m.peak_bytes = std::max(m.planning_bytes, m.running_bytes);
}

double model_table_bytes(const ReducedModel& model) {
  double bytes = 0;
  for (const auto& f : model.factors) {
    double n = 1;
    for (int v : f.scope) n *= model.card[v];
    bytes += 8.0 * n;
  }
  return bytes;
}

double bucket_flops(const Bucket& bk) {
  return std::exp2(bk.log2_states) * (bk.factors.size() + bk.children.size() + 2.0);
}

double estimate_flops(const TaskTree& tree) {
  double flops = 0;
  for (const Bucket& bk : tree.buckets) flops += bucket_flops(bk);
  return flops;
}

void check_memory_floor(const Network& net, const ReducedModel& model, const PlanOptions& opt) {
  const double limit = opt.max_memory_bytes;
  if (limit <= 0) return;
  const double model_bytes = model_table_bytes(model);
  const double program = process_bytes(omp_get_max_threads()), tables = network_table_bytes(net);
  if (program + tables + model_bytes <= limit) return;
  throw ResourceError("--max-memory " + human_bytes(limit) +
                      " is below what any plan needs before computing: the program (" +
                      human_bytes(program) + "), the network's tables (" + human_bytes(tables) +
                      ") and the reduced tables (" + human_bytes(model_bytes) + ") take " +
                      human_bytes(program + tables + model_bytes) + "; raise --max-memory");
}

PlanStart start_plan(const Network& net, const Evidence& ev, const PlanOptions& opt) {
  PlanStart s;
  s.plan.evidence = ev;
  s.plan.reduce_options = opt.reduce;
  s.plan.model = reduce(net, ev, opt.reduce);
  check_memory_floor(net, s.plan.model, opt);
  for (const auto& f : s.plan.model.factors) s.scopes.push_back(f.scope);
  s.plan.components = count_components(net.num_vars(), s.scopes);
  s.order = opt.order;
  if (opt.max_memory_bytes > 0) s.order.max_table_entries = opt.max_memory_bytes / 8.0;
  return s;
}

OrderResult find_order_cached(int num_vars, const ReducedModel& model,
                              const std::vector<std::vector<int>>& scopes, const OrderOptions& oo,
                              std::string cache_dir) {
  if (cache_dir == "none") cache_dir.clear();
  std::string cache_file;
  if (!cache_dir.empty()) cache_file = cache_dir + "/order-" + structure_key(model, oo) + ".txt";
  OrderResult r;
  if (cache_file.empty() || !load_order(cache_file, model, scopes, oo, r)) {
    r = find_order(num_vars, model.card, scopes, oo);
    if (!cache_file.empty()) save_order(cache_file, r);
  }
  return r;
}

OrderedModel order_model(const Network& net, const Evidence& ev, const PlanOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  OrderedModel om;
  om.model = reduce(net, ev, opt.reduce);
  check_memory_floor(net, om.model, opt);
  const auto t1 = clock::now();
  std::vector<std::vector<int>> scopes;
  for (const auto& f : om.model.factors) scopes.push_back(f.scope);
  om.components = count_components(net.num_vars(), scopes);
  const auto t2 = clock::now();
  // No memory filter: the best order by total work; a limit is dealt with afterwards.
  OrderOptions oo = opt.order;
  oo.max_table_entries = std::numeric_limits<double>::infinity();
  om.order = find_order_cached(net.num_vars(), om.model, scopes, oo, opt.order_cache_dir);
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  spdlog::debug(
      "plan: reduction {:.3f} s, components {:.3f} s, order {:.3f} s ({}; search {:.3f} s, "
      "{:.3g} nominal core-s ({:.3g} on 16 threads), {} restarts, {} moves, stopped by {})",
      secs(t0, t1), secs(t1, t2), secs(t2, clock::now()), om.order.heuristic, om.order.seconds,
      om.order.work, om.order.span16, om.order.restarts, om.order.moves,
      om.order.stopped_by.empty() ? "-" : om.order.stopped_by);
  return om;
}

Plan plan_structure(const Network& net, const Evidence& ev, const PlanOptions& opt,
                    ReducedModel model, OrderResult order) {
  Plan plan;
  plan.evidence = ev;
  plan.reduce_options = opt.reduce;
  plan.model = std::move(model);
  plan.order = std::move(order);
  plan.network_bytes = network_table_bytes(net);
  std::vector<std::vector<int>> scopes;
  for (const auto& f : plan.model.factors) scopes.push_back(f.scope);
  plan.components = count_components(net.num_vars(), scopes);
  structure(plan, opt);
  return plan;
}

Plan make_plan(const Network& net, const Evidence& ev, const PlanOptions& opt) {
  OrderedModel om = order_model(net, ev, opt);
  Plan plan = plan_structure(net, ev, opt, std::move(om.model), std::move(om.order));
  if (opt.max_memory_bytes > 0 && plan.memory.peak_bytes > opt.max_memory_bytes) {
    // The best order does not fit: search again with the largest table bounded by the limit.
    const std::vector<std::vector<int>> scopes = [&] {
      std::vector<std::vector<int>> s;
      for (const auto& f : plan.model.factors) s.push_back(f.scope);
      return s;
    }();
    OrderOptions oo = opt.order;
    oo.max_table_entries = opt.max_memory_bytes / 8.0;
    OrderResult r = find_order_cached(net.num_vars(), plan.model, scopes, oo, opt.order_cache_dir);
    if (r.fits) {
      Plan limited = plan_structure(net, ev, opt, plan.model, std::move(r));
      if (limited.memory.peak_bytes < plan.memory.peak_bytes) plan = std::move(limited);
    }
  }
  check_memory(plan, opt, "",
               "Try --order stochastic with a longer --order-time, raise --max-memory if the "
               "machine has more memory, or run on a machine with more memory");
  fill_inputs(plan, opt);
  return plan;
}

void structure(Plan& plan, const PlanOptions& opt) {
  plan.tree = build_task_tree(plan.model, plan.order.order);
  plan.memory = estimate_memory(plan.model, plan.tree, plan.network_bytes, opt.keep_tables);
  plan.flops = estimate_flops(plan.tree);
  // Report what the tree really computes: merged buckets never store the per-variable messages
  // the greedy search saw, so the tree's tables and state space are the honest figures.
  OrderStats& st = plan.order.stats;
  st = OrderStats{};
  double total = 0;
  for (const Bucket& b : plan.tree.buckets) {
    st.width = std::max(st.width, static_cast<int>(b.vars.size()) - 1);
    st.log2_max_table = std::max(st.log2_max_table, b.log2_output);
    st.log2_max_clique = std::max(st.log2_max_clique, b.log2_states);
    total += std::exp2(b.log2_states);
  }
  st.log2_total_state = std::log2(total);
}

void check_memory(const Plan& plan, const PlanOptions& opt, const std::string& who,
                  const std::string& advice) {
  if (opt.max_memory_bytes > 0 && plan.memory.peak_bytes > opt.max_memory_bytes) {
    std::ostringstream s;
    if (!who.empty()) s << who << ": ";
    s << "estimated peak memory " << human_bytes(plan.memory.peak_bytes) << " exceeds the limit "
      << human_bytes(opt.max_memory_bytes) << "; the largest table has 2^"
      << plan.tree.buckets[plan.memory.largest_bucket].log2_output << " entries ("
      << human_bytes(plan.memory.largest_table_bytes) << ", bucket " << plan.memory.largest_bucket
      << ", elimination order " << plan.order.heuristic << ", width " << plan.order.stats.width
      << "). " << advice;
    throw ResourceError(s.str());
  }
}

void fill_inputs(Plan& plan, const PlanOptions& opt) {
  plan.input_data.resize(plan.model.factors.size());
  plan.input_scope.resize(plan.model.factors.size());
  for (std::size_t f = 0; f < plan.model.factors.size(); ++f) {
    plan.input_data[f] =
        restructure(plan.model.factors[f], plan.model.card, plan.tree.rank, plan.input_scope[f]);
    // a plan that runs once needs its model's tables no more
    if (!opt.keep_tables) std::vector<double>().swap(plan.model.factors[f].logv);
  }
}

void finish_plan(Plan& plan, const PlanOptions& opt, const std::string& who,
                 const std::string& advice) {
  structure(plan, opt);
  check_memory(plan, opt, who, advice);
  fill_inputs(plan, opt);
}

BucketShape bucket_shape(const Plan& plan, int b) {
  const Bucket& bk = plan.tree.buckets[b];
  BucketShape s;
  s.vars = bk.vars;
  for (int v : bk.vars) s.card.push_back(plan.model.card[v]);
  s.n_marg = bk.n_marg;
  return s;
}

BucketShape bucket_shape(const Plan& plan, int b, const UpwardPass& pass) {
  BucketShape s = bucket_shape(plan, b);
  s.maximise = pass.maximise;
  return s;
}

double run_plan(const Plan& plan, const RunOptions& opt) {
  const auto& buckets = plan.tree.buckets;
  std::vector<std::unique_ptr<double[]>> msg(buckets.size());
  std::vector<const double*> out(buckets.size());
  // Kept outputs are computed in place: the tables the children pass up are the kept ones.
  std::vector<LnTable>* kept = opt.pass.outputs;
  if (kept) kept->assign(buckets.size(), {});
  if (kept && opt.pass.combined) opt.pass.combined->assign(buckets.size(), {});
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bk = buckets[b];
    const BucketShape shape = bucket_shape(plan, static_cast<int>(b), opt.pass);
    std::vector<InputTable> in;
    for (int f : bk.factors) in.push_back({plan.input_data[f].data(), plan.input_scope[f]});
    for (int c : bk.children) in.push_back({out[c], buckets[c].output_vars()});
    double* o;
    if (kept) {
      (*kept)[b].resize(shape.output_size());
      o = (*kept)[b].data();
    } else {
      msg[b].reset(new double[shape.output_size()]);
      o = msg[b].get();
    }
    out[b] = o;
    sum_product_log(shape, in, o, opt.threads, opt.pass.combined_of(static_cast<int>(b)));
    if (opt.after_bucket) opt.after_bucket(static_cast<int>(b), shape, in, o);
    for (int c : bk.children) msg[c].reset();
  }
  return out.back()[0] + plan.model.log_constant();
}

}  // namespace kinfer

namespace kinfer {

void refill_inputs(Plan& plan, std::vector<InputTableRefill> tables) {
  std::vector<std::vector<double>> data(tables.size());
  std::vector<std::vector<int>> scope(tables.size());
  for (std::size_t k = 0; k < tables.size(); ++k) {
    const LogFactor& old = plan.model.factors.at(tables[k].factor);
    if (tables[k].logv.size() != old.logv.size())
      throw std::logic_error("refill_inputs: a new table of factor " +
                             std::to_string(tables[k].factor) + " has " +
                             std::to_string(tables[k].logv.size()) + " entries, the plan's " +
                             std::to_string(old.logv.size()) + "; build a new plan");
    LogFactor fresh{old.scope, std::move(tables[k].logv), old.origin};
    data[k] = restructure(fresh, plan.model.card, plan.tree.rank, scope[k]);
    tables[k].logv = std::move(fresh.logv);
  }
  for (std::size_t k = 0; k < tables.size(); ++k) {
    const std::size_t f = tables[k].factor;
    plan.model.factors[f].logv = std::move(tables[k].logv);
    plan.input_data[f] = std::move(data[k]);
    plan.input_scope[f] = std::move(scope[k]);
  }
}

void refill_factors(Plan& plan, const Network& net, std::span<const int> changed) {
  // Value elimination depends on where the tables are zero, so reduce afresh and insist that the
  // possible values did not change (a plan's structure is only valid for the same supports).
  ReducedModel fresh = reduce(net, plan.evidence, plan.reduce_options);
  if (fresh.kept != plan.model.kept || fresh.fixed != plan.model.fixed ||
      fresh.factors.size() != plan.model.factors.size())
    throw std::logic_error(
        "refill_factors: the new tables change which values are possible; build a new plan");
  std::vector<char> is_changed(net.factors.size(), 0);
  for (int f : changed) is_changed.at(f) = 1;
  std::vector<InputTableRefill> tables;
  for (std::size_t i = 0; i < plan.model.factors.size(); ++i) {
    const LogFactor& lf = plan.model.factors[i];
    if (!is_changed[lf.origin]) continue;
    if (fresh.factors[i].origin != lf.origin || fresh.factors[i].scope != lf.scope)
      throw std::logic_error(
          "refill_factors: a new table changes its factor's scope (ReduceOptions::fixed_shape); "
          "build a new plan");
    tables.push_back({i, std::move(fresh.factors[i].logv)});
  }
  refill_inputs(plan, std::move(tables));
  plan.model.constants = fresh.constants;
  plan.model.impossible = fresh.impossible;
}

}  // namespace kinfer
