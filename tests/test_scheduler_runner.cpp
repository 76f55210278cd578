// The one runner and executor (scheduler/runner.hpp, executor.hpp) on real plans with the fake
// device: every placement policy gives run_plan's ln P(e) (relative 1e-12: the fake device runs
// the same kernel single-threaded); an all-CPU run is run_plan bit for bit; every bucket has a
// reason; the profile fallback; the auto threshold; the live memory budget; merging inputs;
// and the check mode, passing on real networks and failing, with the bucket named, on a device
// that is wrong on purpose; the slices of a conditioned plan over two fake devices.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "engine/condition.hpp"
#include "engine/posterior.hpp"
#include "engine/errors.hpp"
#include "fake_device.hpp"
#include "gpu/device_api.hpp"
#include "gpu/merge_inputs.hpp"
#include "gpu/policy.hpp"
#include "scheduler/downward.hpp"
#include "scheduler/features.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/runner.hpp"
#include "tests/scheduler_support.hpp"

using namespace kinfer;
using namespace kinfer::sched;
using kinfer::test::data_path;
using kinfer::test::uai_plan;

namespace {

constexpr Policy kEvery[] = {Policy::cpu_only, Policy::gpu_only, Policy::greedy, Policy::comm_aware,
                             Policy::whole_plan};
const char* const kNetworks[] = {"Pedigree_11.uai", "DBN_11.uai", "grid10x10.f10.uai",
                                 "CSP_12.uai"};

bool close(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)); }

// A temporary XDG_CACHE_HOME, so that the default profile path is known to be empty.
struct EmptyCache {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kinfer-runner-" + std::to_string(::getpid()));
  test::ScopedEnv cache{"XDG_CACHE_HOME", dir.c_str()};
  EmptyCache() { std::filesystem::create_directories(dir); }
  ~EmptyCache() { std::filesystem::remove_all(dir); }
};

// A folder of shipped profiles searched first while it lives (set_profiles_folder).
struct ScopedProfilesFolder {
  explicit ScopedProfilesFolder(const std::filesystem::path& dir) {
    set_profiles_folder(dir.string());
  }
  ~ScopedProfilesFolder() { set_profiles_folder({}); }
  ScopedProfilesFolder(const ScopedProfilesFolder&) = delete;
  ScopedProfilesFolder& operator=(const ScopedProfilesFolder&) = delete;
};

// `name`'s plan (weighted min-fill) unconditioned, run on the CPU into ln_whole, then again
// under a --max-memory that leaves an eighth of its intermediates: the conditioned plan that the
// lane tests use.
ConditionedPlan forced_slices(const std::string& name, double& ln_whole) {
  const io::NetworkWithEvidence in = io::read_network_and_evidence(data_path("uai/" + name));
  PlanOptions po;
  po.order.heuristic = OrderHeuristic::WeightedMinFill;
  po.keep_tables = false;
  ConditionedPlan whole = make_conditioned_plan(in.net, in.ev, po);
  REQUIRE(!whole.conditioned());
  ln_whole = run_plan(whole.plan, {});
  const MemoryEstimate& m = whole.plan.memory;
  po.max_memory_bytes = m.peak_bytes - m.intermediate_bytes * 7 / 8 + 2 * m.input_bytes;
  return make_conditioned_plan(in.net, in.ev, po);
}

}  // namespace

TEST_CASE("Scheduler.RunnerEveryPolicyOnTheFakeDevice", "[scheduler]") {
  const Profile prof = load_profile(data_path("profiles/fixed-test.json"));
  int mixed = 0;
  for (const char* name : kNetworks) {
    const Plan plan = uai_plan(name);
    const double expected = run_plan(plan);
    const std::size_t nb = plan.tree.buckets.size();
    for (Policy p : kEvery) {
      INFO(name << ", " << to_string(p));
      test::FakeDevice dev(3, 100, static_cast<std::uint64_t>(p) + 3);
      RunRequest req;
      req.device = DeviceChoice::gpu;
      req.policy = p;
      Runner runner(req, &dev, prof);
      const RunResult r = runner.run(plan);
      CHECK(close(r.ln_pr, expected));
      if (p == Policy::cpu_only) CHECK(r.ln_pr == expected);  // bit for bit
      CHECK(r.policy == to_string(p));
      CHECK(dev.error().empty());
      CHECK(dev.live_tables() == 0);
      CHECK(r.gpu_buckets + r.cpu_buckets == static_cast<int>(nb));
      CHECK(dev.kernels == r.gpu_buckets);
      REQUIRE(r.buckets.size() == nb);
      for (const BucketRun& b : r.buckets) CHECK_FALSE(b.reason.empty());
      if (p == Policy::cpu_only) CHECK(r.gpu_buckets == 0);
      if (p == Policy::greedy || p == Policy::comm_aware) {
        CHECK(std::isfinite(r.predicted_seconds));
        mixed += r.gpu_buckets > 0 && r.cpu_buckets > 0;
      }
      if (p == Policy::whole_plan) {
        // small buckets with every input on the host stay on the CPU, the rest go to the GPU
        // (gpu[b]: where the policy puts b; the executor may move it to the CPU, with a reason)
        std::vector<char> gpu(nb, 0);
        for (std::size_t b = 0; b < nb; ++b) {
          bool child_on_gpu = false;
          for (int c : plan.tree.buckets[b].children) child_on_gpu = child_on_gpu || gpu[c];
          const bool small = !child_on_gpu && plan.tree.buckets[b].log2_states < 15;
          gpu[b] = !small;
          if (small) CHECK(r.buckets[b].device == Device::cpu);
          CHECK_THAT(r.buckets[b].reason, Catch::StartsWith("whole-plan"));
          if (!small && r.buckets[b].device == Device::cpu)
            CHECK_THAT(r.buckets[b].reason, Catch::Contains("ran on the CPU"));
        }
      }
      const nlohmann::json j = run_json(r, true);
      CHECK(j.at("schedule").at("policy") == to_string(p));
      CHECK(j.at("schedule").at("explain").size() == nb);
      CHECK(j.at("gpu").at("name") == dev.name());
    }
  }
  CHECK(mixed >= 1);
}

TEST_CASE("Scheduler.RunnerWithoutGpuRunsTheEngineExecutor", "[scheduler]") {
  for (const char* name : kNetworks) {
    const Plan plan = uai_plan(name);
    const double expected = run_plan(plan);
    for (DeviceChoice d : {DeviceChoice::automatic, DeviceChoice::cpu, DeviceChoice::gpu}) {
      INFO(name << ", --device " << to_string(d));
      RunRequest req;
      req.device = d;
      req.policy = Policy::comm_aware;
      req.repeat = 2;
      Runner runner(req, nullptr);
      const RunResult r = runner.run(plan);
      CHECK(r.ln_pr == expected);  // bit for bit: the engine's run_plan
      CHECK(r.device == "cpu");
      CHECK(r.gpu_buckets == 0);
      CHECK(r.repeats.size() == 2);
      CHECK_FALSE(r.why_not_gpu.empty());
      CHECK_THAT(r.note, Catch::Contains("no GPU in use"));
    }
  }
}

TEST_CASE("Scheduler.RunnerGpuMemoryFullRunsOnTheCpu", "[scheduler]") {
  // The device fills during the run (another process took what was free when it opened): the
  // plan is computed on the CPU instead, noted; refused with the numbers when the CPU's peak
  // does not fit the host limit.
  const Plan plan = uai_plan("DBN_11.uai");
  const double expected = run_plan(plan);
  for (int limit : {0, 3, 10}) {
    INFO("allocations before the device is full: " << limit);
    test::FakeDevice dev(2, 20);
    dev.alloc_limit = limit;
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;
    Runner runner(req, &dev);
    const RunResult r = runner.run(plan);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.device == "cpu");
    CHECK(r.gpu_buckets == 0);
    CHECK(r.cpu_buckets == static_cast<int>(plan.tree.buckets.size()));
    CHECK_THAT(r.note, Catch::Contains("GPU's memory ran out"));
    CHECK_THAT(r.note, Catch::Contains("fake GPU memory full"));
    CHECK(dev.live_tables() == 0);
  }
  test::FakeDevice dev(2, 20);
  dev.alloc_limit = 3;
  RunRequest req;
  req.device = DeviceChoice::gpu;
  req.policy = Policy::gpu_only;
  req.host_memory_bytes = plan.memory.peak_bytes;  // the context's host part does not fit too
  Runner runner(req, &dev);
  try {
    runner.run(plan);
    FAIL("no error");
  } catch (const DeviceMemoryError&) {
    FAIL("the device's error, not the refusal");
  } catch (const ResourceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("fake GPU memory full"));
    CHECK_THAT(e.what(), Catch::Contains("--max-memory"));
  }
}

TEST_CASE("Scheduler.RunnerConditionsToTheDeviceFreeNow", "[scheduler]") {
  // Another process took device memory between the plan and the run: with the plan's options
  // the runner conditions it further so that a slice fits what is usable now, and runs it on
  // the GPU; when an allocation still fails it runs the slices again, then falls back to the
  // CPU. Every answer is run_plan's.
  const Plan plan = uai_plan("DBN_11.uai");
  const double expected = run_plan(plan);
  REQUIRE(plan.memory.device_bytes > 0);
  PlanOptions po;
  {
    test::FakeDevice dev(2, 20);
    dev.memory_bytes = plan.memory.device_bytes / 3 / 0.9;  // 90% of the free memory is usable
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;
    Runner runner(req, &dev);
    runner.set_plan_options(po);
    ConditionedPlan cp;
    cp.plan = plan;
    const RunResult r = runner.run(cp);
    CHECK(cp.conditioned());
    CHECK(cp.cond.slices > 1);
    CHECK(cp.plan.memory.device_bytes <= plan.memory.device_bytes / 3 * 1.0001);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.gpu_buckets > 0);
    CHECK(dev.live_tables() == 0);
  }
  {  // without the options: the plan as it is (the executor's own budget moves buckets)
    test::FakeDevice dev(2, 20);
    dev.memory_bytes = plan.memory.device_bytes / 3 / 0.9;
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;
    Runner runner(req, &dev);
    ConditionedPlan cp;
    cp.plan = plan;
    const RunResult r = runner.run(cp);
    CHECK_FALSE(cp.conditioned());
    CHECK(close(r.ln_pr, expected));
  }
  {  // an allocation fails: again as it is (enough is usable), then on the CPU
    test::FakeDevice dev(2, 20);
    dev.alloc_limit = 3;
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;
    Runner runner(req, &dev);
    runner.set_plan_options(po);
    ConditionedPlan cp;
    cp.plan = plan;
    const RunResult r = runner.run(cp);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.device == "cpu");
    CHECK_THAT(r.note, Catch::Contains("GPU's memory ran out"));
    CHECK(dev.live_tables() == 0);
  }
}

TEST_CASE("Scheduler.RunnerAutoThreshold", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  REQUIRE(plan.flops < kAutoGpuMinFlops);
  test::FakeDevice dev(2, 20);
  RunRequest req;  // --device auto
  Runner runner(req, &dev);
  CHECK_FALSE(runner.wants_gpu(plan));
  const RunResult r = runner.run(plan);
  CHECK(r.ln_pr == run_plan(plan));
  CHECK(dev.kernels == 0);
  CHECK_THAT(r.why_not_gpu, Catch::Contains("--device auto"));
  CHECK(auto_wants_gpu(kAutoGpuMinFlops));
  CHECK_FALSE(auto_wants_gpu(kAutoGpuMinFlops / 2));
}

TEST_CASE("Scheduler.RunnerProfileFallback", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  const double expected = run_plan(plan);
  EmptyCache cache;
  {  // no profile at the default path: whole-plan, with the advice to calibrate, noted once
    test::FakeDevice dev(2, 20);
    RunRequest req;
    req.device = DeviceChoice::gpu;
    Runner runner(req, &dev);
    for (int k = 0; k < 2; ++k) {
      const RunResult r = runner.run(plan);
      CHECK(close(r.ln_pr, expected));
      CHECK(r.requested == "comm-aware");
      CHECK(r.policy == "whole-plan");
      CHECK_THAT(r.note, Catch::Contains("kinfer calibrate"));
    }
  }
  {  // a profile without a GPU part: the same fallback
    Profile cpu_only = load_profile(data_path("profiles/fixed-test.json"));
    cpu_only.has_gpu = false;
    const std::string path = (cache.dir / "cpu.json").string();
    save_profile(cpu_only, path);
    test::FakeDevice dev(2, 20);
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::greedy;
    req.profile_path = path;
    Runner runner(req, &dev);
    const RunResult r = runner.run(plan);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.policy == "whole-plan");
    CHECK_THAT(r.note, Catch::Contains("without a GPU"));
  }
  // a named profile that does not exist is an input error, not a silent fallback
  RunRequest bad;
  bad.profile_path = (cache.dir / "missing.json").string();
  CHECK_THROWS_AS(Runner(bad, nullptr), InputError);
}

TEST_CASE("Scheduler.ProfileMatchedByGpuName", "[scheduler]") {
  namespace fs = std::filesystem;
  EmptyCache cache;
  const fs::path shipped = cache.dir / "shipped";
  fs::create_directories(shipped);
  Profile p = load_profile(data_path("profiles/fixed-test.json"));
  p.gpu.name = "Example GPU 80GB";
  save_profile(p, (shipped / "example.json").string());
  ScopedProfilesFolder profiles(shipped);
  // a shipped profile is found by its GPU's exact name, and only by it
  CHECK(fs::path(find_profile_for_gpu("Example GPU 80GB")) == shipped / "example.json");
  CHECK(find_profile_for_gpu("Example GPU").empty());
  CHECK(find_profile_for_gpu("").empty());
  // the repository's own shipped profiles, found beside the test's executable
  CHECK(fs::path(find_profile_for_gpu("NVIDIA H200")).filename() == "h200.json");
  // the user's calibration wins when made with this GPU; an automatic one comes next
  CHECK(fs::path(auto_profile_path("NVIDIA H100 80GB HBM3")).filename() ==
        "nvidia-h100-80gb-hbm3.json");
  save_profile(p, auto_profile_path("Example GPU 80GB"));
  CHECK(find_profile_for_gpu("Example GPU 80GB") == auto_profile_path("Example GPU 80GB"));
  save_profile(p, default_profile_path());
  CHECK(find_profile_for_gpu("Example GPU 80GB") == default_profile_path());
  Profile other = p;
  other.gpu.name = "Another GPU";
  save_profile(other, default_profile_path());
  CHECK(find_profile_for_gpu("Example GPU 80GB") == auto_profile_path("Example GPU 80GB"));
  // the start time round-trips
  p.gpu_start = 0.25;
  save_profile(p, (shipped / "example.json").string());
  CHECK(load_profile((shipped / "example.json").string()).gpu_start == 0.25);
}

TEST_CASE("Scheduler.ProfileDerivedForAnUnknownGpu", "[scheduler]") {
  // A GPU none of the profiles knows gets one derived from the shipped profile closest by its
  // quick figures, cached for the next run; the placement then comes from it, not whole-plan.
  namespace fs = std::filesystem;
  EmptyCache cache;
  const fs::path shipped = cache.dir / "shipped";
  fs::create_directories(shipped);
  Profile slow = load_profile(data_path("profiles/fixed-test.json"));
  slow.gpu.name = "Slow GPU";
  slow.gpu_figures = {1e14, 10e9, 12e9};  // far from the repository's shipped GPUs
  save_profile(slow, (shipped / "slow.json").string());
  Profile fast = slow;
  fast.gpu.name = "Fast GPU";
  fast.gpu_figures = {4e14, 50e9, 40e9};
  fast.h2d.bandwidth = 30e9;
  save_profile(fast, (shipped / "fast.json").string());
  Profile unmeasured = slow;  // without figures: never a base, however close
  unmeasured.gpu.name = "Old GPU";
  unmeasured.gpu_figures = {};
  save_profile(unmeasured, (shipped / "old.json").string());
  ScopedProfilesFolder profiles(shipped);

  // 2.2e14 is closer to 4e14 than to 1e14 in ratio (and far from the repository's own shipped
  // profiles, which are candidates too: H100 2.9e12, H200 4.1e12)
  CHECK(fs::path(closest_shipped_profile({2.2e14, 20e9, 20e9})).filename() == "fast.json");
  CHECK(fs::path(closest_shipped_profile({1.5e14, 20e9, 20e9})).filename() == "slow.json");
  CHECK(fs::path(closest_shipped_profile({3e12, 20e9, 20e9})).filename() == "h100.json");
  CHECK(closest_shipped_profile({}).empty());

  // the derivation's arithmetic: kernel times above the overhead x 4/2.2, transfers by ratio
  const GpuFigures here{2.2e14, 20e9, 30e9};
  const Profile d = derive_profile(load_profile((shipped / "fast.json").string()), here, "New GPU",
                                   48e9, 0.3);
  CHECK(d.gpu.name == "New GPU");
  CHECK(d.gpu.memory_bytes == 48e9);
  CHECK(d.gpu_start == 0.3);
  CHECK(d.h2d.bandwidth == Approx(30e9 * 20.0 / 50.0));
  CHECK(d.d2h.bandwidth == Approx(fast.d2h.bandwidth * 30.0 / 40.0));
  CHECK_THAT(d.derived_from, Catch::Contains("fast.json"));
  REQUIRE(fast.gpu.model.kind == ModelKind::loglinear);
  const double r = 4e14 / 2.2e14, overhead = std::exp(fast.gpu.model.c);
  for (double log2_states : {12.0, 20.0, 28.0}) {
    BucketFeatures f;
    f.log2_states = log2_states;
    f.log2_out = log2_states - 2;
    f.log2_marg = 2;
    f.inputs = 3;
    f.varying = 2;
    f.log2_in = log2_states - 4;
    const double b = fast.gpu.model.predict(f), x = d.gpu.model.predict(f);
    CHECK((x - overhead) / (b - overhead) == Approx(r).epsilon(1e-9));
  }
  CHECK(d.cpu.model.predict({}) == fast.cpu.model.predict({}));
  CHECK_THROWS_AS(derive_profile(unmeasured, here, "x", 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(derive_profile(fast, GpuFigures{}, "x", 0, 0), std::invalid_argument);

  // the runner: the first run measures and derives, the second reads the cached profile
  const Plan plan = uai_plan("grid10x10.f10.uai");
  const double expected = run_plan(plan);
  RunRequest req;
  req.device = DeviceChoice::gpu;
  req.policy = Policy::comm_aware;
  for (int run = 0; run < 2; ++run) {
    INFO("run " << run);
    test::FakeDevice dev(2, 50, 7);
    dev.quick = {2.2e14, 20e9, 30e9};
    Runner runner(req, &dev);
    const RunResult r = runner.run(plan);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.policy == "comm-aware");
    CHECK(r.note.empty());
    CHECK(r.profile == auto_profile_path(dev.name()));
    CHECK(dev.quick_calls == (run == 0 ? 1 : 0));
    const Profile cached = load_profile(auto_profile_path(dev.name()));
    CHECK(cached.gpu.name == dev.name());
    CHECK_THAT(cached.derived_from, Catch::Contains("fast.json"));
    CHECK(cached.gpu_figures.copy_bandwidth == 2.2e14);
  }
  // a device that measures nothing keeps the fallback (whole-plan, noted)
  fs::remove(auto_profile_path("fake GPU (host memory)"));
  {
    test::FakeDevice dev(2, 50, 7);
    Runner runner(req, &dev);
    const RunResult r = runner.run(plan);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.policy == "whole-plan");
    CHECK(dev.quick_calls == 1);
  }
}

TEST_CASE("Scheduler.ProfileCpuPartFollowsTheThreadCount", "[scheduler]") {
  // A profile's CPU part fitted on 16 threads predicts a 4-thread run's kernels (above their
  // fixed overhead) (16/4)^kCpuThreadExponent times slower, a 64-thread run's at most
  // kCpuMostThreadSpeedup times faster; the runner applies it to the profile it plans with.
  Profile prof = load_profile(data_path("profiles/fixed-test.json"));
  REQUIRE(prof.cpu.model.kind == ModelKind::loglinear);
  prof.cpu.threads = 16;
  const double overhead = std::exp(prof.cpu.model.c);
  BucketFeatures f;
  f.log2_states = 24;
  f.log2_out = 20;
  f.log2_marg = 4;
  f.inputs = 4;
  f.varying = 3;
  f.log2_in = 21;
  const double base = prof.cpu.model.predict(f);
  auto ratio = [&](int threads) {
    return (cpu_for_threads(prof.cpu, threads).model.predict(f) - overhead) / (base - overhead);
  };
  CHECK(ratio(16) == 1);
  CHECK(ratio(0) == 1);
  CHECK(ratio(4) == Approx(std::pow(4.0, kCpuThreadExponent)).epsilon(1e-9));
  CHECK(ratio(2) == Approx(std::pow(8.0, kCpuThreadExponent)).epsilon(1e-9));
  CHECK(ratio(64) == Approx(1 / kCpuMostThreadSpeedup).epsilon(1e-9));
  CHECK(cpu_for_threads(prof.cpu, 4).threads == 4);
  DeviceProfile unknown = prof.cpu;
  unknown.threads = 0;
  CHECK(cpu_for_threads(unknown, 4).model.predict(f) == unknown.model.predict(f));

  // the runner: a GPU 1e6 times slower keeps every bucket on the CPU under greedy, so the
  // prediction is the CPU part's, on each run's thread count
  prof.gpu.model = prof.gpu.model.scaled(1e6);
  const Plan plan = uai_plan("grid10x10.f10.uai");
  const double expected = run_plan(plan);
  double predicted[2];
  for (int k = 0; k < 2; ++k) {
    test::FakeDevice dev(2, 20, 3);
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::greedy;
    req.threads = k == 0 ? 16 : 4;
    Runner runner(req, &dev, prof);
    const RunResult r = runner.run(plan);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.gpu_buckets == 0);
    predicted[k] = r.predicted_seconds;
  }
  CHECK(predicted[1] > 1.2 * predicted[0]);
  CHECK(predicted[1] < std::pow(4.0, kCpuThreadExponent) * predicted[0]);
}

TEST_CASE("Scheduler.AutoDeviceFromTheProfile", "[scheduler]") {
  // --device auto compares the CPU-only prediction (the sum of the profile's CPU bucket times,
  // computed here from the features) with the best placement's, the GPU's start included.
  const Plan plan = uai_plan("grid10x10.f10.uai");
  const double expected = run_plan(plan);
  Profile prof = load_profile(data_path("profiles/fixed-test.json"));
  prof.path = "fixed-test.json";
  double cpu_sum = 0;
  for (int b = 0; b < static_cast<int>(plan.tree.buckets.size()); ++b)
    cpu_sum += prof.cpu_seconds(bucket_features(bucket_shape(plan, b), bucket_scopes(plan, b)));
  const AutoChoice now = auto_choice(plan, prof, Policy::comm_aware, 0);
  CHECK(now.cpu_seconds == Approx(cpu_sum).epsilon(1e-12));
  CHECK(now.gpu_seconds <= now.cpu_seconds);  // comm-aware may keep every bucket on the CPU
  // a start longer than the whole CPU run never pays
  const AutoChoice slow_start = auto_choice(plan, prof, Policy::comm_aware, 2 * cpu_sum + 1);
  CHECK_FALSE(slow_start.gpu);
  CHECK_THAT(slow_start.why, Catch::Contains("predicted"));
  // a profile whose CPU is far slower: the GPU, through the runner, with the same answer
  Profile slow_cpu = prof;
  slow_cpu.cpu.dispatch = 1.0;  // a second per bucket on the CPU
  const AutoChoice g = auto_choice(plan, slow_cpu, Policy::comm_aware, kGpuStartSeconds);
  CHECK(g.gpu);
  CHECK(g.gpu_seconds < g.cpu_seconds);
  {
    test::FakeDevice dev(2, 20);
    Runner runner(RunRequest{}, &dev, slow_cpu);
    CHECK(runner.wants_gpu(plan));
    const RunResult r = runner.run(plan);
    CHECK(close(r.ln_pr, expected));
    CHECK(r.gpu_buckets > 0);
  }
  // a profile whose GPU is far slower: the CPU, with both predictions in the reason
  Profile slow_gpu = prof;
  slow_gpu.gpu.dispatch = 1.0;
  slow_gpu.gpu_first_use = 1.0;
  {
    test::FakeDevice dev(2, 20);
    Runner runner(RunRequest{}, &dev, slow_gpu);
    CHECK_FALSE(runner.wants_gpu(plan));
    const RunResult r = runner.run(plan);
    CHECK(r.ln_pr == expected);
    CHECK(dev.kernels == 0);
    CHECK_THAT(r.why_not_gpu, Catch::Contains("on the CPU"));
  }
}

TEST_CASE("Scheduler.ExecutorLiveMemoryBudget", "[scheduler]") {
  // A device whose memory holds the inputs but not the largest tables: those buckets run on
  // the CPU with the numbers in their reason; the answer does not change.
  const Plan plan = uai_plan("grid10x10.f10.uai");
  const int nb = static_cast<int>(plan.tree.buckets.size());
  double inputs = 0, largest = 0;
  for (const auto& t : plan.input_data) inputs += 8.0 * static_cast<double>(t.size());
  for (int b = 0; b < nb; ++b)
    largest = std::max(largest, 8.0 * static_cast<double>(bucket_shape(plan, b).output_size()));
  test::FakeDevice dev(2, 20);
  dev.memory_bytes = (inputs + 0.5 * largest) / 0.9;
  std::vector<Device> all_gpu(nb, Device::gpu);
  ExecStats st;
  CHECK(close(run_scheduled(plan, all_gpu, &dev, {}, &st), run_plan(plan)));
  int moved = 0;
  for (int b = 0; b < nb; ++b)
    if (st.fallback_reason[b].find("MiB of GPU memory") != std::string::npos) ++moved;
  CHECK(moved >= 1);
  CHECK(st.gpu_buckets >= 1);
  CHECK(dev.error().empty());
  CHECK(dev.live_tables() == 0);
}

TEST_CASE("Scheduler.MergeInputsMultipliesSmallFactorsExactly", "[scheduler]") {
  // A linkage-like bucket: 8 variables (cardinalities 2-3, the last 3 summed), six factors over
  // one or two variables (as selector priors and sliced penetrances are), a large child over
  // all of them and a child over the outputs only. Rule 1 multiplies the small factors of a
  // class (varying with the summed variables, or not) together, never across classes; the
  // bucket's result is the same (brute-force reference kernel).
  std::mt19937_64 rng(11);
  BucketShape shape;
  const int card[] = {2, 3, 2, 2, 3, 2, 3, 2};
  for (int v = 0; v < 8; ++v) shape.vars.push_back(v), shape.card.push_back(card[v]);
  shape.n_marg = 3;  // vars 5, 6, 7
  const std::vector<std::vector<int>> scopes = {{5}, {6}, {1, 7}, {0}, {2, 3}, {6, 7}};
  std::vector<std::vector<double>> tables;
  auto random_table = [&](const std::vector<int>& sc) {
    std::size_t n = 1;
    for (int v : sc) n *= card[v];
    std::vector<double> t(n);
    for (double& x : t) x = std::log(std::uniform_real_distribution<double>(0.05, 1)(rng));
    return t;
  };
  for (const auto& sc : scopes) tables.push_back(random_table(sc));
  const std::vector<std::vector<int>> children = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 4}};
  std::vector<std::vector<double>> child_tables;
  for (const auto& sc : children) child_tables.push_back(random_table(sc));
  std::vector<gpu::HostInput> in;
  std::vector<InputTable> all;
  for (std::size_t k = 0; k < scopes.size(); ++k) {
    in.push_back({tables[k].data(), static_cast<std::int64_t>(tables[k].size()), scopes[k]});
    all.push_back({tables[k].data(), scopes[k]});
  }
  for (std::size_t k = 0; k < children.size(); ++k)
    all.push_back({child_tables[k].data(), children[k]});
  std::vector<double> want(shape.output_size()), got(shape.output_size());
  sum_product_log_reference(shape, all, want.data());

  std::vector<std::vector<double>> owned;
  const auto off = gpu::merge_inputs(shape, in, children, owned, false);
  CHECK(off.size() == in.size());  // within the kernels' limits: rule 2 merges nothing
  const auto merged = gpu::merge_inputs(shape, in, children, owned, true);
  // the four varying factors ({5}, {6}, {1,7}, {6,7}: 2*3*3*2 = 36 entries) become one, the two
  // output-only ones ({0}, {2,3}) another
  REQUIRE(merged.size() == 2);
  const auto varies = [](const std::vector<int>& sc) {
    return std::any_of(sc.begin(), sc.end(), [](int v) { return v >= 5; });
  };
  CHECK(varies(merged[0].scope) != varies(merged[1].scope));
  for (const auto& h : merged) {
    std::int64_t n = 1;
    for (int v : h.scope) n *= card[v];
    CHECK(h.size == n);
  }
  const gpu::MergePlan mp = gpu::merge_plan(shape, scopes, children, true);
  REQUIRE(mp.groups.size() == 2);
  CHECK(mp.merged());
  std::vector<InputTable> kernel_in;
  for (const auto& h : merged) kernel_in.push_back({h.data, h.scope});
  for (std::size_t k = 0; k < children.size(); ++k)
    kernel_in.push_back({child_tables[k].data(), children[k]});
  sum_product_log(shape, kernel_in, got.data(), 1);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
}

TEST_CASE("Scheduler.MergeInputsFitsTheKernelsExactly", "[scheduler]") {
  // A bucket of 24 pairwise factors over 10 binary variables (3 summed): more inputs than a
  // launch takes. Merged, it fits, and the bucket's result is the same.
  std::mt19937_64 rng(7);
  BucketShape shape;
  for (int v = 0; v < 10; ++v) shape.vars.push_back(v), shape.card.push_back(2);
  shape.n_marg = 3;
  std::vector<std::vector<double>> tables;
  std::vector<std::vector<int>> scopes;
  for (int k = 0; k < 24; ++k) {
    int a = std::uniform_int_distribution<int>(0, 9)(rng), b = a;
    while (b == a) b = std::uniform_int_distribution<int>(0, 9)(rng);
    scopes.push_back({std::min(a, b), std::max(a, b)});
    std::vector<double> t(4);
    for (double& x : t) x = std::log(std::uniform_real_distribution<double>(0.1, 1)(rng));
    tables.push_back(t);
  }
  std::vector<gpu::HostInput> in;
  std::vector<InputTable> cpu_in;
  for (int k = 0; k < 24; ++k) {
    in.push_back({tables[k].data(), 4, scopes[k]});
    cpu_in.push_back({tables[k].data(), scopes[k]});
  }
  const std::vector<std::vector<int>> children = {{0, 1, 7}};  // one child, varying
  std::vector<double> child(8);
  for (double& x : child) x = std::log(std::uniform_real_distribution<double>(0.1, 1)(rng));
  cpu_in.push_back({child.data(), children[0]});
  std::vector<std::vector<double>> owned;
  const std::vector<gpu::HostInput> merged = gpu::merge_inputs(shape, in, children, owned);
  CHECK(merged.size() + children.size() <= static_cast<std::size_t>(gpu::kMaxInputs));
  std::vector<std::vector<int>> all_scopes;
  std::vector<InputTable> merged_in;
  for (const auto& h : merged)
    all_scopes.push_back(h.scope), merged_in.push_back({h.data, h.scope});
  all_scopes.push_back(children[0]);
  merged_in.push_back({child.data(), children[0]});
  CHECK(gpu::why_no_kernel(shape, all_scopes).empty());
  std::vector<double> want(shape.output_size()), got(shape.output_size());
  sum_product_log(shape, cpu_in, want.data(), 1);
  sum_product_log(shape, merged_in, got.data(), 1);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
}

TEST_CASE("Scheduler.CheckModePassesOnRealNetworks", "[scheduler]") {
  for (const char* name : kNetworks) {
    INFO(name);
    const Plan plan = uai_plan(name);
    test::FakeDevice dev(2, 20);
    RunRequest req;
    req.check = true;
    Runner runner(req, &dev);
    const RunResult r = runner.run(plan);
    CHECK(r.ln_pr == run_plan(plan));  // the CPU's answer
    REQUIRE(r.check);
    CHECK(r.check->passed);
    CHECK(r.check->buckets > 0);
    CHECK(r.check->buckets + r.check->buckets_without_kernel ==
          static_cast<int>(plan.tree.buckets.size()));
    CHECK(r.check->max_rel_diff <= r.check->tolerance);
    CHECK(r.device == "cpu+gpu");
    CHECK_THAT(check_verdict(r), Catch::StartsWith("check: passed"));
    CHECK(run_json(r, false).at("check").at("passed") == true);
    CHECK(dev.live_tables() == 0);
    CHECK(runner.totals().check.passed);
  }
}

TEST_CASE("Scheduler.CheckModeNamesTheWrongBucket", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  const int nb = static_cast<int>(plan.tree.buckets.size());
  // a bucket in the middle that a kernel takes, made wrong by 1e-3 on the fake GPU
  int target = -1;
  for (int b = nb / 2; b < nb && target < 0; ++b)
    if (gpu::why_no_kernel(bucket_shape(plan, b), bucket_scopes(plan, b)).empty()) target = b;
  REQUIRE(target >= 0);
  const std::vector<int> target_vars = plan.tree.buckets[target].vars;
  test::FakeDevice dev(2, 20);
  dev.corrupt = [&](const BucketShape& s) { return s.vars == target_vars; };
  RunRequest req;
  req.check = true;
  Runner runner(req, &dev);
  const RunResult r = runner.run(plan);
  REQUIRE(r.check);
  CHECK_FALSE(r.check->passed);
  CHECK(r.check->first_failed_bucket == target);
  CHECK(r.check->worst_bucket == target);
  CHECK(r.check->max_abs_diff == Approx(1e-3).epsilon(1e-6));
  CHECK_THAT(check_verdict(r), Catch::Contains("FAILED at bucket " + std::to_string(target)));
  const nlohmann::json j = run_json(r, false).at("check");
  CHECK(j.at("passed") == false);
  CHECK(j.at("failed_bucket") == target);
  CHECK(j.at("tolerance") == kCheckTolerance);
  CHECK_FALSE(runner.totals().check.passed);
  CHECK(runner.totals().check.first_failed_bucket == target);
}

TEST_CASE("Scheduler.CheckModeWithoutGpuSaysSo", "[scheduler]") {
  const Plan plan = uai_plan("Pedigree_11.uai");
  RunRequest req;
  req.check = true;
  Runner runner(req, nullptr);
  const RunResult r = runner.run(plan);
  CHECK(r.ln_pr == run_plan(plan));
  CHECK_FALSE(r.check);
  CHECK_THAT(check_verdict(r), Catch::StartsWith("check: not run"));
  CHECK(run_json(r, false).at("check").at("passed").is_null());
}

namespace {
// The largest difference between two marginals' probabilities (same variables and domains).
double largest_difference(const Marginals& a, const Marginals& b) {
  double worst = 0;
  for (std::size_t v = 0; v < a.p.size(); ++v)
    for (std::size_t x = 0; x < a.p[v].size(); ++x)
      worst = std::max(worst, std::abs(a.p[v][x] - b.p[v][x]));
  return worst;
}
}  // namespace

TEST_CASE("Scheduler.RunnerRunsTheUpwardPassOfMarAndMpe", "[scheduler]") {
  // compute_marginals and compute_mpe with their upward pass through the runner (the commands'
  // way: engine/posterior.hpp UpwardRunner) on the fake device, under two placements and the
  // check mode: the CPU's marginals and assignment. The MPE's traceback reads the outputs the
  // device held (UpwardPass::on_device), leaving out the factors folded into them; the
  // marginals' downward pass runs on the device that held them (scheduler/downward.hpp), the
  // factors folded into a child's table given to that child's message only.
  for (const char* name : {"Pedigree_11.uai", "DBN_11.uai", "Grids_11.uai"}) {
    const Plan plan = uai_plan(name);
    const Marginals want = compute_marginals(plan);
    const MostProbable best = compute_mpe(plan);
    for (int way = 0; way < 3; ++way) {
      INFO(name << ", " << (way == 0 ? "gpu-only" : way == 1 ? "whole-plan" : "check"));
      test::FakeDevice dev(2, 20);
      RunRequest req;
      req.device = DeviceChoice::gpu;
      req.policy = way == 0 ? Policy::gpu_only : Policy::whole_plan;
      req.check = way == 2;
      Runner runner(req, &dev);
      int gpu_runs = 0;
      double mpe_d2h = -1;  // bytes the MPE's pass brought back
      const UpwardRunner upward = [&](const Plan& p, const UpwardPass& pass) {
        runner.set_upward_pass(pass);
        const RunResult r = runner.run(p);
        runner.set_upward_pass({});
        gpu_runs += r.gpu_buckets > 0;
        if (pass.maximise) mpe_d2h = r.d2h_bytes;
      };
      const int kernels_before = dev.kernels;
      const Marginals m = compute_marginals(plan, 0, upward);
      // Pedigree_11, every bucket on the GPU: the downward pass's messages ran on the device
      // (more kernels than the upward pass's buckets, one per child and bucket, some inputs
      // laid out in a message's order, and two children's messages taken from the union of
      // their outputs, each divided by its child's output). DBN_11's buckets have more factors than
      // a kernel takes: their messages take them grouped, as the upward kernels do. Grids_11's
      // root has 22 binary variables in no child's output: their joint is kept on the device,
      // the messages onto groups of them taken from it.
      const int mar_kernels = dev.kernels - kernels_before;
      if (way == 0 && std::string(name) == "Pedigree_11.uai") {
        CHECK(mar_kernels > static_cast<int>(plan.tree.buckets.size()));
        CHECK(dev.permutes > 0);
        CHECK(dev.divides > 0);
      }
      CHECK(close(m.ln_pe, want.ln_pe));
      REQUIRE(m.p.size() == want.p.size());
      CHECK(largest_difference(m, want) <= 1e-12);
      const MostProbable mp = compute_mpe(plan, 0, upward);
      CHECK(close(mp.ln_pr, best.ln_pr));
      CHECK(mp.assignment == best.assignment);
      CHECK(gpu_runs == 2);
      // Pedigree_11, every bucket on the "GPU": its outputs stayed there for the traceback
      // (the root's value came back)
      if (way == 0 && std::string(name) == "Pedigree_11.uai") CHECK(mpe_d2h == 8);
      if (way == 2) {
        CHECK(runner.totals().checked == 2);
        CHECK(runner.totals().check.passed);
        CHECK(runner.totals().check.buckets > 0);
      }
      CHECK(dev.error().empty());
    }
  }
  // A max-product bucket the "GPU" gets wrong fails the check of the MPE's pass.
  const Plan plan = uai_plan("Pedigree_11.uai");
  test::FakeDevice dev(2, 20);
  dev.corrupt = [](const BucketShape& s) { return s.maximise && s.n_marg > 0; };
  RunRequest req;
  req.check = true;
  Runner runner(req, &dev);
  const UpwardRunner upward = [&](const Plan& p, const UpwardPass& pass) {
    runner.set_upward_pass(pass);
    runner.run(p);
    runner.set_upward_pass({});
  };
  compute_marginals(plan, 0, upward);
  CHECK(runner.totals().check.passed);
  compute_mpe(plan, 0, upward);
  CHECK_FALSE(runner.totals().check.passed);
}

TEST_CASE("Scheduler.DownwardStepOnTheHostUnfoldsHeldChildren", "[scheduler]") {
  // Bucket B eliminates x1 and holds 64 factors, x1 with every subset of {x2..x5} four times, all
  // inside the output of its child A (the bucket of x0, whose factor is over x0..x5); its other
  // child (the bucket of x8, over x1, x6, x8) and x7 keep B apart from A and from the buckets
  // above. On the fake device A's table is held and the upward kernel of B adds B's factors (their
  // product) into it. Grouped, they would be one input of B's messages; added into A's table,
  // each is an input of A's message of its own: more than a kernel takes, so B's step runs on the
  // host, from A's table copied back without them. The marginals are the CPU's.
  std::mt19937_64 rng(20261128);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  Network net;
  net.kind = "MARKOV";
  net.card.assign(9, 2);
  const auto add = [&](std::vector<int> scope) {
    Factor f;
    f.scope = std::move(scope);
    f.table.resize(std::size_t{1} << f.scope.size());
    for (double& x : f.table) x = u(rng);
    net.factors.push_back(std::move(f));
  };
  add({0, 1, 2, 3, 4, 5});
  for (int m = 0; m < 64; ++m) {
    std::vector<int> scope = {1};
    for (int v = 2; v <= 5; ++v)
      if ((m % 16) >> (v - 2) & 1) scope.push_back(v);
    add(scope);
  }
  add({1, 6, 8});
  add({6, 7});
  PlanOptions po;
  OrderedModel om = order_model(net, Evidence{}, po);
  om.order.order = {0, 8, 1, 6, 7, 2, 3, 4, 5};
  Plan plan = plan_structure(net, Evidence{}, po, std::move(om.model), std::move(om.order));
  fill_inputs(plan, po);
  REQUIRE(plan.tree.buckets.size() >= 4);  // A, x8's, B, the rest
  REQUIRE(plan.tree.buckets[2].factors.size() == 64);
  REQUIRE(plan.tree.buckets[2].children.size() == 2);
  const Marginals want = compute_marginals(plan);
  test::FakeDevice dev(2, 20);
  RunRequest req;
  req.device = DeviceChoice::gpu;
  req.policy = Policy::gpu_only;
  Runner runner(req, &dev);
  const UpwardRunner upward = [&](const Plan& p, const UpwardPass& pass) {
    runner.set_upward_pass(pass);
    runner.run(p);
    runner.set_upward_pass({});
  };
  const Marginals m = compute_marginals(plan, 0, upward);
  CHECK(dev.folds > 0);  // B's factors were added into A's held table
  CHECK(downward_why_not(plan, 2).empty());  // grouped, a kernel takes B's messages
  CHECK(close(m.ln_pe, want.ln_pe));
  REQUIRE(m.p.size() == want.p.size());
  CHECK(largest_difference(m, want) <= 1e-12);
  CHECK(dev.error().empty());
}

TEST_CASE("Scheduler.SlicesOverTwoFakeDevices", "[scheduler]") {
  // Several GPUs in one process (engine/condition.hpp run_conditioned_lanes, one runner per
  // device): the slices of a conditioned plan spread over two fake devices give the unconditioned
  // plan's ln P(e), bit for bit the one-device answer whichever device finished first, and both
  // devices run slices.
  EmptyCache cache;
  int conditioned = 0;
  for (const std::string name : {"Pedigree_13.uai", "linkage_16.uai.gz", "Pedigree_11.uai"}) {
    double ln_whole = 0;
    ConditionedPlan cp = forced_slices(name, ln_whole);
    if (!cp.conditioned() || cp.cond.slices < 3) continue;
    ++conditioned;
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;  // every bucket a kernel takes on the (fake) device
    test::FakeDevice dev0(2, 50, 1), dev1(2, 50, 2);
    Runner r0(req, &dev0), r1(req, &dev1), one(req, &dev0);
    std::vector<int> lanes;
    int on_devices = 0;
    std::mutex mu;
    const double two = run_conditioned_lanes(
        cp, 2,
        [&](int k, const Plan& p) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let both lanes take some
          const RunResult res = (k == 0 ? r0 : r1).run(p);
          const std::lock_guard<std::mutex> lock(mu);
          on_devices += res.gpu_buckets;
          return res.ln_pr;
        },
        nullptr, &lanes);
    const double single = run_conditioned(cp, [&](const Plan& p) { return one.run(p).ln_pr; });
    INFO(name << ": " << cp.cond.slices << " slices, per device " << lanes[0] << " + " << lanes[1]);
    CHECK(close(two, ln_whole));
    CHECK(two == single);
    CHECK(lanes.size() == 2);
    CHECK(lanes[0] + lanes[1] == cp.cond.slices);
    CHECK(lanes[0] > 0);
    CHECK(lanes[1] > 0);
    CHECK(on_devices > 0);
  }
  CHECK(conditioned > 0);
}

TEST_CASE("Scheduler.RunnerSpreadsSlicesOverItsGpus", "[scheduler]") {
  // Runner::run(ConditionedPlan&) with two (fake) GPUs: one runner per GPU inside the runner,
  // the slices spread over both, the unconditioned plan's ln P(e), bit for bit the answer of one
  // GPU; `lanes` says what each did. With --check the slices stay on one lane.
  EmptyCache cache;
  int conditioned = 0;
  for (const std::string name : {"Pedigree_13.uai", "linkage_16.uai.gz", "Pedigree_11.uai"}) {
    double ln_whole = 0;
    ConditionedPlan cp = forced_slices(name, ln_whole);
    if (!cp.conditioned() || cp.cond.slices < 4) continue;
    ++conditioned;
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;
    test::FakeDevice dev0(2, 50, 1), dev1(2, 50, 2), dev2(2, 50, 3);
    Runner two(req, &dev0), one(req, &dev2);
    two.set_lane_devices({&dev1});
    CHECK(two.lanes(cp) == 2);
    CHECK(one.lanes(cp) == 1);
    const RunResult a = two.run(cp), b = one.run(cp);
    INFO(name << ": " << cp.cond.slices << " slices");
    CHECK(close(a.ln_pr, ln_whole));
    CHECK(a.ln_pr == b.ln_pr);
    REQUIRE(a.lanes.size() == 2);
    CHECK(a.lanes[0].slices + a.lanes[1].slices == cp.cond.slices);
    CHECK(b.lanes.size() == 1);
    CHECK(b.lanes[0].slices == cp.cond.slices);
    // --max-memory that holds one copy of the plan only: one lane
    RunRequest small = req;
    small.host_memory_bytes = 1.5 * cp.plan.memory.peak_bytes;
    Runner capped(small, &dev0);
    capped.set_lane_devices({&dev1});
    CHECK(capped.lanes(cp) == 1);
    RunRequest checked = req;
    checked.check = true;
    Runner check(checked, &dev0);
    check.set_lane_devices({&dev1});
    CHECK(check.lanes(cp) == 1);
  }
  CHECK(conditioned > 0);
}

TEST_CASE("Scheduler.GpuMemoryConditionsToFitTheDevice", "[scheduler]") {
  // --gpu-memory below a plan's device estimate: the plan is conditioned so that each slice's
  // device estimate fits, the slices run one after another on the (fake) device, the answer is
  // the unconditioned plan's, and the device's live bytes never exceed the budget.
  for (const char* name : {"grid10x10.f10.uai", "Pedigree_11.uai"}) {
    const io::NetworkWithEvidence net =
        io::read_network_and_evidence(data_path(std::string("uai/") + name));
    PlanOptions po;
    po.order.heuristic = OrderHeuristic::MinFill;
    const ConditionedPlan whole = make_conditioned_plan(net.net, net.ev, po);
    REQUIRE(!whole.conditioned());
    const double ln_whole = run_plan(whole.plan);
    const MemoryEstimate& m = whole.plan.memory;
    REQUIRE(m.device_bytes == Approx(m.input_bytes + m.intermediate_bytes));
    test::FakeDevice dev(2, 20);
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::gpu_only;
    req.gpu_memory_bytes = m.input_bytes + 0.25 * m.intermediate_bytes;
    Runner runner(req, &dev);
    po.device_budget = [&runner](const Plan& p) { return runner.device_budget(p); };
    // The planner's choice (it may also find an order that fits unconditioned) and the best
    // order conditioned for the device: both fit.
    const ConditionedPlan chosen = make_conditioned_plan(net.net, net.ev, po);
    CHECK(chosen.plan.memory.device_bytes <= req.gpu_memory_bytes);
    bool feasible = false;
    ConditionedPlan cp = condition_to_fit(whole.plan, 0, po, feasible, req.gpu_memory_bytes);
    INFO(name << ": device estimate " << m.device_bytes << ", budget " << req.gpu_memory_bytes
              << ", " << cp.cond.slices << " slices of " << cp.plan.memory.device_bytes);
    REQUIRE(feasible);
    REQUIRE(cp.conditioned());
    CHECK(cp.plan.memory.device_bytes <= req.gpu_memory_bytes);
    const RunResult r = runner.run(cp);
    CHECK(std::abs(r.ln_pr - ln_whole) <= 1e-9 * std::max(1.0, std::abs(ln_whole)));
    CHECK(r.gpu_buckets >= 1);
    CHECK(dev.peak_live_bytes() <= req.gpu_memory_bytes);
    CHECK(dev.peak_live_bytes() > 0);
    CHECK(dev.error().empty());
    CHECK(dev.live_tables() == 0);
  }
}

TEST_CASE("Scheduler.GpuHostPartOfRealPlans", "[scheduler]") {
  // The accountant's host part of a GPU run (Runner::estimate) on real plans with the fake
  // device: whole-plan placement, the staging block at least the GPU buckets' inputs, the host
  // tables no more than the CPU path's intermediates plus the downloads, and an answer unchanged.
  for (const char* name : {"DBN_11.uai", "linkage_14.uai.gz", "Pedigree_11.uai"}) {
    const Plan plan = uai_plan(name);
    test::FakeDevice dev(2, 0);
    RunRequest req;
    req.device = DeviceChoice::gpu;
    req.policy = Policy::whole_plan;
    Runner runner(req, &dev);
    const MemoryEstimate m = runner.estimate(plan);
    const GpuHostPart g = gpu_host_part(plan, whole_plan_schedule(plan.tree).device);
    INFO(name << ": cpu intermediates " << plan.memory.intermediate_bytes << ", gpu host tables "
              << g.intermediates << ", staging " << g.staging << ", " << g.cpu_buckets
              << " CPU buckets; device " << m.device_bytes);
    CHECK(m.device_host_bytes == Approx(gpu_context_host_bytes() + g.staging + g.kernel_plans));
    CHECK(m.intermediate_bytes == Approx(g.intermediates));
    CHECK(g.staging >= 0);
    CHECK(m.peak_bytes >= m.process_bytes + gpu_context_host_bytes());
    WARN(name << ": host tables on the GPU path " << g.intermediates / 1048576 << " MiB (CPU path "
              << plan.memory.intermediate_bytes / 1048576 << "), staging " << g.staging / 1048576
              << " MiB, " << g.cpu_buckets << " of " << plan.tree.buckets.size()
              << " buckets on the CPU");
  }
}

TEST_CASE("Gpu.DriverEnvironmentOneWorkQueueUnlessTheUserSetIt", "[scheduler]") {
  // kinfer's main() asks for one hardware work queue per device (a shorter context creation);
  // a value the user set is kept
  test::ScopedEnv queues("CUDA_DEVICE_MAX_CONNECTIONS", nullptr);
  gpu::set_driver_environment();
  REQUIRE(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") != nullptr);
  CHECK(std::string(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) == "1");
  // the memory accountant's context: 80 MiB with one queue, 10 MiB per further one
  CHECK(gpu_context_host_bytes() == 80.0 * 1048576);
  queues.set("4");
  gpu::set_driver_environment();
  CHECK(std::string(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) == "4");
  CHECK(gpu_context_host_bytes() == 110.0 * 1048576);
  queues.set(nullptr);
  CHECK(gpu_context_host_bytes() == 150.0 * 1048576);  // the driver's 8
}

TEST_CASE("Scheduler.GpusOpenedForSlicesOnlyWhenTheyPay", "[scheduler]") {
  // Each GPU more starts after the ones before (kGpuStartSeconds each): it is opened only when
  // the slices' predicted seconds, shared by one more GPU, save more than those starts.
  ConditionedPlan cp;
  cp.cond.vars = {0};
  cp.plan.order.stats.log2_total_state = 10;  // a slice's kernels: negligible beside its base
  const double slice = kGpuSliceBaseSeconds + std::exp2(10.0) / kGpuStatesPerSecond;
  auto best = [&](int lanes) {  // the fewest lanes of least predicted wall
    int n = 1;
    for (int l = 2; l <= lanes; ++l) {
      const double total = cp.cond.slices * slice;
      if (total / l + (l - 1) * kGpuStartSeconds < total / n + (n - 1) * kGpuStartSeconds) n = l;
    }
    return n;
  };
  for (std::int64_t slices : {2, 8, 72, 300, 2048, 100000}) {
    cp.cond.slices = slices;
    INFO(slices << " slices of " << slice << " s");
    CHECK(lanes_that_pay(cp, 4) <= best(4) + 1);
    CHECK(lanes_that_pay(cp, 4) >= best(4));
    CHECK(lanes_that_pay(cp, 1) == 1);
  }
  cp.cond.slices = 8;  // 8 slices of a few milliseconds: one GPU
  CHECK(lanes_that_pay(cp, 4) == 1);
  cp.cond.slices = 100000;  // minutes of slices: every GPU
  CHECK(lanes_that_pay(cp, 4) == 4);
}
