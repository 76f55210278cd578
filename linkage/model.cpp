#include "linkage/model.hpp"

#include <cmath>
#include <limits>

namespace kinfer::linkage {

int genotype_index(int a, int b, int n) {
  if (a > b) std::swap(a, b);
  // Row a (1-based) starts after rows 1..a-1, which hold n, n-1, ..., n-a+2 entries.
  return (a - 1) * n - (a - 1) * (a - 2) / 2 + (b - a);
}

double theta_to_morgans(double theta, MapFunction f) {
  if (theta >= 0.5) return std::numeric_limits<double>::infinity();
  if (f == MapFunction::Kosambi) return 0.25 * std::log((1 + 2 * theta) / (1 - 2 * theta));
  return -0.5 * std::log(1 - 2 * theta);
}

double morgans_to_theta(double x, MapFunction f) {
  if (std::isinf(x)) return 0.5;
  if (f == MapFunction::Kosambi) return 0.5 * std::tanh(2 * x);
  return 0.5 * (1 - std::exp(-2 * x));
}

std::vector<double> LocusFile::female_for(const std::vector<double>& male) const {
  if (sex_difference == 0) return male;
  if (sex_difference == 2) return female_theta;
  // FASTLINK scales Haldane distances by the ratio whatever the map function (checked against
  // mlink: male 0.05, ratio 2 gives female 0.095).
  std::vector<double> f(male.size());
  for (std::size_t i = 0; i < male.size(); ++i)
    f[i] = morgans_to_theta(distance_ratio * theta_to_morgans(male[i], MapFunction::Haldane),
                            MapFunction::Haldane);
  return f;
}

}  // namespace kinfer::linkage
