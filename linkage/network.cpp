#include "linkage/network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "engine/task_tree.hpp"
#include "linkage/order.hpp"

namespace kinfer::linkage {

double combine_thetas(double a, double b, MapFunction f) {
  if (f == MapFunction::Kosambi) return (a + b) / (1 + 4 * a * b);
  return a + b - 2 * a * b;
}

double split_theta(double total, double a, MapFunction f) {
  if (f == MapFunction::Kosambi) return (total - a) / (1 - 4 * a * total);
  return (total - a) / (1 - 2 * a);
}

namespace {

// The network being built, and what PedigreeNetwork records of each variable: its chain
// position and whether it is a meiosis selector.
struct NetworkBuilder {
  Network& net;
  std::vector<int>& var_locus;
  std::vector<char>& var_selector;
  int locus = 0;  // the chain position whose variables are being added

  int add_var(int card, bool selector = false) {
    net.card.push_back(card);
    var_locus.push_back(locus);
    var_selector.push_back(selector ? 1 : 0);
    return net.num_vars() - 1;
  }
  int add_factor(std::vector<int> scope, std::vector<double> table) {
    net.factors.push_back({std::move(scope), std::move(table), 0});
    return static_cast<int>(net.factors.size()) - 1;
  }
};

// How each person's two alleles are represented: two allele variables ("split"), or one
// variable over the ordered genotypes genotype elimination left ("joint"). Joint is used
// where it is no larger than one allele variable (typically a typed person: a phase
// bit instead of two constrained alleles); sex-linked loci stay split.
struct Rep {
  bool joint = false;
  int gp = -1, gm = -1, g = -1;
  std::vector<std::pair<int, int>> pairs;  // joint: (paternal, maternal) of each value
};

// Adds the allele variables of one locus, per person (`joint`: where it is no larger).
std::vector<Rep> allele_variables(NetworkBuilder& b, const Pedigree& ped, const PedigreeLocus& L,
                                  bool joint) {
  const int np = static_cast<int>(ped.people.size());
  const int n = L.n_alleles;
  std::vector<Rep> rep(np);
  for (int i = 0; i < np; ++i) {
    const Person& p = ped.people[i];
    Rep& r = rep[i];
    if (joint && !L.sex_linked) {
      for (int x : L.dom_p[i])
        for (int y : L.dom_m[i])
          if (L.weight[i][x * n + y] > 0) r.pairs.push_back({x, y});
      const std::size_t split = L.dom_p[i].size() * L.dom_m[i].size();
      r.joint = r.pairs.size() < split &&
                r.pairs.size() <= std::max(L.dom_p[i].size(), L.dom_m[i].size());
    }
    if (r.joint) {
      r.g = b.add_var(static_cast<int>(r.pairs.size()));
      continue;
    }
    r.gm = b.add_var(static_cast<int>(L.dom_m[i].size()));
    if (L.carries_paternal(p) && (!L.sex_linked || p.founder()))
      r.gp = b.add_var(static_cast<int>(L.dom_p[i].size()));
  }
  // A daughter's paternal X is her father's maternal variable.
  for (int i = 0; i < np; ++i) {
    const Person& p = ped.people[i];
    if (L.sex_linked && L.carries_paternal(p) && !p.founder()) rep[i].gp = rep[p.father].gm;
  }
  return rep;
}

// One locus's allele variables seen per person.
struct LocusVars {
  const Pedigree& ped;
  const PedigreeLocus& L;
  std::vector<Rep> rep;

  // The domain of a split allele variable, as recoded alleles.
  const std::vector<int>& dom(int i, bool paternal) const {
    if (paternal && L.sex_linked && !ped.people[i].founder()) return L.dom_m[ped.people[i].father];
    return paternal ? L.dom_p[i] : L.dom_m[i];
  }
  // A parent's variables and, in table order, the (paternal, maternal) alleles of each of
  // their configurations.
  void parent_view(int q, std::vector<int>& vars, std::vector<std::pair<int, int>>& cfg) const {
    if (rep[q].joint) {
      vars = {rep[q].g};
      cfg = rep[q].pairs;
      return;
    }
    vars = {rep[q].gp, rep[q].gm};
    cfg.clear();
    for (int a : dom(q, true))
      for (int b : dom(q, false)) cfg.push_back({a, b});
  }
  // A child's variable holding its allele from one side, and that allele for each value.
  int child_view(int c, bool paternal, std::vector<int>& values) const {
    values.clear();
    if (rep[c].joint) {
      for (auto [x, y] : rep[c].pairs) values.push_back(paternal ? x : y);
      return rep[c].g;
    }
    values = dom(c, paternal);
    return paternal ? rep[c].gp : rep[c].gm;
  }
};

// Where each person's two alleles live at this locus (PedigreeNetwork::genotype).
std::vector<PedigreeNetwork::Genotype> genotype_views(const LocusVars& v) {
  const int np = static_cast<int>(v.ped.people.size());
  std::vector<PedigreeNetwork::Genotype> gt(np);
  for (int i = 0; i < np; ++i) {
    if (v.L.carries_paternal(v.ped.people[i])) {
      v.parent_view(i, gt[i].vars, gt[i].alleles);
      continue;
    }
    gt[i].vars = {v.rep[i].gm};
    for (int m : v.L.dom_m[i]) gt[i].alleles.push_back({-1, m});
  }
  return gt;
}

// A founder's alleles: their frequencies (linkage equilibrium).
void add_founder_frequencies(NetworkBuilder& b, const LocusVars& v, int i) {
  const PedigreeLocus& L = v.L;
  const Rep& r = v.rep[i];
  if (r.joint) {
    std::vector<double> t;
    for (auto [x, y] : r.pairs) t.push_back(L.freq[x] * L.freq[y]);
    b.add_factor({r.g}, std::move(t));
    return;
  }
  const bool hemi = !L.carries_paternal(v.ped.people[i]);
  for (int side = 0; side < 2; ++side) {
    if (side == 0 && hemi) continue;
    std::vector<double> t;
    for (int a : v.dom(i, side == 0)) t.push_back(L.freq[a]);
    b.add_factor({side == 0 ? r.gp : r.gm}, std::move(t));
  }
}

// Transmission: child i's allele from `parent` is the parent's paternal allele when the
// selector `s` is 0, the maternal one when it is 1.
void add_transmission(NetworkBuilder& b, const LocusVars& v, int i, int parent, bool paternal,
                      int s) {
  std::vector<int> scope, xs;
  std::vector<std::pair<int, int>> cfg;
  v.parent_view(parent, scope, cfg);
  const int child = v.child_view(i, paternal, xs);
  scope.push_back(s);
  scope.push_back(child);
  std::vector<double> t;
  t.reserve(cfg.size() * 2 * xs.size());
  for (auto [a, c] : cfg)
    for (int sel = 0; sel < 2; ++sel)
      for (int x : xs) t.push_back(x == (sel == 0 ? a : c) ? 1.0 : 0.0);
  b.add_factor(std::move(scope), std::move(t));
}

// Phenotype: the weight of each ordered genotype (penetrance, or 1/0 for markers),
// omitted when it is 1 on every genotype the variables still allow.
void add_phenotype(NetworkBuilder& b, const LocusVars& v, int i) {
  const PedigreeLocus& L = v.L;
  const Rep& r = v.rep[i];
  const int n = L.n_alleles;
  const bool hemi = !L.carries_paternal(v.ped.people[i]);
  const std::vector<double>& w = L.weight[i];
  std::vector<double> t;
  if (r.joint) {
    for (auto [x, y] : r.pairs) t.push_back(w[x * n + y]);
  } else if (hemi) {
    for (int m : L.dom_m[i]) t.push_back(w[m]);
  } else {
    for (int a : v.dom(i, true))
      for (int m : L.dom_m[i]) t.push_back(w[a * n + m]);
  }
  bool trivial = true;
  for (double x : t) trivial &= x == 1.0;
  if (trivial) return;
  if (r.joint)
    b.add_factor({r.g}, std::move(t));
  else if (hemi)
    b.add_factor({r.gm}, std::move(t));
  else
    b.add_factor({r.gp, r.gm}, std::move(t));
}

}  // namespace

// Per chain position: the allele variables, then per person in pedigree order its founder
// frequencies or its meioses (selector, selector table, transmission), then its phenotype.
PedigreeNetwork::PedigreeNetwork(const Pedigree& ped,
                                 const std::vector<const PedigreeLocus*>& chain, bool kosambi,
                                 bool joint) {
  const int np = static_cast<int>(ped.people.size());
  n_loci_ = static_cast<int>(chain.size());
  const bool interference = kosambi && n_loci_ == 3;
  net_.source = "pedigree " + ped.id;
  net_.kind = "BAYES";
  NetworkBuilder b{net_, var_locus_, var_selector_};
  // Selector variables of the previous chain position, per person: [paternal, maternal].
  std::vector<std::array<int, 2>> prev_sel(np, {-1, -1}), first_sel(np, {-1, -1});

  for (int k = 0; k < n_loci_; ++k) {
    b.locus = k;
    const PedigreeLocus& L = *chain[k];
    const LocusVars v{ped, L, allele_variables(b, ped, L, joint)};
    genotypes_.push_back(genotype_views(v));
    std::vector<std::array<int, 2>>& sels = selectors_.emplace_back(np, std::array<int, 2>{-1, -1});
    for (int i = 0; i < np; ++i) {
      const Person& p = ped.people[i];
      const bool hemi = !L.carries_paternal(p);
      if (p.founder()) {
        add_founder_frequencies(b, v, i);
      } else {
        // Sex-linked: sons and daughters get the mother's X through a selector; the father's
        // X is the daughter's own variable.
        for (int side = 0; side < 2; ++side) {
          if (side == 0 && (hemi || L.sex_linked)) continue;
          const int parent = side == 0 ? p.father : p.mother;
          if (!L.carries_paternal(ped.people[parent]))
            throw std::logic_error("a father transmits through a selector at a sex-linked locus");
          const int s = b.add_var(2, true);
          sels[i][side] = s;
          if (k == 0) {
            b.add_factor({s}, {0.5, 0.5});
            first_sel[i][side] = s;
          } else {
            const bool kos = interference && k == 2;
            std::vector<int> scope{prev_sel[i][side], s};
            if (kos) scope.insert(scope.begin(), first_sel[i][side]);
            const int f = b.add_factor(scope, std::vector<double>(kos ? 8 : 4, 0.5));
            // X-linked meioses are all maternal (female thetas).
            transitions_.push_back({f, k - 1, side == 0, kos});
            theta_factors_.push_back(f);
          }
          prev_sel[i][side] = s;
          add_transmission(b, v, i, parent, side == 0, s);
        }
      }
      add_phenotype(b, v, i);
    }
  }
}

const std::vector<int>& PedigreeNetwork::set_thetas(const std::vector<double>& male,
                                                    const std::vector<double>& female) {
  for (const Transition& tr : transitions_) {
    const std::vector<double>& th = tr.male ? male : female;
    const double t = th.at(tr.interval);
    std::vector<double>& tab = net_.factors[tr.factor].table;
    if (!tr.kosambi) {
      tab = {1 - t, t, t, 1 - t};
      continue;
    }
    // Three loci under Kosambi: P(S2 | S0, S1). With r1, r2 the recombinations in the two
    // intervals and t13 their Kosambi combination, P(r1 r2) = (t1 + t2 - t13) / 2.
    const double t1 = th.at(0), t2 = t;
    const double both = (t1 + t2 - combine_thetas(t1, t2, MapFunction::Kosambi)) / 2;
    const double r_after_r = t1 > 0 ? both / t1 : t2;               // P(r2 | r1)
    const double r_after_n = t1 < 1 ? (t2 - both) / (1 - t1) : t2;  // P(r2 | no r1)
    for (int s0 = 0; s0 < 2; ++s0)
      for (int s1 = 0; s1 < 2; ++s1) {
        const double r = s0 != s1 ? r_after_r : r_after_n;
        tab[(s0 * 2 + s1) * 2 + (s1 == 0 ? 0 : 1)] = 1 - r;  // S2 == S1
        tab[(s0 * 2 + s1) * 2 + (s1 == 0 ? 1 : 0)] = r;      // S2 != S1
      }
  }
  return theta_factors_;
}

namespace {
// Thetas strictly inside (0, 0.5) so that no table entry is zero while the plan is made
// (a reduction that prunes zeros must not depend on the theta it was planned at).
std::vector<double> generic(std::size_t n) { return std::vector<double>(n, 0.25); }
}  // namespace

PedigreeLikelihood::PedigreeLikelihood(const Pedigree& ped,
                                       const std::vector<const PedigreeLocus*>& chain, bool kosambi,
                                       const PlanOptions& opt, bool joint,
                                       std::function<double(ConditionedPlan&)> runner)
    : net_(ped, chain, kosambi, joint), runner_(std::move(runner)) {
  net_.set_thetas(generic(chain.size() - 1), generic(chain.size() - 1));
  // Dimensions a table does not depend on are dropped (a child's allele given the selector of
  // a homozygous parent), except in the selector tables that refill() rewrites per theta.
  PlanOptions po = opt;
  po.reduce.drop_independent = true;
  po.reduce.fixed_shape = net_.theta_factors();
  plan_ =
      make_linkage_plan(net_.network(), net_.evidence(), po, net_.var_locus(), net_.var_selector());
  male_ = generic(chain.size() - 1);
  female_ = male_;
  std::vector<int> slot(net_.network().factors.size(), 0);
  const std::vector<LogFactor>& factors = model_factors(plan_);
  const auto& constants = model_constants(plan_);
  for (std::size_t i = 0; i < factors.size(); ++i)
    slot[factors[i].origin] = static_cast<int>(i) + 1;
  for (std::size_t i = 0; i < constants.size(); ++i)
    slot[constants[i].first] = -1 - static_cast<int>(i);
  for (int f : net_.theta_factors())
    if (slot[f] != 0) slots_.push_back({f, slot[f] > 0 ? slot[f] - 1 : slot[f]});
}

// Compile once, evaluate many: only the selector tables change with theta, and value
// elimination never depends on them (the plan is made at theta 0.25, where they have no zero,
// and a zero at theta 0 never empties a domain on its own). So re-slice just those tables
// against the plan's kept values instead of reducing the whole network again; a zero is then
// simply a -inf entry.
void PedigreeLikelihood::refill() {
  const Network& net = net_.network();
  const ReducedModel& m = plan_.plan.model;  // kept values: the same in a conditioned plan
  std::vector<InputTableRefill> tables;
  for (auto [f, slot] : slots_) {
    const Factor& src = net.factors[f];
    const int k = static_cast<int>(src.scope.size());
    std::vector<long> stride(k);
    long s = 1;
    for (int j = k - 1; j >= 0; --j) stride[j] = s, s *= m.orig_card[src.scope[j]];
    // Offsets of the kept values of each free variable; the fixed ones add a constant.
    long base = 0;
    std::vector<std::vector<long>> off;
    for (int j = 0; j < k; ++j) {
      const int v = src.scope[j];
      if (m.fixed[v]) {
        base += m.value[v] * stride[j];
      } else {
        off.emplace_back();
        for (int x : m.kept[v]) off.back().push_back(x * stride[j]);
      }
    }
    std::vector<double> out;
    std::vector<int> digit(off.size(), 0);
    while (true) {
      long at = base;
      for (std::size_t j = 0; j < off.size(); ++j) at += off[j][digit[j]];
      const double x = src.table[at];
      out.push_back(x > 0 ? std::log(x) : -std::numeric_limits<double>::infinity());
      int j = static_cast<int>(off.size()) - 1;
      for (; j >= 0; --j) {
        if (++digit[j] < static_cast<int>(off[j].size())) break;
        digit[j] = 0;
      }
      if (j < 0) break;
    }
    if (slot < 0) {
      model_constants(plan_)[-1 - slot].second = out.at(0);
      continue;
    }
    tables.push_back({static_cast<std::size_t>(slot), std::move(out)});
  }
  refill_inputs(plan_, std::move(tables));
}

double PedigreeLikelihood::ln_likelihood(const std::vector<double>& male,
                                         const std::vector<double>& female) {
  if (have_last_ && male == male_ && female == female_) return last_;
  if (male != male_ || female != female_) {
    net_.set_thetas(male, female);
    refill();
    male_ = male;
    female_ = female;
  }
  have_last_ = true;
  const Plan& p = plan_.plan;
  if (!p.model.impossible.empty()) return last_ = -std::numeric_limits<double>::infinity();
  if (!plan_.conditioned() && p.tree.buckets.empty()) return last_ = p.model.log_constant();
  // every slice of a conditioned plan (one call when it is not) through the same runner
  if (runner_) return last_ = runner_(plan_);
  return last_ = run_conditioned(plan_, [](const Plan& slice) { return run_plan(slice); });
}

}  // namespace kinfer::linkage

namespace kinfer::linkage {

GenotypeVariable add_genotype_variable(Network& net, const PedigreeNetwork& pn, int locus,
                                       int person, const PedigreeLocus& L) {
  auto input_allele = [&L](int x) {
    return x < 0 ? 0 : x < static_cast<int>(L.original.size()) ? L.original[x] : x + 1;
  };
  const PedigreeNetwork::Genotype& g = pn.genotype(locus, person);
  std::map<std::pair<int, int>, int> index;
  std::vector<std::pair<int, int>> of_config;  // per configuration of the person's variables
  for (auto [x, y] : g.alleles) {
    const int a = input_allele(x), b = input_allele(y);
    of_config.push_back(a == 0 ? std::pair{0, b} : std::pair{std::min(a, b), std::max(a, b)});
    index.emplace(of_config.back(), 0);
  }
  GenotypeVariable gv;
  gv.var = net.num_vars();
  for (auto& [key, at] : index) at = static_cast<int>(gv.values.size()), gv.values.push_back(key);
  net.card.push_back(static_cast<int>(gv.values.size()));
  std::vector<double> table(of_config.size() * gv.values.size(), 0.0);
  for (std::size_t c = 0; c < of_config.size(); ++c)
    table[c * gv.values.size() + index.at(of_config[c])] = 1.0;
  std::vector<int> scope = g.vars;
  scope.push_back(gv.var);
  net.factors.push_back({std::move(scope), std::move(table), 0});
  return gv;
}

}  // namespace kinfer::linkage
