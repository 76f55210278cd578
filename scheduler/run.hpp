#pragma once
// One call for commands such as `kinfer pe --schedule POLICY`: plan the assignment of a Plan's
// buckets from a calibration profile, then run it with the two-thread executor.
#include <string>

#include "engine/plan.hpp"
#include "gpu/device_api.hpp"
#include "scheduler/executor.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/policies.hpp"
#include "scheduler/profile.hpp"

namespace kinfer::sched {

struct ScheduledRunOptions {
  Policy policy = Policy::comm_aware;
  std::string profile_path;          // empty: default_profile_path()
  const Profile* profile = nullptr;  // already read (profile_path then only names it in logs)
  ExecOptions exec;
  bool explain = false;   // log each bucket's reason (info level)
  bool warm_gpu = false;  // ctx already ran this plan (repeated evaluations): see plan_costs
};

struct ScheduledRun {
  double ln_pr = 0;
  Policy policy = Policy::cpu_only;  // the policy that actually ran (see fallbacks below)
  Schedule schedule;                 // empty device list when no profile was needed
  ExecStats stats;
  std::string note;                // fallbacks taken, for logs and --json
  double schedule_seconds = 0;     // reading the profile, predicting, assigning
  std::vector<Device> assignment;  // what was asked of the executor (repeat with run_scheduled)
};

// ctx == nullptr: every bucket on the CPU, no profile needed. With a device, the profile is
// read (InputError if --profile names a bad file); when there is none, or it has no GPU part,
// this function falls back to gpu-only (logged, with the advice to run `kinfer calibrate`);
// `kinfer pe` checks for the profile first and runs whole-plan instead (cmd_pe.cpp).
ScheduledRun run_with_policy(const Plan& plan, gpu::Context* ctx, const ScheduledRunOptions& opt);

}  // namespace kinfer::sched
