#pragma once
// Elimination orders for pedigree networks over long locus chains. The general greedy search
// (engine/ordering.hpp) looks at the whole graph at once; on a chain of many markers it mixes
// far-apart loci and its tables grow with the number of markers (a 20-person pedigree: width
// 23 over 21 loci, 51 over 41). Sweeping a window of a few loci along the chain, greedy inside
// the window, keeps the width about that of a few loci. make_linkage_plan tries both and keeps
// the cheaper order.
#include <vector>

#include "engine/condition.hpp"
#include "engine/plan.hpp"

namespace kinfer::linkage {

// Greedy min-fill (ties: smaller table) restricted to the variables of loci
// [front, front + window] (or, reversed, [front - window, front]), where front is the first
// (last) locus with variables left. `locus_of` gives each variable's locus position. With
// `phase` (empty: all 0), every variable of phase 0 goes before any of phase 1, and so on; the
// window moves separately in each phase.
std::vector<int> windowed_order(int num_vars, const std::vector<int>& card,
                                const std::vector<std::vector<int>>& scopes,
                                const std::vector<int>& locus_of, int window, bool reverse,
                                const std::vector<char>& phase = {});

// make_plan (engine/plan.hpp) with the windowed orders as extra candidates when the greedy
// search's order is costly. When the order found does not fit opt.max_memory_bytes the plan is
// conditioned to fit (engine/condition.hpp); ResourceError only when even that cannot fit.
// `selector` (may be empty): 1 for the meiosis selectors, which the alleles-first candidates
// eliminate after every allele variable.
ConditionedPlan make_linkage_plan(const Network& net, const Evidence& ev, const PlanOptions& opt,
                                  const std::vector<int>& locus_of,
                                  const std::vector<char>& selector = {});

}  // namespace kinfer::linkage
