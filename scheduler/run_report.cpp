// The runner's results as `kinfer pe --json` reports them, and the --check verdicts.
#include <spdlog/spdlog.h>

#include "engine/json.hpp"
#include "engine/util.hpp"
#include "scheduler/runner.hpp"

namespace kinfer::sched {

nlohmann::json check_json(const CheckReport& c) {
  auto num = [](double x) { return number_or_null(x); };
  return {{"tolerance", c.tolerance},
          {"buckets", c.buckets},
          {"buckets_without_gpu_kernel", c.buckets_without_kernel},
          {"max_abs_diff", num(c.max_abs_diff)},
          {"max_rel_diff", num(c.max_rel_diff)},
          {"worst_bucket", c.worst_bucket},
          {"failed_bucket", c.first_failed_bucket >= 0 ? nlohmann::json(c.first_failed_bucket)
                                                       : nlohmann::json(nullptr)},
          {"passed", c.passed}};
}

nlohmann::json run_json(const RunResult& r, bool explain) {
  auto num = number_or_null;
  nlohmann::json j = nlohmann::json::object();
  if (!r.gpu_name.empty())
    j["gpu"] = {
        {"name", r.gpu_name}, {"buckets_gpu", r.gpu_buckets}, {"buckets_cpu", r.cpu_buckets}};
  else if (!r.why_not_gpu.empty())
    j["gpu"] = {{"why_not", r.why_not_gpu}};
  nlohmann::json s = {{"requested", r.requested},
                      {"policy", r.policy},
                      {"buckets_gpu", r.gpu_buckets},
                      {"buckets_cpu", r.cpu_buckets},
                      {"buckets_merged", r.merged_buckets},
                      {"h2d_bytes", bytes_or_null(r.h2d_bytes)},
                      {"d2h_bytes", bytes_or_null(r.d2h_bytes)},
                      {"device_peak_bytes", bytes_or_null(r.device_peak_bytes)},
                      {"predicted_seconds", num(r.predicted_seconds)},
                      {"first_run_seconds", num(r.first_seconds)},
                      {"schedule_seconds", num(r.schedule_seconds)}};
  if (!r.profile.empty()) s["profile"] = r.profile;
  if (!r.note.empty()) s["note"] = r.note;
  if (!r.repeats.empty()) {
    s["repeat_seconds"] = r.repeats;
    s["repeat_median_seconds"] = num(median(r.repeats));
  }
  if (explain) {
    nlohmann::json e = nlohmann::json::array();
    for (std::size_t b = 0; b < r.buckets.size(); ++b)
      e.push_back({{"bucket", b},
                   {"device", to_string(r.buckets[b].device)},
                   {"reason", r.buckets[b].reason}});
    s["explain"] = e;
  }
  j["schedule"] = s;
  if (r.check)
    j["check"] = check_json(*r.check);
  else if (!r.check_not_run.empty())
    j["check"] = {{"passed", nullptr}, {"not_run", r.check_not_run}};
  return j;
}

std::string check_report_verdict(const CheckReport& c) {
  const std::string nums = fmt::format(
      "{} buckets compared, {} without a GPU kernel; largest difference {:.3g} ({:.3g} "
      "relative, bucket {}); tolerance {:.0e} relative in ln",
      c.buckets, c.buckets_without_kernel, c.max_abs_diff, c.max_rel_diff, c.worst_bucket,
      c.tolerance);
  if (c.passed) return "check: passed (" + nums + ")";
  return fmt::format("check: FAILED at bucket {} ({})", c.first_failed_bucket, nums);
}

std::string check_verdict(const RunResult& r) {
  if (r.check) return check_report_verdict(*r.check);
  if (!r.check_not_run.empty()) return "check: not run (" + r.check_not_run + ")";
  return {};
}

}  // namespace kinfer::sched
