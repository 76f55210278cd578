#pragma once
// The heterogeneity LOD (Smith's admixture model): a proportion alpha of the families is linked,
// the rest is not, so family i's likelihood ratio is alpha * 10^LOD_i + 1 - alpha and
//   HLOD = max over alpha in [0, 1] of sum_i log10(alpha * 10^LOD_i + 1 - alpha).
// Each term is the log of a function affine in alpha, so the sum is concave in alpha: a grid
// search followed by a golden-section refinement finds the global maximum.
// Also what the LOD report states about each pedigree (its Lander-Green bit count).
#include <vector>

#include "linkage/model.hpp"

namespace kinfer::linkage {

// sum_i log10(alpha * 10^lods[i] + 1 - alpha), computed without overflow for large LODs;
// a LOD of -inf (the family excludes linkage) contributes log10(1 - alpha).
double admixture_lod(const std::vector<double>& lods, double alpha);

struct Hlod {
  double hlod = 0;
  double alpha = 0;
};

// The maximum over alpha: a grid 0, 0.01, ..., 1, then golden section around the best grid
// point (to about 1e-10 in alpha). HLOD >= 0 (alpha = 0 gives 0); when every LOD is <= 0 the
// answer is HLOD 0 at alpha 0. No families: HLOD 0 at alpha 0.
Hlod max_hlod(const std::vector<double>& lods);

// Bits of the inheritance vector MERLIN's Lander-Green algorithm walks: 2n - f, with n the
// non-founders and f the founders (founder-phase symmetry saves one bit per founder).
int lander_green_bits(const Pedigree& ped);
// MERLIN's default limit on that count.
constexpr int kMerlinMaxBits = 24;

}  // namespace kinfer::linkage
