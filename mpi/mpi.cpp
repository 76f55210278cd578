// distributed.hpp over MPI (Open MPI). The only file that includes <mpi.h>.
// The C API only: Open MPI's deprecated C++ bindings do not compile under -Werror.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mpi/distributed.hpp"

namespace kinfer::mpi {

namespace {
bool g_launched = false;
int g_rank = 0, g_size = 1;

bool started_by_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}
}  // namespace

void init(int* argc, char*** argv, bool no_mpi) {
  if (g_launched || no_mpi || !started_by_launcher()) return;
  int provided = 0;
  // Only the main thread calls MPI (OpenMP threads compute, never communicate).
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_launched = true;
  // A rank never outlives its launcher (mpirun or orted killed with SIGKILL): its job processes
  // (apps/batch_supervisor.cpp) go with it, and `--resume` finds no stray writer.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
}

void finalize() {
  if (!g_launched) return;
  MPI_Finalize();
  g_launched = false;
}

bool compiled() { return true; }
bool launched() { return g_launched; }
int rank() { return g_rank; }
int size() { return g_size; }

void abort(int code) {
  if (g_launched) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

namespace {
// Every rank's `mine` (a contiguous container of doubles or chars), rank by rank.
template <class C>
std::vector<C> allgather_v(const C& mine, MPI_Datatype type) {
  if (g_size == 1) return {mine};
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(g_size), displs(g_size);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < g_size; ++r) displs[r] = total, total += counts[r];
  C all(total, typename C::value_type{});
  MPI_Allgatherv(mine.data(), n, type, all.data(), counts.data(), displs.data(), type,
                 MPI_COMM_WORLD);
  std::vector<C> out(g_size);
  for (int r = 0; r < g_size; ++r)
    out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
  return out;
}
}  // namespace

std::vector<std::vector<double>> allgather(const std::vector<double>& mine) {
  return allgather_v(mine, MPI_DOUBLE);
}

std::vector<std::string> allgather(const std::string& mine) { return allgather_v(mine, MPI_CHAR); }

bool any(bool mine) {
  if (g_size == 1) return mine;
  int in = mine ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return out != 0;
}

// Waits for a nonblocking collective without spinning: Open MPI's blocking calls poll at full
// speed, so a rank waiting for rank 0's order search would take a core from it (2 ranks on
// 2 cores: the search ran at half speed).
static void wait_idle(MPI_Request& req) {
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string broadcast(const std::string& from_rank0) {
  if (g_size == 1) return from_rank0;
  unsigned long long n = from_rank0.size();
  MPI_Request req;
  MPI_Ibcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD, &req);
  wait_idle(req);
  std::string out = g_rank == 0 ? from_rank0 : std::string(n, '\0');
  MPI_Ibcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD, &req);
  wait_idle(req);
  return out;
}

void send(int to, int tag, const std::string& body) {
  MPI_Send(body.data(), static_cast<int>(body.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

bool poll(int& from, int& tag) {
  if (g_size == 1) return false;
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return false;
  from = st.MPI_SOURCE;
  tag = st.MPI_TAG;
  return true;
}

std::string receive(int from, int tag) {
  MPI_Status st;
  MPI_Probe(from, tag, MPI_COMM_WORLD, &st);
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string body(n, '\0');
  MPI_Recv(body.data(), n, MPI_CHAR, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return body;
}

}  // namespace kinfer::mpi
