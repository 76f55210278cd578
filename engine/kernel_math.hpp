#pragma once
// The inline pieces of the CPU kernels' hot loops (engine/cpu_kernel.cpp, engine/posterior.cpp),
// written so that the compiler vectorises them: exp for non-positive arguments, and the maxima
// of short runs of values.
#include <cstdint>
#include <cstring>

namespace kinfer {

// exp(x) for x <= 0 (x may be -inf), within 2 ulp of std::exp where the result is a normal
// double; x below -708 (and -inf) gives e^-708, not 0.
#pragma omp declare simd notinbranch
inline double exp_np(double x) {
  // exp(x) = 2^n * exp(r), r = x - n ln2, |r| <= ln2/2; Taylor to degree 13 (error < 1e-17).
  x = x < -708.0 ? -708.0 : x;                // also maps -inf to a harmless tiny value
  const double shifter = 6755399441055744.0;  // 1.5 * 2^52: rounds to an integer
  double t = x * 1.4426950408889634 + shifter;
  double n = t - shifter;
  double r = x - n * 0.6931471805599453;
  r = r - n * 2.3190468138462996e-17;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // Scale by 2^n through the exponent bits (n >= -1022 here, so the result is normal). t's
  // bits are the shifter's plus n, and the shifter's bits shifted left by 52 are 0: the
  // exponent's bits are (t's bits + 1023) << 52, integer arithmetic that vectorises (AVX2 has
  // no packed conversion of doubles to 64-bit integers).
  std::uint64_t t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const std::uint64_t bits = (t_bits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// out[g] = the largest of x[g * terms + j] over j < terms, for each g < runs (terms >= 1): term
// by term across the runs, which vectorises where one run is too short to.
inline void max_of_runs(const double* __restrict x, std::int64_t runs, std::int64_t terms,
                        double* __restrict out) {
  for (std::int64_t g = 0; g < runs; ++g) out[g] = x[g * terms];
  for (std::int64_t j = 1; j < terms; ++j)
#pragma omp simd
    for (std::int64_t g = 0; g < runs; ++g) {
      const double v = x[g * terms + j];
      out[g] = v > out[g] ? v : out[g];
    }
}

}  // namespace kinfer
