#include "engine/linkage_network.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/task_tree.hpp"

namespace kinfer::linkage {

double combine_thetas(double a, double b, MapFunction f) {
  if (f == MapFunction::Kosambi) return (a + b) / (1 + 4 * a * b);
  return a + b - 2 * a * b;
}

double split_theta(double total, double a, MapFunction f) {
  if (f == MapFunction::Kosambi) return (total - a) / (1 - 4 * a * total);
  return (total - a) / (1 - 2 * a);
}

PedigreeNetwork::PedigreeNetwork(const Pedigree& ped, const std::vector<const PedigreeLocus*>& chain,
                                 bool kosambi) {
  const int np = static_cast<int>(ped.people.size());
  n_loci_ = static_cast<int>(chain.size());
  const bool interference = kosambi && n_loci_ == 3;
  net_.source = "pedigree " + ped.id;
  net_.kind = "BAYES";
  auto add_var = [&](int card) {
    net_.card.push_back(card);
    return net_.num_vars() - 1;
  };
  auto add_factor = [&](std::vector<int> scope, std::vector<double> table) {
    net_.factors.push_back({std::move(scope), std::move(table), 0});
    return static_cast<int>(net_.factors.size()) - 1;
  };
  // Selector variables of the previous chain position, per person: [paternal, maternal].
  std::vector<std::array<int, 2>> prev_sel(np, {-1, -1}), first_sel(np, {-1, -1});

  for (int k = 0; k < n_loci_; ++k) {
    const PedigreeLocus& L = *chain[k];
    std::vector<int> gp(np, -1), gm(np, -1);
    // Allele variables; a daughter's paternal X is her father's maternal variable.
    for (int i = 0; i < np; ++i) {
      const Person& p = ped.people[i];
      gm[i] = add_var(static_cast<int>(L.dom_m[i].size()));
      if (L.carries_paternal(p) && (!L.sex_linked || p.founder()))
        gp[i] = add_var(static_cast<int>(L.dom_p[i].size()));
    }
    for (int i = 0; i < np; ++i) {
      const Person& p = ped.people[i];
      if (L.sex_linked && L.carries_paternal(p) && !p.founder()) gp[i] = gm[p.father];
    }
    // The domain of each allele variable, as recoded alleles.
    auto dom = [&](int i, bool paternal) -> const std::vector<int>& {
      if (paternal && L.sex_linked && !ped.people[i].founder()) return L.dom_m[ped.people[i].father];
      return paternal ? L.dom_p[i] : L.dom_m[i];
    };

    for (int i = 0; i < np; ++i) {
      const Person& p = ped.people[i];
      const bool hemi = !L.carries_paternal(p);
      // Founders: allele frequencies (linkage equilibrium).
      if (p.founder()) {
        for (int side = 0; side < 2; ++side) {
          if (side == 0 && hemi) continue;
          std::vector<double> t;
          for (int a : dom(i, side == 0)) t.push_back(L.freq[a]);
          add_factor({side == 0 ? gp[i] : gm[i]}, std::move(t));
        }
      } else {
        // Transmission: the child's allele is the parent's paternal allele when the selector
        // is 0, the maternal one when it is 1. Sex-linked: sons and daughters get the
        // mother's X through a selector; the father's X is the daughter's own variable.
        for (int side = 0; side < 2; ++side) {
          if (side == 0 && (hemi || L.sex_linked)) continue;
          const int parent = side == 0 ? p.father : p.mother;
          const Person& par = ped.people[parent];
          const int s = add_var(2);
          if (k == 0) {
            add_factor({s}, {0.5, 0.5});
            first_sel[i][side] = s;
          } else {
            const bool kos = interference && k == 2;
            std::vector<int> scope{prev_sel[i][side], s};
            if (kos) scope.insert(scope.begin(), first_sel[i][side]);
            const int f = add_factor(scope, std::vector<double>(kos ? 8 : 4, 0.5));
            // X-linked meioses are all maternal (female thetas).
            transitions_.push_back({f, k - 1, side == 0, kos});
            theta_factors_.push_back(f);
          }
          prev_sel[i][side] = s;
          const std::vector<int>& da = dom(parent, true);
          const std::vector<int>& db = dom(parent, false);
          const std::vector<int>& dx = dom(i, side == 0);
          const bool par_hemi = !L.carries_paternal(par);  // a sex-linked father: one allele
          std::vector<double> t;
          std::vector<int> scope;
          if (par_hemi) {
            throw std::logic_error("a father transmits through a selector at a sex-linked locus");
          }
          scope = {gp[parent], gm[parent], s, side == 0 ? gp[i] : gm[i]};
          t.reserve(da.size() * db.size() * 2 * dx.size());
          for (int a : da)
            for (int b : db)
              for (int sel = 0; sel < 2; ++sel)
                for (int x : dx) t.push_back(x == (sel == 0 ? a : b) ? 1.0 : 0.0);
          add_factor(std::move(scope), std::move(t));
        }
      }
      // Phenotype: the weight of each ordered genotype (penetrance, or 1/0 for markers),
      // omitted when it is 1 on every genotype the domains still allow.
      const std::vector<double>& w = L.weight[i];
      const int n = L.n_alleles;
      std::vector<double> t;
      bool trivial = true;
      if (hemi) {
        for (int m : L.dom_m[i]) t.push_back(w[m]);
      } else {
        for (int a : dom(i, true))
          for (int m : L.dom_m[i]) t.push_back(w[a * n + m]);
      }
      for (double x : t) trivial &= x == 1.0;
      if (!trivial) {
        if (hemi)
          add_factor({gm[i]}, std::move(t));
        else
          add_factor({gp[i], gm[i]}, std::move(t));
      }
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
    const double r_after_r = t1 > 0 ? both / t1 : t2;             // P(r2 | r1)
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
                                       const PlanOptions& opt)
    : net_(ped, chain, kosambi) {
  net_.set_thetas(generic(chain.size() - 1), generic(chain.size() - 1));
  plan_ = make_plan(net_.network(), net_.evidence(), opt);
  male_ = generic(chain.size() - 1);
  female_ = male_;
  std::vector<int> slot(net_.network().factors.size(), 0);
  for (std::size_t i = 0; i < plan_.model.factors.size(); ++i)
    slot[plan_.model.factors[i].origin] = static_cast<int>(i) + 1;
  for (std::size_t i = 0; i < plan_.model.constants.size(); ++i)
    slot[plan_.model.constants[i].first] = -1 - static_cast<int>(i);
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
  const ReducedModel& m = plan_.model;
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
      plan_.model.constants[-1 - slot].second = out.at(0);
      continue;
    }
    LogFactor& lf = plan_.model.factors[slot];
    if (lf.logv.size() != out.size()) throw std::logic_error("selector table changed its shape");
    lf.logv = std::move(out);
    plan_.input_data[slot] = restructure(lf, m.card, plan_.tree.rank, plan_.input_scope[slot]);
  }
}

double PedigreeLikelihood::ln_likelihood(const std::vector<double>& male,
                                         const std::vector<double>& female) {
  if (male != male_ || female != female_) {
    net_.set_thetas(male, female);
    refill();
    male_ = male;
    female_ = female;
  }
  if (!plan_.model.impossible.empty()) return -std::numeric_limits<double>::infinity();
  if (plan_.tree.buckets.empty()) return plan_.model.log_constant();
  return run_plan(plan_);
}

}  // namespace kinfer::linkage
