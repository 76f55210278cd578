#include "apps/environment.hpp"

#include <algorithm>
#include <cstdlib>

namespace kinfer::app {

namespace {

std::string variable(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Environment read_environment() {
  Environment e;
  e.order_cache = variable("KINFER_ORDER_CACHE");
  e.profiles = variable("KINFER_PROFILES");
  e.auto_calibrate_seconds = std::max(0.0, std::atof(variable("KINFER_AUTO_CALIBRATE").c_str()));
  e.exit = variable("KINFER_EXIT");
  const std::string no_mpi = variable("KINFER_NO_MPI");
  e.no_mpi = !no_mpi.empty() && no_mpi != "0";
  return e;
}

}  // namespace

const Environment& environment() {
  static const Environment e = read_environment();
  return e;
}

}  // namespace kinfer::app
