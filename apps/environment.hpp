#pragma once
// The environment variables of kinfer's own that it reads, every one of them here, read once and
// passed down as options (docs/building.md#environment-variables lists the five for users). Variables of other
// programs that kinfer honours (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_MAX_CONNECTIONS,
// XDG_CACHE_HOME, HOME, the MPI launchers') are read where they are used.
#include <string>

namespace kinfer::app {

struct Environment {
  // KINFER_ORDER_CACHE: the order cache's folder, or "none" (--order-cache overrides it); empty:
  // unset (network_options.hpp's default_order_cache_dir).
  std::string order_cache;
  // KINFER_PROFILES: a folder of shipped GPU profiles looked in first (sched::set_profiles_folder;
  // a device bundle's data/profiles); empty: unset.
  std::string profiles;
  // KINFER_AUTO_CALIBRATE=SECONDS: a GPU no profile knows is calibrated this long on its first
  // large run instead of getting a derived profile (RunRequest::auto_calibrate_seconds); 0: unset.
  double auto_calibrate_seconds = 0;
  // KINFER_EXIT=fast|wait|helper: how a process that used the GPU ends (process_exit.hpp); empty:
  // unset, kinfer decides.
  std::string exit;
  // KINFER_NO_MPI (set, not 0): one process even when started by an MPI launcher (mpi::init;
  // the batch sets it for its worker processes).
  bool no_mpi = false;
};

// The variables as they were at the first call.
const Environment& environment();

}  // namespace kinfer::app
