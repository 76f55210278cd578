// Re-predicts a recorded schedule-compare run with another profile, without a GPU: reads the
// run's cost tree (--save-tree) for the structure and transfer costs, and its bucket log
// (--bucket-log) for each bucket's features and measured kernel times; prints, per policy, the
// new predicted cost next to the recorded measurement, and the per-bucket prediction errors.
//   repredict PROFILE RUN_DIR NAME...     (RUN_DIR/NAME.tree.json, .buckets.tsv, .json)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "scheduler/policies.hpp"
#include "scheduler/profile.hpp"
#include "scheduler/tree_json.hpp"

using namespace kinfer::sched;

namespace {

struct Logged {
  BucketFeatures f;
  double cpu = NAN, gpu = NAN;  // measured, each kernel alone
};

std::vector<Logged> read_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<Logged> rows;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> t;
    for (std::string tok; std::getline(ss, tok, '\t');) t.push_back(tok);
    if (t.size() < 15) throw std::runtime_error(path + ": short line");
    double v[BucketFeatures::kCount];
    for (int i = 0; i < BucketFeatures::kCount; ++i) v[i] = std::stod(t[1 + i]);
    Logged r;
    r.f = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
    r.cpu = std::stod(t[11]);
    r.gpu = t[13] == "-" ? NAN : std::stod(t[13]);
    rows.push_back(r);
  }
  return rows;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: repredict PROFILE RUN_DIR NAME...\n");
    return 2;
  }
  const Profile prof = load_profile(argv[1]);
  const std::string dir = argv[2];
  std::vector<double> all_cpu, all_gpu;
  std::printf("%-12s %-11s %11s %11s %8s %8s\n", "network", "policy", "predicted", "measured",
              "error", "GPU");
  for (int a = 3; a < argc; ++a) {
    const std::string name = argv[a];
    CostTree t = read_cost_tree(dir + "/" + name + ".tree.json");
    const std::vector<Logged> log = read_log(dir + "/" + name + ".buckets.tsv");
    std::ifstream jf(dir + "/" + name + ".json");
    const nlohmann::json run = nlohmann::json::parse(jf);
    if (log.size() != t.nodes.size()) throw std::runtime_error(name + ": log and tree differ");
    std::vector<double> ecpu, egpu;
    for (std::size_t v = 0; v < t.nodes.size(); ++v) {
      CostNode& n = t.nodes[v];
      const Logged& l = log[static_cast<std::size_t>(n.id)];
      n.cpu = prof.cpu_seconds(l.f);
      if (std::isfinite(n.gpu)) n.gpu = prof.gpu_seconds(l.f);  // infinite stays: no kernel
      // kernels alone, as the log measured them: without the executor's own cost per bucket
      const double kc = n.cpu - prof.cpu.dispatch, kg = n.gpu - prof.gpu.dispatch;
      if (l.cpu > 0) ecpu.push_back(std::abs(kc / l.cpu - 1));
      if (l.gpu > 0 && std::isfinite(n.gpu)) egpu.push_back(std::abs(kg / l.gpu - 1));
    }
    for (const auto& p : run.at("policies")) {
      const Schedule s = make_schedule(t, parse_policy(p.at("policy")));
      const bool same = s.cost.on_gpu == p.at("gpu_buckets").get<int>();
      const double meas = p.value("measured_seconds", nlohmann::json(nullptr)).is_null()
                              ? NAN
                              : p["measured_seconds"].get<double>();
      std::printf("%-12s %-11s %11s %11s %+7.1f%% %4d%s\n", name.c_str(), to_string(s.policy),
                  format_seconds(s.cost.total()).c_str(), format_seconds(meas).c_str(),
                  100 * (s.cost.total() / meas - 1), s.cost.on_gpu,
                  same ? "" : " (the recorded run had another assignment)");
    }
    std::printf("%-12s buckets: CPU median error %.1f%% (%zu), GPU %.1f%% (%zu)\n\n", name.c_str(),
                100 * median(ecpu), ecpu.size(), 100 * median(egpu), egpu.size());
    all_cpu.insert(all_cpu.end(), ecpu.begin(), ecpu.end());
    all_gpu.insert(all_gpu.end(), egpu.begin(), egpu.end());
  }
  std::printf("all buckets: CPU median error %.1f%% (%zu), GPU %.1f%% (%zu)\n",
              100 * median(all_cpu), all_cpu.size(), 100 * median(all_gpu), all_gpu.size());
  return 0;
}
