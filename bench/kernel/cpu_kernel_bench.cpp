// Microbenchmark of the CPU bucket kernel on random buckets of a given shape.
// Prints states/s (bucket state space over seconds) for the log-domain kernel.
//   cpu_kernel_bench [vars] [marg] [functions] [repeats]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/cpu_kernel.hpp"

using namespace kinfer;

int main(int argc, char** argv) {
  const int nv = argc > 1 ? std::atoi(argv[1]) : 24;
  const int nm = argc > 2 ? std::atoi(argv[2]) : 8;
  const int nf = argc > 3 ? std::atoi(argv[3]) : 3;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  std::mt19937_64 rng(1);
  BucketShape shape;
  for (int i = 0; i < nv; ++i) shape.vars.push_back(i), shape.card.push_back(2);
  shape.n_marg = nm;
  // Function 0 covers every variable; the others cover random halves, all including the
  // summed ones (the linkage-like case: a big message times small factors).
  std::vector<std::vector<double>> data(nf);
  std::vector<InputTable> in(nf);
  std::uniform_real_distribution<double> u(-5, 0);
  for (int f = 0; f < nf; ++f) {
    std::vector<int> sc;
    for (int i = 0; i < nv; ++i)
      if (f == 0 || i >= nv - nm || rng() % 3 == 0) sc.push_back(i);
    std::size_t n = std::size_t(1) << sc.size();
    data[f].resize(n);
    for (auto& x : data[f]) x = u(rng);
    in[f] = {data[f].data(), sc};
  }
  std::vector<double> out(shape.output_size());
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    sum_product_log(shape, in, out.data());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  const double states = std::ldexp(1.0, nv);
  std::printf("vars %d marg %d functions %d threads %d: %.4f s, %.3g states/s\n", nv, nm, nf,
              omp_get_max_threads(), best, states / best);
}
