// What the batch keeps of its jobs: results adopted by --resume, where each job ran, the summary
// (summary.tsv, --json, the progress line) and --verify's recomputations compared.
#include "apps/batch_supervisor.hpp"

namespace kinfer::app::supervisor {

bool Batch::read_result(JobState& s) {
  const fs::path r = out_ / "results" / (s.job.id + ".json");
  if (!fs::exists(r)) return false;
  try {
    const auto j = nlohmann::json::parse(io::read_file(r));
    s.answer = answer_of(j);
    s.seconds = j.value("seconds", 0.0);
    return true;
  } catch (const std::exception&) {
    fs::remove(r);
    return false;
  }
}

void Batch::note_where(const JobState& s) {
  std::ofstream(out_ / "where.tsv", std::ios::app) << s.job.id << '\t' << s.where << '\n';
}

void Batch::adopt_previous_results() {
  std::map<std::string, std::string> where;  // the last start of each job
  if (std::ifstream f(out_ / "where.tsv"); f)
    for (std::string line; std::getline(f, line);)
      if (const auto tab = line.find('\t'); tab != std::string::npos)
        where[line.substr(0, tab)] = line.substr(tab + 1);
  int found = 0;
  for (auto& s : states_) {
    if (!fs::exists(out_ / "results" / (s.job.id + ".json"))) continue;
    if (!opt_.resume)
      throw InputError(out_.string(), 0,
                       "this folder already holds results of an earlier batch; pass --resume to "
                       "continue it, or choose another --out");
    if (!read_result(s)) continue;
    s.status = Status::Ok;
    s.from_previous_run = true;
    if (auto w = where.find(s.job.id); w != where.end()) s.where = w->second;
    ++found;
  }
  if (opt_.resume) spdlog::info("resume: {} of {} jobs already complete", found, states_.size());
}

void Batch::launch_verify(std::size_t idx, int rank) {
  JobState& s = states_[idx];
  const std::vector<std::string> args = job_args(s, false);
  const fs::path part = out_ / "partial" / (s.job.id + ".verify.json");
  const fs::path log = out_ / "logs" / (s.job.id + ".verify.log");
  write_log_header(log, "verification of job " + s.job.id, args);
  Unit u;
  u.rank = rank;
  u.verify = true;
  u.jobs = {idx};
  u.memory = s.memory;
  u.start = clock_type::now();
  if (!start(u, args, part.string(), log, std::max(1, ranks_[rank].cores / ranks_[rank].slots))) {
    s.verify = "not run: cannot start a process";
    return;
  }
  s.verify = "running on " + where_of(rank);
  occupy(u, +1);
  units_.push_back(std::move(u));
}

std::vector<double> Batch::verified_numbers(const nlohmann::json& j) {
  std::vector<double> v;
  if (j.contains("ln_pr"))  // a number, or "-inf" when P(e) = 0
    v.push_back(j["ln_pr"].is_number() ? j["ln_pr"].get<double>() : -INFINITY);
  if (j.contains("evaluations"))
    for (const auto& e : j["evaluations"])
      if (e.contains("total") && e["total"].contains("ln_l") && e["total"]["ln_l"].is_number())
        v.push_back(e["total"]["ln_l"].get<double>());
  return v;
}

void Batch::verify_reaped(Unit& u, int wstatus) {
  JobState& s = states_[u.jobs.front()];
  const fs::path part = out_ / "partial" / (s.job.id + ".verify.json");
  const std::string where = where_of(u.rank);
  if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
    s.verify = "not run: the recomputation on " + where + " failed";
    ++verify_not_run_;
    return;
  }
  try {
    const auto a = verified_numbers(
        nlohmann::json::parse(io::read_file(out_ / "results" / (s.job.id + ".json"))));
    const auto b = verified_numbers(nlohmann::json::parse(io::read_file(part)));
    fs::remove(part);
    bool same = a.size() == b.size() && !a.empty();
    std::size_t k = 0;
    for (; same && k < a.size(); ++k)
      same = a[k] == b[k] || std::abs(a[k] - b[k]) <= 1e-9 * std::max(1.0, std::abs(a[k]));
    if (same) {
      s.verify = "same on " + where;
      ++verified_;
      return;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "MISMATCH: %.17g on %s, %.17g on %s",
                  k > 0 && k <= a.size() ? a[k - 1] : NAN, s.where.c_str(),
                  k > 0 && k <= b.size() ? b[k - 1] : NAN, where.c_str());
    s.verify = buf;
    ++verify_mismatches_;
    spdlog::error("verify: job {}: {}", s.job.id, s.verify);
  } catch (const std::exception& e) {
    s.verify = std::string("not run: ") + e.what();
    ++verify_not_run_;
  }
}

bool Batch::verify_selected(const JobState& s) const {
  if (opt_.verify <= 0) return false;
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a of the id: the same jobs in every run
  for (unsigned char c : s.job.id) h = (h ^ c) * 1099511628211ULL;
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<double>((h ^ (h >> 31)) >> 11) * 0x1.0p-53 < opt_.verify;
}

void Batch::draw_progress(int running) {
  int ok = 0, failed = 0, fresh = 0;
  double fresh_secs = 0;
  for (const auto& s : states_) {
    ok += s.status == Status::Ok;
    failed += s.status == Status::Failed;
    if ((s.status == Status::Ok || s.status == Status::Failed) && !s.from_previous_run)
      ++fresh, fresh_secs += s.seconds;
  }
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0_).count();
  const int left = static_cast<int>(states_.size()) - ok - failed;
  std::string eta = "?";
  if (fresh > 0) {
    const double per_job = elapsed / fresh;
    char b[32];
    std::snprintf(b, sizeof b, "%.0f s", per_job * left);
    eta = b;
  }
  int queued = 0;
  for (const auto& s : states_) queued += s.status == Status::Pending;
  // per GPU of this rank: the jobs on it now
  std::string gpus;
  const RankSlot& k = ranks_[0];
  for (std::size_t e = 0; e < k.devices.size(); ++e)
    gpus += fmt::format("{}gpu{} {}", gpus.empty() ? " (" : ", ", k.devices[e], k.on_device[e]);
  if (!gpus.empty()) gpus += ")";
  std::fprintf(stderr,
               "\r\033[K[batch] %d/%zu done, %d running%s, %d queued, %d failed, elapsed %.0f s, "
               "remaining ~%s",
               ok + failed, states_.size(), running, gpus.c_str(), queued, failed, elapsed,
               eta.c_str());
  std::fflush(stderr);
}

void Batch::write_summary() {
  summary_due_ = false;
  summary_written_ = clock_type::now();
  std::ostringstream t;
  t << "id\tkind\tstatus\tanswer\tseconds\twhere\terror" << (opt_.verify > 0 ? "\tverify" : "")
    << '\n';
  for (const auto& s : states_) {
    std::string err = s.error;
    std::replace(err.begin(), err.end(), '\t', ' ');
    std::replace(err.begin(), err.end(), '\n', ' ');
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3f", s.seconds);
    t << s.job.id << '\t' << s.job.kind << '\t' << status_name(s.status) << '\t' << s.answer << '\t'
      << (s.status == Status::Ok || s.status == Status::Failed ? secs : "") << '\t' << s.where
      << '\t' << err;
    if (opt_.verify > 0) t << '\t' << s.verify;
    t << '\n';
  }
  write_file_atomically(out_ / "summary.tsv", t.str());
}

void Batch::print_json(int ok, int failed) {
  nlohmann::json j = {{"out", out_.string()},
                      {"ok", ok},
                      {"failed", failed},
                      {"group_workers", groups_started_},
                      {"plans_shared", plans_shared_},
                      {"probe_seconds", probe_seconds_},
                      {"order_searches", order_searches_},
                      {"wall_seconds", wall_seconds_},
                      {"sizing_seconds", sizing_seconds_},
                      {"ideal_seconds", ideal_schedule().seconds},
                      {"ranks", ranks_.size()},
                      {"verify",
                       {{"fraction", opt_.verify},
                        {"same", verified_},
                        {"mismatches", verify_mismatches_},
                        {"not_run", verify_not_run_}}},
                      {"jobs", nlohmann::json::array()}};
  for (const auto& s : states_)
    j["jobs"].push_back({{"id", s.job.id},
                         {"kind", s.job.kind},
                         {"status", status_name(s.status)},
                         {"answer", s.answer},
                         {"seconds", s.seconds},
                         {"where", s.where},
                         {"verify", s.verify},
                         {"error", s.error}});
  std::cout << j.dump(2) << std::endl;
}

}  // namespace kinfer::app::supervisor
