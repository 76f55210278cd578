#pragma once
// One locus's emission evaluated per inheritance vector, on the fly, instead of as factor
// tables (linkage/inheritance.hpp): given the vector, every kept person's two alleles are copies
// of founder alleles (the founder-allele graph: one vertex per founder allele, one edge per
// person with a phenotype, weighted by that person's genotype weights), and the emission is
//   sum over founder-allele values a of prod_v freq(a_v) prod_i w_i(a_lab(i,0), a_lab(i,1)).
// The sum is taken by eliminating vertices of degree 0, 1 and 2 in sweeps over the vertices
// (series-parallel reduction: every table stays n x n); what remains (a core where every vertex has
// 3 or more neighbours) is enumerated, up to kMaxEnumeration assignments. Cost per state: O(people
// + vertices^2) operations and a few KB of working memory, against a factor table that can reach
// 2^bits entries (8 GB at 30 bits). Plain data and one function template, compiled by the host
// compiler and (through KINFER_HD) by nvcc for gpu/chain.cu; no CUDA type.
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define KINFER_HD __host__ __device__
#else
#define KINFER_HD
#endif

namespace kinfer::linkage {

KINFER_HD inline int program_ctz(std::uint32_t m) {
#ifdef __CUDA_ARCH__
  return __ffs(static_cast<int>(m)) - 1;
#else
  return __builtin_ctz(m);
#endif
}
KINFER_HD inline int program_ctz64(std::uint64_t m) {
#ifdef __CUDA_ARCH__
  return __ffsll(static_cast<long long>(m)) - 1;
#else
  return __builtin_ctzll(m);
#endif
}
KINFER_HD inline int program_popcount(std::uint32_t m) {
#ifdef __CUDA_ARCH__
  return __popc(m);
#else
  return __builtin_popcount(m);
#endif
}

// A kept person, parents before children. Each side's allele: kind 0 a founder allele (`src`
// its vertex), 1 the parent's (`src` its index here) paternal or maternal allele as the state
// bit at position `pos` says, 2 the parent's allele of slot `pos` (a meiosis fixed by founder
// phase, or a father's X), 3 none (a male's paternal side at an X locus).
struct ProgramPerson {
  std::int32_t kind[2];
  std::int32_t src[2];
  std::int32_t pos[2];
  std::int32_t weight;  // offset into EmissionProgram::weights (n x n, or n when hemizygous), -1
  std::int32_t hemi;    // only side 1 carries an allele
};

struct EmissionProgram {
  static constexpr int kMaxVertices = 32;  // founder alleles
  static constexpr int kMaxEdges = 64;     // people with a phenotype
  static constexpr int kMaxAlleles = 4;
  static constexpr long kMaxEnumeration = 1L << 16;
  int n = 0;  // alleles after recoding; 0: no program
  int vertices = 0;
  std::vector<ProgramPerson> people;
  std::vector<double> freq;     // n
  std::vector<double> weights;  // concatenated
};

// The emission at `state`, or -1 when the core left after the reduction is too large to
// enumerate (the caller refuses). N: the number of alleles (2, 3 or 4).
template <int N>
KINFER_HD inline double evaluate_program(const ProgramPerson* people, int np, const double* freq,
                                         const double* weights, std::uint64_t state) {
  constexpr int V = EmissionProgram::kMaxVertices, E = EmissionProgram::kMaxEdges;
  std::int8_t lab[2 * 64];  // per person and side: its founder allele (people <= 64)
  double U[V][N];           // per vertex: prior times unary weights
  std::int8_t ea[E], eb[E];
  const double* tp[E];  // edge tables, t[x_a * N + x_b]: a person's weights, or `made`
  double made[E][N * N];
  int ne = 0;
  std::uint32_t alive = 0, nb[V];
  std::uint64_t inc[V];  // per vertex: its edges (bits of edge slots)
  for (int i = 0; i < np; ++i) {
    const ProgramPerson& p = people[i];
    for (int s = 0; s < 2; ++s) {
      const int k = p.kind[s];
      if (k == 0)
        lab[2 * i + s] = static_cast<std::int8_t>(p.src[s]);
      else if (k == 1)
        lab[2 * i + s] = lab[2 * p.src[s] + static_cast<int>((state >> p.pos[s]) & 1)];
      else if (k == 2)
        lab[2 * i + s] = lab[2 * p.src[s] + p.pos[s]];
      else
        lab[2 * i + s] = -1;
    }
    if (p.weight < 0) continue;
    const double* w = weights + p.weight;
    const int a = lab[2 * i], b = lab[2 * i + 1];
    for (int side = 0; side < 2; ++side) {
      const int v = side == 0 ? a : b;
      if (v < 0 || (alive >> v) & 1) continue;
      alive |= 1u << v;
      nb[v] = 0;
      inc[v] = 0;
      for (int x = 0; x < N; ++x) U[v][x] = freq[x];
    }
    if (p.hemi) {
      for (int x = 0; x < N; ++x) U[b][x] *= w[x];
    } else if (a == b) {
      for (int x = 0; x < N; ++x) U[a][x] *= w[x * N + x];
    } else {
      ea[ne] = static_cast<std::int8_t>(a), eb[ne] = static_cast<std::int8_t>(b);
      tp[ne] = w;
      inc[a] |= std::uint64_t(1) << ne, inc[b] |= std::uint64_t(1) << ne;
      ++ne;
      nb[a] |= 1u << b, nb[b] |= 1u << a;
    }
  }
  double result = 1;
  // Sweeps over the vertices, eliminating each one with at most two neighbours left, until a
  // sweep eliminates none.
  for (bool again = true; again && alive;) {
    again = false;
    for (std::uint32_t sweep = alive; sweep; sweep &= sweep - 1) {
      const int v = program_ctz(sweep);
      const std::uint32_t nv = nb[v] & alive;
      const int d = program_popcount(nv);
      if (d > 2) continue;
      again = true;
      double G[2][N][N];  // per neighbour: the product of its edges, oriented [x_v][x_u]
      int nbr[2] = {-1, -1};
      for (std::uint32_t m = nv, j = 0; m; m &= m - 1, ++j) nbr[j] = program_ctz(m);
      bool have[2] = {false, false};
      int free_slot = -1;
      for (std::uint64_t m = inc[v]; m; m &= m - 1) {
        const int e = program_ctz64(m);
        const bool first = ea[e] == v;
        const int u = first ? eb[e] : ea[e];
        const int j = u == nbr[0] ? 0 : 1;
        const double* t = tp[e];
        for (int x = 0; x < N; ++x)
          for (int y = 0; y < N; ++y) {
            const double w = first ? t[x * N + y] : t[y * N + x];
            G[j][x][y] = have[j] ? G[j][x][y] * w : w;
          }
        have[j] = true;
        inc[u] &= ~(std::uint64_t(1) << e);
        ea[e] = eb[e] = -1;
        free_slot = e;
      }
      inc[v] = 0;
      if (d == 0) {
        double s = 0;
        for (int x = 0; x < N; ++x) s += U[v][x];
        result *= s;
      } else if (d == 1) {
        const int u = nbr[0];
        for (int y = 0; y < N; ++y) {
          double s = 0;
          for (int x = 0; x < N; ++x) s += U[v][x] * G[0][x][y];
          U[u][y] *= s;
        }
      } else {  // a new edge between the two neighbours, in a freed slot
        const int u = nbr[0], w = nbr[1], e = free_slot;
        for (int y = 0; y < N; ++y)
          for (int z = 0; z < N; ++z) {
            double s = 0;
            for (int x = 0; x < N; ++x) s += U[v][x] * G[0][x][y] * G[1][x][z];
            made[e][y * N + z] = s;
          }
        ea[e] = static_cast<std::int8_t>(u), eb[e] = static_cast<std::int8_t>(w);
        tp[e] = made[e];
        inc[u] |= std::uint64_t(1) << e, inc[w] |= std::uint64_t(1) << e;
        nb[u] |= 1u << w, nb[w] |= 1u << u;
      }
      alive &= ~(1u << v);
    }
  }
  if (!alive) return result;
  // A core of degree >= 3 everywhere: enumerate its vertices' alleles.
  int core[V], nc = 0;
  long count = 1;
  for (std::uint32_t m = alive; m; m &= m - 1) {
    core[nc++] = program_ctz(m);
    count *= N;
    if (count > EmissionProgram::kMaxEnumeration) return -1;
  }
  int val[V];
  for (int v = 0; v < V; ++v) val[v] = 0;
  double total = 0;
  for (long c = 0; c < count; ++c) {
    long r = c;
    double p = 1;
    for (int j = 0; j < nc; ++j) {
      val[core[j]] = static_cast<int>(r % N);
      r /= N;
      p *= U[core[j]][val[core[j]]];
    }
    for (int e = 0; e < ne && p != 0; ++e)
      if (ea[e] >= 0) p *= tp[e][val[ea[e]] * N + val[eb[e]]];
    total += p;
  }
  return result * total;
}

// evaluate_program for the program's number of alleles (1 to 4).
KINFER_HD inline double evaluate_program(int n, const ProgramPerson* people, int np,
                                         const double* freq, const double* weights,
                                         std::uint64_t state) {
  switch (n) {
    case 1:
      return evaluate_program<1>(people, np, freq, weights, state);
    case 2:
      return evaluate_program<2>(people, np, freq, weights, state);
    case 3:
      return evaluate_program<3>(people, np, freq, weights, state);
    default:
      return evaluate_program<4>(people, np, freq, weights, state);
  }
}

}  // namespace kinfer::linkage
