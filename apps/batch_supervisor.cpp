// The `kinfer batch` supervisor's scheduling: the manifest read, the units (job processes, group
// workers, device workers, order searches) started on the ranks' slots and reaped, the loop that
// drives them (see batch.hpp and batch_supervisor.hpp).
#include "apps/batch_supervisor.hpp"

namespace kinfer::app {
namespace supervisor {

int Batch::run() {
  t0_ = clock_type::now();  // the wall the batch reports counts its start too
  ranks_ = gather_ranks(opt_);  // every rank's offer (first: the other ranks wait for it)
  auto jobs = io::read_manifest(opt_.manifest);  // validated before anything runs
  out_ = fs::absolute(opt_.out.empty()
                          ? fs::path(opt_.manifest).replace_extension("").string() + "-results"
                          : opt_.out);
  fs::create_directories(out_ / "results");
  fs::create_directories(out_ / "logs");
  fs::create_directories(out_ / "partial");
  fs::create_directories(out_ / "order-cache");
  budget_ = ranks_[0].budget;  // a pe job's --max-memory (the smallest it may get)
  for (auto& j : jobs) {
    JobState s;
    s.options = parse_job_options(j);
    s.job = std::move(j);
    states_.push_back(std::move(s));
  }
  adopt_previous_results();
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankSlot& k = ranks_[r];
    budget_ = std::min(budget_, k.budget);
    if (ranks_.size() > 1)
      spdlog::info("batch: rank {} on {}: {} job(s) at once, {} cores, memory {}, GPU {}", r,
                   k.host, k.slots, k.cores, human_bytes(k.budget), k.gpu);
    if (opt_.gpu_jobs != 0 && r == 0)
      // Only the device count and properties: no context in this process (children exec).
      spdlog::info("batch: {}", k.gpu_slots > 0
                                    ? fmt::format("GPU {}: {} job(s) at once may use it, "
                                                  "those of at least {:.3g} FLOP",
                                                  k.gpu, k.gpu_slots, opt_.gpu_min_flops)
                                    : "GPU " + k.gpu + ": every job runs on the CPU");
  }
  // The order jobs start in: the largest estimated work first (every job sized now: pe jobs
  // by their plan's FLOPs, lod jobs by estimate_lod_work; unsized ones last, in manifest
  // order), so that no device or rank is left with a long job at the end while the others
  // wait.
  for (std::size_t i = 0; i < states_.size(); ++i) order_.push_back(i);
  self_ = fs::read_symlink("/proc/self/exe").string();
  std::signal(SIGPIPE, SIG_IGN);  // a device worker that died: its write fails, it is reaped
  start_device_workers_early();   // their GPUs open while the jobs are sized
  size_by_searches();
  probe_all();
  sort_order();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  tty_ = ::isatty(STDERR_FILENO);
  sizing_seconds_ = std::chrono::duration<double>(clock_type::now() - t0_).count();
  loop();
  write_summary();
  if (tty_) std::fprintf(stderr, "\n");
  int ok = 0, failed = 0, interrupted = 0;
  for (const auto& s : states_) {
    ok += s.status == Status::Ok;
    failed += s.status == Status::Failed;
    interrupted += s.status == Status::Interrupted || s.status == Status::Pending;
  }
  spdlog::info("batch: {} ok, {} failed, {} not finished; results in {}", ok, failed, interrupted,
               out_.string());
  spdlog::info(
      "batch: {:.2f} s from the start to the first job ({:.2f} s estimating plans in this "
      "process)",
      sizing_seconds_, probe_seconds_);
  if (device_workers_started_)
    spdlog::info("batch: {} device worker(s) ran the GPU jobs, each GPU opened once",
                 device_workers_started_);
  if (groups_started_)
    spdlog::info(
        "batch: {} group workers; {} jobs evaluated on a plan compiled for an earlier "
        "job of the same structure",
        groups_started_, plans_shared_);
  if (order_searches_)
    spdlog::info(
        "batch: {} order search(es) ran ahead of the GPU jobs on CPU cores ({:.2f} s "
        "in all)",
        order_searches_, order_search_seconds_);
  wall_seconds_ = std::chrono::duration<double>(clock_type::now() - t0_).count();
  const Ideal ideal = ideal_schedule();
  if (ideal.seconds > 0)
    spdlog::info(
        "batch: wall {:.2f} s; the ideal schedule of the jobs' own seconds over {} "
        "GPU(s) and {} cores takes at least {:.2f} s ({:.2f}x of it)",
        wall_seconds_, ideal.gpus, ideal.cores, ideal.seconds, wall_seconds_ / ideal.seconds);
  if (opt_.verify > 0)
    spdlog::info("verify: {} job(s) recomputed with the same answer, {} mismatch(es), {} not run",
                 verified_, verify_mismatches_, verify_not_run_);
  if (opt_.json) print_json(ok, failed);
  if (g_signal) return 130;
  if (verify_mismatches_) return 5;
  return failed ? 4 : 0;
}

bool Batch::start(Unit& u, const std::vector<std::string>& args, const std::string& out_path,
                  const fs::path& log, int threads) {
  u.uid = ++uids_;
  if (u.gpu && u.gpu_device < 0) {  // the rank's GPU with the fewest jobs
    const RankSlot& k = ranks_[u.rank];
    std::size_t e = 0;
    for (std::size_t i = 1; i < k.devices.size(); ++i)
      if (k.on_device[i] < k.on_device[e]) e = i;
    u.gpu_device = k.devices.empty() ? 0 : k.devices[e];
  }
  if (u.rank == 0) {
    u.pid = spawn_child(self_, args, out_path, &u.fd, log.string(), threads,
                        (out_ / "order-cache").string(), u.gpu_device,
                        u.device_worker ? &u.in_fd : nullptr);
    return u.pid > 0;
  }
  const nlohmann::json m = {{"uid", u.uid},
                            {"args", args},
                            {"out", out_path},
                            {"log", log.string()},
                            {"threads", threads},
                            {"order_cache", (out_ / "order-cache").string()},
                            {"gpu_device", u.gpu_device},
                            {"serve", u.device_worker}};
  mpi::send(u.rank, kSpawn, m.dump());
  u.pid = -1;
  return true;
}

void Batch::write_log_header(const fs::path& log, const std::string& what,
                             const std::vector<std::string>& args) {
  std::ofstream l(log, std::ios::trunc);
  l << "# kinfer batch " << what << ":";
  for (const auto& a : args) l << ' ' << a;
  l << '\n';
}

std::vector<std::string> Batch::job_args(const JobState& s, bool gpu) const {
  std::vector<std::string> args = {self_, s.job.kind};
  if (s.job.kind != "lod") {  // a network job: pe, mar or mpe
    args.push_back(s.job.network);
    if (!s.job.evidence.empty()) args.insert(args.end(), {"-e", s.job.evidence});
    args.insert(args.end(), {"--order-cache", (out_ / "order-cache").string()});
    if (s.options.net().max_memory.empty())  // else the job's own limit (given twice: exit 2)
      args.insert(
          args.end(),
          {"--max-memory", std::to_string(static_cast<long long>(std::max(s.memory, budget_)))});
    // The batch decides where a pe job runs, by --gpu-min-flops and the free GPU slots (mar
    // and mpe jobs are not sized, no plan probed: the CPU unless their options name a --device).
    if (!s.options.device_given) args.insert(args.end(), {"--device", gpu ? "gpu" : "cpu"});
  } else {
    args.insert(args.end(), {"--ped", s.job.ped, "--dat", s.job.dat});
    // Given a GPU, a lod job decides per plan (auto); else it stays on the CPU (no GPU
    // context of its own beside the jobs given the GPU) unless its options name a --device.
    if (!s.options.device_given) args.insert(args.end(), {"--device", gpu ? "auto" : "cpu"});
  }
  args.push_back("--json");
  args.insert(args.end(), s.job.options.begin(), s.job.options.end());
  return args;
}

void Batch::launch(std::size_t idx, int threads, bool gpu, int rank) {
  JobState& s = states_[idx];
  const std::vector<std::string> args = job_args(s, gpu);
  const fs::path part = out_ / "partial" / (s.job.id + ".json");
  const fs::path log = out_ / "logs" / (s.job.id + ".log");
  write_log_header(log, "job " + s.job.id, args);
  Unit u;
  u.rank = rank;
  u.gpu = gpu;
  if (!start(u, args, part.string(), log, threads)) {
    finish(s, Status::Failed, "cannot start a process");
    return;
  }
  u.jobs = {idx};
  u.memory = s.memory;
  u.start = clock_type::now();
  s.pid = u.pid;
  s.status = Status::Running;
  s.start = u.start;
  s.where = where_of(rank) + (gpu ? ":gpu" + std::to_string(u.gpu_device) : "");
  s.threads = gpu ? 0 : threads;
  note_where(s);
  ++s.attempts;
  occupy(u, +1);
  units_.push_back(std::move(u));
}

void Batch::occupy_job(Unit& u, std::size_t idx, int sign) {
  u.memory = states_[idx].memory;
  occupy(u, sign);
}

bool Batch::gpu_room(int r) const {
  const RankSlot& k = ranks_[r];
  if (opt_.no_share) return k.gpu_running < k.gpu_slots;
  return k.gpu_running < static_cast<int>(kWorkerDepth) * k.gpu_slots;
}

void Batch::occupy(const Unit& u, int sign) {
  RankSlot& k = ranks_[u.rank];
  k.running += sign;
  k.gpu_running += sign * u.gpu;
  k.search_threads += sign * u.search_threads;
  k.memory += sign * u.memory;
  for (std::size_t e = 0; e < k.devices.size(); ++e)
    if (u.gpu && k.devices[e] == u.gpu_device) k.on_device[e] += sign;
}

void Batch::launch_group(const std::vector<std::size_t>& jobs, int threads, bool gpu, int rank) {
  JobState& first = states_[jobs.front()];
  std::string ids;
  for (std::size_t i : jobs) ids += (ids.empty() ? "" : ",") + states_[i].job.id;
  std::vector<std::string> args = {
      self_,
      "batch",
      fs::absolute(opt_.manifest).string(),
      "--out",
      out_.string(),
      "--worker",
      ids,
      "--max-memory",
      std::to_string(static_cast<long long>(std::max(first.memory, budget_)))};
  if (gpu) args.push_back("--worker-gpu");
  const fs::path log = out_ / "logs" / ("group-" + first.job.id + ".log");
  write_log_header(log, "group worker", args);
  Unit u;
  u.rank = rank;
  u.gpu = gpu;
  if (!start(u, args, "", log, threads)) {
    for (std::size_t i : jobs) states_[i].solo = true;  // run them alone
    return;
  }
  u.jobs = jobs;
  u.group = true;
  u.memory = first.memory;
  u.start = clock_type::now();
  for (std::size_t i : jobs) {
    states_[i].pid = u.pid;
    states_[i].status = Status::Running;
    states_[i].start = u.start;
    states_[i].probed = true;
    states_[i].where = where_of(rank);
    states_[i].threads = gpu ? 0 : threads;
    note_where(states_[i]);
  }
  occupy(u, +1);
  ++groups_started_;
  units_.push_back(std::move(u));
}

void Batch::read_worker(Unit& u) {
  drain(u.fd, u.buf);
  std::size_t nl;
  while ((nl = u.buf.find('\n')) != std::string::npos) {
    const std::string line = u.buf.substr(0, nl);
    u.buf.erase(0, nl + 1);
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, '\t');) f.push_back(x);
    if (f.size() < 3) continue;
    auto it = index_.find(f[1]);
    if (it == index_.end()) continue;
    JobState& s = states_[it->second];
    if (u.device_worker && !u.queued.empty() && u.queued.front() == it->second) {
      occupy_job(u, it->second, -1);  // its next job (if any) is running now
      u.queued.pop_front();
      searching_.erase(plan_key(states_[it->second]));
    }
    if (s.status != Status::Running) continue;
    s.seconds = std::atof(f[2].c_str());
    if (f[0] == "ok") {
      try {
        auto j = nlohmann::json::parse(io::read_file(out_ / "results" / (s.job.id + ".json")));
        s.answer = answer_of(j);
        if (j.value("batch_plan", "").rfind("shared", 0) == 0) ++plans_shared_;
        finish(s, Status::Ok, "");
      } catch (const std::exception& e) {
        finish(s, Status::Failed, std::string("the worker's result is unreadable: ") + e.what());
      }
    } else {
      finish(s, Status::Failed, f.size() > 3 ? f[3] : "failed");
    }
  }
}

void Batch::reap_unit(Unit& u, int wstatus) {
  if (u.device_worker) {
    reap_device_worker(u, wstatus);
    return;
  }
  occupy(u, -1);
  if (!u.search_key.empty()) {
    reap_order_search(u, wstatus);
    return;
  }
  if (u.verify) {
    verify_reaped(u, wstatus);
    return;
  }
  if (!u.group) {
    reap(states_[u.jobs.front()], wstatus, u.rank);
    return;
  }
  read_worker(u);
  if (u.fd >= 0) ::close(u.fd);
  u.fd = -1;
  int left = 0;
  for (std::size_t i : u.jobs) {
    JobState& s = states_[i];
    if (s.status != Status::Running) continue;
    s.pid = -1;
    // The worker renamed the result into place and died before saying so (and perhaps before
    // its journal line): it is complete, and journaled here.
    if (read_result(s)) {
      journal_if_missing(out_, s.job.id);
      finish(s, Status::Ok, "");
      continue;
    }
    ++left;
    if (g_signal) {
      finish(s, Status::Interrupted, "interrupted");
    } else {
      // The worker died (crash, out of memory, killed): this job and the other unfinished jobs
      // of its group run again, each alone, so one bad job cannot take the others with it.
      s.status = Status::Pending;
      s.solo = true;
      next_ = std::min(next_, position_[i]);
    }
  }
  if (left && !g_signal) {
    std::string why = WIFSIGNALED(wstatus) ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                                           : "exit code " + std::to_string(WEXITSTATUS(wstatus));
    spdlog::warn(
        "group worker of job {} ended ({}) with {} jobs unfinished; they run again one by one",
        states_[u.jobs.front()].job.id, why, left);
  }
}

void Batch::reap(JobState& s, int wstatus, int rank) {
  s.seconds = std::chrono::duration<double>(clock_type::now() - s.start).count();
  const fs::path part = out_ / "partial" / (s.job.id + ".json");
  const fs::path log = out_ / "logs" / (s.job.id + ".log");
  if (g_signal && !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
    finish(s, Status::Interrupted, "interrupted");
    return;
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    try {
      const std::string text = io::read_file(part);
      auto j = nlohmann::json::parse(text);
      record_result(out_, s.job.id, j);
      fs::remove(part);
      s.answer = answer_of(j);
      if (j.contains("seconds") && j["seconds"].is_number()) s.seconds = j["seconds"].get<double>();
      finish(s, Status::Ok, "");
    } catch (const std::exception& e) {
      finish(s, Status::Failed, std::string("the job printed no valid JSON: ") + e.what());
    }
    return;
  }
  if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL && s.attempts < 2) {
    // Killed from outside (a dead worker, the OOM killer, a lost node): once more, on another
    // rank when there is one; a second kill fails it.
    spdlog::warn("job {} was killed (signal 9) on {}; it runs once more{}", s.job.id, s.where,
                 ranks_.size() > 1 ? " on another rank" : "");
    s.status = Status::Pending;
    s.pid = -1;
    s.avoid_rank = rank;
    next_ = std::min(next_, position_[index_[s.job.id]]);
    return;
  }
  std::string why = last_error(log);
  if (WIFSIGNALED(wstatus))
    why = "killed by signal " + std::to_string(WTERMSIG(wstatus)) + (why.empty() ? "" : ": " + why);
  else
    why = "exit code " + std::to_string(WEXITSTATUS(wstatus)) + (why.empty() ? "" : ": " + why);
  finish(s, Status::Failed, why);
}

void Batch::finish(JobState& s, Status st, const std::string& err) {
  s.status = st;
  s.error = err;
  s.pid = -1;
  if (st == Status::Ok && verify_selected(s)) {
    s.verify = "waiting";
    to_verify_.push_back(index_[s.job.id]);
  }
  if (st == Status::Ok || st == Status::Failed) {
    if (!tty_)
      spdlog::info("job {} {} in {:.2f} s{}{} ({}/{})", s.job.id, status_name(st), s.seconds,
                   (st == Status::Ok ? s.answer : err).empty() ? "" : ": ",
                   st == Status::Ok ? s.answer : err, ++finished_, states_.size());
    else
      ++finished_;
    summary_due_ = true;  // written by the loop, at most every kSummaryInterval
  }
}

std::vector<std::size_t> Batch::group_of(std::size_t idx, std::size_t cap) {
  std::vector<std::size_t> g = {idx};
  const JobState& s = states_[idx];
  if (opt_.no_share || s.job.kind != "pe" || s.solo || !s.options.groupable) return g;
  for (std::size_t i = idx + 1; i < states_.size() && g.size() < cap; ++i) {
    const JobState& t = states_[i];
    if (t.status == Status::Pending && !t.solo && t.job.kind == "pe" &&
        t.job.network == s.job.network && t.job.options == s.job.options)
      g.push_back(i);
  }
  return g;
}

bool Batch::launch_on(int r) {
  RankSlot& k = ranks_[r];
  if (k.running >= k.slots) return false;
  // Recomputations first (they are few): on another rank than the job's when there is one.
  for (std::size_t q = 0; q < to_verify_.size(); ++q) {
    const JobState& v = states_[to_verify_[q]];
    if (ranks_.size() > 1 && v.where == where_of(r)) continue;
    if (k.running > 0 && k.memory + v.memory > k.budget) continue;
    const std::size_t idx = to_verify_[q];
    to_verify_.erase(to_verify_.begin() + static_cast<long>(q));
    launch_verify(idx, r);
    return true;
  }
  while (next_ < order_.size() && states_[order_[next_]].status != Status::Pending) ++next_;
  if (next_ >= order_.size()) return false;
  if (r == 0 && start_order_search(k)) return true;
  // The first pending job in order, except that a job that needs the GPU (its plan is so
  // large that the CPU would take far longer) waits while the rank's GPU is busy, letting the
  // jobs after it run on the CPU meanwhile; and a job killed on this rank goes to another.
  std::size_t idx = states_.size();
  for (std::size_t q = next_; q < order_.size(); ++q) {
    JobState& c = states_[order_[q]];
    if (c.status != Status::Pending) continue;
    if (c.awaiting_search) continue;  // sized (and its order found) by its search ahead
    if (!c.probed) probe(c);
    if (c.status != Status::Pending) continue;
    if (c.avoid_rank == r && ranks_.size() > 1) continue;
    if (k.gpu_running > 0 && !gpu_room(r) && waits_for_gpu(c)) continue;
    if (waits_for_gpu(c) && order_being_searched(c)) continue;
    idx = order_[q];
    break;
  }
  if (idx >= states_.size()) return false;  // only jobs waiting for the GPU are left
  JobState& s = states_[idx];
  if (k.running > 0 && k.memory + s.memory > k.budget) return false;  // wait for memory
  int pending = 0, slots = 0;
  for (const auto& x : states_) pending += x.status == Status::Pending;
  for (const auto& x : ranks_) slots += x.slots;
  // Groups small enough that every slot keeps busy to the end: about two groups per slot.
  std::size_t cap = std::max<std::size_t>(1, (pending + 2 * slots - 1) / (2 * slots));
  // A shared plan saves a job's setup (process, reading, planning: milliseconds to a
  // second); jobs in one worker run one after another. So only jobs whose computation is
  // small are grouped: heavy jobs run alone, in parallel (grouping heavy jobs made a batch
  // slower than one process per job: docs/performance.md).
  cap = std::min(cap,
                 static_cast<std::size_t>(std::max(1.0, kGroupWorkFlops / std::max(1.0, s.flops))));
  std::vector<std::size_t> g = group_of(idx, cap);
  const int concurrent =
      std::max(1, std::min(k.slots, k.running + pending - static_cast<int>(g.size()) + 1));
  // A job's own --threads sets its process's OpenMP threads (OMP_NUM_THREADS at start).
  int threads = std::max(1, k.cores / concurrent);
  if (s.options.threads() > 0) threads = s.options.threads();
  // A job whose GPU gain is a guess leaves the GPU to a pending one whose gain is known.
  const bool gpu = wants_gpu(s) &&
                   (s.solo || opt_.no_share ? k.gpu_running < k.gpu_slots : gpu_room(r)) &&
                   !(s.gpu_gain_unknown && gpu_job_pending());
  if (gpu && !opt_.no_share && !s.solo) {
    dispatch(idx, threads, r);
    return true;
  }
  if (g.size() > 1)
    launch_group(g, threads, gpu, r);
  else
    launch(idx, threads, gpu, r);
  return true;
}

void Batch::dispatch(std::size_t idx, int threads, int r) {
  JobState& s = states_[idx];
  const RankSlot& k = ranks_[r];
  std::size_t e = 0;
  for (std::size_t i = 1; i < k.devices.size(); ++i)
    if (k.on_device[i] < k.on_device[e]) e = i;
  const int device = k.devices.empty() ? 0 : k.devices[e];
  Unit* w = nullptr;
  for (auto& u : units_)
    if (u.device_worker && u.rank == r && u.accepting && u.queued.size() < kWorkerDepth &&
        u.gpu_device == device && (!w || u.queued.size() < w->queued.size()))
      w = &u;
  if (!w) w = start_device_worker(r, device, threads);
  std::vector<std::string> args = job_args(s, true);
  args.erase(args.begin());  // the executable: the worker runs the rest in itself
  write_log_header(out_ / "logs" / (s.job.id + ".log"), "job " + s.job.id + " (device worker)",
                   args);
  const std::string line =
      nlohmann::json{{"id", s.job.id}, {"args", args}, {"threads", threads}}.dump() + "\n";
  if (!w || !feed(*w, line)) {
    s.solo = true;  // no worker to take it (it could not start, or died): a process of its own
    launch(idx, threads, true, r);
    return;
  }
  w->queued.push_back(idx);
  w->start = clock_type::now();
  occupy_job(*w, idx, +1);
  if (searched_.insert(plan_key(s)).second) searching_.insert(plan_key(s));
  s.pid = w->pid;
  s.status = Status::Running;
  s.start = w->start;
  s.where = where_of(r) + ":gpu" + std::to_string(device);
  note_where(s);
  ++s.attempts;
}

bool Batch::feed(Unit& w, const std::string& line) {
  if (!w.accepting) return false;
  if (w.rank != 0) {  // that rank writes it; a worker gone by then is reported by its kExit
    mpi::send(w.rank, kFeed, nlohmann::json{{"uid", w.uid}, {"line", line}}.dump());
    return true;
  }
  return ::write(w.in_fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
}

void Batch::close_input(Unit& w) {
  w.accepting = false;
  if (w.rank != 0) {
    mpi::send(w.rank, kClose, nlohmann::json{{"uid", w.uid}}.dump());
  } else if (w.in_fd >= 0) {
    ::close(w.in_fd);
    w.in_fd = -1;
  }
}

Batch::Unit* Batch::start_device_worker(int r, int device, int threads) {
  Unit u;
  u.rank = r;
  u.gpu = true;
  u.device_worker = true;
  u.gpu_device = device;
  const std::vector<std::string> args = {
      self_, "batch", fs::absolute(opt_.manifest).string(), "--out", out_.string(), "--serve"};
  const std::string name = "device-worker-" + (r > 0 ? "rank" + std::to_string(r) + "-" : "") +
                           "gpu" + std::to_string(device);
  const fs::path log = out_ / "logs" / (name + ".log");
  if (!fs::exists(log)) write_log_header(log, "device worker", args);
  if (!start(u, args, "", log, threads)) return nullptr;
  u.accepting = true;
  ++device_workers_started_;
  spdlog::debug("batch: a device worker for GPU {} started {:.2f} s into the batch", device,
                std::chrono::duration<double>(clock_type::now() - t0_).count());
  units_.push_back(std::move(u));
  return &units_.back();
}

void Batch::start_device_workers_early() {
  if (opt_.no_share) return;
  // Before the jobs are sized: any job that may want a GPU (not one that names --device cpu).
  bool gpu_jobs = false;
  for (const auto& s : states_)
    gpu_jobs = gpu_jobs || (s.status == Status::Pending && s.options.parsed &&
                            !(s.options.device_given && s.options.device() == "cpu"));
  if (!gpu_jobs) return;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankSlot& k = ranks_[r];
    const int n = std::min(k.gpu_slots, static_cast<int>(k.devices.size()));
    for (int e = 0; e < n; ++e)
      start_device_worker(static_cast<int>(r), k.devices[e], std::max(1, k.cores / n));
  }
}

void Batch::release_idle_workers() {
  for (const auto& s : states_)
    if (s.status == Status::Pending) return;
  for (auto& u : units_)
    if (u.device_worker && u.queued.empty() && u.accepting) close_input(u);
}

void Batch::reap_device_worker(Unit& u, int wstatus) {
  read_worker(u);
  if (u.fd >= 0) ::close(u.fd);
  if (u.in_fd >= 0) ::close(u.in_fd);
  u.fd = u.in_fd = -1;
  u.accepting = false;
  if (u.queued.empty()) return;
  const std::size_t idx = u.queued.front();
  // The jobs after the one it ran had not started: they wait for another worker.
  for (std::size_t q = 1; q < u.queued.size(); ++q) {
    const std::size_t j = u.queued[q];
    occupy_job(u, j, -1);
    if (states_[j].status != Status::Running) continue;
    states_[j].status = Status::Pending;
    states_[j].pid = -1;
    --states_[j].attempts;
    next_ = std::min(next_, position_[j]);
  }
  occupy_job(u, idx, -1);
  u.queued.clear();
  searching_.erase(plan_key(states_[idx]));
  JobState& s = states_[idx];
  if (s.status != Status::Running) return;
  s.pid = -1;
  if (read_result(s)) {  // written before the worker died: complete (journaled as above)
    journal_if_missing(out_, s.job.id);
    finish(s, Status::Ok, "");
    return;
  }
  if (g_signal) {
    finish(s, Status::Interrupted, "interrupted");
    return;
  }
  const std::string why = WIFSIGNALED(wstatus)
                              ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                              : "exit code " + std::to_string(WEXITSTATUS(wstatus));
  spdlog::warn(
      "the device worker of GPU {} ended ({}) during job {}; it runs again in a "
      "process of its own",
      u.gpu_device, why, s.job.id);
  s.status = Status::Pending;
  s.solo = true;
  next_ = std::min(next_, position_[idx]);
}

void Batch::receive(int from, int tag) {
  const auto m = nlohmann::json::parse(mpi::receive(from, tag));
  const int uid = m["uid"];
  for (std::size_t k = 0; k < units_.size(); ++k) {
    if (units_[k].rank != from || units_[k].uid != uid) continue;
    if (tag == kLine) {
      units_[k].buf += m["text"].get<std::string>();
      read_worker(units_[k]);
    } else if (tag == kExit) {
      Unit u = std::move(units_[k]);
      units_.erase(units_.begin() + static_cast<long>(k));
      reap_unit(u, m["status"].get<int>());
    }
    return;
  }
}

void Batch::loop() {
  for (std::size_t i = 0; i < states_.size(); ++i) index_[states_[i].job.id] = i;
  auto last_draw = clock_type::now() - std::chrono::seconds(10);
  bool signalled = false;
  while (true) {
    if (g_signal && !signalled) {
      signalled = true;
      for (auto& u : units_)
        if (u.rank == 0) ::kill(u.pid, SIGTERM);
      for (std::size_t r = 1; r < ranks_.size(); ++r) mpi::send(static_cast<int>(r), kTerm, "{}");
    }
    // launch while there is room: on the rank with the most free slots first
    for (bool started = true; started && !g_signal;) {
      started = false;
      std::vector<int> by_free(ranks_.size());
      for (std::size_t r = 0; r < ranks_.size(); ++r) by_free[r] = static_cast<int>(r);
      std::stable_sort(by_free.begin(), by_free.end(), [&](int a, int b) {
        return ranks_[a].slots - ranks_[a].running > ranks_[b].slots - ranks_[b].running;
      });
      for (int r : by_free)
        if ((started = launch_on(r))) break;
    }
    release_idle_workers();
    if (summary_due_ && clock_type::now() - summary_written_ > kSummaryInterval) write_summary();
    // Device workers whose input is closed are ending (their GPU's teardown): nothing of the
    // batch waits for them; they end with this process at the latest.
    if (std::all_of(units_.begin(), units_.end(), [](const Unit& u) {
          return u.device_worker && !u.accepting && u.queued.empty();
        }))
      break;
    for (auto& u : units_)
      if ((u.group || u.device_worker) && u.rank == 0) read_worker(u);
    bool busy = false;
    for (int from, tag; mpi::poll(from, tag);) {
      receive(from, tag);
      busy = true;
    }
    int wstatus = 0;
    pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
    if (pid > 0) {
      for (std::size_t k = 0; k < units_.size(); ++k)
        if (units_[k].rank == 0 && units_[k].pid == pid) {
          Unit u = std::move(units_[k]);
          units_.erase(units_.begin() + static_cast<long>(k));
          reap_unit(u, wstatus);
          break;
        }
      continue;
    }
    if (busy) continue;
    if (tty_ && clock_type::now() - last_draw > std::chrono::milliseconds(250)) {
      int running = 0;
      for (const auto& u : units_) running += u.device_worker ? u.queued.size() : 1;
      draw_progress(running);
      last_draw = clock_type::now();
    }
    std::vector<int> fds;
    for (const auto& u : units_)
      if (u.rank == 0 && u.fd >= 0) fds.push_back(u.fd);
    wait_for_output(fds, ranks_.size() > 1 ? 2 : 20);
  }
  for (std::size_t r = 1; r < ranks_.size(); ++r) mpi::send(static_cast<int>(r), kStop, "{}");
  if (g_signal)
    for (auto& s : states_)
      if (s.status == Status::Pending) s.error = "not started: the batch was interrupted";
}

}  // namespace supervisor

int run_batch(const BatchOptions& opt) {
  return mpi::rank() > 0 ? supervisor::run_batch_rank(opt) : supervisor::Batch(opt).run();
}

}  // namespace kinfer::app
