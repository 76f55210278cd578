#include "engine/ordering.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iterator>
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

constexpr double kInf = std::numeric_limits<double>::infinity();

// Work is counted in 64-bit word operations on the adjacency bitsets (and vertex visits); this
// many make one nominal core-second. Fixed, so that the search's length does not depend on the
// machine; chosen near the rate of one core of the development machine.
constexpr double kOpsPerSecond = 7e8;
// Fixed costs of a restart or chain (allocations, copies, dispatch) that the word count misses;
// they dominate on small graphs, where they would otherwise let a round's nominal time run low.
constexpr std::uint64_t kTaskOps = 20000;
constexpr std::uint64_t kPushOps = 16;  // a step's bookkeeping (log2 and exp2) in word operations

// Portable random numbers: mt19937_64's output is fixed by the standard, the distributions of
// <random> are not, so the draws below are written out.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Rng {
  std::mt19937_64 gen;
  // Stream `index` of kind `kind` (restarts, annealing chains) under `seed`.
  Rng(std::uint64_t seed, std::uint64_t kind, std::uint64_t index)
      : gen(splitmix64(splitmix64(splitmix64(seed) ^ kind) ^ index)) {}
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(gen() % n); }
  double uniform() { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// The interaction graph over the scoped variables, as adjacency bitsets, for fast
// elimination. Vertices are compacted: vertex i is variable var[i].
struct EliminationGraph {
  int n = 0, words = 0;
  std::vector<int> var;
  std::vector<double> lc;          // log2 cardinality
  std::vector<std::int64_t> c;     // cardinality (exact sums and products of cardinalities)
  std::vector<std::uint64_t> adj;  // n rows of `words` words

  std::uint64_t* row(int v) { return &adj[static_cast<std::size_t>(v) * words]; }
  const std::uint64_t* row(int v) const { return &adj[static_cast<std::size_t>(v) * words]; }
  bool has(int u, int v) const { return (row(u)[v >> 6] >> (v & 63)) & 1; }
  void add(int u, int v) {
    row(u)[v >> 6] |= 1ull << (v & 63);
    row(v)[u >> 6] |= 1ull << (u & 63);
  }
};

template <class F>
void for_each_bit(const std::uint64_t* r, int words, F&& f) {
  for (int w = 0; w < words; ++w)
    for (std::uint64_t b = r[w]; b; b &= b - 1) f(w * 64 + std::countr_zero(b));
}

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
  for (int v : g.var) {
    g.c.push_back(card[v]);
    g.lc.push_back(std::log2(static_cast<double>(card[v])));
  }
  for (auto [e, end] = boost::edges(ig); e != end; ++e)
    g.add(static_cast<int>(boost::source(*e, ig)), static_cast<int>(boost::target(*e, ig)));
  return g;
}

double log2_add(double a, double b) {  // log2(2^a + 2^b)
  if (a < b) std::swap(a, b);
  if (b == -kInf) return a;
  return a + std::log2(1.0 + std::exp2(b - a));
}

// Greedy criterion scores of every vertex (lower is better): `fill` is the primary score (fill-in
// edges, their weight, or the log2 clique size for min-weight), `weight` the log2 clique size
// that breaks ties. Fill counts and weights are integers held exactly in doubles, so updating
// them incrementally gives the values a recomputation would.
struct Scores {
  OrderHeuristic crit = OrderHeuristic::MinFill;
  std::vector<double> fill, weight;
};

// An elimination in progress: the graph with the eliminated vertices removed, the live vertices,
// optionally the greedy scores (kept up to date incrementally), and the work done.
class Eliminator {
 public:
  explicit Eliminator(const EliminationGraph& g)
      : g_(g), alive_(g.n, 1), pos_(g.n), scratch_(g.words) {
    live_.resize(g.n);
    for (int v = 0; v < g.n; ++v) live_[v] = v, pos_[v] = v;
    ops_ = static_cast<std::uint64_t>(g.n) * (g.words + 4);  // the copy
  }

  const EliminationGraph& graph() const { return g_; }
  int live() const { return static_cast<int>(live_.size()); }
  std::uint64_t ops() const { return ops_; }
  void add_ops(std::uint64_t n) { ops_ += n; }

  // Scores of every live vertex, from scratch.
  void score_all(OrderHeuristic crit) {
    sc_.crit = crit;
    sc_.fill.assign(g_.n, 0);
    sc_.weight.assign(g_.n, 0);
    for (int v : live_) rescore(v);
    scored_ = true;
  }
  // Scores computed once for the whole graph (every restart starts from them).
  void set_scores(const Scores& s) {
    sc_ = s;
    scored_ = true;
  }
  const Scores& scores() const { return sc_; }

  // log2 of the clique of v (v and its live neighbours) and of its message (the neighbours).
  void clique(int v, double& clique_log2, double& msg_log2, int& degree) {
    double msg = 0;
    int deg = 0;
    for_each_bit(g_.row(v), g_.words, [&](int u) { msg += g_.lc[u], ++deg; });
    ops_ += g_.words + deg;
    clique_log2 = msg + g_.lc[v];
    msg_log2 = msg;
    degree = deg;
  }

  // The best live vertex by (fill, weight, index); with rng, one drawn at random among those
  // within `slack` of the best fill (additive, relative for weighted min-fill).
  int pick(Rng* rng, double slack) {
    int best = -1;
    for (int v : live_)
      if (best < 0 || better(v, best)) best = v;
    ops_ += live_.size();
    if (!rng) return best;
    const double p = sc_.fill[best];
    const double lim = sc_.crit == OrderHeuristic::WeightedMinFill ? p * (1 + slack) : p + slack;
    // live_'s order depends only on the eliminations so far, so the draw is reproducible
    cand_.clear();
    for (int v : live_)
      if (sc_.fill[v] <= lim) cand_.push_back(v);
    ops_ += live_.size();
    return cand_[rng->below(cand_.size())];
  }

  // Removes v, connecting its neighbours; updates the scores when they are kept.
  void eliminate(int v) {
    const int words = g_.words;
    std::uint64_t* nbmask = scratch_.data();
    std::copy(g_.row(v), g_.row(v) + words, nbmask);
    nb_.clear();
    for_each_bit(nbmask, words, [&](int u) { nb_.push_back(u); });
    if (scored_ && sc_.crit != OrderHeuristic::MinWeight) {
      // A fill-in edge (a, b) removes one missing pair from the neighbourhood of every common
      // neighbour x of a and b. Vertices outside N(v) keep their neighbourhoods, so their fill
      // drops by exactly that; the neighbours of v are rescored below.
      const bool weighted = sc_.crit == OrderHeuristic::WeightedMinFill;
      for (std::size_t i = 0; i < nb_.size(); ++i) {
        const int a = nb_[i];
        const std::uint64_t* ra = g_.row(a);
        for (std::size_t j = i + 1; j < nb_.size(); ++j) {
          const int b = nb_[j];
          if (g_.has(a, b)) continue;
          const std::uint64_t* rb = g_.row(b);
          const double w = weighted ? static_cast<double>(g_.c[a]) * g_.c[b] : 1.0;
          for (int k = 0; k < words; ++k)
            for (std::uint64_t m = ra[k] & rb[k] & ~nbmask[k]; m; m &= m - 1) {
              const int x = k * 64 + std::countr_zero(m);
              if (x != v) sc_.fill[x] -= w;
              ++ops_;
            }
          ops_ += words;
        }
        ops_ += nb_.size();
      }
    }
    for (int u : nb_) {
      std::uint64_t* ru = g_.row(u);
      for (int k = 0; k < words; ++k) ru[k] |= nbmask[k];
      ru[u >> 6] &= ~(1ull << (u & 63));
      ru[v >> 6] &= ~(1ull << (v & 63));
    }
    ops_ += nb_.size() * words;
    std::fill(g_.row(v), g_.row(v) + words, 0);
    alive_[v] = 0;
    const int last = live_.back();
    live_[pos_[v]] = last;
    pos_[last] = pos_[v];
    live_.pop_back();
    if (scored_)
      for (int u : nb_) rescore(u);
  }

 private:
  bool better(int a, int b) const {
    if (sc_.fill[a] != sc_.fill[b]) return sc_.fill[a] < sc_.fill[b];
    if (sc_.weight[a] != sc_.weight[b]) return sc_.weight[a] < sc_.weight[b];
    return a < b;
  }

  void rescore(int v) {
    const int words = g_.words;
    const std::uint64_t* rv = g_.row(v);
    double w = g_.lc[v];
    int deg = 0;
    for_each_bit(rv, words, [&](int u) { w += g_.lc[u], ++deg; });
    sc_.weight[v] = w;
    ops_ += words + deg;
    if (sc_.crit == OrderHeuristic::MinWeight) {
      sc_.fill[v] = w;
      return;
    }
    double fill = 0;
    for_each_bit(rv, words, [&](int u) {
      const std::uint64_t* ru = g_.row(u);
      if (sc_.crit == OrderHeuristic::MinFill) {
        int missing = 0;
        for (int k = 0; k < words; ++k) missing += std::popcount(rv[k] & ~ru[k]);
        fill += missing - 1;  // u itself is in N(v) \ N(u)
      } else {
        // c[u] times the cardinalities of the x > u missing from N(u): the words from u's on
        // (u's own bit is set, u being in N(v): masked), summed in integers (no chain of
        // floating-point adds; the same value, the products being exact in a double)
        std::int64_t sum = 0;
        const int k0 = u >> 6;
        for (int k = k0; k < words; ++k) {
          std::uint64_t b = rv[k] & ~ru[k];
          if (k == k0) b &= (~0ull << (u & 63)) << 1;
          for (; b; b &= b - 1) {
            sum += g_.c[k * 64 + std::countr_zero(b)];
            ++ops_;
          }
        }
        fill += static_cast<double>(g_.c[u]) * static_cast<double>(sum);
      }
    });
    ops_ += static_cast<std::uint64_t>(deg) * words;
    sc_.fill[v] = sc_.crit == OrderHeuristic::MinFill ? fill / 2 : fill;
  }

  EliminationGraph g_;
  std::vector<char> alive_;
  std::vector<int> live_, pos_, nb_, cand_;
  std::vector<std::uint64_t> scratch_;
  Scores sc_;
  bool scored_ = false;
  std::uint64_t ops_ = 0;
};

// An elimination order of the compacted vertices with its per-step clique sizes, so that a
// change from position k on is scored from the prefix totals.
struct Candidate {
  std::vector<int> order;      // vertices
  std::vector<double> clique;  // log2 clique size at each step
  std::vector<double> msg;     // log2 message size at each step
  std::vector<int> degree;     // neighbours at each step
  double total = kInf;         // log2 total state
  double max_msg = 0;
  std::string name;
  bool complete = false;

  void clear() {
    order.clear(), clique.clear(), msg.clear(), degree.clear();
    total = -kInf, max_msg = 0, complete = false;
  }
  void push(int v, double c, double m, int d) {
    order.push_back(v), clique.push_back(c), msg.push_back(m), degree.push_back(d);
    total = log2_add(total, c);
    max_msg = std::max(max_msg, m);
  }
  OrderStats stats() const {
    OrderStats st;
    st.log2_total_state = order.empty() ? 0 : total;
    for (std::size_t i = 0; i < order.size(); ++i) {
      st.width = std::max(st.width, degree[i]);
      st.log2_max_clique = std::max(st.log2_max_clique, clique[i]);
      st.log2_max_table = std::max(st.log2_max_table, msg[i]);
    }
    return st;
  }
};

// The best orders seen. The search itself follows the smallest total alone, so that a table
// limit never changes its course: with a limit, the answer is the best order when it fits, else
// the best fitting one, else the one with the smallest largest table. So a limit never makes the
// search return a worse order than it finds without one when that order fits. Ties keep the
// earlier candidate in the fixed merge order.
struct Best {
  double max_msg = kInf;  // the limit, log2 entries
  Candidate overall, fitting, smallest;

  void consider(const Candidate& c) {
    if (!c.complete) return;
    if (!overall.complete || c.total < overall.total) overall = c;
    if (c.max_msg <= max_msg && (!fitting.complete || c.total < fitting.total)) fitting = c;
    if (!smallest.complete || c.max_msg < smallest.max_msg ||
        (c.max_msg == smallest.max_msg && c.total < smallest.total))
      smallest = c;
  }
  const Candidate& answer() const {
    if (overall.max_msg <= max_msg) return overall;
    return fitting.complete ? fitting : smallest;
  }
};

// Runs the greedy criterion on `e` to the end, appending to `out`. With rng, ties and near-ties
// are drawn at random. Stops early (out.complete stays false) once the total exceeds `abort_total`
// or a message exceeds `max_msg`.
void greedy_complete(Eliminator& e, Rng* rng, double slack, double abort_total, double max_msg,
                     Candidate& out) {
  while (e.live() > 0) {
    const int v = e.pick(rng, slack);
    double c, m;
    int d;
    e.clique(v, c, m, d);
    out.push(v, c, m, d);
    e.add_ops(kPushOps);
    if (out.total > abort_total || m > max_msg) return;
    e.eliminate(v);
  }
  out.complete = true;
}

// Eliminates the first k vertices of `order` on `e` (without scores).
void replay(Eliminator& e, const std::vector<int>& order, std::size_t k) {
  for (std::size_t i = 0; i < k; ++i) e.eliminate(order[i]);
}

const OrderHeuristic kCriteria[] = {OrderHeuristic::MinFill, OrderHeuristic::WeightedMinFill,
                                    OrderHeuristic::MinWeight};

// The restarts' arms: a criterion (index into kCriteria) and the slack of its random draw
// (additive for min-fill and min-weight, relative for weighted min-fill). Which arm pays depends
// on the network (traced with bench/order/order_bench: min-weight never gave a top-1%
// order on pedigree50 or linkage_11/17, min-fill none on the linkage networks, weighted min-fill
// with slack 1.0 all of pedigree50's entries into its good basin), so the search learns it.
struct Arm {
  int ci;
  double slack;
};
constexpr Arm kArms[] = {{0, 0.0}, {0, 1.0}, {1, 0.0}, {1, 0.1},
                         {1, 0.3}, {1, 1.0}, {2, 0.0}, {2, 1.0}};
constexpr int kNumArms = static_cast<int>(std::size(kArms));
// The annealing's greedy moves draw one of these slacks.
constexpr double kMoveSlacks[] = {1.0, 0.1};

// Restarts shared out among the arms by how often each arm's restarts finish below the abort
// line (the ones that may found a lineage): Laplace-smoothed rates, with a quarter of the
// restarts spread evenly so that every arm keeps being tried. Deterministic: the shares change
// only between rounds, from the merged results.
class ArmShares {
 public:
  // The arms of a round's n restarts, by the largest accumulated credit (ties: lower arm).
  std::vector<int> assign(int n) {
    double rates[kNumArms], sum = 0;
    for (int a = 0; a < kNumArms; ++a) sum += rates[a] = (wins_[a] + 1) / (trials_[a] + 2);
    for (int a = 0; a < kNumArms; ++a)
      credit_[a] += n * (kEven / kNumArms + (1 - kEven) * rates[a] / sum);
    std::vector<int> arms(n);
    for (int t = 0; t < n; ++t) {
      const int b = static_cast<int>(std::max_element(credit_, credit_ + kNumArms) - credit_);
      arms[t] = b;
      credit_[b] -= 1;
    }
    return arms;
  }
  void record(int arm, bool won) {
    trials_[arm] += 1;
    wins_[arm] += won;
  }

 private:
  static constexpr double kEven = 0.25;
  double trials_[kNumArms] = {}, wins_[kNumArms] = {}, credit_[kNumArms] = {};
};

// Restart i: a randomized greedy run of arm `arm` from the whole graph.
Candidate restart(const EliminationGraph& g, const std::vector<Scores>& initial, std::uint64_t seed,
                  std::uint64_t i, int arm, double abort_total, double max_msg,
                  std::uint64_t& ops) {
  Rng rng(seed, 1, i);
  const int ci = kArms[arm].ci;
  const double slack = kArms[arm].slack;
  Eliminator e(g);
  e.set_scores(initial[ci]);
  Candidate c;
  c.clear();
  greedy_complete(e, &rng, slack, abort_total, max_msg, c);
  c.name = "stochastic(" + heuristic_name(kCriteria[ci]) + ")";
  ops = e.ops();
  return c;
}

// One annealing chain from `start`: `moves` local moves, each accepted when its total is below
// the current one plus T ln(1/u) (log2 units; T falls geometrically from t_hot to t_cold). A
// move picks a costly step p (with probability proportional to its clique size) and changes the
// order at or before p: either re-runs a randomized greedy criterion from a point k <= p, or
// moves one vertex to another position near p. Returns the best order visited.
Candidate anneal(const EliminationGraph& g, const Candidate& start, std::uint64_t seed,
                 std::uint64_t index, int moves, double max_msg, std::uint64_t& ops) {
  Rng rng(seed, 2, index);
  ops = 0;
  const int n = g.n;
  Candidate cur = start, best = start;
  const double t_hot = 1.0, t_cold = 0.02;
  std::vector<double> pre(n + 1), cum(n + 1);
  auto prepare = [&] {  // prefix totals and sampling weights of the current order
    pre[0] = -kInf;
    for (int i = 0; i < n; ++i) pre[i + 1] = log2_add(pre[i], cur.clique[i]);
    const double top = *std::max_element(cur.clique.begin(), cur.clique.end());
    cum[0] = 0;
    for (int i = 0; i < n; ++i) cum[i + 1] = cum[i] + std::exp2(cur.clique[i] - top);
    ops += static_cast<std::uint64_t>(n) * 2 * kPushOps;
  };
  prepare();
  const int window =
      std::max(4, std::min(n, 2 * *std::max_element(cur.degree.begin(), cur.degree.end())));
  Candidate next;
  for (int m = 0; m < moves; ++m) {
    const double t = t_hot * std::pow(t_cold / t_hot, moves > 1 ? double(m) / (moves - 1) : 1.0);
    const double u = std::max(rng.uniform(), 1e-300);
    const double limit = cur.total + t * -std::log(u);
    // the costly step p
    const double r = rng.uniform() * cum[n];
    const int p =
        std::min<int>(n - 1, std::upper_bound(cum.begin(), cum.end(), r) - cum.begin() - 1);
    const int lo = std::max(0, p - window);
    Eliminator e(g);
    next.clear();
    if (rng.below(2) == 0) {
      // re-run a greedy criterion from k
      const int k = lo + static_cast<int>(rng.below(p - lo + 1));
      replay(e, cur.order, k);
      for (int i = 0; i < k; ++i) next.push(cur.order[i], cur.clique[i], cur.msg[i], cur.degree[i]);
      const int ci = static_cast<int>(rng.below(3));
      e.score_all(kCriteria[ci]);
      const double slack = kMoveSlacks[rng.below(2)];
      greedy_complete(e, &rng, slack, limit, max_msg, next);
    } else {
      // move one vertex from position i to position j (both near p), then replay the rest
      const int i = lo + static_cast<int>(rng.below(p - lo + 1));
      const int j = std::clamp(i + static_cast<int>(rng.below(2 * window + 1)) - window, 0, n - 1);
      if (i == j) continue;
      std::vector<int> order = cur.order;
      const int v = order[i];
      if (i < j)
        std::move(order.begin() + i + 1, order.begin() + j + 1, order.begin() + i);
      else
        std::move_backward(order.begin() + j, order.begin() + i, order.begin() + i + 1);
      order[j] = v;
      const int k = std::min(i, j);
      replay(e, order, k);
      for (int q = 0; q < k; ++q) next.push(order[q], cur.clique[q], cur.msg[q], cur.degree[q]);
      bool ok = true;
      for (int q = k; q < n && ok; ++q) {
        double c, mm;
        int d;
        e.clique(order[q], c, mm, d);
        next.push(order[q], c, mm, d);
        e.add_ops(kPushOps);
        ok = next.total <= limit && mm <= max_msg;
        if (ok) e.eliminate(order[q]);
      }
      next.complete = ok;
    }
    ops += e.ops() + static_cast<std::uint64_t>(n) * 4;  // + copying and comparing orders
    if (!next.complete || next.total > limit) continue;
    // keep the annealed order's name only when it improves: equal orders keep their history
    if (next.total < cur.total || next.order != cur.order) {
      std::swap(cur, next);
      prepare();
      if (cur.total < best.total) best = cur;
    }
  }
  if (!(best.total < start.total)) return start;
  const std::string prefix = "annealed ";
  best.name = start.name.rfind(prefix, 0) == 0 ? start.name : prefix + start.name;
  return best;
}

// The orders the annealing chains refine: up to kLines lines of descent, each founded by a
// restart and holding the best order its chains have found. Good orders lie in basins that a
// chain does not leave (pedigree50: 2^36.8-36.9 in one, 2^37.3-38.2 in others; the chains only
// polish), so the search keeps several basins alive and replaces the ones that have converged:
// a lineage whose chains found nothing better for kStale rounds gets no chains while others
// can use them, and a new restart within kDelta (log2) of it takes its place. A restart enters
// when it beats the worst lineage (counting kDelta for a converged one); the best lineage is
// never replaced. At most kNewPerRound restarts enter per round, best first.
class Lineages {
 public:
  explicit Lineages(const Candidate& first) { lines_.push_back({first, 0}); }

  const Candidate& order(int i) const { return lines_[i].best; }

  // The restarts' abort line: a restart above it could not enter.
  double entry_line() const {
    const int b = best();
    if (static_cast<int>(lines_.size()) < kLines) return lines_[b].best.total + kDelta;
    double line = -kInf;
    for (int i = 0; i < static_cast<int>(lines_.size()); ++i)
      if (i != b) line = std::max(line, value(i));
    return line;
  }

  // The lineage of each of n chains: the active ones (best first) in turn, else the best.
  std::vector<int> chains(int n) const {
    std::vector<int> active;
    for (int i = 0; i < static_cast<int>(lines_.size()); ++i)
      if (lines_[i].stale < kStale) active.push_back(i);
    if (active.empty()) active.push_back(best());
    std::stable_sort(active.begin(), active.end(),
                     [&](int a, int b) { return lines_[a].best.total < lines_[b].best.total; });
    std::vector<int> of(n);
    for (int c = 0; c < n; ++c) of[c] = active[c % active.size()];
    return of;
  }

  // A round's results: chain c's best order (refining lineage of[c]), then the restarts' in
  // index order.
  void merge(const std::vector<int>& of, const Candidate* chains, const Candidate* restarts,
             int n_restarts) {
    std::vector<char> improved(lines_.size(), 0);
    for (std::size_t c = 0; c < of.size(); ++c) {
      Line& l = lines_[of[c]];
      if (chains[c].complete && chains[c].total < l.best.total)
        l.best = chains[c], improved[of[c]] = 1;
    }
    for (std::size_t i = 0; i < lines_.size(); ++i)
      lines_[i].stale = improved[i] ? 0 : lines_[i].stale + 1;
    std::vector<int> idx;
    for (int t = 0; t < n_restarts; ++t)
      if (restarts[t].complete) idx.push_back(t);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int a, int b) { return restarts[a].total < restarts[b].total; });
    int entered = 0;
    for (int t : idx) {
      if (entered == kNewPerRound) break;
      const Candidate& c = restarts[t];
      if (std::any_of(lines_.begin(), lines_.end(),
                      [&](const Line& l) { return l.best.order == c.order; }))
        continue;
      if (static_cast<int>(lines_.size()) < kLines) {
        lines_.push_back({c, 0}), ++entered;
        continue;
      }
      const int b = best();
      int worst = -1;
      for (int i = 0; i < static_cast<int>(lines_.size()); ++i)
        if (i != b && (worst < 0 || value(i) > value(worst))) worst = i;
      if (!(c.total < value(worst))) break;
      lines_[worst] = {c, 0}, ++entered;
    }
  }

 private:
  static constexpr int kLines = 6, kStale = 3, kNewPerRound = 2;
  static constexpr double kDelta = 0.5;
  struct Line {
    Candidate best;
    int stale;  // rounds since its chains last improved it
  };
  int best() const {
    int b = 0;
    for (int i = 1; i < static_cast<int>(lines_.size()); ++i)
      if (lines_[i].best.total < lines_[b].best.total) b = i;
    return b;
  }
  double value(int i) const {
    return lines_[i].best.total + (lines_[i].stale >= kStale ? kDelta : 0);
  }
  std::vector<Line> lines_;
};

}  // namespace

OrderStats evaluate_order(int num_vars, const std::vector<int>& card,
                          const std::vector<std::vector<int>>& scopes,
                          const std::vector<int>& order) {
  const EliminationGraph g = build_graph(num_vars, card, scopes);
  std::vector<int> idx(num_vars, -1);
  for (int i = 0; i < g.n; ++i) idx[g.var[i]] = i;
  std::vector<char> done(g.n, 0);
  Eliminator e(g);
  Candidate c;
  c.clear();
  for (int var : order) {
    const int v = var >= 0 && var < num_vars ? idx[var] : -1;
    if (v < 0 || done[v])
      throw std::invalid_argument("order repeats or names an unscoped variable");
    done[v] = 1;
    double cl, m;
    int d;
    e.clique(v, cl, m, d);
    c.push(v, cl, m, d);
    e.eliminate(v);
  }
  if (static_cast<int>(order.size()) != g.n) throw std::invalid_argument("order is incomplete");
  return c.stats();
}

OrderResult find_order(int num_vars, const std::vector<int>& card,
                       const std::vector<std::vector<int>>& scopes, const OrderOptions& opt) {
  const int n_restarts = std::max(1, opt.round_restarts);
  const int n_chains = std::max(0, opt.round_chains);
  const int n_moves = std::max(1, opt.round_moves);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const EliminationGraph g = build_graph(num_vars, card, scopes);
  const double max_msg = std::log2(opt.max_table_entries);
  OrderResult res;
  if (g.n == 0) {
    res.heuristic = heuristic_name(opt.heuristic);
    return res;
  }
  std::uint64_t ops = 0;
  const auto work = [&] { return static_cast<double>(ops) / kOpsPerSecond; };

  // Deterministic runs first, one per criterion, never aborted (so an order always exists); in
  // parallel on large graphs, merged in criterion order.
  Best best;
  best.max_msg = max_msg;
  const bool search = opt.heuristic == OrderHeuristic::Stochastic;
  const std::vector<OrderHeuristic> crits =
      search ? std::vector<OrderHeuristic>(std::begin(kCriteria), std::end(kCriteria))
             : std::vector<OrderHeuristic>{opt.heuristic};
  const int nc = static_cast<int>(crits.size());
  std::vector<Scores> initial(search ? nc : 0);
  std::vector<Candidate> det(nc);
  std::vector<std::uint64_t> det_ops(nc, 0);
#pragma omp parallel for schedule(static, 1) if (nc > 1 && g.n >= 256)
  for (int i = 0; i < nc; ++i) {
    Eliminator e(g);
    e.score_all(crits[i]);
    if (search) initial[i] = e.scores();
    det[i].clear();
    greedy_complete(e, nullptr, 0, kInf, kInf, det[i]);
    det[i].name = heuristic_name(crits[i]);
    det_ops[i] = e.ops();
  }
  std::uint64_t greedy_ops = 0;
  for (int i = 0; i < nc; ++i) {
    ops += det_ops[i];
    best.consider(det[i]);
    ++res.restarts;
    greedy_ops = std::max(greedy_ops, det_ops[i]);
  }
  std::uint64_t span_ops = greedy_ops;
  res.log2_total_greedy = best.answer().total;
  // Threads only pay when a round is long enough to amortise waking them (a few milliseconds).
  const bool parallel = greedy_ops * n_restarts > 4'000'000;

  auto predicted = [&](const Candidate& c) {
    const OrderStats st = c.stats();
    return opt.predict_seconds ? opt.predict_seconds(st)
                               : std::exp2(st.log2_total_state) / opt.states_per_second;
  };
  // Rounds of fixed work: n_restarts greedy restarts (arms shared out by what they have found)
  // and n_chains annealing chains of n_moves moves on the lineages' orders, all from the state
  // at the start of the round; their results merge in index order. The stopping rule is checked
  // between rounds on counted work.
  Lineages lines(best.overall);
  ArmShares shares;
  while (search && opt.time_budget > 0) {
    const Candidate& answer = best.answer();
    const double target =
        std::max(opt.min_search_seconds,
                 answer.max_msg <= max_msg ? opt.search_fraction * predicted(answer) : kInf);
    if (work() >= opt.time_budget) {
      res.stopped_by = "budget";
      break;
    }
    if (work() >= target) {
      res.stopped_by = "target";
      break;
    }
    const std::uint64_t r = res.rounds++;
    const int chains = opt.refine ? n_chains : 0;
    const double abort_total = lines.entry_line();
    const std::vector<int> arm = shares.assign(n_restarts);
    const std::vector<int> of = lines.chains(chains);
    std::vector<Candidate> out(n_restarts + chains);
    std::vector<std::uint64_t> out_ops(out.size(), 0);
    // The chains (n_moves greedy-sized moves each) are handed out first, so that the restarts
    // fill the other threads while they run; results stay at their index: task k is out[task(k)].
    const auto task = [&](int k) { return k < chains ? n_restarts + k : k - chains; };
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int k = 0; k < static_cast<int>(out.size()); ++k) {
      const int t = task(k);
      if (t < n_restarts)
        out[t] = restart(g, initial, opt.seed, r * n_restarts + t, arm[t], abort_total, kInf,
                         out_ops[t]);
      else {
        const int c = t - n_restarts;
        out[t] =
            anneal(g, lines.order(of[c]), opt.seed, r * n_chains + c, n_moves, kInf, out_ops[t]);
      }
    }
    {  // the round's wall time on 16 threads (schedule(dynamic, 1) hands the tasks out in order)
      std::vector<std::uint64_t> free_at(16, 0);
      for (int k = 0; k < static_cast<int>(out.size()); ++k) {
        auto it = std::min_element(free_at.begin(), free_at.end());
        *it += out_ops[task(k)] + kTaskOps;
      }
      span_ops += *std::max_element(free_at.begin(), free_at.end());
    }
    for (std::size_t t = 0; t < out.size(); ++t) {
      ops += out_ops[t] + kTaskOps;
      if (static_cast<int>(t) < n_restarts) {
        ++res.restarts;
        shares.record(arm[t], out[t].complete);
      } else {
        res.moves += n_moves;
      }
      best.consider(out[t]);
    }
    lines.merge(of, out.data() + n_restarts, out.data(), n_restarts);
    res.trajectory.push_back(
        {work(), std::chrono::duration<double>(clock::now() - t0).count(), best.answer().total});
  }

  const Candidate& answer = best.answer();
  res.order.reserve(g.n);
  for (int v : answer.order) res.order.push_back(g.var[v]);
  res.stats = answer.stats();
  res.heuristic = answer.name;
  res.fits = answer.max_msg <= max_msg;
  res.work = work();
  res.span16 = static_cast<double>(span_ops) / kOpsPerSecond;
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

int count_components(int num_vars, const std::vector<std::vector<int>>& scopes) {
  std::vector<int> var;
  const InteractionGraph ig = interaction_graph(num_vars, scopes, var);
  std::vector<int> comp(var.size());
  return var.empty() ? 0 : static_cast<int>(boost::connected_components(ig, comp.data()));
}

}  // namespace kinfer
