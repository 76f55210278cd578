#pragma once
// Several kinfer processes working on one command, started by `mpirun -np N` or Slurm's `srun`
// (Open MPI): the ranks. Built without MPI (-Dmpi=disabled, or no Open MPI found), or started
// without a launcher, a process is rank 0 of 1 and every call here is a local no-op, so callers
// never branch on how kinfer was built. No MPI type appears here (mpi.cpp / no_mpi.cpp).
//
// What is distributed, and how (docs/cluster.md):
//   pe    the slices of a conditioned plan, dealt cyclically (RankDealer below); an unconditioned
//         plan is one slice and runs on rank 0
//   lod   the (evaluation, pedigree) likelihoods, dealt cyclically in the order every rank counts
//   batch jobs handed out by rank 0 as ranks become free (apps/batch_supervisor.cpp)
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/condition.hpp"

namespace kinfer::mpi {

// MPI_Init when this process was started by a launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK or
// PMI_RANK in the environment), unless `no_mpi` (the batch's child processes: KINFER_NO_MPI,
// apps/environment.hpp).
void init(int* argc, char*** argv, bool no_mpi);
void finalize();      // once, at a normal exit
bool compiled();      // built with MPI
bool launched();      // MPI is initialized (under mpirun/srun, even with one rank)
int rank();           // 0 without MPI
int size();           // 1 without MPI
std::string host();   // this machine's name
std::string where();  // "host:rank", for logs and the batch summary
// Ends every rank with `code` (an error in one rank while others wait in a collective).
[[noreturn]] void abort(int code);
// Environment variables a child process must not inherit, lest it take itself for a rank.
bool is_launcher_variable(const std::string& name);

// Collectives: every rank calls them, in the same order.
std::vector<std::vector<double>> allgather(const std::vector<double>& mine);  // per rank
std::vector<std::string> allgather(const std::string& mine);                  // per rank
bool any(bool mine);  // true on every rank when it is true on some rank
std::string broadcast(const std::string& from_rank0);  // rank 0's string, on every rank
int ranks_on_this_host();  // how many ranks share this machine (1 without MPI)

// Point to point (the batch): a message is a tag and a string.
void send(int to, int tag, const std::string& body);
// Whether a message is waiting (from any rank); sets its sender and tag.
bool poll(int& from, int& tag);
std::string receive(int from, int tag);

// The slices of a conditioned plan (and lod's likelihoods) dealt over the ranks: item i runs on
// rank i mod N; with --verify F a seeded fraction F of the items runs on rank (i + 1) mod N
// too, and combine() compares the two values (tolerance 1e-9 relative in ln, the --check one;
// equal infinities and two NaNs, "not computed this way", agree).
// With one rank and no verification it is never needed (callers pass nullptr).
class RankDealer : public SliceDealer {
 public:
  explicit RankDealer(double verify_fraction = 0, std::uint64_t seed = 1);
  bool mine(std::uint64_t item) override;
  void combine(std::vector<double>& value, const std::vector<char>& computed,
               std::size_t width = 1) override;

  struct Mismatch {
    std::uint64_t item;
    double a, b;
    int rank_a, rank_b;
  };
  const std::vector<Mismatch>& mismatches() const { return mismatches_; }
  int verified() const { return verified_; }  // items computed twice and compared
  // Per rank: {"rank", "host", "items", "seconds"} (collective: every rank calls it).
  nlohmann::json per_rank(const char* items_name) const;
  std::uint64_t items_here() const { return items_; }

 private:
  bool verifies(std::uint64_t item) const;
  double fraction_;
  std::uint64_t seed_;
  std::uint64_t items_ = 0;
  std::uint64_t base_ = 0;  // item numbering of the values combine() receives
  double busy_ = 0;         // seconds between the first mine() and each combine()
  double start_ = -1;
  int verified_ = 0;
  std::vector<Mismatch> mismatches_;
};

// make_conditioned_plan (engine/condition.hpp) on rank 0 alone: it sends its order and its
// conditioning choice to the other ranks, which build the same plan from them without searching
// (rebuild_conditioned_plan). One process: make_conditioned_plan. Collective.
ConditionedPlan conditioned_plan(const Network& net, const Evidence& ev, const PlanOptions& opt);

// The slice dealer of a conditioned plan (pe): null with one process; else a RankDealer, after
// checking that every rank holds the same plan (slices, conditioning variables and order; a
// rank whose plan differs would sum other slices: ResourceError). After conditioned_plan they
// agree by construction: a cheap assertion.
std::unique_ptr<RankDealer> slice_dealer(const ConditionedPlan& cp, double verify_fraction,
                                         std::uint64_t seed);

}  // namespace kinfer::mpi
