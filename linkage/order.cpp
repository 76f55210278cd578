#include "linkage/order.hpp"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

namespace kinfer::linkage {

namespace {

bool adjacent(const std::vector<int>& nb, int u) {
  return std::binary_search(nb.begin(), nb.end(), u);
}

}  // namespace

std::vector<int> windowed_order(int n, const std::vector<int>& card,
                                const std::vector<std::vector<int>>& scopes,
                                const std::vector<int>& locus_of, int window, bool reverse,
                                const std::vector<char>& phase) {
  // Interaction graph over the scoped variables, neighbours kept sorted.
  std::vector<std::vector<int>> nb(n);
  std::vector<char> scoped(n, 0), alive(n, 0);
  for (const auto& s : scopes)
    for (int a : s) {
      scoped[a] = 1;
      for (int b : s)
        if (a != b) nb[a].push_back(b);
    }
  for (auto& v : nb) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  auto phase_of = [&](int v) { return phase.empty() ? 0 : static_cast<int>(phase[v]); };
  int max_locus = 0, left = 0, phases = 1;
  for (int v = 0; v < n; ++v)
    if (scoped[v]) {
      alive[v] = 1, ++left, max_locus = std::max(max_locus, locus_of[v]);
      phases = std::max(phases, phase_of(v) + 1);
    }
  // Per phase and locus: the variables and how many are left.
  std::vector<std::vector<int>> remaining(phases, std::vector<int>(max_locus + 1, 0));
  std::vector<int> phase_left(phases, 0);
  std::vector<std::vector<std::vector<int>>> at_locus(phases,
                                                      std::vector<std::vector<int>>(max_locus + 1));
  for (int v = 0; v < n; ++v)
    if (alive[v]) {
      ++remaining[phase_of(v)][locus_of[v]], ++phase_left[phase_of(v)];
      at_locus[phase_of(v)][locus_of[v]].push_back(v);
    }

  std::vector<long> fill(n, 0);
  std::vector<double> weight(n, 0);
  auto score = [&](int v) {
    long f = 0;
    const auto& a = nb[v];
    for (std::size_t i = 0; i < a.size(); ++i)
      for (std::size_t j = i + 1; j < a.size(); ++j) f += !adjacent(nb[a[i]], a[j]);
    double w = std::log2(static_cast<double>(card[v]));
    for (int u : a) w += std::log2(static_cast<double>(card[u]));
    fill[v] = f;
    weight[v] = w;
  };
  for (int v = 0; v < n; ++v)
    if (alive[v]) score(v);

  std::vector<int> order;
  order.reserve(left);
  std::vector<int> front(phases, reverse ? max_locus : 0);
  int ph = 0;
  while (left > 0) {
    while (phase_left[ph] == 0) ++ph;
    int& fr = front[ph];
    while (remaining[ph][fr] == 0) fr += reverse ? -1 : 1;
    const int lo = reverse ? fr - window : fr, hi = reverse ? fr : fr + window;
    int best = -1;
    for (int l = std::max(lo, 0); l <= std::min(hi, max_locus); ++l)
      for (int v : at_locus[ph][l]) {
        if (!alive[v]) continue;
        if (best < 0 || fill[v] < fill[best] || (fill[v] == fill[best] && weight[v] < weight[best]))
          best = v;
      }
    // Eliminate `best`: its neighbours become a clique.
    const std::vector<int> a = nb[best];
    for (int u : a) {
      auto& x = nb[u];
      x.erase(std::lower_bound(x.begin(), x.end(), best));
      std::vector<int> merged;
      std::set_union(x.begin(), x.end(), a.begin(), a.end(), std::back_inserter(merged));
      merged.erase(std::remove(merged.begin(), merged.end(), u), merged.end());
      x.swap(merged);
    }
    nb[best].clear();
    alive[best] = 0;
    --left;
    --remaining[ph][locus_of[best]];
    --phase_left[ph];
    order.push_back(best);
    // Scores change within two steps of the eliminated variable.
    std::vector<int> touched = a;
    for (int u : a) touched.insert(touched.end(), nb[u].begin(), nb[u].end());
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int u : touched)
      if (alive[u]) score(u);
  }
  return order;
}

ConditionedPlan make_linkage_plan(const Network& net, const Evidence& ev, const PlanOptions& opt,
                                  const std::vector<int>& locus_of,
                                  const std::vector<char>& selector) {
  PlanStart start = start_plan(net, ev, opt);
  Plan& plan = start.plan;
  const std::vector<std::vector<int>>& scopes = start.scopes;
  const OrderOptions& oo = start.order;
  plan.order = find_order(net.num_vars(), plan.model.card, scopes, oo);
  spdlog::debug(
      "{}: {} factors, {} values removed, {} independent dimensions dropped; {} order: "
      "2^{:.1f} states, largest table 2^{:.1f}",
      net.source, plan.model.factors.size(), plan.model.values_removed, plan.model.dims_dropped,
      plan.order.heuristic, plan.order.stats.log2_total_state, plan.order.stats.log2_max_table);
  // Worth a second look only when a run costs seconds (2^28 states and up: the sweeps take
  // a second or more on large networks) and the chain is long enough to sweep.
  const int loci = locus_of.empty() ? 0 : *std::max_element(locus_of.begin(), locus_of.end()) + 1;
  if (plan.order.stats.log2_total_state > 28 && loci >= 4) {
    const double max_log2 = std::log2(oo.max_table_entries);
    // Two families of candidates: every variable swept together (greedy inside a window of
    // loci), and alleles first (no fill crosses loci: an allele meets only its own locus),
    // then the selector chains swept by window, like Lander-Green's walk along the map.
    const std::vector<char> none;  // one phase: every variable swept together
    struct Candidate {
      int phases, window;
      bool reverse;
      std::vector<int> order;
      OrderStats stats;
    };
    std::vector<Candidate> cand;
    for (int ph : {0, 1})
      for (int w : {0, 1, 2, 4, loci})
        for (bool rev : {false, true}) {
          if (ph == 0 && (w == 0 || w == loci)) continue;
          if (ph == 1 && (selector.empty() || (w == loci && rev))) continue;
          cand.push_back({ph, w, rev, {}, {}});
        }
        // Independent sweeps, one per thread; the choice below is made in list order, so the
        // result does not depend on the number of threads.
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < static_cast<int>(cand.size()); ++i) {
      Candidate& c = cand[i];
      c.order = windowed_order(net.num_vars(), plan.model.card, scopes, locus_of, c.window,
                               c.reverse, c.phases ? selector : none);
      c.stats = evaluate_order(net.num_vars(), plan.model.card, scopes, c.order);
    }
    for (Candidate& c : cand) {
      const OrderStats& st = c.stats;
      const std::string name = std::string(c.phases ? "alleles first, then selectors by " : "") +
                               "locus-window(" +
                               (c.window == loci ? "all" : std::to_string(c.window)) +
                               (c.reverse ? ", from the right)" : ")");
      spdlog::debug("{}: {}: 2^{:.1f} states, largest table 2^{:.1f}", net.source, name,
                    st.log2_total_state, st.log2_max_table);
      const bool fits = st.log2_max_table <= max_log2;
      const bool better =
          (fits && !plan.order.fits) ||
          (fits == plan.order.fits && st.log2_total_state < plan.order.stats.log2_total_state);
      if (!better) continue;
      plan.order.order = std::move(c.order);
      plan.order.stats = st;
      plan.order.fits = fits;
      plan.order.heuristic = name;
    }
  }
  // Net's own name: a multi-pedigree analysis says which pedigree is too large.
  plan.network_bytes = network_table_bytes(net);
  structure(plan, opt);
  return fit_plan(std::move(plan), opt, net.source,
                  "Try a longer --order-time, fewer markers at once, raise --max-memory if the "
                  "machine has more memory, or run on a machine with more memory");
}

}  // namespace kinfer::linkage
