// A batch job's options, parsed by the single commands' own definitions; what every worker of
// the batch says and writes for a finished job.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>

#include "apps/batch.hpp"
#include "engine/util.hpp"
#include "io/linkage.hpp"

namespace kinfer::app {

void report_job(const char* what, const std::string& id, double seconds, std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\t') c = ' ';
  std::printf("%s\t%s\t%.6f\t%s\n", what, id.c_str(), seconds, message.c_str());
  std::fflush(stdout);
}

void journal_completed(const std::filesystem::path& out, const std::string& id) {
  std::ofstream(out / "journal.log", std::ios::app) << "completed " << id << '\n';
}

void journal_if_missing(const std::filesystem::path& out, const std::string& id) {
  const std::string line = "completed " + id;
  std::ifstream in(out / "journal.log");
  for (std::string l; std::getline(in, l);)
    if (l == line) return;
  in.close();
  journal_completed(out, id);
}

void record_result(const std::filesystem::path& out, const std::string& id,
                   const nlohmann::json& result) {
  write_file_atomically(out / "results" / (id + ".json"), result.dump(2) + "\n");
  journal_completed(out, id);
}

JobOptions parse_job_options(const io::Job& job) {
  JobOptions o;
  o.kind = job.kind;
  CLI::App root;
  root.fallthrough();  // -q and -v may follow the subcommand, as on the command line
  LogFlags log;
  add_log_flags(root, log);
  CLI::App* cmd = root.add_subcommand(job.kind);
  std::vector<std::string> args = {job.kind};
  if (job.kind == "lod") {
    add_lod_options(*cmd, o.lod);
    args.insert(args.end(), {"--ped", job.ped, "--dat", job.dat});
  } else {  // a network job: pe, mar or mpe
    if (o.posterior_kind())
      add_posterior_options(*cmd, o.posterior, job.kind == "mar" ? "MAR" : "MAP (MPE)");
    else
      add_pe_options(*cmd, o.pe);
    args.push_back(job.network);
    if (!job.evidence.empty()) args.insert(args.end(), {"-e", job.evidence});
  }
  args.insert(args.end(), job.options.begin(), job.options.end());
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector of arguments last first
  try {
    root.parse(args);
    if (job.kind != "lod") o.net().plan_options(false);  // validates --max-memory
  } catch (const CLI::Error& e) {
    o.error = e.what();
    return o;
  }
  o.parsed = true;
  o.device_given = cmd->count("--device") > 0;
  if (job.kind == "pe") {
    // What a group worker evaluates: the network options and --device (the others, e.g.
    // --check or --uai-output, need the single command).
    static const std::initializer_list<const char*> kGroupOptions = {
        "NETWORK", "--evidence", "--order",      "--order-time",
        "--seed",  "--threads",  "--max-memory", "--device"};
    // -e from the manifest's evidence column, not from the options.
    o.groupable = cmd->count("--evidence") == (job.evidence.empty() ? 0u : 1u);
    for (const CLI::Option* opt : cmd->get_options())
      if (opt->count() > 0 && std::none_of(kGroupOptions.begin(), kGroupOptions.end(),
                                           [&](const char* name) { return opt->check_name(name); }))
        o.groupable = false;
  }
  return o;
}

double estimate_lod_work(const io::Job& job, const LodOptions& o, bool* beyond_chain) {
  if (beyond_chain) *beyond_chain = false;
  if (!o.merlin.map.empty()) return -1;  // MERLIN input (-m): not sized
  try {
    const linkage::LocusFile lf = io::read_locus_file(job.dat);
    const linkage::PedigreeFile pf = io::read_pedigree_file(job.ped, lf);
    const double loci = static_cast<double>(lf.loci.size());
    const bool multipoint = !o.positions.empty() || o.program == "linkmap";
    const double evaluations =
        !o.positions.empty() ? static_cast<double>(parse_list("--positions", o.positions).size())
        : !o.theta.empty()   ? static_cast<double>(parse_list("--theta", o.theta).size())
                             : 1.0;
    double work = 0;
    for (const auto& ped : pf.pedigrees) {
      int nonfounders = 0, founders = 0;
      for (const auto& p : ped.people) (p.founder() ? founders : nonfounders) += 1;
      const int bits = std::clamp(2 * nonfounders - founders, 0, 60);
      if (multipoint && bits > o.bits && beyond_chain) *beyond_chain = true;
      work += multipoint ? evaluations * loci * bits * std::exp2(bits)
                         : evaluations * loci * std::exp2(std::min(bits, 20));
    }
    return work;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace kinfer::app
