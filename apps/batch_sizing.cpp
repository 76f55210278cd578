// Sizing and placing the batch's jobs: each plan's estimates (probes, several at once), the GPU
// decision, the order searches run ahead of the GPU jobs, and the ideal schedule the wall is
// compared with.
#include "apps/batch_supervisor.hpp"

namespace kinfer::app::supervisor {

Batch::Estimate Batch::estimate_plan(const JobState& s) const {
  Estimate e;
  try {
    // The job's own network options (defaults when they do not parse: its child reports that).
    NetworkOptions no = s.options.parsed ? s.options.pe.net : NetworkOptions{};
    no.network = s.job.network;
    no.evidence = s.job.evidence;
    const io::NetworkWithEvidence r = io::read_network_and_evidence(no.network, no.evidence);
    PlanOptions po = no.plan_options(false);
    po.max_memory_bytes = 0;  // we want the estimate, whatever it is
    po.order.time_budget = std::min(po.order.time_budget, kProbeSearchCoreSeconds);
    po.order_cache_dir = "none";
    const Plan plan = make_plan(r.net, r.ev, po);
    e.memory = plan.memory.peak_bytes;
    e.flops = plan.flops;
  } catch (const InputError& x) {
    e.input_error = true;
    e.error = x.what();
  } catch (const std::exception&) {
    e.memory = 0;  // the child will report it properly
  }
  return e;
}

void Batch::probe(JobState& s) {
  s.probed = true;
  if (!s.options.parsed) {  // what its single command would refuse, without starting it
    finish(s, Status::Failed,
           "options not accepted by kinfer " + s.job.kind + ": " + s.options.error);
    return;
  }
  if (s.job.kind == "lod") {
    s.flops = estimate_lod_work(s.job, s.options.lod, &s.gpu_gain_unknown);
    return;
  }
  if (s.job.kind != "pe") return;
  // A job with the same network, evidence and options as one probed before has the same plan.
  const std::string key = plan_key(s);
  auto it = probed_.find(key);
  if (it == probed_.end()) {
    const auto t0 = clock_type::now();
    it = probed_.emplace(key, estimate_plan(s)).first;
    probe_seconds_ += std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  if (it->second.input_error) {
    finish(s, Status::Failed, it->second.error);
    return;
  }
  s.memory = it->second.memory;
  s.flops = it->second.flops;
}

void Batch::probe_all() {
  std::map<std::string, std::size_t> first;  // plans not estimated yet: their first job
  for (std::size_t i = 0; i < states_.size(); ++i) {
    const JobState& s = states_[i];
    if (s.status == Status::Pending && !s.probed && !s.awaiting_search && s.options.parsed &&
        s.job.kind == "pe" && !probed_.count(plan_key(s)))
      first.emplace(plan_key(s), i);
  }
  if (first.size() > 1) {
    const auto t0 = clock_type::now();
    const int cores = std::max(1, ranks_[0].cores);
    const int at_once = std::min<int>(static_cast<int>(first.size()), cores);
    const int threads = std::max(1, cores / at_once);
    std::vector<std::pair<std::string, std::size_t>> todo(first.begin(), first.end());
    std::vector<Estimate> done(todo.size());
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < at_once; ++t)
      pool.emplace_back([&] {
        omp_set_num_threads(threads);  // this thread's searches
        for (std::size_t k; (k = next++) < todo.size();)
          done[k] = estimate_plan(states_[todo[k].second]);
      });
    for (auto& t : pool) t.join();
    for (std::size_t k = 0; k < todo.size(); ++k) probed_[todo[k].first] = done[k];
    probe_seconds_ += std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  for (auto& s : states_)
    if (s.status == Status::Pending && !s.probed && !s.awaiting_search) probe(s);
}

void Batch::size_by_searches() {
  if (ranks_[0].gpu_slots == 0 || opt_.no_share) return;
  for (auto& s : states_)
    s.awaiting_search = s.status == Status::Pending && !s.probed && s.options.parsed &&
                        s.options.groupable && s.job.kind == "pe" && !s.solo &&
                        !(s.options.device_given && s.options.device() == "cpu");
}

void Batch::sort_order() {
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    return states_[a].flops > states_[b].flops;
  });
  position_.resize(states_.size());
  for (std::size_t k = 0; k < order_.size(); ++k) position_[order_[k]] = k;
  next_ = 0;  // launch_on skips what is no longer pending
}

bool Batch::wants_gpu(const JobState& s) const {
  const std::string d = s.options.device_given ? s.options.device() : "";
  // lod: under auto (or no --device) on a GPU machine a job large enough for the GPU (or not
  // sized: estimate_lod_work < 0) gets a device worker, whose runner puts each plan and the
  // chain where it is faster.
  if (s.job.kind != "pe") {
    if (d == "gpu") return true;
    if (d == "cpu" || (d.empty() && ranks_[0].gpu_slots == 0)) return false;
    return s.flops < 0 || s.flops >= opt_.gpu_min_flops;
  }
  if (d == "cpu") return false;
  return d == "gpu" || s.flops >= opt_.gpu_min_flops;
}

bool Batch::waits_for_gpu(const JobState& s) const {
  return wants_gpu(s) && s.flops >= opt_.gpu_wait_flops && !s.gpu_gain_unknown;
}

bool Batch::gpu_job_pending() const {
  for (std::size_t q = next_; q < order_.size(); ++q) {
    const JobState& c = states_[order_[q]];
    if (c.status == Status::Pending && c.probed && waits_for_gpu(c)) return true;
  }
  return false;
}

bool Batch::start_order_search(RankSlot& k) {
  if (k.gpu_slots == 0 || opt_.no_share || k.running >= k.slots) return false;
  std::size_t first = kNone;  // the next job whose plan's order is not searched yet
  for (std::size_t q = next_; q < order_.size() && first == kNone; ++q) {
    const JobState& c = states_[order_[q]];
    if (c.status == Status::Pending && !c.solo && c.options.groupable &&
        (c.awaiting_search || waits_for_gpu(c)) && !searched_.count(plan_key(c)))
      first = order_[q];
  }
  if (first == kNone) return false;
  const JobState& s = states_[first];
  if (k.running > 0 && k.memory + s.memory > k.budget) return false;
  // The search's nominal work is fixed (OrderOptions::time_budget): threads shorten its wall.
  // The searches run in the jobs' order, each on up to 16 threads (the search's rounds keep
  // about 16 busy: engine/ordering.hpp) of the cores left beside the GPUs' jobs and the
  // searches running: the first GPU jobs' order is ready soonest, and the GPUs compute them
  // while the next plans' orders are searched. Sharing the cores among every plan due at once
  // would have all of them end late, the GPUs idle until then. Another search starts only with
  // at least half its threads free.
  const int cores = std::max(1, k.cores - k.gpu_running);
  const int want = std::min(16, cores);
  const int free_cores = cores - k.search_threads;
  if (k.search_threads > 0 && free_cores < (want + 1) / 2) return false;
  const int threads = std::clamp(free_cores, 1, want);
  std::vector<std::string> args = {self_, "info", s.job.network};
  if (!s.job.evidence.empty()) args.insert(args.end(), {"-e", s.job.evidence});
  args.insert(args.end(), {"--order-cache", (out_ / "order-cache").string(), "--json"});
  if (!s.options.device_given) args.insert(args.end(), {"--device", "gpu"});
  args.insert(args.end(), s.job.options.begin(), s.job.options.end());
  const fs::path log = out_ / "logs" / ("order-search-" + s.job.id + ".log");
  write_log_header(log, "order search for the GPU jobs like " + s.job.id, args);
  Unit u;
  u.rank = 0;
  u.search_key = plan_key(s);
  u.memory = s.memory;
  u.start = clock_type::now();
  u.uid = ++uids_;
  const fs::path answer = out_ / "partial" / ("order-search-" + s.job.id + ".json");
  u.search_answer = answer;
  u.search_threads = threads;
  // It sees the one GPU its jobs' device workers see (each sees its own): starting the driver
  // on every GPU of the machine would cost it a fraction of a second per GPU.
  u.pid = spawn_child(self_, args, answer.string(), nullptr, log.string(), threads,
                      (out_ / "order-cache").string(), k.devices.empty() ? -1 : k.devices[0]);
  searched_.insert(u.search_key);
  if (u.pid <= 0) {  // its jobs search their order themselves (and are probed)
    stop_awaiting(u.search_key);
    return false;
  }
  searching_.insert(u.search_key);
  occupy(u, +1);
  ++order_searches_;
  units_.push_back(std::move(u));
  return true;
}

void Batch::reap_order_search(const Unit& u, int wstatus) {
  searching_.erase(u.search_key);
  const double secs = std::chrono::duration<double>(clock_type::now() - u.start).count();
  order_search_seconds_ += secs;
  spdlog::debug("batch: an order search ended after {:.2f} s, {:.2f} s into the batch", secs,
                std::chrono::duration<double>(clock_type::now() - t0_).count());
  read_search_estimate(u, wstatus);
  stop_awaiting(u.search_key);  // sized by the search's estimate, or (without one) by a probe
  sort_order();
}

void Batch::stop_awaiting(const std::string& key) {
  for (auto& s : states_)
    if (s.awaiting_search && plan_key(s) == key) s.awaiting_search = false;
}

void Batch::read_search_estimate(const Unit& u, int wstatus) {
  if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
    if (!g_signal)
      spdlog::warn(
          "an order search ahead of the GPU jobs ended with {} (its log in {}); "
          "those jobs search their order themselves",
          WIFSIGNALED(wstatus) ? "signal " + std::to_string(WTERMSIG(wstatus))
                               : "exit code " + std::to_string(WEXITSTATUS(wstatus)),
          (out_ / "logs").string());
    return;
  }
  try {
    const auto j = nlohmann::json::parse(io::read_file(u.search_answer));
    fs::remove(u.search_answer);
    const double memory = j.at("memory").at("estimated_peak_bytes").get<double>();
    const double flops = j.at("memory").at("estimated_flops").get<double>();
    probed_[u.search_key] = Estimate{memory, flops, false, {}};
    for (auto& s : states_)
      if (s.status == Status::Pending && plan_key(s) == u.search_key) {
        s.memory = memory;
        s.flops = flops;
        s.probed = true;
      }
  } catch (const std::exception& e) {
    spdlog::debug("order search {}: no estimate read ({})", u.search_answer.string(), e.what());
  }
}

std::string Batch::plan_key(const JobState& s) {
  std::string key = s.job.network + "\x1f" + s.job.evidence;
  for (const auto& o : s.job.options) key += "\x1f" + o;
  return key;
}

bool Batch::order_being_searched(const JobState& c) const {
  return searching_.count(plan_key(c)) > 0;
}

Batch::Ideal Batch::ideal_schedule() const {
  Ideal i;
  for (const auto& k : ranks_) {
    i.cores += k.cores;
    if (k.gpu_slots > 0) i.gpus += static_cast<int>(k.devices.size());
  }
  double longest = 0, gpu_seconds = 0, core_seconds = 0;
  for (const auto& s : states_) {
    if (s.from_previous_run || (s.status != Status::Ok && s.status != Status::Failed)) continue;
    longest = std::max(longest, s.seconds);
    if (s.where.find(":gpu") != std::string::npos)
      gpu_seconds += s.seconds;
    else
      core_seconds += s.seconds * std::max(1, s.threads);
  }
  i.seconds = std::max(
      {longest, i.gpus > 0 ? gpu_seconds / i.gpus : 0.0, core_seconds / std::max(1, i.cores)});
  if (i.gpus == 0 && gpu_seconds > 0) i.seconds = std::max(i.seconds, gpu_seconds);
  return i;
}

}  // namespace kinfer::app::supervisor
