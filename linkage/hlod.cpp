#include "linkage/hlod.hpp"

#include <algorithm>
#include <cmath>

namespace kinfer::linkage {

namespace {
const double kLn10 = std::log(10.0);
}

double admixture_lod(const std::vector<double>& lods, double alpha) {
  double s = 0;
  for (double lod : lods) {
    if (std::isinf(lod) && lod < 0) {
      s += std::log1p(-alpha) / kLn10;
    } else if (lod >= 0) {
      // lod + log10(alpha + (1 - alpha) 10^-lod): no overflow however large the LOD.
      s += lod + std::log10(alpha + (1 - alpha) * std::pow(10.0, -lod));
    } else {
      // log10(1 + alpha (10^lod - 1)), accurate for LODs near 0 and alpha near 0.
      s += std::log1p(alpha * std::expm1(lod * kLn10)) / kLn10;
    }
  }
  return s;
}

Hlod max_hlod(const std::vector<double>& lods) {
  Hlod best{admixture_lod(lods, 0), 0};
  int best_i = 0;
  for (int i = 1; i <= 100; ++i) {
    const double a = i / 100.0;
    const double v = admixture_lod(lods, a);
    if (v > best.hlod) best = {v, a}, best_i = i;
  }
  // Concave in alpha: the maximum lies within one grid step of the best grid point.
  double lo = std::max(0, best_i - 1) / 100.0, hi = std::min(100, best_i + 1) / 100.0;
  const double g = (std::sqrt(5.0) - 1) / 2;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = admixture_lod(lods, x1), f2 = admixture_lod(lods, x2);
  while (hi - lo > 1e-11) {
    if (f1 < f2) {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + g * (hi - lo);
      f2 = admixture_lod(lods, x2);
    } else {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - g * (hi - lo);
      f1 = admixture_lod(lods, x1);
    }
  }
  const double a = (lo + hi) / 2, v = admixture_lod(lods, a);
  if (v > best.hlod) best = {v, a};
  if (best.hlod <= 0) best = {0, 0};  // no evidence for linkage in any proportion
  return best;
}

int lander_green_bits(const Pedigree& ped) {
  int n = 0, f = 0;
  for (const Person& p : ped.people) (p.founder() ? f : n) += 1;
  return 2 * n - f;
}

}  // namespace kinfer::linkage
