#include "scheduler/profile.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/util.hpp"
#include "scheduler/staging.hpp"

namespace kinfer::sched {

namespace {
constexpr int kFormat = 1;
using nlohmann::json;

json samples_json(const std::vector<Sample>& s) {
  json a = json::array();
  for (const Sample& x : s) a.push_back({{"f", x.f.values()}, {"s", x.seconds}});
  return a;
}

std::vector<Sample> samples_from(const json& a) {
  std::vector<Sample> out;
  for (const json& x : a) {
    const auto v = x.at("f").get<std::vector<double>>();
    if (v.size() != BucketFeatures::kCount)
      throw std::invalid_argument("a sample has other features");
    Sample s;
    s.f = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
    s.seconds = x.at("s").get<double>();
    out.push_back(s);
  }
  return out;
}

json device_json(const DeviceProfile& d) {
  return {{"name", d.name},
          {"threads", d.threads},
          {"memory_bytes", d.memory_bytes},
          {"dispatch_seconds", d.dispatch},
          {"model", d.model.to_json()},
          {"samples", samples_json(d.samples)}};
}

DeviceProfile device_from(const json& j) {
  DeviceProfile d;
  d.name = j.value("name", "");
  d.threads = j.value("threads", 0);
  d.memory_bytes = j.value("memory_bytes", 0.0);
  d.dispatch = j.value("dispatch_seconds", 0.0);
  d.model = RuntimeModel::from_json(j.at("model"));
  if (j.contains("samples")) d.samples = samples_from(j["samples"]);
  return d;
}

json transfer_json(const TransferModel& t) {
  json s = json::array();
  for (auto [b, sec] : t.samples) s.push_back({b, sec});
  return {{"latency", t.latency}, {"bandwidth", t.bandwidth}, {"samples", s}};
}

TransferModel transfer_from(const json& j) {
  TransferModel t;
  t.latency = j.at("latency").get<double>();
  t.bandwidth = j.at("bandwidth").get<double>();
  if (!(t.latency >= 0) || !(t.bandwidth > 0))
    throw std::invalid_argument("a transfer needs latency >= 0 and bandwidth > 0");
  if (j.contains("samples"))
    for (const json& s : j["samples"])
      t.samples.emplace_back(s.at(0).get<double>(), s.at(1).get<double>());
  return t;
}
}  // namespace

TransferModel TransferModel::fit(std::vector<std::pair<double, double>> samples) {
  // minimize sum ((a + b x - t) / t)^2 over a (latency) and b (1 / bandwidth)
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (auto [x, t] : samples) {
    const double w = 1 / (t * t);
    s11 += w, s12 += w * x, s22 += w * x * x, r1 += w * t, r2 += w * x * t;
  }
  TransferModel m;
  m.samples = std::move(samples);
  const double det = s11 * s22 - s12 * s12;
  double a = 0, b = 0;
  if (det > 0) a = (r1 * s22 - r2 * s12) / det, b = (s11 * r2 - s12 * r1) / det;
  if (!(b > 0)) {  // degenerate sweep: fall back to the largest transfer's rate, no latency
    a = 0;
    double best_x = 0, best_t = 1;
    for (auto [x, t] : m.samples)
      if (x > best_x) best_x = x, best_t = t;
    b = best_x > 0 ? best_t / best_x : 1e-9;
  }
  if (a < 0) a = 0;
  m.latency = a;
  m.bandwidth = 1 / b;
  return m;
}

double Profile::gpu_seconds(const BucketFeatures& f, bool first_use) const {
  if (!has_gpu) return std::numeric_limits<double>::infinity();
  if (f.inputs > gpu_max_inputs) return std::numeric_limits<double>::infinity();
  return gpu.model.predict(f) + gpu.dispatch + (first_use ? gpu_first_use : 0.0);
}

double Profile::pin_seconds(double bytes) const {
  if (bytes <= 0) return 0;
  const double pinned =
      8.0 *
      static_cast<double>(StagingPool::capacity(static_cast<std::int64_t>(std::ceil(bytes / 8))));
  return pin.bandwidth > 0 ? pin.seconds(pinned) : kPinLatency + pinned / kPinBandwidth;
}

std::string utc_timestamp() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string default_profile_path() {
  namespace fs = std::filesystem;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "kinfer" / "profile.json").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "kinfer" / "profile.json").string();
  return "kinfer-profile.json";
}

namespace {
std::string& profiles_folder() {
  static std::string dir;
  return dir;
}
}  // namespace

void set_profiles_folder(std::string dir) { profiles_folder() = std::move(dir); }

std::vector<std::string> shipped_profile_dirs() {
  namespace fs = std::filesystem;
  std::vector<fs::path> c;
  if (!profiles_folder().empty()) c.emplace_back(profiles_folder());
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    c.push_back(bin / ".." / "share" / "kinfer" / "profiles");
    c.push_back(bin / ".." / "data" / "profiles");
    c.push_back(bin / ".." / ".." / "data" / "profiles");
  }
#ifdef KINFER_INSTALL_PROFILES
  c.emplace_back(KINFER_INSTALL_PROFILES);
#endif
#ifdef KINFER_SOURCE_PROFILES
  c.emplace_back(KINFER_SOURCE_PROFILES);
#endif
  std::vector<std::string> out;
  for (const fs::path& d : c) {
    if (!fs::is_directory(d, ec)) continue;
    const std::string s = fs::weakly_canonical(d, ec).string();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

std::string auto_profile_path(const std::string& gpu_name) {
  std::string slug;
  for (char ch : gpu_name) {
    if (std::isalnum(static_cast<unsigned char>(ch)))
      slug += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    else if (!slug.empty() && slug.back() != '-')
      slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.empty()) slug = "gpu";
  return (std::filesystem::path(default_profile_path()).parent_path() / "profiles" /
          (slug + ".json"))
      .string();
}

namespace {
// The shipped profiles' files: each of shipped_profile_dirs() in order, its .json files sorted by
// name (the same choice whatever the directory order).
std::vector<std::string> shipped_profile_files() {
  std::vector<std::string> out;
  for (const std::string& dir : shipped_profile_dirs()) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

bool made_with_gpu(const std::string& path, const std::string& gpu_name) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    const Profile p = load_profile(path, false);
    return p.has_gpu && p.gpu.name == gpu_name;
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

std::string shipped_profile(const std::string& name) {
  for (const std::string& f : shipped_profile_files())
    if (std::filesystem::path(f).stem() == name) return f;
  return {};
}

std::vector<std::string> shipped_gpu_profile_names() {
  std::vector<std::string> out;
  for (const std::string& f : shipped_profile_files()) {
    const std::string stem = std::filesystem::path(f).stem().string();
    if (std::find(out.begin(), out.end(), stem) != out.end()) continue;
    try {
      // a profile of a real GPU has its quick figures (a hand-written test profile has none)
      if (const Profile p = load_profile(f, false); p.has_gpu && p.gpu_figures.measured())
        out.push_back(stem);
    } catch (const std::exception&) {
      // an unreadable file is no choice
    }
  }
  return out;
}

std::string find_profile_for_gpu(const std::string& gpu_name) {
  if (gpu_name.empty()) return {};
  for (const std::string& p : {default_profile_path(), auto_profile_path(gpu_name)})
    if (made_with_gpu(p, gpu_name)) return p;
  for (const std::string& f : shipped_profile_files())
    if (made_with_gpu(f, gpu_name)) return f;
  return {};
}

Profile derive_profile(const Profile& base, const GpuFigures& here, const std::string& gpu_name,
                       double memory_bytes, double start_seconds, const DeviceProfile* cpu) {
  if (!base.has_gpu) throw std::invalid_argument("the base profile has no GPU part");
  if (!base.gpu_figures.measured())
    throw std::invalid_argument("the base profile has no quick figures of its GPU");
  if (!here.measured()) throw std::invalid_argument("the GPU's quick figures were not measured");
  Profile p = base;
  p.path.clear();
  const double kernels = base.gpu_figures.copy_bandwidth / here.copy_bandwidth;
  const double up = here.h2d_bandwidth / base.gpu_figures.h2d_bandwidth;
  const double down = here.d2h_bandwidth / base.gpu_figures.d2h_bandwidth;
  p.gpu.name = gpu_name;
  if (memory_bytes > 0) p.gpu.memory_bytes = memory_bytes;
  p.gpu.model = base.gpu.model.scaled(kernels);
  p.gpu.samples.clear();  // the base's, on another GPU
  if (start_seconds > 0) p.gpu_start = start_seconds;
  p.h2d.bandwidth *= up;
  p.h2d.samples.clear();
  p.h2d_batch.bandwidth *= up;
  p.h2d_batch.samples.clear();
  p.d2h.bandwidth *= down;
  p.d2h.samples.clear();
  if (cpu) p.cpu = *cpu;
  p.cpu.samples.clear();
  p.gpu_figures = here;
  p.derived_from = fmt::format(
      "{} ({}): GPU kernels x {:.3g} (a copy on the device at {:.0f} GB/s here, {:.0f} there), "
      "uploads x {:.3g} ({:.1f} GB/s here), downloads x {:.3g} ({:.1f} GB/s here){}",
      base.path.empty() ? std::string("a profile") : base.path, base.gpu.name, kernels,
      here.copy_bandwidth / 1e9, base.gpu_figures.copy_bandwidth / 1e9, up,
      here.h2d_bandwidth / 1e9, down, here.d2h_bandwidth / 1e9,
      cpu ? "; the CPU part from this machine's calibration" : "");
  p.created = utc_timestamp();
  p.host = "derived on first use (no profile for this GPU)";
  return p;
}

DeviceProfile cpu_for_threads(const DeviceProfile& cpu, int threads) {
  if (cpu.threads <= 0 || threads <= 0 || threads == cpu.threads) return cpu;
  DeviceProfile d = cpu;
  const double factor = std::max(
      1 / kCpuMostThreadSpeedup,
      std::pow(static_cast<double>(cpu.threads) / threads, kCpuThreadExponent));
  d.model = cpu.model.scaled(factor);
  d.threads = threads;
  return d;
}

std::string closest_shipped_profile(const GpuFigures& here) {
  if (!(here.copy_bandwidth > 0)) return {};
  std::string best;
  double best_gap = std::numeric_limits<double>::infinity();
  for (const std::string& f : shipped_profile_files()) {
    try {
      const Profile p = load_profile(f, false);
      if (!p.has_gpu || !p.gpu_figures.measured()) continue;
      const double gap = std::abs(std::log(p.gpu_figures.copy_bandwidth / here.copy_bandwidth));
      if (gap < best_gap) best_gap = gap, best = f;
    } catch (const std::exception&) {  // unreadable: not a candidate
    }
  }
  return best;
}

json to_json(const Profile& p) {
  json j = {{"kinfer_profile", kFormat}, {"created", p.created}, {"host", p.host},
            {"cpu", device_json(p.cpu)}, {"gpu", nullptr},       {"transfer", nullptr}};
  if (p.has_gpu) {
    j["gpu"] = device_json(p.gpu);
    j["gpu"]["max_inputs"] = p.gpu_max_inputs;
    j["gpu"]["first_use_seconds"] = p.gpu_first_use;
    if (p.gpu_start > 0) j["gpu"]["start_seconds"] = p.gpu_start;
    j["gpu"]["kernels"] = p.gpu_kernels;
    if (p.gpu_figures.copy_bandwidth > 0)
      j["gpu"]["quick"] = {{"copy_bandwidth", p.gpu_figures.copy_bandwidth},
                           {"h2d_bandwidth", p.gpu_figures.h2d_bandwidth},
                           {"d2h_bandwidth", p.gpu_figures.d2h_bandwidth}};
    if (!p.derived_from.empty()) j["gpu"]["derived_from"] = p.derived_from;
    j["transfer"] = {{"h2d", transfer_json(p.h2d)}, {"d2h", transfer_json(p.d2h)}};
    if (p.h2d_batch.bandwidth > 0) j["transfer"]["h2d_batch"] = transfer_json(p.h2d_batch);
    if (p.pin.bandwidth > 0) j["transfer"]["pin"] = transfer_json(p.pin);
  }
  return j;
}

Profile profile_from_json(const json& j, const std::string& source) {
  try {
    if (!j.is_object() || !j.contains("kinfer_profile"))
      throw std::invalid_argument("not a kinfer profile (no \"kinfer_profile\" field)");
    if (j["kinfer_profile"] != kFormat)
      throw std::invalid_argument("profile format " + j["kinfer_profile"].dump() +
                                  " is not the one this kinfer reads (" + std::to_string(kFormat) +
                                  "); run kinfer calibrate again");
    Profile p;
    p.path = source;
    p.created = j.value("created", "");
    p.host = j.value("host", "");
    p.cpu = device_from(j.at("cpu"));
    if (!j.at("gpu").is_null()) {
      p.has_gpu = true;
      p.gpu = device_from(j["gpu"]);
      p.gpu_max_inputs = j["gpu"].value("max_inputs", 16);
      p.gpu_first_use = j["gpu"].value("first_use_seconds", 0.0);
      p.gpu_start = j["gpu"].value("start_seconds", 0.0);
      p.gpu_kernels = j["gpu"].value("kernels", 0);
      if (j["gpu"].contains("quick")) {
        const json& q = j["gpu"]["quick"];
        p.gpu_figures.copy_bandwidth = q.value("copy_bandwidth", 0.0);
        p.gpu_figures.h2d_bandwidth = q.value("h2d_bandwidth", 0.0);
        p.gpu_figures.d2h_bandwidth = q.value("d2h_bandwidth", 0.0);
      }
      p.derived_from = j["gpu"].value("derived_from", "");
      p.h2d = transfer_from(j.at("transfer").at("h2d"));
      p.d2h = transfer_from(j.at("transfer").at("d2h"));
      if (j["transfer"].contains("h2d_batch"))
        p.h2d_batch = transfer_from(j["transfer"]["h2d_batch"]);
      if (j["transfer"].contains("pin")) p.pin = transfer_from(j["transfer"]["pin"]);
    }
    return p;
  } catch (const std::invalid_argument& e) {
    throw InputError(source, 0, e.what());
  } catch (const json::exception& e) {
    throw InputError(source, 0, std::string("malformed profile: ") + e.what());
  }
}

Profile load_profile(const std::string& path, bool with_samples) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "cannot read the profile: it is a folder, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path, 0, "cannot open the profile (run `kinfer calibrate` to make one)");
  json j;
  try {
    // Without the samples (most of the file): a third of the time to read, which a command
    // such as `kinfer pe` pays before every run.
    const json::parser_callback_t drop_samples = [](int, json::parse_event_t ev, json& parsed) {
      return !(ev == json::parse_event_t::key && parsed == "samples");
    };
    j = with_samples ? json::parse(f) : json::parse(f, drop_samples);
  } catch (const json::parse_error& e) {
    throw InputError(path, 0, std::string("not valid JSON: ") + e.what());
  }
  return profile_from_json(j, path);
}

void save_profile(const Profile& p, const std::string& path) {
  write_file_atomically(path, to_json(p).dump(1) + "\n");
}

}  // namespace kinfer::sched
