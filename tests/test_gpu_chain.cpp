// [gpu] The Lander-Green chain's GPU backend (gpu/chain_api.hpp) against the CPU backend
// (linkage/chain.hpp) on random layouts (several kernel regions, founder groups inside a region
// and across regions, male and female thetas) and random factored emissions: every step's ln
// scale and every ln_dot to 1e-10. Without a usable GPU the program exits 77 (meson: SKIP).
#include <cmath>
#include <cstdio>
#include <random>

#include "gpu/chain_api.hpp"
#include "gpu/device_api.hpp"
#include "linkage/chain.hpp"

using namespace kinfer;
using linkage::ChainLayout;
using linkage::Emission;

namespace {

int failures = 0;

void check(double a, double b, const char* what, int bits, int i) {
  const bool ok = (std::isinf(a) && std::isinf(b)) || std::abs(a - b) <= 1e-10 * (1 + std::abs(a));
  if (!ok) {
    std::printf("FAIL %s (bits %d, op %d): cpu %.15g gpu %.15g\n", what, bits, i, a, b);
    ++failures;
  }
}

ChainLayout random_layout(std::mt19937& rng, int bits) {
  ChainLayout L;
  L.bits = bits;
  for (int i = 0; i < bits; ++i) L.female.push_back(rng() % 2);
  for (int a = 0; a < bits; a += ChainLayout::kRegionBits)
    L.regions.push_back({a, std::min(bits, a + ChainLayout::kRegionBits)});
  for (std::size_t r = 0; r < L.regions.size(); ++r) {
    const auto [a, b] = L.regions[r];
    for (int p = a; p + 3 <= b; p += 4) {  // groups of 2 or 3 positions inside the region
      const int n = 2 + static_cast<int>(rng() % 2);
      std::uint64_t m = 0;
      for (int k = 0; k < n; ++k) m |= 1ull << (p + k);
      L.groups.push_back({m, static_cast<bool>(rng() % 2), static_cast<int>(r)});
    }
  }
  if (L.regions.size() > 1)  // a group across regions: its own pass
    L.groups.push_back({(1ull << 1) | (1ull << (bits - 1)), true, -1});
  return L;
}

Emission random_emission(std::mt19937& rng, int bits) {
  std::uniform_real_distribution<double> U(0.05, 1.0);
  Emission e;
  e.ln_scale = -U(rng);
  const int nf = 1 + static_cast<int>(rng() % 3);
  for (int f = 0; f < nf; ++f) {
    linkage::EmissionFactor ef;
    const int k = 1 + static_cast<int>(rng() % std::min(bits, 8));
    while (__builtin_popcountll(ef.mask) < k) ef.mask |= 1ull << (rng() % bits);
    ef.table.resize(std::size_t(1) << k);
    for (double& x : ef.table) x = rng() % 7 == 0 ? 0.0 : U(rng);
    e.factors.push_back(std::move(ef));
  }
  // Every other emission also evaluated per state (linkage/emission_program.hpp): founders, then
  // children of random earlier people through random state bits, random genotype weights.
  if (rng() % 2) {
    linkage::EmissionProgram& g = e.program;
    g.n = 1 + static_cast<int>(rng() % 4);
    g.freq.resize(g.n);
    for (double& x : g.freq) x = U(rng);
    const int founders = 2 + static_cast<int>(rng() % 5), kids = 3 + static_cast<int>(rng() % 12);
    g.vertices = 2 * founders;
    for (int i = 0; i < founders + kids; ++i) {
      linkage::ProgramPerson q{};
      for (int s = 0; s < 2; ++s) {
        if (i < founders) {
          q.kind[s] = 0, q.src[s] = 2 * i + s, q.pos[s] = 0;
        } else {
          q.kind[s] = rng() % 4 ? 1 : 2;
          q.src[s] = static_cast<int>(rng() % i);
          q.pos[s] = static_cast<int>(q.kind[s] == 1 ? rng() % bits : rng() % 2);
        }
      }
      q.weight = -1;
      if (rng() % 3) {
        q.weight = static_cast<int>(g.weights.size());
        for (int k = 0; k < g.n * g.n; ++k) g.weights.push_back(rng() % 5 == 0 ? 0.0 : U(rng));
      }
      g.people.push_back(q);
    }
  }
  return e;
}

}  // namespace

int main() {
  const gpu::DeviceInfo info = gpu::probe();
  if (!info.available) {
    std::printf("SKIP: no GPU: %s\n", info.why_not.c_str());
    return 77;
  }
  std::mt19937 rng(2026);
  for (int bits : {3, 9, 12, 17, 23}) {
    const ChainLayout L = random_layout(rng, bits);
    auto cpu = linkage::make_cpu_chain(L, 0);
    auto gpu = gpu::make_gpu_chain(L, 0);
    std::vector<Emission> em;
    for (int i = 0; i < 12; ++i) em.push_back(random_emission(rng, bits));
    const int a1 = cpu->alloc(true), b1 = cpu->alloc(true);
    const int a2 = gpu->alloc(true), b2 = gpu->alloc(true);
    cpu->fill(a1, 1.0), gpu->fill(a2, 1.0);
    std::uniform_real_distribution<double> T(0.0, 0.5);
    for (int i = 0; i < 12; ++i) {
      const double m = T(rng), f = T(rng);
      const bool kernel = i > 0;
      check(cpu->step(a1, kernel, m, f, &em[i]), gpu->step(a2, kernel, m, f, &em[i]), "step", bits,
            i);
      cpu->copy(b1, a1), gpu->copy(b2, a2);
      check(cpu->step(b1, true, f, m, nullptr), gpu->step(b2, true, f, m, nullptr),
            "step without emission", bits, i);
      check(cpu->ln_dot(a1, &em[(i + 5) % 12], b1), gpu->ln_dot(a2, &em[(i + 5) % 12], b2),
            "ln_dot", bits, i);
      check(cpu->ln_dot(a1, nullptr, -1), gpu->ln_dot(a2, nullptr, -1), "ln sum", bits, i);
      const linkage::ChainBackend::Side l{i % 2 == 0, m, f}, r{i % 3 != 0, f, m};
      const int c1 = cpu->alloc(true), d1 = cpu->alloc(true);
      const int c2 = gpu->alloc(true), d2 = gpu->alloc(true);
      check(cpu->ln_score(a1, l, &em[(i + 3) % 12], b1, r, c1, d1),
            gpu->ln_score(a2, l, &em[(i + 3) % 12], b2, r, c2, d2), "ln_score", bits, i);
      cpu->release(c1), cpu->release(d1), gpu->release(c2), gpu->release(d2);
    }
    std::printf("%d bits: %s\n", bits, failures ? "failures so far" : "cpu and gpu agree");
  }
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
