// The two-thread executor on a fake device (tests/fake_device.hpp): every policy, and random
// assignments, give run_plan's answer; the bytes that cross match the schedule's traffic; no
// GPU means everything on the CPU; errors of the GPU thread come back without a hang.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "engine/errors.hpp"
#include "engine/posterior.hpp"
#include "fake_device.hpp"
#include "gpu/policy.hpp"
#include "io/uai.hpp"
#include "scheduler/calibrate.hpp"
#include "scheduler/executor.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/policies.hpp"
#include "tests/scheduler_support.hpp"

using namespace kinfer;
using kinfer::test::data_path;
using kinfer::test::uai_plan;
using namespace kinfer::sched;

namespace {

// The fixed profile makes the policies disagree on these small networks: its GPU is 100x
// faster per state but pays 10-20 us per transfer.
std::vector<std::pair<std::string, std::vector<Device>>> assignments(const Plan& plan,
                                                                     std::uint64_t seed) {
  const Profile prof = load_profile(data_path("profiles/fixed-test.json"));
  const PlanCosts pc = plan_costs(plan, prof);
  std::vector<std::pair<std::string, std::vector<Device>>> out;
  for (Policy p : kAllPolicies) out.emplace_back(to_string(p), make_schedule(pc.tree, p).device);
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 6; ++k) {
    std::vector<Device> a(plan.tree.buckets.size());
    for (auto& d : a) d = std::bernoulli_distribution(0.5)(rng) ? Device::gpu : Device::cpu;
    out.emplace_back("random " + std::to_string(k), a);
  }
  return out;
}

}  // namespace

TEST_CASE("Scheduler.ExecutorMatchesRunPlanUnderEveryAssignment", "[scheduler]") {
  int folds = 0;  // factor inputs the device added into a child's table (merge_inputs rule 3)
  for (const char* name : {"Pedigree_11.uai", "grid10x10.f10.uai", "CSP_12.uai", "DBN_11.uai"}) {
    const Plan plan = uai_plan(name);
    const double expected = run_plan(plan);
    const Profile prof = load_profile(data_path("profiles/fixed-test.json"));
    const PlanCosts pc = plan_costs(plan, prof);
    int mixed = 0;
    for (const auto& [label, a] : assignments(plan, 17)) {
      INFO(name << ", " << label);
      test::FakeDevice dev(2, 200, std::hash<std::string>{}(label));
      ExecStats st;
      const double got = run_scheduled(plan, a, &dev, {}, &st);
      CHECK(got == Approx(expected).epsilon(1e-12));
      CHECK(dev.error().empty());
      // buckets no GPU kernel takes (e.g. more than 16 inputs) moved to the CPU, nothing else
      REQUIRE(st.ran_on.size() == a.size());
      for (std::size_t b = 0; b < a.size(); ++b)
        if (st.ran_on[b] != a[b]) {
          CHECK(a[b] == Device::gpu);
          CHECK_FALSE(st.fallback_reason[b].empty());
        }
      int on_gpu = 0;
      for (Device d : st.ran_on) on_gpu += d == Device::gpu;
      mixed += on_gpu > 0 && on_gpu < static_cast<int>(a.size());
      CHECK(st.gpu_buckets == on_gpu);
      CHECK(dev.kernels == on_gpu);
      // exactly the traffic the cost model charges for
      const Traffic t = schedule_traffic(pc, st.ran_on);
      // (uploads differ when factor inputs were merged for the kernels: products, not the
      // plan's tables, cross)
      CHECK(st.h2d_bytes == t.h2d);
      CHECK(st.d2h_bytes == t.d2h);
      CHECK(dev.h2d_bytes == st.h2d_bytes);
      CHECK(dev.d2h_bytes == t.d2h);
      CHECK(dev.live_tables() == 0);  // every device table released
      folds += dev.folds;
    }
    CHECK(mixed >= 3);
  }
  CHECK(folds > 20);
}

TEST_CASE("Scheduler.ExecutorKeepsTheUpwardPassOfMarAndMpe", "[scheduler]") {
  // ExecOptions::pass under every assignment: every bucket's output kept on the host (a GPU
  // output that stays on the device for its parent downloaded too) and, maximising, max-product
  // buckets on both devices: the kept tables are run_plan's, entry for entry.
  int kept_on_device_total = 0;
  for (const char* name : {"Pedigree_11.uai", "DBN_11.uai"}) {
    const Plan plan = uai_plan(name);
    for (bool maximise : {false, true}) {
      std::vector<LnTable> expected, got;
      RunOptions ro;
      ro.pass = {maximise, &expected};
      run_plan(plan, ro);
      REQUIRE(expected.size() == plan.tree.buckets.size());
      int kept_on_device = 0;
      for (const auto& [label, a] : assignments(plan, 29)) {
        INFO(name << (maximise ? ", max-product, " : ", sum-product, ") << label);
        test::FakeDevice dev(2, 100, std::hash<std::string>{}(label));
        ExecOptions eo;
        eo.pass = {maximise, &got};
        ExecStats st;
        run_scheduled(plan, a, &dev, eo, &st);
        CHECK(dev.error().empty());
        REQUIRE(got.size() == expected.size());
        for (std::size_t b = 0; b < got.size(); ++b) {
          REQUIRE(got[b].size() == expected[b].size());
          for (std::size_t i = 0; i < got[b].size(); ++i)
            if (std::isinf(expected[b][i]))
              REQUIRE(got[b][i] == expected[b][i]);
            else
              REQUIRE(got[b][i] == Approx(expected[b][i]).epsilon(1e-12).margin(1e-12));
          const int parent = plan.tree.buckets[b].parent;
          kept_on_device += parent >= 0 && st.ran_on[b] == Device::gpu &&
                            st.ran_on[parent] == Device::gpu;
        }
      }
      kept_on_device_total += kept_on_device;
    }
  }
  CHECK(kept_on_device_total > 0);  // Pedigree_11's; DBN_11's GPU buckets all have CPU parents
  // The maximising pass's root is max_x P(x, e) up to the constants: never above P(e).
  const Plan plan = uai_plan("Pedigree_11.uai");
  std::vector<LnTable> up;
  RunOptions ro;
  ro.pass = {true, &up};
  run_plan(plan, ro);
  CHECK(up.back()[0] < run_plan(plan) - plan.model.log_constant());
}

TEST_CASE("Scheduler.ExecutorNarrowsTheTracebackWhereTheOutputsAre", "[scheduler]") {
  // The MPE's traceback with the outputs held on the fake device: every scan that reads a held
  // output narrowed down there (traceback_held_from 0: the held parts copied into the scan's
  // tables on the device, never through the host), or every scan of two or more variables
  // (traceback_maxima_from 0), under every assignment: the CPU's assignment.
  for (const char* name : {"Pedigree_11.uai", "grid10x10.f10.uai"}) {
    const Plan plan = uai_plan(name);
    const MostProbable want = compute_mpe(plan, 1);
    int range_copies = 0;
    for (const auto& [label, a] : assignments(plan, 31)) {
      for (bool held_only : {true, false}) {
        INFO(name << ", " << label << (held_only ? ", scans reading held outputs" : ", every scan"));
        test::FakeDevice dev(2, 20, std::hash<std::string>{}(label));
        ExecOptions eo;
        eo.traceback_held_from = 0;
        if (!held_only) eo.traceback_maxima_from = 0;
        const UpwardRunner upward = [&](const Plan& p, const UpwardPass& pass) {
          eo.pass = pass;
          run_scheduled(p, a, &dev, eo);
        };
        const MostProbable m = compute_mpe(plan, 1, upward);
        CHECK(m.ln_pr == Approx(want.ln_pr).epsilon(1e-12));
        CHECK(m.assignment == want.assignment);
        CHECK(dev.error().empty());
        CHECK(dev.live_tables() == 0);
        range_copies += dev.range_copies;
      }
    }
    CHECK(range_copies > 0);
  }
}

TEST_CASE("Scheduler.ExecutorWithOneStreamAndTimedBuckets", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  const double expected = run_plan(plan);
  for (const auto& [label, a] : assignments(plan, 5)) {
    INFO(label);
    test::FakeDevice dev(1, 50);
    ExecOptions opt;
    opt.time_buckets = true;
    ExecStats st;
    CHECK(run_scheduled(plan, a, &dev, opt, &st) == Approx(expected).epsilon(1e-12));
    REQUIRE(st.kernel_seconds.size() == plan.tree.buckets.size());
    for (double s : st.kernel_seconds) CHECK(s > 0);
  }
}

TEST_CASE("Scheduler.ExecutorWithoutGpuRunsEverythingOnCpu", "[scheduler]") {
  const Plan plan = uai_plan("grid10x10.f10.uai");
  std::vector<Device> all_gpu(plan.tree.buckets.size(), Device::gpu);
  ExecStats st;
  CHECK(run_scheduled(plan, all_gpu, nullptr, {}, &st) == Approx(run_plan(plan)).epsilon(1e-12));
  CHECK(st.gpu_buckets == 0);
  CHECK(st.cpu_buckets == static_cast<int>(plan.tree.buckets.size()));
  CHECK_THAT(st.fallback, Catch::Contains("no GPU"));
}

TEST_CASE("Scheduler.ExecutorGpuErrorsPropagate", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  std::vector<Device> alt(plan.tree.buckets.size());
  for (std::size_t b = 0; b < alt.size(); ++b) alt[b] = b % 2 ? Device::gpu : Device::cpu;
  for (int limit : {0, 3, 10}) {
    INFO("allocations before the device is full: " << limit);
    test::FakeDevice dev(2, 100);
    dev.alloc_limit = limit;
    CHECK_THROWS_AS(run_scheduled(plan, alt, &dev), ResourceError);
  }
}

TEST_CASE("Scheduler.ExecutorOverTheDeviceBudget", "[scheduler]") {
  // GPU buckets that do not fit the device budget run on the CPU, or, when the runner can
  // condition the plan instead (over_budget_throws), the run stops with DeviceMemoryError
  // before any bucket runs.
  const Plan plan = uai_plan("DBN_11.uai");
  const std::vector<Device> all(plan.tree.buckets.size(), Device::gpu);
  ExecOptions eo;
  eo.device_budget_bytes = plan.memory.device_bytes / 4;
  {
    test::FakeDevice dev(2, 20);
    ExecStats st;
    CHECK(run_scheduled(plan, all, &dev, eo, &st) == Approx(run_plan(plan)).epsilon(1e-12));
    CHECK(st.cpu_buckets > 0);
    CHECK_THAT(st.fallback, Catch::Contains("MiB usable"));
  }
  test::FakeDevice dev(2, 20);
  eo.over_budget_throws = true;
  CHECK_THROWS_AS(run_scheduled(plan, all, &dev, eo), DeviceMemoryError);
  CHECK(dev.kernels == 0);
  CHECK(dev.live_tables() == 0);
}

TEST_CASE("Scheduler.ExecutorRejectsAWrongAssignmentSize", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  std::vector<Device> a(plan.tree.buckets.size() + 1, Device::cpu);
  CHECK_THROWS_AS(run_scheduled(plan, a, nullptr), std::invalid_argument);
}

TEST_CASE("Scheduler.CalibrateDrivesADeviceThroughTheContract", "[scheduler]") {
  // The GPU half of `kinfer calibrate` (kernel sweep, staged and batched transfers) on the fake
  // device: every call goes through gpu::Context as on a real GPU.
  test::FakeDevice dev(2, 20);
  dev.quick = {1.5e12, 20e9, 25e9};
  CalibrateOptions opt;
  opt.seconds = 3;
  opt.threads = 1;
  opt.cpu_max_log2_states = 12;
  opt.gpu_max_log2_states = 12;
  const Profile p = calibrate(opt, &dev, dev.name());
  CHECK(dev.error().empty());
  REQUIRE(p.has_gpu);
  CHECK(p.cpu.samples.size() >= 30);
  CHECK(p.gpu.samples.size() >= 30);
  CHECK(dev.kernels > 0);
  CHECK(p.h2d.bandwidth > 0);
  CHECK(p.h2d_batch.bandwidth > 0);
  CHECK(p.d2h.bandwidth > 0);
  CHECK(dev.live_tables() == 0);
  BucketFeatures f;
  f.log2_states = 10;
  CHECK(std::isfinite(p.gpu_seconds(f)));
  CHECK(p.gpu_seconds(f) > 0);
  // the quick figures are recorded, and survive the file
  CHECK(dev.quick_calls == 1);
  CHECK(p.gpu_figures.copy_bandwidth == 1.5e12);
  const Profile back = profile_from_json(to_json(p), "calibrated.json");
  CHECK(back.gpu_figures.copy_bandwidth == 1.5e12);
  CHECK(back.gpu_figures.h2d_bandwidth == 20e9);
  CHECK(back.gpu_figures.d2h_bandwidth == 25e9);
  CHECK(back.derived_from.empty());
}
