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
            factor_intervals_.push_back(kos ? std::vector<int>{0, 1} : std::vector<int>{k - 1});
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
  const auto& tf = net_.theta_factors();
  for (std::size_t i = 0; i < tf.size(); ++i)
    if (slot[tf[i]] != 0) {
      slots_.push_back({tf[i], slot[tf[i]] > 0 ? slot[tf[i]] - 1 : slot[tf[i]]});
      slot_intervals_.push_back(net_.intervals_of(i));
    }
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
  const std::size_t ni = male_.size();
  std::vector<char> changed(ni, 0);
  bool any = false;
  for (std::size_t i = 0; i < ni; ++i) any |= changed[i] = male.at(i) != male_[i] || female.at(i) != female_[i];
  if (!any && have_last_) {
    last_states_ = 0;
    return last_;
  }
  if (any) {
    net_.set_thetas(male, female);
    refill();
    male_ = male;
    female_ = female;
  }
  have_last_ = true;
  if (!plan_.model.impossible.empty()) return last_ = -std::numeric_limits<double>::infinity();
  if (plan_.tree.buckets.empty()) return last_ = plan_.model.log_constant();
  // The same intervals change as last time: reuse what does not depend on them. Otherwise
  // compute everything and keep what the new pattern of changes leaves alone.
  bool subset = primed_;
  for (std::size_t i = 0; i < ni && subset; ++i) subset = !changed[i] || volatile_[i];
  if (subset || cache_off_) return last_ = run(false);
  volatile_ = changed;
  return last_ = run(true);
}

double PedigreeLikelihood::recomputed_fraction() const {
  double all = 0;
  for (const Bucket& b : plan_.tree.buckets) all += std::exp2(b.log2_states);
  return all > 0 ? last_states_ / all : 0;
}

double PedigreeLikelihood::run(bool prime) {
  const auto& buckets = plan_.tree.buckets;
  const std::size_t nb = buckets.size();
  if (prime) {
    // A bucket is dirty when it holds a factor of a volatile interval, or a child is dirty.
    std::vector<int> bucket_of(plan_.model.factors.size(), -1);
    for (std::size_t b = 0; b < nb; ++b)
      for (int f : buckets[b].factors) bucket_of[f] = static_cast<int>(b);
    dirty_.assign(nb, 0);
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].second < 0) continue;
      for (int iv : slot_intervals_[i])
        if (volatile_[iv]) dirty_[bucket_of[slots_[i].second]] = 1;
    }
    for (std::size_t b = 0; b < nb; ++b)
      if (dirty_[b] && buckets[b].parent >= 0) dirty_[buckets[b].parent] = 1;
    kept_.assign(nb, {});
    primed_ = true;
  }
  // Keeping outputs costs memory: give up caching past a quarter of the plan's estimate
  // (or 64 MiB), running every bucket each time instead.
  const double keep_limit = std::max(64.0 * (1 << 20), plan_.memory.peak_bytes / 4);
  double kept_bytes = 0;
  std::vector<std::vector<double>> msg(nb);
  last_states_ = 0;
  for (std::size_t b = 0; b < nb; ++b) {
    const Bucket& bk = buckets[b];
    const bool compute = prime || !primed_ || dirty_[b];
    if (!compute) continue;
    const BucketShape shape = bucket_shape(plan_, static_cast<int>(b));
    std::vector<InputTable> in;
    for (int f : bk.factors) in.push_back({plan_.input_data[f].data(), plan_.input_scope[f]});
    for (int c : bk.children) {
      const std::vector<double>& m = msg[c].empty() && primed_ && !kept_[c].empty() ? kept_[c] : msg[c];
      in.push_back({m.data(), buckets[c].output_vars()});
    }
    msg[b].resize(shape.output_size());
    sum_product_log(shape, in, msg[b].data(), 0);
    last_states_ += std::exp2(bk.log2_states);
    for (int c : bk.children) std::vector<double>().swap(msg[c]);
    if (prime && primed_ && !dirty_[b] && bk.parent >= 0 && dirty_[bk.parent]) {
      kept_bytes += 8.0 * msg[b].size();
      kept_[b] = msg[b];
    }
  }
  if (prime && kept_bytes > keep_limit) {
    primed_ = false;  // too much to keep: every run computes everything
    cache_off_ = true;
    kept_.assign(nb, {});
  }
  // A root that reads no volatile interval keeps its value; the constants may still change.
  if (!msg.back().empty()) root_ = msg.back()[0];
  return root_ + plan_.model.log_constant();
}

}  // namespace kinfer::linkage
