#pragma once
// JSON helpers shared by the commands and the scheduler (header-only: needs nlohmann_json).
#include <cmath>
#include <nlohmann/json.hpp>

namespace kinfer {

// `x` as a JSON number, or null when it is not finite (NaN: not measured; inf: not possible).
inline nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

// A byte count as a whole JSON number (estimates are fractional), or null when not finite.
inline nlohmann::json bytes_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(static_cast<long long>(std::llround(x)))
                          : nlohmann::json(nullptr);
}

}  // namespace kinfer
