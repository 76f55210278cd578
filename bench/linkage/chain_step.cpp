// The CPU chain's per-step cost on the layout of the c250 family (the 250-SNP case of
// scripts/bench_linkage.py's part 4, `scripts/bench.py linkage-big`):
// 22 bits in regions [0, 11) and [11, 22), the six founder groups of that family in region 0,
// and a SNP's emission as it leaves the elimination (a factor over the upper region and bits
// 0-6, 2^18 entries, and a small one). Prints milliseconds per operation (median of --reps),
// so a change to linkage/chain.cpp can be timed without the rest of a run.
//   chain_step [BITS] [REPS]      (threads: OMP_NUM_THREADS)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "linkage/chain.hpp"

using namespace kinfer::linkage;

int main(int argc, char** argv) {
  const int bits = argc > 1 ? std::atoi(argv[1]) : 22;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  ChainLayout L;
  L.bits = bits;
  for (int i = 0; i < bits; ++i) L.female.push_back(i % 3 == 0);
  for (int a = 0; a < bits; a += ChainLayout::kRegionBits)
    L.regions.push_back({a, std::min(bits, a + ChainLayout::kRegionBits)});
  for (std::uint64_t m : {0x7ull, 0x18ull, 0x60ull, 0x180ull, 0x200ull, 0x400ull})
    if (m < (1ull << std::min(bits, 11))) L.groups.push_back({m, (m & 0x1f) != 0, 0});
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> U(0.05, 1.0);
  Emission e;
  const std::uint64_t all = (bits >= 64 ? ~0ull : (1ull << bits) - 1);
  for (std::uint64_t m : {all & ~0x780ull, 0x780ull & all}) {
    EmissionFactor f;
    f.mask = m;
    f.table.resize(std::size_t(1) << __builtin_popcountll(m));
    for (double& x : f.table) x = U(rng);
    e.factors.push_back(std::move(f));
  }
  auto chain = make_cpu_chain(L, 0);
  const int a = chain->alloc(true), b = chain->alloc(true), va = chain->alloc(true),
            vb = chain->alloc(true);
  chain->fill(a, 1.0);
  chain->fill(b, 1.0);
  chain->step(a, false, 0, 0, &e);
  chain->step(b, false, 0, 0, &e);
  using Clock = std::chrono::steady_clock;
  auto time = [&](const char* what, auto&& op) {
    std::vector<double> ms;
    op();  // warm: first touch, prepared emission
    for (int r = 0; r < reps; ++r) {
      const auto t = Clock::now();
      op();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-36s %8.2f ms (min %.2f)\n", what, ms[ms.size() / 2], ms[0]);
  };
  std::printf("%d bits, %d threads, %d reps\n", bits, omp_get_max_threads(), reps);
  time("step (kernel + emission, in place)", [&] { chain->step(a, true, 0.01, 0.02, &e); });
  time("step_from (into another vector)", [&] { chain->step_from(va, a, true, 0.01, 0.02, &e); });
  time("kernel only", [&] { chain->step(a, true, 0.01, 0.02, nullptr); });
  time("emission only", [&] { chain->step(a, false, 0, 0, &e); });
  time("ln_score (two kernels)", [&] {
    chain->ln_score(a, {true, 0.01, 0.02}, &e, b, {true, 0.02, 0.01}, va, vb);
  });
  time("copy", [&] { chain->copy(va, a); });
  return 0;
}
