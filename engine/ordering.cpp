#include "engine/ordering.hpp"

#include <omp.h>
#include <algorithm>
#include <bit>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>

namespace kinfer {

OrderHeuristic parse_heuristic(const std::string& name) {
  if (name == "minfill") return OrderHeuristic::MinFill;
  if (name == "minweight") return OrderHeuristic::MinWeight;
  if (name == "wminfill") return OrderHeuristic::WeightedMinFill;
  if (name == "stochastic") return OrderHeuristic::Stochastic;
  throw std::invalid_argument("unknown order heuristic '" + name +
                              "', expected minfill, minweight, wminfill or stochastic");
}

std::string heuristic_name(OrderHeuristic h) {
  switch (h) {
    case OrderHeuristic::MinFill:
      return "min-fill";
    case OrderHeuristic::MinWeight:
      return "min-weight";
    case OrderHeuristic::WeightedMinFill:
      return "weighted-min-fill";
    case OrderHeuristic::Stochastic:
      return "stochastic";
  }
  return "?";
}

namespace {

// The interaction graph over the scoped variables, as adjacency bitsets, for fast
// elimination. Vertices are compacted: vertex i is variable var[i].
struct EliminationGraph {
  int n = 0, words = 0;
  std::vector<int> var;
  std::vector<double> lc;          // log2 cardinality
  std::vector<double> c;           // cardinality
  std::vector<std::uint64_t> adj;  // n rows of `words` words
  std::vector<char> alive;

  std::uint64_t* row(int v) { return &adj[static_cast<std::size_t>(v) * words]; }
  const std::uint64_t* row(int v) const { return &adj[static_cast<std::size_t>(v) * words]; }
  bool has(int u, int v) const { return (row(u)[v >> 6] >> (v & 63)) & 1; }
  void add(int u, int v) {
    row(u)[v >> 6] |= 1ull << (v & 63);
    row(v)[u >> 6] |= 1ull << (u & 63);
  }
  template <class F>
  void for_each_neighbor(int v, F&& f) const {
    const std::uint64_t* r = row(v);
    for (int w = 0; w < words; ++w)
      for (std::uint64_t b = r[w]; b; b &= b - 1) f(w * 64 + std::countr_zero(b));
  }
};

// The interaction graph of the scoped variables (an edge between variables sharing a factor),
// compacted: vertex i is variable var[i].
using InteractionGraph = boost::adjacency_list<boost::setS, boost::vecS, boost::undirectedS>;

InteractionGraph interaction_graph(int num_vars, const std::vector<std::vector<int>>& scopes,
                                   std::vector<int>& var) {
  std::vector<int> idx(num_vars, -1);
  var.clear();
  for (const auto& s : scopes)
    for (int v : s)
      if (idx[v] < 0) idx[v] = static_cast<int>(var.size()), var.push_back(v);
  InteractionGraph ig(var.size());
  for (const auto& s : scopes)
    for (std::size_t a = 0; a < s.size(); ++a)
      for (std::size_t b = a + 1; b < s.size(); ++b)
        if (s[a] != s[b]) boost::add_edge(idx[s[a]], idx[s[b]], ig);
  return ig;
}

// Elimination works on adjacency bitsets copied from the interaction graph: filling in a clique
// and scoring a vertex become word operations.
EliminationGraph build_graph(int num_vars, const std::vector<int>& card,
                             const std::vector<std::vector<int>>& scopes) {
  EliminationGraph g;
  const InteractionGraph ig = interaction_graph(num_vars, scopes, g.var);
  g.n = static_cast<int>(g.var.size());
  g.words = (g.n + 63) / 64;
  g.adj.assign(static_cast<std::size_t>(g.n) * g.words, 0);
  g.alive.assign(g.n, 1);
  for (int v : g.var) {
    g.c.push_back(card[v]);
    g.lc.push_back(std::log2(static_cast<double>(card[v])));
  }
  for (auto [e, end] = boost::edges(ig); e != end; ++e)
    g.add(static_cast<int>(boost::source(*e, ig)), static_cast<int>(boost::target(*e, ig)));
  return g;
}

// Greedy criterion scores: lower is better. Primary then secondary (log2 clique size).
struct Score {
  double primary = 0, weight = 0;
};

Score score(const EliminationGraph& g, int v, OrderHeuristic crit) {
  double w = g.lc[v];
  g.for_each_neighbor(v, [&](int u) { w += g.lc[u]; });
  if (crit == OrderHeuristic::MinWeight) return {w, w};
  const std::uint64_t* rv = g.row(v);
  double fill = 0;
  g.for_each_neighbor(v, [&](int u) {
    const std::uint64_t* ru = g.row(u);
    if (crit == OrderHeuristic::MinFill) {
      int missing = 0;
      for (int k = 0; k < g.words; ++k) missing += std::popcount(rv[k] & ~ru[k]);
      fill += missing - 1;  // u itself is in N(v) \ N(u)
    } else {
      for (int k = 0; k < g.words; ++k)
        for (std::uint64_t b = rv[k] & ~ru[k]; b; b &= b - 1) {
          int x = k * 64 + std::countr_zero(b);
          if (x > u) fill += g.c[u] * g.c[x];
        }
    }
  });
  if (crit == OrderHeuristic::MinFill) fill /= 2;
  return {fill, w};
}

double log2_add(double a, double b) {  // log2(2^a + 2^b)
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<double>::infinity()) return a;
  return a + std::log2(1.0 + std::exp2(b - a));
}

// One greedy elimination. With rng, ties (and near-ties within `slack`) are broken at random.
// Stops early (returns false) if the running total exceeds `abort_total_log2` or a message
// exceeds the table limit.
bool greedy_run(EliminationGraph g, OrderHeuristic crit, std::mt19937_64* rng, double slack,
                double abort_total_log2, double max_table_log2, std::vector<int>& order,
                OrderStats& st) {
  const int n = g.n;
  order.clear();
  st = OrderStats{};
  st.log2_total_state = -std::numeric_limits<double>::infinity();
  std::vector<Score> sc(n);
  for (int v = 0; v < n; ++v) sc[v] = score(g, v, crit);
  std::vector<int> cand;
  std::vector<int> touched;
  std::vector<char> mark(n, 0);
  for (int step = 0; step < n; ++step) {
    // pick the best (primary, then weight)
    int best = -1;
    for (int v = 0; v < n; ++v)
      if (g.alive[v] && (best < 0 || sc[v].primary < sc[best].primary ||
                         (sc[v].primary == sc[best].primary && sc[v].weight < sc[best].weight)))
        best = v;
    if (rng) {
      cand.clear();
      // fill counts and log2 weights take an additive slack, weighted fill a relative one
      const double p = sc[best].primary;
      const double lim = crit == OrderHeuristic::WeightedMinFill ? p * (1 + slack) : p + slack;
      for (int v = 0; v < n; ++v)
        if (g.alive[v] && sc[v].primary <= lim) cand.push_back(v);
      best = cand[std::uniform_int_distribution<std::size_t>(0, cand.size() - 1)(*rng)];
    }
    const int v = best;
    // statistics
    double clique = g.lc[v], msg = 0;
    int deg = 0;
    g.for_each_neighbor(v, [&](int u) {
      clique += g.lc[u];
      msg += g.lc[u];
      ++deg;
    });
    st.width = std::max(st.width, deg);
    st.log2_max_clique = std::max(st.log2_max_clique, clique);
    st.log2_max_table = std::max(st.log2_max_table, msg);
    st.log2_total_state = log2_add(st.log2_total_state, clique);
    order.push_back(g.var[v]);
    if (st.log2_total_state > abort_total_log2 || msg > max_table_log2) return false;
    // eliminate: connect the neighbours, remove v
    std::vector<int> nb;
    g.for_each_neighbor(v, [&](int u) { nb.push_back(u); });
    for (std::size_t a = 0; a < nb.size(); ++a)
      for (std::size_t b = a + 1; b < nb.size(); ++b) g.add(nb[a], nb[b]);
    for (int u : nb) {
      g.row(u)[v >> 6] &= ~(1ull << (v & 63));
    }
    std::fill(g.row(v), g.row(v) + g.words, 0);
    g.alive[v] = 0;
    // rescore: neighbours always; for fill criteria also their neighbours
    touched.clear();
    for (int u : nb)
      if (!mark[u]) mark[u] = 1, touched.push_back(u);
    if (crit != OrderHeuristic::MinWeight)
      for (int u : nb)
        g.for_each_neighbor(u, [&](int x) {
          if (!mark[x]) mark[x] = 1, touched.push_back(x);
        });
    for (int u : touched) {
      sc[u] = score(g, u, crit);
      mark[u] = 0;
    }
  }
  return true;
}

}  // namespace

OrderStats evaluate_order(int num_vars, const std::vector<int>& card,
                          const std::vector<std::vector<int>>& scopes,
                          const std::vector<int>& order) {
  EliminationGraph g = build_graph(num_vars, card, scopes);
  std::vector<int> idx(num_vars, -1);
  for (int i = 0; i < g.n; ++i) idx[g.var[i]] = i;
  OrderStats st;
  st.log2_total_state = -std::numeric_limits<double>::infinity();
  for (int var : order) {
    const int v = idx[var];
    if (v < 0 || !g.alive[v])
      throw std::invalid_argument("order repeats or names an unscoped variable");
    double clique = g.lc[v], msg = 0;
    std::vector<int> nb;
    g.for_each_neighbor(v, [&](int u) {
      nb.push_back(u);
      clique += g.lc[u];
      msg += g.lc[u];
    });
    st.width = std::max<int>(st.width, static_cast<int>(nb.size()));
    st.log2_max_clique = std::max(st.log2_max_clique, clique);
    st.log2_max_table = std::max(st.log2_max_table, msg);
    st.log2_total_state = log2_add(st.log2_total_state, clique);
    for (std::size_t a = 0; a < nb.size(); ++a)
      for (std::size_t b = a + 1; b < nb.size(); ++b) g.add(nb[a], nb[b]);
    for (int u : nb) g.row(u)[v >> 6] &= ~(1ull << (v & 63));
    std::fill(g.row(v), g.row(v) + g.words, 0);
    g.alive[v] = 0;
  }
  if (static_cast<int>(order.size()) != g.n) throw std::invalid_argument("order is incomplete");
  if (g.n == 0) st.log2_total_state = 0;
  return st;
}

OrderResult find_order(int num_vars, const std::vector<int>& card,
                       const std::vector<std::vector<int>>& scopes, const OrderOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const EliminationGraph g = build_graph(num_vars, card, scopes);
  const double max_table_log2 = std::log2(opt.max_table_entries);
  const double inf = std::numeric_limits<double>::infinity();

  OrderResult best;
  best.stats.log2_total_state = inf;
  auto consider = [&](std::vector<int>& order, const OrderStats& st, const std::string& name) {
    const bool fits = st.log2_max_table <= max_table_log2;
    const bool better =
        (fits && !best.fits) || best.order.empty() ||
        (fits == best.fits && (fits ? st.log2_total_state < best.stats.log2_total_state
                                    : st.log2_max_table < best.stats.log2_max_table));
    if (better) {
      best.order = order;
      best.stats = st;
      best.heuristic = name;
      best.fits = fits;
    }
  };

  std::vector<int> order;
  OrderStats st;
  std::vector<OrderHeuristic> crits;
  if (opt.heuristic == OrderHeuristic::Stochastic)
    crits = {OrderHeuristic::MinFill, OrderHeuristic::WeightedMinFill, OrderHeuristic::MinWeight};
  else
    crits = {opt.heuristic};
  // Deterministic runs first: each criterion once, never aborted (so one order always exists).
  for (OrderHeuristic c : crits) {
    greedy_run(g, c, nullptr, 0, inf, inf, order, st);
    consider(order, st, heuristic_name(c));
    ++best.restarts;
  }
  if (opt.heuristic == OrderHeuristic::Stochastic && g.n > 0) {
    // Restarts run on every core; each thread has its own random stream and the best order is
    // shared under a lock (a restart aborts as soon as it is worse than the best so far).
    const double slacks[] = {0.0, 0.0, 1.0, 0.1};
    int restarts = 0;
#pragma omp parallel reduction(+ : restarts)
    {
      std::mt19937_64 rng(opt.seed * 7919 + omp_get_thread_num());
      std::vector<int> my_order;
      OrderStats my_st;
      for (std::uint64_t it = omp_get_thread_num();; it += omp_get_num_threads()) {
        double abort, est_compute;
        bool fits;
#pragma omp critical(kinfer_order_best)
        {
          abort = best.fits ? best.stats.log2_total_state : inf;
          est_compute = std::exp2(best.stats.log2_total_state) / opt.states_per_second;
          fits = best.fits;
        }
        const double spent = elapsed();
        if (spent >= opt.time_budget || (fits && spent >= opt.search_fraction * est_compute)) break;
        const OrderHeuristic c = crits[it % crits.size()];
        const double slack = slacks[(it / crits.size()) % 4];
        if (greedy_run(g, c, &rng, slack, abort, max_table_log2, my_order, my_st)) {
#pragma omp critical(kinfer_order_best)
          consider(my_order, my_st, "stochastic(" + heuristic_name(c) + ")");
        }
        ++restarts;
      }
    }
    best.restarts += restarts;
  }
  if (g.n == 0) {
    best.stats = OrderStats{};
    best.heuristic = heuristic_name(opt.heuristic);
  }
  best.seconds = elapsed();
  return best;
}

int count_components(int num_vars, const std::vector<std::vector<int>>& scopes) {
  std::vector<int> var;
  const InteractionGraph ig = interaction_graph(num_vars, scopes, var);
  std::vector<int> comp(var.size());
  return var.empty() ? 0 : static_cast<int>(boost::connected_components(ig, comp.data()));
}

}  // namespace kinfer
