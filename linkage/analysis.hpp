#pragma once
// LOD scores as FASTLINK's MLINK and LINKMAP compute them, and multipoint location scores
// across a whole marker map. Each pedigree's network is compiled once per locus order
// (structure, reductions, elimination order); every theta or map position after that only
// refills the selector tables.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/condition.hpp"
#include "engine/plan.hpp"
#include "linkage/chain.hpp"
#include "linkage/model.hpp"
#include "linkage/pedigree.hpp"

namespace kinfer::linkage {

enum class Program { Mlink, Linkmap };

std::string program_name(Program p);

struct AnalysisOptions {
  std::optional<Program> program;  // default: from the locus file's last line
  std::vector<double> thetas;      // MLINK: values of the varied theta (default: the tail's)
  std::vector<double> positions;   // LINKMAP: map positions (cM) of the moving locus
  int moving_locus = 0;            // LINKMAP with positions: input locus (1-based); 0: default
  ReductionOptions reduction;
  PlanOptions plan;
  // LINKMAP with positions: a pedigree whose inheritance vector has at most this many bits
  // (after founder phase) goes through the Lander-Green chain (linkage/inheritance.hpp), one
  // forward and one backward pass for all positions; larger ones (or 0 here) use the network.
  int lander_green_bits = 24;
  // The chain keeps a locus's emission as factor tables up to this many entries each; a locus
  // whose elimination would build a larger one is evaluated per inheritance vector on the fly
  // (linkage/emission_program.hpp); 0: every locus on the fly.
  double emission_table_entries = 67108864.0;
  // Runs one compiled plan, every slice of it when it is conditioned, and returns its ln L
  // (empty: run_plan on the CPU, slice by slice). `kinfer lod --device` puts the runner here
  // (scheduler/runner.hpp: the GPU for plans large enough to pay for it, slices over GPUs).
  std::function<double(ConditionedPlan&)> runner;
  // Several processes (MPI ranks, mpi/): each evaluation computes only the pedigrees the dealer
  // gives this process (items numbered by a count of (evaluation, pedigree) pairs that every
  // process makes alike) and its combine() fills in the others. Null: all here.
  SliceDealer* dealer = nullptr;
  // The backend of the Lander-Green chain for one pedigree's layout (null or returning null:
  // the CPU). `kinfer lod --device` puts the GPU here (gpu/chain_api.hpp).
  std::function<std::unique_ptr<ChainBackend>(const ChainLayout&)> chain_backend;
};

struct Evaluation {
  std::vector<double> male, female;  // per interval of the evaluated locus order
  std::vector<std::string> order;    // locus names in that order
  std::optional<double> position;    // LINKMAP: cM from the first marker (none if unlinked)
  std::vector<double> ln_l;          // per pedigree
  double total_ln_l = 0;
};

struct AnalysisTiming {
  double reduce_s = 0, plan_s = 0, evaluate_s = 0;
  int plans = 0, runs = 0;
  int max_width = 0;
  double log2_max_table = 0;
  double log2_total_state = 0;  // summed over the plans of one evaluation's locus order, max
  int buckets = 0;              // of the largest plan
  double peak_bytes = 0;        // the largest single plan's estimate
  int conditioned = 0;          // plans conditioned to fit the memory limits
  std::int64_t max_slices = 1;  // the most slices of one plan
};

struct AnalysisResult {
  Program program = Program::Mlink;
  bool sex_specific = false;  // thetas differ between the sexes
  bool sex_linked = false;
  std::vector<std::string> pedigrees;
  int varied_interval = -1;            // MLINK: 0-based interval of the map order
  int moving_locus = -1;               // LINKMAP: input index
  std::vector<std::string> map_order;  // locus names in the file's map order
  // LINKMAP: the markers (every locus but the moving one) and their sex-averaged map
  // positions, cM from the first (map function of the locus file).
  std::vector<std::pair<std::string, double>> markers;
  Evaluation baseline;  // MLINK: varied theta 0.5; LINKMAP: moving locus unlinked
  std::vector<Evaluation> evaluations;
  AnalysisTiming timing;
  std::vector<std::string> notes;                  // e.g. Kosambi interference modelled or not
  // LINKMAP: per pedigree, the bits of the Lander-Green chain's inheritance vector when the
  // chain computed it, -1 when the network did (empty: the network for every pedigree).
  std::vector<int> chain_bits;
  static double lod(double ln_l, double ln_base);  // log10 ratio, -inf when ln_l is
};

// Throws InputError for Mendelian inconsistencies (naming pedigree, locus and individuals),
// for tails that do not fit the program, and for positions or thetas out of range.
AnalysisResult analyze(const LocusFile& lf, const PedigreeFile& pf, const AnalysisOptions& opt);

// Which program the locus file's last line is written for (MLINK when there is none).
Program program_from_tail(const LocusFile& lf);

}  // namespace kinfer::linkage
