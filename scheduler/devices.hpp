#pragma once
// The GPUs as the commands (apps/) see them besides running plans (runner.hpp): listing them,
// opening one, keeping them open across jobs, the driver's process environment, and the
// Lander-Green chain's GPU backend. apps/ includes no gpu/ header: the scheduler is the one
// layer that decides about and drives the device.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpu/device_api.hpp"
#include "linkage/chain.hpp"
#include "scheduler/profile.hpp"

namespace kinfer::sched {

enum class DeviceChoice { automatic, cpu, gpu };
const char* to_string(DeviceChoice d);
DeviceChoice parse_device(const std::string& name);  // "auto", "cpu", "gpu"; invalid_argument

// The machine's GPUs as the driver lists them, without opening one (`kinfer info`, the batch's
// GPU slots). Never throws; `available` false says why there is none.
using GpuList = gpu::DeviceInfo;
GpuList list_gpus();

// Opening the machine's GPU (for the runner, and for `kinfer calibrate` and `kinfer schedule`,
// which measure it directly). Never throws.
struct OpenedDevice {
  // null when there is no usable GPU; shared with the process's kept devices (keep_gpus_open)
  std::shared_ptr<gpu::Context> ctx;
  std::string name;                   // the GPU's name, or why there is none
  double memory_bytes = 0;
  double seconds = 0;  // probing and opening it took (the driver's start included)
  // The calibration profile for it, looked up and read while the context is made when asked for
  // (open_gpu's `with_profile`: the background start; reading ~0.2 MB of JSON takes 3-4 ms):
  // `profile_looked` says it was; `profile_path` is where it was looked for (find_profile_for_gpu,
  // else default_profile_path()), `profile` empty when there is none or it could not be read.
  bool profile_looked = false;
  std::string profile_path;
  std::optional<Profile> profile;
};
// device: an index among the visible GPUs
OpenedDevice open_gpu(int device = 0, bool with_profile = false);
// For a process that runs many jobs one after another (a batch's device worker): from now on
// each GPU opened stays open for the process's life, and later open_gpu calls (every job's
// runner) take it as it is, its memory pools and loaded kernels warm, instead of opening the
// device again. A single command's GPU closes with its runner.
void keep_gpus_open();

// The calibration profile for the GPU `gpu_name`: the one made with it, else whatever the user's
// cache holds (e.g. a CPU-only calibration); `profile` empty when the file is not there. Throws
// InputError for a malformed file.
void find_and_read_profile(const std::string& gpu_name, std::string& path,
                           std::optional<Profile>& profile);

// The process around the driver (apps/main.cpp, apps/process_exit.cpp); gpu/device_api.hpp
// says what each does.
void set_gpu_driver_environment();  // first thing in main(), before any thread starts
bool gpu_driver_started();
bool under_gpu_tool();

// The backends of the Lander-Green chain (dense maps) for a command's --device: on the GPU with
// `gpu` always, with `auto` from 18 bits (below, a CPU step takes a millisecond), never with
// `cpu` (empty function). Checkpoints beyond device memory go to pinned host memory up to
// `host_bytes`. A backend that cannot be made (no GPU) is nullptr: the chain runs on the CPU,
// said once (a warning when a GPU was asked for or seems present, else at -v).
using ChainBackends =
    std::function<std::unique_ptr<linkage::ChainBackend>(const linkage::ChainLayout&)>;
ChainBackends gpu_chain_backends(DeviceChoice device, double host_bytes);

}  // namespace kinfer::sched
