// TREE.json: parsing, validation with file and line, and `kinfer schedule --tree` end to end.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/errors.hpp"
#include "scheduler/tree_json.hpp"
#include "tests/scheduler_support.hpp"

using kinfer::test::data_path;
using namespace kinfer::sched;

namespace {

struct Output {
  int status = -1;
  std::string text;
};

// Runs the real `kinfer` (KINFER_EXE) and captures stdout (and stderr when `merge`).
Output run_kinfer(const std::string& args, bool merge = true) {
  const char* exe = std::getenv("KINFER_EXE");
  REQUIRE(exe != nullptr);
  const std::string cmd = std::string(exe) + " " + args + (merge ? " 2>&1" : " 2>/dev/null");
  Output o;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) o.text.append(buf, n);
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

int index_of(const CostTree& t, long long id) {
  for (std::size_t v = 0; v < t.nodes.size(); ++v)
    if (t.nodes[v].id == id) return static_cast<int>(v);
  return -1;
}

}  // namespace

TEST_CASE("Scheduler.TreeJsonIslands", "[scheduler]") {
  // A chain 1 -> 2 -> 3 -> 4 (root) where node 2 is a small kernel between two large ones.
  const CostTree t = read_cost_tree(data_path("trees/islands.json"));
  REQUIRE(t.nodes.size() == 4);
  CHECK(t.nodes[t.root].id == 4);
  const Schedule g = make_schedule(t, Policy::greedy);
  // greedy: 1 gpu (1.6 < 8), 2 cpu (1.31 > 0.2), 3 gpu (1.61 < 9), 4 cpu (0.061 > 0.01);
  // cost 1 + 0.1 + 0.5 + 0.2 + 0.5 + 1 + 0.1 + 0.01 + 0.01
  CHECK(g.device[index_of(t, 2)] == Device::cpu);
  CHECK(g.cost.total() == Approx(3.42));
  // comm-aware moves the CPU island 2 to the GPU: 1 + 0.1 + 0.3 + 0.01 + 1 + 0.1 + 0.01 + 0.01
  const Schedule c = make_schedule(t, Policy::comm_aware);
  CHECK(c.device[index_of(t, 1)] == Device::gpu);
  CHECK(c.device[index_of(t, 2)] == Device::gpu);
  CHECK(c.device[index_of(t, 3)] == Device::gpu);
  CHECK(c.device[index_of(t, 4)] == Device::cpu);
  CHECK(c.cost.total() == Approx(2.53));
}

TEST_CASE("Scheduler.TreeJsonNullGpuMeansCpuOnly", "[scheduler]") {
  const CostTree t = read_cost_tree(data_path("trees/mixed.json"));
  const int n7 = index_of(t, 7);
  CHECK(std::isinf(t.nodes[n7].gpu));
  CHECK(make_schedule(t, Policy::comm_aware).device[n7] == Device::cpu);
  CHECK(std::isinf(make_schedule(t, Policy::gpu_only).cost.total()));
  // round trip through to_json
  const CostTree back = parse_cost_tree(to_json(t).dump(), "round-trip");
  CHECK(make_schedule(back, Policy::comm_aware).cost.total() ==
        Approx(make_schedule(t, Policy::comm_aware).cost.total()));
}

TEST_CASE("Scheduler.TreeJsonErrorsNameFileAndLine", "[scheduler]") {
  struct Case {
    const char* file;
    long line;
    const char* says;
  };
  const Case cases[] = {
      {"cycle.json", 6, "not below the root"},
      {"root-in-cycle.json", 4, "a cycle"},
      {"unknown-child.json", 4, "child 9 is not the id of any node"},
      {"two-roots.json", 6, "two roots"},
      {"negative.json", 5, "non-negative"},
      {"syntax.json", 4, "not valid JSON"},
      {"duplicate-id.json", 6, "used twice"},
      {"two-parents.json", 6, "two parents"},
      {"unknown-root.json", 1, "not the id of any node"},
      {"missing-cost.json", 5, "missing \"cpu\""},
  };
  for (const Case& c : cases) {
    INFO(c.file);
    try {
      read_cost_tree(data_path(std::string("trees/bad/") + c.file));
      FAIL("accepted a bad tree");
    } catch (const kinfer::InputError& e) {
      CHECK(e.line() == c.line);
      CHECK_THAT(e.what(), Catch::Contains(c.says));
      CHECK_THAT(e.what(), Catch::Contains(c.file));
    }
  }
}

TEST_CASE("Scheduler.ScheduleCommandJson", "[scheduler]") {
  const Output o =
      run_kinfer("schedule --tree " + data_path("trees/paper-fig1.json") + " --json", false);
  REQUIRE(o.status == 0);
  const auto j = nlohmann::json::parse(o.text);
  const auto& p = j.at("policies");
  // costs worked by hand in test_scheduler_policies.cpp (GreedyLosesWhereTransfersMatter)
  CHECK(p.at("cpu-only").at("cost").get<double>() == Approx(70));
  CHECK(p.at("gpu-only").at("cost").get<double>() == Approx(54));
  CHECK(p.at("greedy").at("cost").get<double>() == Approx(62));
  CHECK(p.at("comm-aware").at("cost").get<double>() == Approx(54));
  CHECK(p.at("greedy").at("assignment").at("1") == "cpu");
  CHECK(p.at("greedy").at("assignment").at("2") == "gpu");
  CHECK(p.at("comm-aware").at("assignment").at("1") == "gpu");
  CHECK(p.at("comm-aware").at("reasons").at("2").get<std::string>().find("root") == 0);
}

TEST_CASE("Scheduler.ScheduleCommandExplain", "[scheduler]") {
  const Output o = run_kinfer("schedule --tree " + data_path("trees/islands.json") +
                              " --explain --policy greedy");
  REQUIRE(o.status == 0);
  CHECK_THAT(o.text, Catch::Contains("greedy assignment: 1:gpu 2:cpu 3:gpu 4:cpu"));
  CHECK_THAT(o.text, Catch::Contains("alone on cpu"));
}

TEST_CASE("Scheduler.ScheduleCommandBadTreesExit2", "[scheduler]") {
  for (const char* f : {"cycle.json", "unknown-child.json", "two-roots.json", "negative.json",
                        "syntax.json", "root-in-cycle.json"}) {
    INFO(f);
    const Output o = run_kinfer("schedule --tree " + data_path(std::string("trees/bad/") + f));
    CHECK(o.status == 2);
    CHECK_THAT(o.text, Catch::Contains(f));
  }
  const Output missing = run_kinfer("schedule --tree /nonexistent/tree.json");
  CHECK(missing.status == 2);
  CHECK_THAT(missing.text, Catch::Contains("cannot open"));
  const Output policy =
      run_kinfer("schedule --tree " + data_path("trees/islands.json") + " --policy fastest");
  CHECK(policy.status == 2);
}

TEST_CASE("Scheduler.ScheduleCompareWithoutGpuIsLabelledPredicted", "[scheduler]") {
  const std::string net = data_path("uai/Pedigree_11.uai");
  const Output o = run_kinfer("schedule-compare " + net +
                                  " --order minfill --no-gpu --repeat 1 --json --profile " +
                                  data_path("profiles/fixed-test.json"),
                              false);
  REQUIRE(o.status == 0);
  const auto j = nlohmann::json::parse(o.text);
  CHECK(j.at("gpu").is_null());
  CHECK(j.at("ln_pr").get<double>() / std::log(10.0) ==
        Approx(-17.2155).margin(5e-5));  // REFERENCES.tsv
  const auto& pol = j.at("policies");
  REQUIRE(pol.size() == 4);
  for (const auto& p : pol) {
    const std::string name = p.at("policy");
    INFO(name);
    const bool uses_gpu = p.at("gpu_buckets").get<int>() > 0 || name == "gpu-only";
    CHECK(p.at("measured").get<bool>() == !uses_gpu);  // GPU figures are predictions only
    if (!uses_gpu) CHECK(p.at("measured_seconds").get<double>() > 0);
  }
  // the fixed profile's GPU is 100x faster per state: comm-aware uses it, cpu-only does not
  CHECK(pol.at(0).at("policy") == "cpu-only");
  CHECK(pol.at(3).at("policy") == "comm-aware");
  CHECK(pol.at(3).at("gpu_buckets").get<int>() > 0);
  CHECK(pol.at(3).at("predicted_seconds").get<double>() <=
        pol.at(0).at("predicted_seconds").get<double>());
  CHECK(j.at("bucket_predictions").at("cpu").at("buckets").get<int>() ==
        j.at("buckets").get<int>());
}

TEST_CASE("Scheduler.ScheduleCompareNeedsAProfile", "[scheduler]") {
  const Output o = run_kinfer("schedule-compare " + data_path("uai/Pedigree_11.uai") +
                              " --no-gpu --profile /nonexistent/profile.json");
  CHECK(o.status == 2);
  CHECK_THAT(o.text, Catch::Contains("kinfer calibrate"));
}

TEST_CASE("Scheduler.CalibrateQuick", "[scheduler]") {
  // `calibrate --quick`: the GPU's quick figures as JSON, or, without a GPU, exit 3 saying so.
  const Output o = run_kinfer("calibrate --quick", false);
  if (o.status == 0) {
    const auto j = nlohmann::json::parse(o.text);
    CHECK(j.at("copy_bandwidth").get<double>() > 1e9);
    CHECK(j.at("h2d_bandwidth").get<double>() > 1e8);
    CHECK(j.at("d2h_bandwidth").get<double>() > 1e8);
    CHECK_FALSE(j.at("gpu").get<std::string>().empty());
  } else {
    CHECK(o.status == 3);
    CHECK_THAT(run_kinfer("calibrate --quick").text, Catch::Contains("--quick needs a GPU"));
  }
}

TEST_CASE("Scheduler.PeScheduleOptions", "[scheduler]") {
  // `kinfer pe --schedule X` for every X gives the reference answer (REFERENCES.tsv: log10 P(e)
  // of Pedigree_11 is -17.2155) and the same answer as --device cpu. Without a GPU every bucket
  // runs on the CPU; on the GPU machine the policies run on the device.
  const std::string net = data_path("uai/Pedigree_11.uai");
  const Output cpu = run_kinfer("pe " + net + " --device cpu --json -q", false);
  REQUIRE(cpu.status == 0);
  const auto cj = nlohmann::json::parse(cpu.text);
  const double expected = cj["log10_pr"].get<double>();
  CHECK(std::abs(expected - -17.2155) <= 5e-5);
  CHECK(cj["schedule"]["policy"] == "cpu-only");
  CHECK(cj["schedule"]["buckets_gpu"] == 0);
  for (const char* s : {"cpu-only", "gpu-only", "greedy", "comm-aware", "whole-plan"}) {
    INFO(s);
    const Output o = run_kinfer("pe " + net + " --device gpu --json -q --explain --schedule " + s +
                                    " --profile " + data_path("profiles/h200.json") + " --repeat 1",
                                false);
    REQUIRE(o.status == 0);
    const auto j = nlohmann::json::parse(o.text);
    CHECK(j["log10_pr"].get<double>() == Approx(expected).epsilon(1e-9));
    const auto& sj = j["schedule"];
    CHECK(sj["requested"] == s);
    CHECK(sj["explain"].is_array());
    CHECK(sj["repeat_seconds"].size() == 1);
    CHECK(sj["buckets_gpu"].get<int>() + sj["buckets_cpu"].get<int>() == j["buckets"].get<int>());
    if (j["device"] == "cpu") CHECK(sj["buckets_gpu"] == 0);
  }
  // bad values are usage errors
  CHECK(run_kinfer("pe " + net + " --schedule fastest").status == 2);
  CHECK(run_kinfer("pe " + net + " --device gpu --schedule greedy --profile /nonexistent/p.json")
            .status != 0);
}
