#include "apps/network_options.hpp"

#include "apps/command_options.hpp"
#include "apps/environment.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/errors.hpp"
#include "engine/json.hpp"
#include "engine/util.hpp"
#include "engine/memory_limit.hpp"
#include "io/uai.hpp"

namespace kinfer::app {

void NetworkOptions::add(CLI::App& cmd) {
  cmd.add_option("NETWORK", network, "UAI network file (MARKOV or BAYES, optionally .gz)")
      ->required();
  cmd.add_option("-e,--evidence", evidence, "evidence file (default: NETWORK.evid if present)");
  cmd.add_option("--order", order, "elimination order heuristic")
      ->check(CLI::IsMember({"minfill", "minweight", "wminfill", "stochastic"}))
      ->capture_default_str();
  cmd.add_option("--order-time", order_time,
                 "most work of the stochastic order search, in nominal core-seconds (counted, not "
                 "timed: N threads take about 1/N of it); it stops at a quarter of the predicted "
                 "compute time of the best order found")
      ->check(number_at_least(0))
      ->capture_default_str();
  cmd.add_option("--seed", seed,
                 "seed of the stochastic order search: the same seed gives the same order on any "
                 "machine and thread count")
      ->capture_default_str();
  cmd.add_option("--threads", threads, "CPU threads (default: all cores)")
      ->check(count_at_least(1));
  cmd.add_option("--order-cache", order_cache,
                 "folder that keeps elimination orders between runs, keyed by the network's "
                 "reduced structure and the search's options (a cached order is the one the "
                 "search would find again); default $KINFER_ORDER_CACHE, else "
                 "$XDG_CACHE_HOME/kinfer/orders; `none`: no cache");
  cmd.add_option("--max-memory", max_memory,
                 "memory the computation may use, e.g. 8G (default: 85% of this machine's)");
}

void NetworkOptions::load(Network& net, Evidence& ev) const {
  io::NetworkWithEvidence r = io::read_network_and_evidence(network, evidence);
  if (evidence.empty() && !r.evidence_path.empty())
    spdlog::info("using the evidence file beside the network: {}", r.evidence_path);
  else if (evidence.empty())
    spdlog::info("no evidence file given and none beside the network: computing with no evidence");
  if (!r.evidence_path.empty() && r.ev.observed.empty())
    spdlog::info("{} observes no variable: computing with no evidence", r.evidence_path);
  net = std::move(r.net);
  ev = std::move(r.ev);
}

namespace {

// A validator of "a T of at least min", parsed whole by `parse` (std::stod or std::stol):
// `noun` names it in the message ("a number", "a whole number") and `kind` in the help.
template <class T, class Parse>
CLI::Validator at_least(T min, Parse parse, const char* noun, const char* kind) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::size_t used = 0;
        T v = 0;
        try {
          v = parse(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || !std::isfinite(static_cast<double>(v)) || v < min)
          return fmt::format("must be {} >= {}, not {}", noun, min, text);
        return {};
      },
      fmt::format("{} >= {}", kind, min));
}

}  // namespace

CLI::Validator number_at_least(double min) {
  return at_least(
      min, [](const std::string& t, std::size_t* used) { return std::stod(t, used); }, "a number",
      "NUMBER");
}

CLI::Validator count_at_least(long min) {
  return at_least(
      min, [](const std::string& t, std::size_t* used) { return std::stol(t, used); },
      "a whole number", "INT");
}

namespace {
nlohmann::json g_memory_limit_note;  // the last adjustment of within_available_memory
}  // namespace

double within_available_memory(double limit, bool given) {
  g_memory_limit_note = nullptr;  // this command's own (a device worker runs many in turn)
  const double available = available_memory_bytes();
  if (!(limit > 0) || !(available > 0) || limit <= available) return limit;
  const double lowered = 0.9 * available;
  const std::string what = given ? "--max-memory " + human_bytes(limit)
                                 : "the default memory limit " + human_bytes(limit);
  const std::string msg = what + " is more than the " + human_bytes(available) +
                          " this machine has available now (other processes hold the rest): "
                          "kinfer plans within " + human_bytes(lowered) + " instead";
  if (given)
    spdlog::warn("{}", msg);
  else
    spdlog::info("{}", msg);
  g_memory_limit_note = {{"requested_bytes", bytes_or_null(limit)},
                         {"available_bytes", bytes_or_null(available)},
                         {"used_bytes", bytes_or_null(lowered)},
                         {"lowered", true}};
  return lowered;
}

nlohmann::json memory_limit_json() { return g_memory_limit_note; }

namespace {

// The reason no new file can be made in `dir` (an existing path), or empty: tried by making and
// removing one (permissions alone do not tell it for root, nor on a read-only or special file
// system), as the atomic writes later make theirs.
std::string unwritable_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return dir.string() + " is not a folder";
  std::string probe = (dir / ".kinfer-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    return "no file can be made in the folder " + dir.string() + " (" + std::strerror(errno) + ")";
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace

void check_output_file(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec))
    throw CLI::ValidationError(option, path + " is a folder; give a file name");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::exists(dir, ec))
    throw CLI::ValidationError(option, path + ": the folder " + dir.string() + " does not exist");
  if (const std::string why = unwritable_folder(dir); !why.empty())
    throw CLI::ValidationError(option, path + ": " + why);
}

void check_output_folder(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    throw CLI::ValidationError(option, path + " exists and is not a folder");
  // made now (the results go there anyway), so that a path that cannot be made fails at once
  fs::create_directories(path, ec);
  if (ec) throw CLI::ValidationError(option, path + ": cannot make the folder (" + ec.message() + ")");
  if (const std::string why = unwritable_folder(path); !why.empty())
    throw CLI::ValidationError(option, path + ": " + why);
}

void add_log_flags(CLI::App& root, LogFlags& f) {
  root.add_flag("-q,--quiet", f.quiet, "log warnings and errors only");
  root.add_flag("-v,--verbose", f.verbose, "log debugging detail");
}

std::string default_order_cache_dir() {
  namespace fs = std::filesystem;
  if (const std::string& x = environment().order_cache; !x.empty()) return x;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "kinfer" / "orders").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "kinfer" / "orders").string();
  return "none";
}

PlanOptions NetworkOptions::plan_options(bool for_run) const {
  PlanOptions po;
  po.order.heuristic = parse_heuristic(order);
  po.order.time_budget = order_time;
  po.order.seed = seed;
  po.order_cache_dir = order_cache.empty() ? default_order_cache_dir() : order_cache;
  if (max_memory.empty()) {
    po.max_memory_bytes = default_max_memory_bytes();
  } else {
    try {
      po.max_memory_bytes = parse_size(max_memory);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--max-memory", e.what());
    }
  }
  if (for_run)
    po.max_memory_bytes = within_available_memory(po.max_memory_bytes, !max_memory.empty());
  return po;
}

std::string format_log10(double x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

nlohmann::json order_json(const Plan& plan) {
  const auto& o = plan.order;
  return {{"heuristic", o.heuristic},
          {"width", o.stats.width},
          {"log2_max_table", o.stats.log2_max_table},
          {"log2_max_clique", o.stats.log2_max_clique},
          {"log2_total_state", o.stats.log2_total_state},
          {"restarts", o.restarts},
          {"moves", o.moves},
          {"work", o.work},
          {"stopped_by", o.stopped_by},
          {"seconds", o.seconds}};
}

nlohmann::json memory_json(const Plan& plan) {
  const auto& m = plan.memory;
  return {{"estimated_peak_bytes", bytes_or_null(m.peak_bytes)},
          {"input_bytes", bytes_or_null(m.input_bytes)},
          {"largest_table_bytes", bytes_or_null(m.largest_table_bytes)},
          {"estimated_flops", plan.flops},
          {"estimated_device_bytes", bytes_or_null(m.device_bytes)},
          {"parts",
           {{"process", bytes_or_null(m.process_bytes)},
            {"network", bytes_or_null(m.network_bytes)},
            {"model", bytes_or_null(m.model_bytes)},
            {"inputs", bytes_or_null(m.input_bytes)},
            {"intermediates", bytes_or_null(m.intermediate_bytes)},
            {"scratch", bytes_or_null(m.scratch_bytes)},
            {"source", bytes_or_null(m.source_bytes)},
            {"device_host", bytes_or_null(m.device_host_bytes)},
            {"tables_kept", m.tables_kept},
            {"planning", bytes_or_null(m.planning_bytes)},
            {"running", bytes_or_null(m.running_bytes)}}}};
}

nlohmann::json conditioning_json(const ConditionedPlan& cp) {
  const Conditioning& c = cp.cond;
  return {{"variables", c.vars},
          {"cardinalities", c.card},
          {"slices", c.slices},
          {"slice_peak_bytes", bytes_or_null(c.slice_peak_bytes)},
          {"flops", c.flops},
          {"unconditioned_flops", c.unconditioned_flops},
          {"unconditioned_peak_bytes", bytes_or_null(c.unconditioned_peak_bytes)},
          {"overhead", c.overhead()},
          {"choice", c.choice}};
}

nlohmann::json pe_json(const std::string& network, const Plan& plan, double ln_pr, const PeTimes& t,
                       const std::string& device) {
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  const double log10_pr = ln_pr / std::log(10.0);
  return {{"network", network},
          {"evidence_observed", plan.model.num_observed},
          {"log10_pr", std::isinf(log10_pr) ? nlohmann::json("-inf") : nlohmann::json(log10_pr)},
          {"ln_pr", std::isinf(ln_pr) ? nlohmann::json("-inf") : nlohmann::json(ln_pr)},
          {"seconds", secs(t.t0, t.t3)},
          {"timings",
           {{"read", secs(t.t0, t.t1)},
            {"plan", secs(t.t1, t.t2)},
            {"compute", secs(t.t2, t.t3)},
            {"device_start", secs(t.t2, t.t_dev)}}},
          {"order", order_json(plan)},
          {"buckets", plan.tree.buckets.size()},
          {"memory", memory_json(plan)},
          {"device", device}};
}

}  // namespace kinfer::app
