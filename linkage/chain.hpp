#pragma once
// The inheritance-vector chain's per-step work as a backend interface: a state vector of 2^bits
// doubles, the recombination kernel (a butterfly per state bit and per founder group), the
// product with one locus's emission, scaling, and the sums a location score needs. The driver
// (InheritanceModel::location_scores) only calls these, so the same walk over the map runs on
// the CPU (make_cpu_chain, linkage/chain.cpp) or on a GPU (gpu/chain_api.hpp, which includes
// this header only: plain C++, no CUDA type).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linkage/emission_program.hpp"

namespace kinfer::linkage {

// How a state index is laid out. Bit p of the index is one meiosis; its kernel reads the male or
// the female recombination fraction. The positions are cut into regions [lo, hi) of at most
// kRegionBits positions, and every founder group (the flip of all of one founder's other
// children's bits, founder-phase lumping) lies inside one region: a kernel pass then works on
// one region at a time in a cache-sized (or shared-memory-sized) tile, 2^(hi - lo) rows.
struct ChainLayout {
  static constexpr int kRegionBits = 11;
  int bits = 0;
  std::vector<char> female;                  // per position: the female theta (else male)
  std::vector<std::pair<int, int>> regions;  // [lo, hi), region 0 starts at position 0
  struct Group {
    std::uint64_t mask;  // state positions flipped together
    bool female;
    int region;  // index into regions, or -1 when it spans regions (its own pass)
  };
  std::vector<Group> groups;
};

// One locus's emission as a product of small tables: value(state) = exp(ln_scale) *
// prod_f f.table[pext(state, f.mask)] (times evaluate_program(state) when `program.n` > 0: the
// emission computed per state on the fly, linkage/emission_program.hpp), pext numbering the
// mask's set bits from the lowest. No factor and no program: the locus is uninformative given
// the inheritance vector (a constant).
struct EmissionFactor {
  std::uint64_t mask = 0;
  std::vector<double> table;
};
struct Emission {
  double ln_scale = 0;
  bool zero = false;  // the likelihood is 0 whatever the inheritance vector
  std::vector<EmissionFactor> factors;
  EmissionProgram program;
};

class ChainBackend {
 public:
  virtual ~ChainBackend() = default;
  virtual std::string name() const = 0;
  // Vectors this backend can still hold: `fast` in the memory the steps run in, `total`
  // counting slower memory (the host, for a GPU) for checkpoints.
  virtual long vectors_fast() const = 0;
  virtual long vectors_total() const = 0;
  // A state vector; `fast` false: may live in slower memory (checkpoints; only copy reads it).
  virtual int alloc(bool fast) = 0;
  virtual void release(int v) = 0;
  virtual void fill(int v, double x) = 0;
  virtual void copy(int dst, int src) = 0;
  // v <- e ⊙ K(v) (K when `kernel`: the recombination kernel at these thetas; e when not null),
  // then v scaled to a maximum of 1: returns the ln of the factor taken out (-inf when v is 0).
  virtual double step(int v, bool kernel, double male, double female, const Emission* e) = 0;
  // The same step into `dst` from `src` (both fast vectors; src unchanged). The default copies,
  // then steps in place; the CPU reads src in the kernel's first pass instead of copying.
  virtual double step_from(int dst, int src, bool kernel, double male, double female,
                           const Emission* e) {
    copy(dst, src);
    return step(dst, kernel, male, female, e);
  }
  // ln sum_w a(w) e(w) b(w): e null means 1, b < 0 means 1.
  virtual double ln_dot(int a, const Emission* e, int b) = 0;
  // A trait position's score: ln sum_w [K_left a](w) e(w) [K_right b](w), K_side the kernel at
  // its thetas when `kernel` (else 1); a and b unchanged, va and vb scratch vectors. The
  // default composes copy, step and ln_dot; a backend may fuse them (the CPU: the copies ride
  // on the kernel's first pass, the right side's last pass takes the sum).
  struct Side {
    bool kernel;
    double male, female;
  };
  virtual double ln_score(int a, const Side& left, const Emission* e, int b, const Side& right,
                          int va, int vb) {
    copy(va, a);
    double s = left.kernel ? step(va, true, left.male, left.female, nullptr) : 0.0;
    copy(vb, b);
    if (right.kernel) s += step(vb, true, right.male, right.female, nullptr);
    const double d = ln_dot(va, e, vb);
    return d + s;
  }
  // Vector v's entries in host memory, and the ln of the factor they are to be multiplied by
  // (`ln_factor`), for sums the backend has no operation for; null when v does not live on the
  // host (a GPU: the caller uses ln_dot instead). Valid until the next operation on v.
  virtual const double* host_data(int v, double* ln_factor) {
    (void)v;
    (void)ln_factor;
    return nullptr;
  }
  // Drops what the backend keeps for emission `e` (prepared from its tables and kept by its
  // address) before the caller changes or frees it; forget(nullptr) asks whether it can.
  // Returns false when it cannot: an emission it has seen must then stay unchanged at its
  // address for the backend's life (the GPU keeps device copies).
  virtual bool forget(const Emission* e) {
    (void)e;
    return false;
  }
};

// The CPU backend: OpenMP over tiles; `max_bytes` bounds the vectors it holds (0: no bound).
std::unique_ptr<ChainBackend> make_cpu_chain(const ChainLayout& layout, double max_bytes);

}  // namespace kinfer::linkage
