// Offline refit of the kernel models with the buckets of recorded networks, judged by
// leave-one-network-out: for each network, a model fitted to the profile's calibration samples
// plus the other networks' buckets (each timed alone, from schedule-compare --bucket-log)
// predicts the held-out network's buckets. Prints, per network and device, the per-bucket
// median |pred/meas - 1| and the total predicted/measured, for the profile's own model and the
// refitted one. With --write FILE, also writes the profile refitted with all networks' buckets.
//   refit PROFILE [--write FILE] BUCKET_LOG...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scheduler/profile.hpp"

using namespace kinfer::sched;

namespace {

struct Net {
  std::string name;
  std::vector<Sample> cpu, gpu;  // kernels timed alone
};

Net read_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  Net n;
  n.name = path.substr(path.find_last_of('/') + 1);
  n.name = n.name.substr(0, n.name.find(".buckets.tsv"));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> t;
    for (std::string tok; std::getline(ss, tok, '\t');) t.push_back(tok);
    if (t.size() < 15) throw std::runtime_error(path + ": short line");
    BucketFeatures f;
    double v[BucketFeatures::kCount];
    for (int i = 0; i < BucketFeatures::kCount; ++i) v[i] = std::stod(t[1 + i]);
    f = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
    if (const double c = std::stod(t[11]); c > 0) n.cpu.push_back({f, c});
    if (t[13] != "-")
      if (const double g = std::stod(t[13]); g > 0) n.gpu.push_back({f, g});
  }
  return n;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Score {
  double median_error = NAN, predicted = 0, measured = 0;
  std::vector<double> errors;
};

Score score(const RuntimeModel& m, const std::vector<Sample>& s) {
  Score r;
  for (const Sample& x : s) {
    const double p = m.predict(x.f);
    r.errors.push_back(std::abs(p / x.seconds - 1));
    r.predicted += p;
    r.measured += x.seconds;
  }
  r.median_error = median(r.errors);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string write;
  if (args.size() >= 3 && args[1] == "--write") {
    write = args[2];
    args.erase(args.begin() + 1, args.begin() + 3);
  }
  if (args.size() < 3) {
    std::fprintf(stderr, "usage: refit PROFILE [--write FILE] BUCKET_LOG BUCKET_LOG...\n");
    return 2;
  }
  Profile prof = load_profile(args[0]);
  std::vector<Net> nets;
  for (std::size_t a = 1; a < args.size(); ++a) nets.push_back(read_log(args[a]));
  for (const char* dev : {"cpu", "gpu"}) {
    const bool is_cpu = std::string(dev) == "cpu";
    const DeviceProfile& d = is_cpu ? prof.cpu : prof.gpu;
    std::printf("%s: %zu calibration samples, model %s\n", dev, d.samples.size(),
                to_string(d.model.kind));
    std::printf("  %-16s %8s | %9s %9s %9s | %9s %9s %9s\n", "held out", "buckets", "profile",
                "total", "", "refit", "total", "model");
    std::vector<double> all_before, all_after;
    for (std::size_t h = 0; h < nets.size(); ++h) {
      const auto& test = is_cpu ? nets[h].cpu : nets[h].gpu;
      std::vector<Sample> train = d.samples;
      for (std::size_t o = 0; o < nets.size(); ++o)
        if (o != h) {
          const auto& s = is_cpu ? nets[o].cpu : nets[o].gpu;
          train.insert(train.end(), s.begin(), s.end());
        }
      const RuntimeModel m = RuntimeModel::fit(train);
      const Score before = score(d.model, test), after = score(m, test);
      all_before.insert(all_before.end(), before.errors.begin(), before.errors.end());
      all_after.insert(all_after.end(), after.errors.begin(), after.errors.end());
      std::printf("  %-16s %8zu | %8.1f%% %+8.0f%% %9s | %8.1f%% %+8.0f%% %9s\n",
                  nets[h].name.c_str(), test.size(), 100 * before.median_error,
                  100 * (before.predicted / before.measured - 1), "", 100 * after.median_error,
                  100 * (after.predicted / after.measured - 1), to_string(m.kind));
    }
    std::printf("  %-16s %8zu | %8.1f%% %9s %9s | %8.1f%%\n\n", "all", all_before.size(),
                100 * median(all_before), "", "", 100 * median(all_after));
    if (!write.empty()) {
      DeviceProfile& w = is_cpu ? prof.cpu : prof.gpu;
      for (const Net& n : nets) {
        const auto& s = is_cpu ? n.cpu : n.gpu;
        w.samples.insert(w.samples.end(), s.begin(), s.end());
      }
      w.model = RuntimeModel::fit(w.samples);
    }
  }
  if (!write.empty()) {
    prof.host += " (refitted offline with network buckets: bench/scheduler/refit)";
    save_profile(prof, write);
    std::printf("wrote %s\n", write.c_str());
  }
  return 0;
}
