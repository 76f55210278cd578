// The engine against independent computations: ln P(e) of random networks against brute-force
// enumeration of the joint (long double, linear domain); the bucket kernel against its
// one-configuration-at-a-time reference; exp_nonpositive against std::exp; and the invariants of
// the task tree and of the elimination orders, on random networks and the Pedigree instances.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"
#include "engine/ordering.hpp"
#include "engine/plan.hpp"
#include "tests/brute_force.hpp"
#include "tests/random_network.hpp"
#include "engine/task_tree.hpp"
#include "io/uai.hpp"
#include "tests/support.hpp"

using namespace kinfer;
using namespace kinfer::test;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

const std::vector<OrderHeuristic> kHeuristics = {OrderHeuristic::MinFill, OrderHeuristic::MinWeight,
                                                 OrderHeuristic::WeightedMinFill,
                                                 OrderHeuristic::Stochastic};

bool is_subsequence(const std::vector<int>& sub, const std::vector<int>& seq) {
  std::size_t i = 0;
  for (int v : seq)
    if (i < sub.size() && sub[i] == v) ++i;
  return i == sub.size();
}

// Every structural promise of the task tree (task_tree.hpp) on a finished plan.
void check_tree(const Plan& plan) {
  const TaskTree& t = plan.tree;
  const ReducedModel& m = plan.model;
  const int nb = static_cast<int>(t.buckets.size());
  REQUIRE(nb >= 1);
  const Bucket& root = t.buckets[t.root()];
  CHECK(t.root() == nb - 1);
  CHECK(root.parent == -1);
  CHECK(root.output_vars().empty());  // the root yields one number

  std::vector<int> entered(m.factors.size(), 0);
  std::map<int, int> summed;  // variable -> buckets that sum it out
  int child_links = 0;
  for (int b = 0; b < nb; ++b) {
    const Bucket& bk = t.buckets[b];
    INFO("bucket " << b << " of " << nb);
    REQUIRE(bk.n_marg >= 0);
    REQUIRE(bk.n_marg <= static_cast<int>(bk.vars.size()));
    if (b != t.root()) {
      CHECK(bk.n_marg >= 1);  // a bucket exists to eliminate something
      // exactly one parent, later in the list, listing this bucket once among its children
      REQUIRE(bk.parent > b);
      REQUIRE(bk.parent < nb);
      const auto& sib = t.buckets[bk.parent].children;
      CHECK(std::count(sib.begin(), sib.end(), b) == 1);
    }
    for (int c : bk.children) {
      REQUIRE(c >= 0);
      CHECK(c < b);  // children come before their parent
      CHECK(t.buckets[c].parent == b);
      ++child_links;
    }
    // global order: most significant first, so the summed variables are the least significant
    for (std::size_t i = 0; i < bk.vars.size(); ++i) {
      REQUIRE(t.rank[bk.vars[i]] >= 0);
      if (i > 0) CHECK(t.rank[bk.vars[i - 1]] > t.rank[bk.vars[i]]);
    }
    for (std::size_t i = bk.vars.size() - bk.n_marg; i < bk.vars.size(); ++i) ++summed[bk.vars[i]];
    for (int f : bk.factors) {
      REQUIRE(f >= 0);
      REQUIRE(f < static_cast<int>(m.factors.size()));
      ++entered[f];
      const std::vector<int>& sc = plan.input_scope[f];
      CHECK(std::set<int>(sc.begin(), sc.end()) ==
            std::set<int>(m.factors[f].scope.begin(), m.factors[f].scope.end()));
      CHECK(is_subsequence(sc, bk.vars));
    }
    for (int c : bk.children) CHECK(is_subsequence(t.buckets[c].output_vars(), bk.vars));
    // a variable summed out here appears in no ancestor
    for (int p = bk.parent; p >= 0; p = t.buckets[p].parent)
      for (std::size_t i = bk.vars.size() - bk.n_marg; i < bk.vars.size(); ++i) {
        const auto& pv = t.buckets[p].vars;
        CHECK(std::find(pv.begin(), pv.end(), bk.vars[i]) == pv.end());
      }
    double states = 0, output = 0;
    for (std::size_t i = 0; i < bk.vars.size(); ++i) {
      const double l = std::log2(static_cast<double>(m.card[bk.vars[i]]));
      states += l;
      if (i + bk.n_marg < bk.vars.size()) output += l;
    }
    CHECK(bk.log2_states == Approx(states).margin(1e-9));
    CHECK(bk.log2_output == Approx(output).margin(1e-9));
  }
  CHECK(child_links == nb - 1);
  for (std::size_t f = 0; f < entered.size(); ++f) {
    INFO("reduced factor " << f);
    CHECK(entered[f] == 1);
  }
  std::set<int> scoped;
  for (const LogFactor& f : m.factors) scoped.insert(f.scope.begin(), f.scope.end());
  for (int v : scoped) {
    INFO("variable " << v);
    CHECK(summed[v] == 1);
  }
  CHECK(summed.size() == scoped.size());  // nothing unscoped is summed
}

std::vector<std::vector<int>> reduced_scopes(const ReducedModel& m) {
  std::vector<std::vector<int>> s;
  for (const LogFactor& f : m.factors) s.push_back(f.scope);
  return s;
}

// Orders: the returned statistics are those of the returned order, every scoped variable is
// ordered once, and the stochastic search is never worse than plain min-fill.
void check_orders(const ReducedModel& m, double stochastic_seconds) {
  const auto scopes = reduced_scopes(m);
  const int n = static_cast<int>(m.card.size());
  std::set<int> scoped;
  for (const auto& s : scopes) scoped.insert(s.begin(), s.end());
  std::map<OrderHeuristic, OrderResult> res;
  for (OrderHeuristic h : kHeuristics) {
    INFO("heuristic " << heuristic_name(h));
    OrderOptions oo;
    oo.heuristic = h;
    oo.time_budget = stochastic_seconds;
    const OrderResult r = find_order(n, m.card, scopes, oo);
    CHECK(std::set<int>(r.order.begin(), r.order.end()) == scoped);
    CHECK(r.order.size() == scoped.size());
    const OrderStats e = evaluate_order(n, m.card, scopes, r.order);
    CHECK(e.width == r.stats.width);
    CHECK(e.log2_max_table == Approx(r.stats.log2_max_table).margin(1e-9));
    CHECK(e.log2_max_clique == Approx(r.stats.log2_max_clique).margin(1e-9));
    CHECK(e.log2_total_state == Approx(r.stats.log2_total_state).margin(1e-9));
    CHECK(r.fits);
    res[h] = r;
  }
  CHECK(res[OrderHeuristic::Stochastic].stats.log2_total_state <=
        res[OrderHeuristic::MinFill].stats.log2_total_state + 1e-12);
}

// Random log-domain data with exact -inf entries (probability p_inf).
std::vector<double> random_log_table(std::mt19937_64& rng, std::int64_t size, double p_inf) {
  std::uniform_real_distribution<double> u(0, 1), x(-30, 10);
  std::vector<double> t(size);
  for (double& v : t) v = u(rng) < p_inf ? kNegInf : x(rng);
  return t;
}

Network read_instance(const std::string& name, Evidence& ev) {
  const auto dir = kinfer::test::data_dir() / "uai";
  io::NetworkWithEvidence r = io::read_network_and_evidence((dir / (name + ".uai")).string());
  ev = std::move(r.ev);
  return std::move(r.net);
}

}  // namespace

TEST_CASE("Solver.RandomNetworksMatchBruteForce", "[engine]") {
  std::mt19937_64 rng(20240611);
  int impossible = 0, compared = 0;
  for (int it = 0; it < 150; ++it) {
    const Case c = random_case(rng, it < 100 ? 8 : 12, 2e4);
    const long double z = brute_force(c.net, c.ev);
    const double want = z > 0 ? static_cast<double>(std::log(z)) : kNegInf;
    for (bool ve : {true, false})
      for (OrderHeuristic h : kHeuristics) {
        INFO("network " << it << ", heuristic " << heuristic_name(h) << ", value elimination " << ve
                        << ", " << c.net.num_vars() << " variables, " << c.net.factors.size()
                        << " factors, " << c.ev.observed.size() << " observed");
        PlanOptions po;
        po.order.heuristic = h;
        po.order.time_budget = 0.01;
        po.reduce.value_elimination = ve;
        const Plan plan = make_plan(c.net, c.ev, po);
        check_tree(plan);
        // A reported impossibility must be real; P(e) = 0 must give -inf either way.
        if (!plan.model.impossible.empty()) {
          INFO(plan.model.impossible);
          CHECK(z == 0);
          ++impossible;
        }
        for (int threads : {1, 2}) {
          RunOptions ro;
          ro.threads = threads;
          const double got = run_plan(plan, ro);
          INFO("threads " << threads << ": got " << got << ", brute force " << want);
          CHECK(close_ln(got, want, 1e-9));
          ++compared;
        }
      }
  }
  CHECK(impossible > 0);  // the generator does reach P(e) = 0
  CHECK(compared == 150 * 2 * 4 * 2);
}

TEST_CASE("Reduce.DropIndependentDimensionsKeepsPe", "[engine]") {
  // Random networks where some factors are made constant along one of their variables (as a
  // child's allele is along the selector of a homozygous parent): dropping those dimensions
  // must leave P(e) unchanged, and must drop some.
  std::mt19937_64 rng(4242);
  int dropped = 0;
  for (int it = 0; it < 120; ++it) {
    Case c = random_case(rng, 9, 2e4);
    for (Factor& f : c.net.factors) {
      if (f.scope.empty() || rng() % 2) continue;
      // Copy the slice at value 0 of a random scope position to its other values.
      const std::size_t j = rng() % f.scope.size();
      std::size_t stride = 1;
      for (std::size_t i = f.scope.size() - 1; i > j; --i) stride *= c.net.card[f.scope[i]];
      const std::size_t k = c.net.card[f.scope[j]];
      for (std::size_t hi = 0; hi < f.table.size(); hi += stride * k)
        for (std::size_t t = 1; t < k; ++t)
          for (std::size_t lo = 0; lo < stride; ++lo)
            f.table[hi + t * stride + lo] = f.table[hi + lo];
    }
    const long double z = brute_force(c.net, c.ev);
    const double want = z > 0 ? static_cast<double>(std::log(z)) : kNegInf;
    for (bool keep_some : {false, true}) {
      PlanOptions po;
      po.order.heuristic = OrderHeuristic::MinFill;
      po.reduce.drop_independent = true;
      if (keep_some)
        for (std::size_t f = 0; f < c.net.factors.size(); f += 2)
          po.reduce.fixed_shape.push_back(static_cast<int>(f));
      const Plan plan = make_plan(c.net, c.ev, po);
      if (!keep_some) dropped += plan.model.dims_dropped;
      INFO("network " << it << ", fixed shapes " << keep_some);
      CHECK(close_ln(run_plan(plan), want, 1e-9));
      // A factor listed in fixed_shape keeps every free variable of its network scope.
      for (const LogFactor& lf : plan.model.factors) {
        if (!keep_some || lf.origin % 2) continue;
        int free_vars = 0;
        for (int v : c.net.factors[lf.origin].scope) free_vars += !plan.model.fixed[v];
        CHECK(static_cast<int>(lf.scope.size()) == free_vars);
      }
    }
  }
  CHECK(dropped > 50);
}

TEST_CASE("Solver.RefillMatchesBruteForce", "[engine]") {
  // Compile once, then change every table's non-zero entries (same zeros, so the same values
  // survive value elimination) and evaluate again.
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(0.1, 3.0);
  for (int it = 0; it < 40; ++it) {
    Case c = random_case(rng, 8, 2e4);
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::MinFill;
    Plan plan = make_plan(c.net, c.ev, po);
    if (!plan.model.impossible.empty()) continue;
    std::vector<int> changed;
    for (std::size_t f = 0; f < c.net.factors.size(); ++f) {
      if (rng() % 2) continue;
      for (double& x : c.net.factors[f].table)
        if (x > 0) x = u(rng);
      changed.push_back(static_cast<int>(f));
    }
    refill_factors(plan, c.net, changed);
    const long double z = brute_force(c.net, c.ev);
    INFO("network " << it);
    CHECK(close_ln(run_plan(plan), z > 0 ? static_cast<double>(std::log(z)) : kNegInf, 1e-9));
  }
}

TEST_CASE("Solver.NoFactorsAndFullyObserved", "[engine]") {
  Network net;
  net.card = {3, 1, 2};
  SECTION("no factors: the sum over all configurations is their number") {
    Plan plan = make_plan(net, {}, {});
    CHECK(run_plan(plan) == Approx(std::log(6.0)).epsilon(1e-14));
  }
  SECTION("every variable observed: the product of the entries") {
    net.factors.push_back({{0, 2}, {1, 2, 3, 4, 5, 6}, 0});
    net.factors.push_back({{2}, {0.5, 0.25}, 0});
    Evidence ev{"e", {{0, 2}, {2, 1}}};
    Plan plan = make_plan(net, ev, {});
    CHECK(run_plan(plan) == Approx(std::log(6.0 * 0.25)).epsilon(1e-14));
  }
}

TEST_CASE("Solver.ImpossibleFoundByValueElimination", "[engine]") {
  // Value elimination removes value 1 of A, then finds B with no possible value (fB kills B = 0,
  // fBA kills B = 1) in the same round. P(e) = 0, and run_plan must say so on its own: the
  // tables left in the plan must still agree with the domains they are indexed by.
  Network net;
  net.card = {3, 2};                                       // A, B
  net.factors.push_back({{0}, {1, 0, 1}, 0});              // fA(A)
  net.factors.push_back({{1}, {0, 1}, 0});                 // fB(B)
  net.factors.push_back({{1, 0}, {1, 1, 1, 0, 0, 0}, 0});  // fBA(B, A)
  REQUIRE(brute_force(net, {}) == 0);
  for (OrderHeuristic h : kHeuristics) {
    PlanOptions po;
    po.order.heuristic = h;
    const Plan plan = make_plan(net, {}, po);
    CHECK(!plan.model.impossible.empty());
    CHECK(run_plan(plan) == kNegInf);
  }
}

TEST_CASE("Kernel.RandomBucketsMatchReference", "[engine]") {
  std::mt19937_64 rng(4242);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  struct Spec {
    const char* name;
    int iterations;
    std::vector<int> out_card;  // empty with marg_card empty: a random shape
    std::vector<int> marg_card;
    bool constant_only = false;  // no input depends on a summed variable
    int n_inputs = 0;            // 0: 0 to 9 inputs of any scope; else that many of 0-3 variables
  };
  const std::vector<int> two15(15, 2);
  // Shapes chosen to reach every path: few summed configurations (blocked, M = 2 and general,
  // one thread and several), more than 4096 summed configurations with many outputs (outer/hi
  // loop, parallel over outputs) and with few outputs (parallel over the summed configurations),
  // inputs that do not depend on the summed variables, no summed variable at all, and hundreds
  // of inputs of a few variables each (a Markov network's bucket: the small ones multiplied
  // together first, repeated scopes among them).
  const std::vector<Spec> specs = {
      {"small random", 300, {}, {}},
      {"M = 2, parallel blocks", 6, {4, 4, 4, 4, 4, 4, 4}, {2}},
      {"M = 3, parallel blocks", 4, {4, 4, 4, 4, 4, 4, 4}, {3}},
      {"32768 summed, 1 output", 4, {}, two15},
      {"32768 summed, 3 outputs", 4, {3}, two15},
      {"6561 summed, 24 outputs", 4, {2, 3, 4}, {3, 3, 3, 3, 3, 3, 3, 3}},
      {"16384 summed, 8 outputs", 4, {2, 4}, {4, 4, 4, 4, 4, 4, 4}},
      {"16384 summed, constant inputs", 4, {2, 4}, {4, 4, 4, 4, 4, 4, 4}, true},
      {"no summed variable", 10, {3, 4, 2, 4}, {}},
      {"many small inputs", 4, {2, 2, 2, 2, 2, 2}, {2, 3, 2, 2, 2, 2, 2, 2}, false, 200},
      {"many small inputs, 1 output", 2, {}, {2, 2, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2}, false, 300},
  };
  int buckets = 0;
  for (const Spec& s : specs) {
    for (int it = 0; it < s.iterations; ++it) {
      BucketShape shape;
      if (s.out_card.empty() && s.marg_card.empty()) {
        const int nv = uni(0, 6);
        for (int i = 0; i < nv; ++i) shape.card.push_back(uni(1, 4));
        shape.n_marg = uni(0, nv);
      } else {
        shape.card = s.out_card;
        shape.card.insert(shape.card.end(), s.marg_card.begin(), s.marg_card.end());
        shape.n_marg = static_cast<int>(s.marg_card.size());
      }
      const int nv = static_cast<int>(shape.card.size());
      // variable ids need not be sorted or contiguous: the kernel matches them by value
      for (int i = 0; i < nv; ++i) shape.vars.push_back(1000 - 7 * i + (i % 3));
      // inputs: random subsequences, some that skip every summed variable, some empty
      const int n_in = s.n_inputs > 0 ? s.n_inputs : uni(0, 9);
      const double p_inf = std::vector<double>{0.0, 0.2, 0.9, 1.0}[uni(0, 3)];
      std::vector<std::vector<double>> data;
      std::vector<InputTable> in;
      for (int f = 0; f < n_in; ++f) {
        const int mode = s.constant_only ? 0 : uni(0, 3);
        std::vector<int> scope, card;
        std::vector<char> take(nv, 0);
        if (s.n_inputs > 0) {
          for (int k = uni(0, 3); k > 0; --k) take[uni(0, nv - 1)] = 1;
        } else {
          for (int i = 0; i < nv; ++i) {
            const bool summed = i >= nv - shape.n_marg;
            take[i] = mode == 0 ? !summed && uni(0, 1) : uni(0, 2) > 0;
          }
        }
        for (int i = 0; i < nv; ++i)
          if (take[i]) scope.push_back(shape.vars[i]), card.push_back(shape.card[i]);
        std::int64_t size = 1;
        for (int k : card) size *= k;
        data.push_back(random_log_table(rng, size, p_inf));
        in.push_back({nullptr, scope});
      }
      for (int f = 0; f < n_in; ++f) in[f].data = data[f].data();
      INFO(s.name << " #" << it << ": " << nv << " variables, " << shape.n_marg << " summed, "
                  << n_in << " inputs, p(-inf) " << p_inf);
      // sum-product, and max-product (BucketShape::maximise: the MPE's upward pass)
      for (bool maximise : {false, true}) {
        shape.maximise = maximise;
        std::vector<double> want(shape.output_size()), got(shape.output_size());
        sum_product_log_reference(shape, in, want.data());
        for (int threads : {1, 2, 3}) {
          std::fill(got.begin(), got.end(), 12345.0);
          sum_product_log(shape, in, got.data(), threads);
          int bad = 0;
          for (std::size_t o = 0; o < got.size(); ++o)
            if (!close_ln(got[o], want[o], 1e-12)) {
              if (bad++ < 3) {
                INFO((maximise ? "max" : "sum") << ", threads " << threads << ", output " << o
                                                << ": " << got[o] << " vs " << want[o]);
                CHECK(close_ln(got[o], want[o], 1e-12));
              }
            }
          CHECK(bad == 0);
        }
      }
      ++buckets;
    }
  }
  int planned = 0;
  for (const Spec& s : specs) planned += s.iterations;
  CHECK(buckets == planned);
}

TEST_CASE("Kernel.ExpNonpositiveMatchesStdExp", "[engine]") {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-745.0, 0.0);
  double worst = 0, worst_x = 0;
  auto check = [&](double x) {
    const double want = std::exp(x), got = exp_nonpositive(x);
    if (want > 1e-300) {
      const double rel = std::abs(got - want) / want;
      if (rel > worst) worst = rel, worst_x = x;
    } else {
      CHECK(got >= 0);
      CHECK(got <= 1e-299);  // documented as approximate there, but it must stay negligible
    }
  };
  for (int i = 0; i <= 745000; ++i) check(-i * 1e-3);
  for (int i = 0; i < 1000000; ++i) check(u(rng));
  for (double x : {-0.0, -1e-300, -5e-324, -1e-17, -0.34657359027997264, -0.6931471805599453, -1.0,
                   -690.7755278982137, -708.0, -708.3964185322641, -744.44})
    check(x);
  INFO("largest relative error " << worst << " at x = " << worst_x);
  CHECK(worst < 4e-16);
  CHECK(exp_nonpositive(0.0) == 1.0);
  CHECK(exp_nonpositive(kNegInf) >= 0);
  CHECK(exp_nonpositive(kNegInf) <= 1e-299);
}

TEST_CASE("TaskTree.InvariantsOnRandomNetworks", "[engine]") {
  std::mt19937_64 rng(31337);
  for (int it = 0; it < 200; ++it) {
    // larger networks than the brute-force test: the structure is checked, not the value
    Case c = random_case(rng, 40, 1e300);
    INFO("network " << it);
    for (OrderHeuristic h : kHeuristics) {
      PlanOptions po;
      po.order.heuristic = h;
      po.order.time_budget = 0.01;
      check_tree(make_plan(c.net, c.ev, po));
    }
    check_orders(reduce(c.net, c.ev), 0.01);
  }
}

TEST_CASE("TaskTree.InvariantsOnPedigrees", "[engine]") {
  for (const std::string name : {"Pedigree_11", "Pedigree_12", "Pedigree_13"}) {
    DYNAMIC_SECTION(name) {
      Evidence ev;
      const Network net = read_instance(name, ev);
      REQUIRE(!ev.observed.empty());
      for (OrderHeuristic h : kHeuristics) {
        INFO("heuristic " << heuristic_name(h));
        PlanOptions po;
        po.order.heuristic = h;
        po.order.time_budget = 0.2;
        const Plan plan = make_plan(net, ev, po);
        check_tree(plan);
        // Merged buckets only save states: the tree's total is at most the order's (+ the root).
        const OrderStats e = evaluate_order(net.num_vars(), plan.model.card,
                                            reduced_scopes(plan.model), plan.order.order);
        CHECK(std::exp2(plan.order.stats.log2_total_state) <=
              (std::exp2(e.log2_total_state) + 1) * (1 + 1e-12));
      }
      check_orders(reduce(net, ev), 0.2);
    }
  }
}

TEST_CASE("Kernel.PedigreeBucketsMatchReference", "[engine]") {
  // Every bucket of a real elimination, recomputed one configuration at a time.
  Evidence ev;
  const Network net = read_instance("Pedigree_11", ev);
  PlanOptions po;
  po.order.heuristic = OrderHeuristic::MinFill;
  const Plan plan = make_plan(net, ev, po);
  int checked = 0, bad = 0;
  RunOptions ro;
  ro.after_bucket = [&](int b, const BucketShape& shape, std::span<const InputTable> in,
                        const double* out) {
    std::vector<double> want(shape.output_size());
    sum_product_log_reference(shape, in, want.data());
    for (std::size_t o = 0; o < want.size(); ++o)
      if (!close_ln(out[o], want[o], 1e-12) && bad++ < 3) {
        INFO("bucket " << b << ", output " << o);
        CHECK(close_ln(out[o], want[o], 1e-12));
      }
    ++checked;
  };
  const double ln_pr = run_plan(plan, ro);
  CHECK(bad == 0);
  CHECK(checked == static_cast<int>(plan.tree.buckets.size()));
  CHECK(std::abs(ln_pr / std::log(10.0) - -17.2155) <= 5e-5);  // UAI 2014 reference solution
}
