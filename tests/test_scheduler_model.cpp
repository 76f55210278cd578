// The cost model: bucket features, the fitted runtime models, transfer fits, and a Plan's cost
// tree under a fixed hand-written profile (data/profiles/fixed-test.json) whose models have
// closed forms.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "engine/errors.hpp"
#include "gpu/merge_inputs.hpp"
#include "io/uai.hpp"
#include "scheduler/calibrate.hpp"
#include "scheduler/plan_costs.hpp"
#include "scheduler/policies.hpp"
#include "tests/scheduler_support.hpp"

using namespace kinfer;
using kinfer::test::data_path;
using kinfer::test::uai_plan;
using namespace kinfer::sched;

namespace {}  // namespace

TEST_CASE("Scheduler.FeaturesOfAHandMadeBucket", "[scheduler]") {
  // vars a(2) b(3) c(2) d(4), last two summed; inputs f(a, c, d), g(b), h(c)
  BucketShape s{{10, 11, 12, 13}, {2, 3, 2, 4}, 2};
  const std::vector<std::vector<int>> scopes = {{10, 12, 13}, {11}, {12}};
  const BucketFeatures f = bucket_features(s, scopes);
  CHECK(f.log2_states == Approx(std::log2(48.0)));
  CHECK(f.log2_out == Approx(std::log2(6.0)));
  CHECK(f.log2_marg == Approx(3.0));
  CHECK(f.inputs == 3);
  CHECK(f.varying == 2);  // f and h vary with c or d; g does not
  CHECK(f.log2_in == Approx(std::log2(16.0 + 3 + 2)));
  CHECK(f.log2_reuse == Approx(std::log2(48.0 * 3 / 21)));
  CHECK(f.log2_run == Approx((3.0 + 1.0) / 2));  // f runs over c,d (8), h over c (2)
  CHECK(f.log2_inner == Approx(3.0));
  CHECK(input_entries(s, scopes) == 21);
}

TEST_CASE("Scheduler.FixedProfileCostTree", "[scheduler]") {
  const Profile p = load_profile(data_path("profiles/fixed-test.json"));
  REQUIRE(p.has_gpu);
  const Plan plan = uai_plan("Pedigree_11.uai");
  const PlanCosts pc = plan_costs(plan, p);
  REQUIRE(pc.tree.nodes.size() == plan.tree.buckets.size());
  REQUIRE_NOTHROW(validate(pc.tree));
  for (std::size_t b = 0; b < plan.tree.buckets.size(); ++b) {
    const Bucket& bk = plan.tree.buckets[b];
    // independent figures: the state space from the cardinalities, the varying inputs from
    // whether a scope meets the summed variables
    double states = 1, out = 1;
    for (std::size_t i = 0; i < bk.vars.size(); ++i) {
      states *= plan.model.card[bk.vars[i]];
      if (i + bk.n_marg < bk.vars.size()) out *= plan.model.card[bk.vars[i]];
    }
    const std::vector<int> summed(bk.vars.end() - bk.n_marg, bk.vars.end());
    int varying = 0, inputs = 0;
    double factor_bytes = 0, upload = 0;
    auto count = [&](const std::vector<int>& scope) {
      ++inputs;
      for (int v : scope)
        if (std::find(summed.begin(), summed.end(), v) != summed.end()) {
          ++varying;
          return;
        }
    };
    std::vector<std::vector<int>> factor_scopes, child_scopes;
    for (int f : bk.factors) {
      count(plan.input_scope[f]);
      factor_scopes.push_back(plan.input_scope[f]);
    }
    for (int c : bk.children) {
      count(plan.tree.buckets[c].output_vars());
      child_scopes.push_back(plan.tree.buckets[c].output_vars());
    }
    // the uploads are the factor inputs as the executor merges them: each factor in one group,
    // a group's table over the union of its factors' scopes
    const gpu::MergePlan mp = gpu::merge_plan(bucket_shape(plan, b), factor_scopes, child_scopes);
    std::vector<int> seen(bk.factors.size(), 0);
    for (std::size_t k = 0; k < mp.groups.size(); ++k) {
      std::set<int> vars;
      for (int i : mp.groups[k]) {
        ++seen.at(i);
        vars.insert(factor_scopes[i].begin(), factor_scopes[i].end());
      }
      CHECK(std::set<int>(mp.scopes[k].begin(), mp.scopes[k].end()) == vars);
      double entries = 1;
      for (int v : vars) entries *= plan.model.card[v];
      CHECK(mp.sizes[k] == entries);
      factor_bytes += 8.0 * entries;
      upload += 1e-5 + 8.0 * entries / 1e10;
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));
    const CostNode& n = pc.tree.nodes[b];
    INFO("bucket " << b);
    CHECK(n.cpu == Approx(1e-5 + 1e-9 * states * std::exp(0.1 * varying)));
    CHECK(n.gpu == Approx(2e-5 + 1e-11 * states));
    CHECK(n.upload == Approx(upload));
    CHECK(n.to_gpu == Approx(1e-5 + 8 * out / 1e10));
    // a download lands in a new pinned buffer: the staging pool's power of two of at least 4 KiB
    double pinned = 4096;
    while (pinned < 8 * out) pinned *= 2;
    CHECK(n.to_cpu == Approx(2e-5 + 8 * out / 5e9 + 3e-5 + pinned / 2e9));
    CHECK(pc.out_bytes[b] == 8 * out);
    CHECK(pc.input_bytes[b] == factor_bytes);
    CHECK(pc.features[b].inputs == inputs);
    CHECK(n.parent == (b + 1 == plan.tree.buckets.size() ? -1 : bk.parent));
  }
  // the schedules on it: comm-aware is the cheapest, and its traffic adds up
  const Schedule ca = make_schedule(pc.tree, Policy::comm_aware);
  for (Policy pol : kAllPolicies)
    CHECK(ca.cost.total() <= make_schedule(pc.tree, pol).cost.total() * (1 + 1e-12));
  const Traffic all_gpu = schedule_traffic(pc, make_schedule(pc.tree, Policy::gpu_only).device);
  double inputs = 0;
  for (double x : pc.input_bytes) inputs += x;
  CHECK(all_gpu.h2d == Approx(inputs));
  CHECK(all_gpu.d2h == 8.0);  // the root's single value
}

TEST_CASE("Scheduler.ProfileWithoutGpuKeepsEverythingOnCpu", "[scheduler]") {
  Profile p = load_profile(data_path("profiles/fixed-test.json"));
  p.has_gpu = false;
  const Plan plan = uai_plan("grid10x10.f10.uai");
  const PlanCosts pc = plan_costs(plan, p);
  const Schedule ca = make_schedule(pc.tree, Policy::comm_aware);
  CHECK(ca.cost.on_gpu == 0);
  CHECK(std::isinf(make_schedule(pc.tree, Policy::gpu_only).cost.total()));
}

TEST_CASE("Scheduler.GpuMemoryAndInputLimits", "[scheduler]") {
  Profile p = load_profile(data_path("profiles/fixed-test.json"));
  BucketFeatures f;
  f.log2_states = 20;
  f.inputs = 17;  // more than the GPU kernel takes
  CHECK(std::isinf(p.gpu_seconds(f)));
  f.inputs = 16;
  CHECK(std::isfinite(p.gpu_seconds(f)));
  // a GPU with almost no memory: every bucket with tables stays on the CPU
  p.gpu.memory_bytes = 8;  // less than one entry of any table
  const Plan plan = uai_plan("Pedigree_11.uai");
  const PlanCosts pc = plan_costs(plan, p);
  int finite = 0;
  for (std::size_t b = 0; b + 1 < pc.tree.nodes.size(); ++b)
    finite += std::isfinite(pc.tree.nodes[b].gpu);
  CHECK(finite == 0);
}

TEST_CASE("Scheduler.FirstUseOfAShapeCostsOnlyWhenCold", "[scheduler]") {
  Profile p = load_profile(data_path("profiles/fixed-test.json"));
  p.gpu_first_use = 1e-3;
  const Plan plan = uai_plan("Pedigree_11.uai");
  const PlanCosts cold = plan_costs(plan, p), warm = plan_costs(plan, p, true);
  for (std::size_t b = 0; b < cold.tree.nodes.size(); ++b) {
    CHECK(cold.tree.nodes[b].gpu == Approx(warm.tree.nodes[b].gpu + 1e-3));
    CHECK(cold.tree.nodes[b].cpu == warm.tree.nodes[b].cpu);
  }
}

TEST_CASE("Scheduler.ExecutorOverheadIsChargedPerBucket", "[scheduler]") {
  Profile p = load_profile(data_path("profiles/fixed-test.json"));
  const Plan plan = uai_plan("Pedigree_11.uai");
  const PlanCosts base = plan_costs(plan, p, true);
  p.cpu.dispatch = 3e-6;
  p.gpu.dispatch = 2.5e-5;
  const PlanCosts with = plan_costs(plan, p, true);
  for (std::size_t b = 0; b < base.tree.nodes.size(); ++b) {
    CHECK(with.tree.nodes[b].cpu == Approx(base.tree.nodes[b].cpu + 3e-6));
    CHECK(with.tree.nodes[b].gpu == Approx(base.tree.nodes[b].gpu + 2.5e-5));
  }
}

TEST_CASE("Scheduler.ProfileRoundTrip", "[scheduler]") {
  const Profile p = load_profile(data_path("profiles/fixed-test.json"));
  const auto dir =
      std::filesystem::temp_directory_path() / ("kinfer-test-" + std::to_string(::getpid()));
  const std::string path = (dir / "sub" / "profile.json").string();
  save_profile(p, path);
  const Profile q = load_profile(path);
  std::filesystem::remove_all(dir);
  BucketFeatures f;
  f.log2_states = 17.5;
  f.varying = 3;
  CHECK(q.cpu_seconds(f) == Approx(p.cpu_seconds(f)).epsilon(1e-14));
  CHECK(q.gpu_seconds(f) == Approx(p.gpu_seconds(f)).epsilon(1e-14));
  CHECK(q.h2d.seconds(1e6) == Approx(1e-5 + 1e-4));
  CHECK(q.gpu_first_use == p.gpu_first_use);
  CHECK(q.gpu.dispatch == p.gpu.dispatch);
  CHECK(p.gpu_kernels == 0);  // a profile from before kernel generations were recorded
  Profile r = p;
  r.gpu_kernels = gpu::kKernelGeneration;
  save_profile(r, path);
  CHECK(load_profile(path).gpu_kernels == gpu::kKernelGeneration);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Scheduler.ShippedProfilesAreOfTheseKernels", "[scheduler]") {
  // The shipped profiles must be refitted (kinfer calibrate on their machines) when the
  // kernels' generation is raised: a profile of older kernels mispredicts the GPU's times.
  for (const char* name : {"profiles/h100.json", "profiles/h200.json"}) {
    INFO(name);
    const Profile p = load_profile(data_path(name));
    CHECK(p.has_gpu);
    CHECK(p.gpu_kernels == gpu::kKernelGeneration);
  }
}

TEST_CASE("Scheduler.ProfileWithoutSamplesPredictsTheSame", "[scheduler]") {
  // what run_with_policy reads: the models, not the calibration samples
  const std::string path = data_path("profiles/h200.json");
  const Profile p = load_profile(path);
  const Profile q = load_profile(path, false);
  CHECK_FALSE(p.cpu.samples.empty());
  CHECK(q.cpu.samples.empty());
  CHECK(q.gpu.samples.empty());
  REQUIRE(q.has_gpu);
  for (double s : {4.0, 12.0, 20.0}) {
    BucketFeatures f;
    f.log2_states = s;
    f.log2_out = s - 2;
    f.inputs = 3;
    f.varying = 2;
    CHECK(q.cpu_seconds(f) == p.cpu_seconds(f));
    CHECK(q.gpu_seconds(f, true) == p.gpu_seconds(f, true));
  }
  CHECK(q.h2d.seconds(1e6) == p.h2d.seconds(1e6));
  CHECK(q.d2h.seconds(1e6) == p.d2h.seconds(1e6));
}

TEST_CASE("Scheduler.PinningPrice", "[scheduler]") {
  // a profile that measured pinning keeps it through its JSON; one that did not (the shipped
  // ones) uses the documented defaults; either way on the pool's power-of-two buffer
  const Profile f = load_profile(data_path("profiles/fixed-test.json"));
  const Profile g = profile_from_json(to_json(f), "copy.json");
  CHECK(g.pin.latency == 3e-5);
  CHECK(g.pin.bandwidth == 2e9);
  CHECK(g.pin_seconds(5e6) == Approx(3e-5 + 8388608 / 2e9));
  CHECK(g.pin_seconds(8) == Approx(3e-5 + 4096 / 2e9));
  CHECK(g.pin_seconds(0) == 0);
  const Profile h = load_profile(data_path("profiles/h200.json"), false);
  CHECK(h.pin.bandwidth == 0);
  CHECK(h.pin_seconds(8388608) == Approx(kPinLatency + 8388608 / kPinBandwidth));
}

TEST_CASE("Scheduler.BadProfilesAreInputErrors", "[scheduler]") {
  CHECK_THROWS_AS(load_profile("/nonexistent/profile.json"), InputError);
  CHECK_THROWS_WITH(profile_from_json(nlohmann::json{{"cpu", 1}}, "x.json"),
                    Catch::Contains("x.json") && Catch::Contains("not a kinfer profile"));
  auto j = nlohmann::json::parse(R"({"kinfer_profile": 99})");
  CHECK_THROWS_WITH(profile_from_json(j, "y.json"), Catch::Contains("calibrate again"));
  // the GPU kernels' generation must be a number
  std::ifstream in(data_path("profiles/fixed-test.json"));
  auto k = nlohmann::json::parse(in);
  REQUIRE(k.at("gpu").is_object());
  k["gpu"]["kernels"] = "seven";
  CHECK_THROWS_WITH(profile_from_json(k, "z.json"),
                    Catch::Contains("z.json") && Catch::Contains("malformed profile"));
  // so must the quick figures and the derivation's note
  k["gpu"]["kernels"] = 8;
  k["gpu"]["quick"] = {{"copy_bandwidth", "fast"}, {"h2d_bandwidth", 1e10}, {"d2h_bandwidth", 1e10}};
  CHECK_THROWS_WITH(profile_from_json(k, "q.json"),
                    Catch::Contains("q.json") && Catch::Contains("malformed profile"));
  k["gpu"]["quick"] = {{"copy_bandwidth", 3e12}, {"h2d_bandwidth", 5e10}, {"d2h_bandwidth", 5e10}};
  k["gpu"]["derived_from"] = 42;
  CHECK_THROWS_WITH(profile_from_json(k, "d.json"),
                    Catch::Contains("d.json") && Catch::Contains("malformed profile"));
  k["gpu"].erase("derived_from");
  CHECK(profile_from_json(k, "ok.json").gpu_figures.copy_bandwidth == 3e12);
}

TEST_CASE("Scheduler.LoglinearFitRecoversAKnownLaw", "[scheduler]") {
  // t = 30 us + 2 ns * states^1.1 * 1.2^varying, with 3% noise
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> ls(0, 26), noise(-0.03, 0.03);
  auto law = [](const BucketFeatures& f) {
    return 3e-5 + 2e-9 * std::exp2(1.1 * f.log2_states) * std::pow(1.2, f.varying);
  };
  auto draw = [&](double states) {
    BucketFeatures f;
    f.log2_states = states;
    f.log2_out = f.log2_states * 0.7;
    f.log2_marg = f.log2_states - f.log2_out;
    f.inputs = std::uniform_int_distribution<int>(1, 9)(rng);
    f.varying = std::uniform_int_distribution<int>(1, static_cast<int>(f.inputs))(rng);
    f.log2_in = f.log2_out + 1;
    f.log2_reuse = f.log2_states + std::log2(f.inputs) - f.log2_in;
    return f;
  };
  std::vector<Sample> train, test;
  for (int i = 0; i < 200; ++i) {
    const BucketFeatures f = draw(ls(rng));
    train.push_back({f, law(f) * (1 + noise(rng))});
  }
  for (int i = 0; i < 100; ++i) {
    const BucketFeatures f = draw(ls(rng));
    test.push_back({f, law(f)});
  }
  const RuntimeModel m = RuntimeModel::fit_kind(train, ModelKind::loglinear);
  CHECK(median_relative_error(m, test) < 0.02);
  // beyond the calibrated sizes, a power law still extrapolates
  const BucketFeatures big = draw(30);
  CHECK(m.predict(big) / law(big) == Approx(1).epsilon(0.1));
}

TEST_CASE("Scheduler.CrossValidationPrefersTheTreeForRegimes", "[scheduler]") {
  // Two code paths: buckets with one summed state are 8x slower per state than a power law
  // says. The residual tree should find the regime; the plain power law cannot.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> ls(4, 24);
  std::vector<Sample> s;
  for (int i = 0; i < 300; ++i) {
    BucketFeatures f;
    f.log2_states = ls(rng);
    f.log2_marg = std::uniform_int_distribution<int>(0, 1)(rng) ? 0 : 3;
    f.log2_out = f.log2_states - f.log2_marg;
    f.inputs = 3;
    f.varying = f.log2_marg > 0 ? 2 : 0;
    const double t = 1e-5 + 1e-9 * std::exp2(f.log2_states) * (f.log2_marg == 0 ? 8 : 1);
    s.push_back({f, t});
  }
  const RuntimeModel m = RuntimeModel::fit(s);
  CHECK(m.kind != ModelKind::loglinear);
  CHECK(m.cv_loglinear_tree < m.cv_loglinear);
  CHECK(median_relative_error(m, s) < 0.05);
}

TEST_CASE("Scheduler.TransferFitRecoversLatencyAndBandwidth", "[scheduler]") {
  std::vector<std::pair<double, double>> s;
  for (int k = 3; k <= 28; ++k) s.emplace_back(std::exp2(k), 8e-6 + std::exp2(k) / 2.5e10);
  const TransferModel t = TransferModel::fit(s);
  CHECK(t.latency == Approx(8e-6).epsilon(1e-6));
  CHECK(t.bandwidth == Approx(2.5e10).epsilon(1e-6));
  CHECK(t.seconds(0) == 0);
}

TEST_CASE("Scheduler.SweepBucketsAreWellFormed", "[scheduler]") {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 40; ++i) {
    const double l = 0.5 * i;
    const SweepBucket b = sweep_bucket(rng, l);
    const BucketFeatures f = bucket_features(b.shape, b.scopes);
    CHECK(std::abs(f.log2_states - l) <= 1.6);
    CHECK(b.shape.n_marg >= 1);
    CHECK(b.shape.n_marg <= static_cast<int>(b.shape.vars.size()));
    // every variable in some input; every input a subsequence of the bucket, data sized to it
    std::vector<char> seen(b.shape.vars.size(), 0);
    for (std::size_t k = 0; k < b.scopes.size(); ++k) {
      CHECK(std::is_sorted(b.scopes[k].begin(), b.scopes[k].end()));
      double n = 1;
      for (int v : b.scopes[k]) seen[v] = 1, n *= b.shape.card[v];
      CHECK(b.data[k].size() == static_cast<std::size_t>(n));
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](char c) { return c == 1; }));
    // and the CPU kernel runs it (against the reference on the small ones)
    if (l <= 10) {
      std::vector<double> fast(b.shape.output_size()), ref(b.shape.output_size());
      sum_product_log(b.shape, b.inputs(), fast.data(), 1);
      sum_product_log_reference(b.shape, b.inputs(), ref.data());
      for (std::size_t o = 0; o < fast.size(); ++o) CHECK(fast[o] == Approx(ref[o]).epsilon(1e-12));
    }
  }
}
