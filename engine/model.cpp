#include "engine/model.hpp"

#include <limits>

namespace kinfer {

std::int64_t table_size(const std::vector<int>& scope, const std::vector<int>& card) {
  std::int64_t n = 1;
  for (int v : scope) {
    if (n > std::numeric_limits<std::int64_t>::max() / card[v])
      return std::numeric_limits<std::int64_t>::max();
    n *= card[v];
  }
  return n;
}

}  // namespace kinfer
