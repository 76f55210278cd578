#pragma once
// The exp and log of the bucket kernels, in double (table methods on the FMA pipe) and float
// (the special-function unit). Private to gpu/: included by sum_product.cu only.
//
// Two exps:
//  * expneg(x), x <= 0 (-inf and NaN clamp): the split combine and the arithmetic-rate probe;
//  * exp_neg_add(y, tab, acc) = acc + exp(-y), y >= 0: the inner loops of every bucket kernel.
//    It costs fewer integer instructions (counted in the machine code): the clamp is one integer
//    min, the scale one shift-add, the polynomial's constants operands from the constant bank.
#include <cuda_runtime.h>

#include "gpu/detail/kernel_args.cuh"

namespace kinfer::gpu {
namespace {

// 2^(j/64), j = 0..63, correctly rounded: the table of expneg.
__constant__ double c_exp2_64[64] = {
    0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
    0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0,
    0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
    0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
    0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
    0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
    0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
    0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
    0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
    0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0,
    0x1.9c49182a3f090p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
    0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
    0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
    0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
    0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0, 0x1.fa7c1819e90d8p+0,
};

// Each block copies expneg's table to shared memory once; the exp reads it with a per-lane index.
__device__ __forceinline__ void load_exp_table(double* s) {
  static_assert(sizeof(c_exp2_64) == kStaticShared,
                "the planner reserves this much static shared memory");
  for (int i = threadIdx.x; i < 64; i += blockDim.x) s[i] = c_exp2_64[i];
}

// exp(x) for x <= 0 (x may be -inf, or NaN from -inf - -inf: both clamp to a negligible
// 2^-1021). Table method: x = (64 e + j) ln2/64 + r with |r| <= ln2/128, so
// exp(x) = 2^e * 2^(j/64) * p(r) with p of degree 5 (truncation < 4e-17 relative): 10
// double operations instead of the 19 of a plain degree-13 polynomial, within 2 ulp.
__device__ __forceinline__ double expneg(double x, const double* tab) {
  x = fmax(x, -708.0);
  const double shifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double t = fma(x, 92.332482616893658, shifter);  // 64 / ln2
  const double kd = t - shifter;
  double r = fma(kd, -0.010830424696249145, x);  // ln2 / 64, high part (fma: exact product)
  r = fma(kd, -3.623510646634843e-19, r);        // low part
  double p = 1.0 / 120.0;
  p = fma(p, r, 1.0 / 24.0);
  p = fma(p, r, 1.0 / 6.0);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  const int k = __double2loint(t);  // the low word of t holds k = round(x * 64 / ln2) <= 0
  const double s = tab[k & 63];     // 2^(j/64) in [1, 2)
  // times 2^(k >> 6) through the exponent field (k >= -65376: the result stays normal)
  const double scale = __hiloint2double(__double2hiint(s) + ((k >> 6) << 20), __double2loint(s));
  return p * scale;
}

// Single precision: the special-function unit (ex2.approx), as paper 000 section 7.2.4 used.
__device__ __forceinline__ float expneg(float x, const double*) {
  return __expf(fmaxf(x, -100.0f));
}

__device__ __forceinline__ double neg_inf(double) { return -INFINITY; }
__device__ __forceinline__ float neg_inf(float) { return -INFINITY; }
__device__ __forceinline__ double log_of(double x) { return log(x); }
__device__ __forceinline__ float log_of(float x) { return logf(x); }
__device__ __forceinline__ double lowest(double) { return -1.7976931348623157e308; }
__device__ __forceinline__ float lowest(float) { return -3.402823466e38f; }

// ---- exp_neg_add: the exp of the kernels' inner loops ----
// acc + exp(-y) for y >= 0 (+inf included). A non-negative double's high word, read as a signed
// int, grows with its value, so one integer min clamps y to 708 (+inf too; the low word is
// kept, which moves the clamped value by less than 2^-11: the result stays normal). Table
// method: y = -(64 k + j) ln2/64 + r, exp = 2^(k >> 6) 2^(j/64) p(r), p of degree 5, the last
// multiply fused into the sum. The low part of ln2/64 is left out: it moves r by at most
// y 3.3e-17, i.e. a term's error by at most y e^-y 3.3e-17 of the largest term (< 1.3e-17);
// host check over 2e7 arguments: within 3.4 ulp for y <= 5, absolute error <= 2.4e-16.
// The table entry j holds 2^(j/64) with (j << 14) subtracted from its high word, so the scale
// 2^(k >> 6) is one shift-add of the whole k: hi + (k << 14) = hi(2^(j/64)) + ((k >> 6) << 20),
// since k = 64 (k >> 6) + j (two's complement, k >= -65376: no overflow). The polynomial's
// constants that are no double immediates come from the constant bank (an operand of the DFMA,
// not a register pair rebuilt every chunk).
__constant__ double c_exp_poly[5] = {-92.332482616893658, -0.010830424696249145, 1.0 / 120.0,
                                     1.0 / 24.0, 1.0 / 6.0};

// exp_neg_add's table: 2^(j/64) with j << 14 taken off its high word (c_exp2_64's entries so
// changed, precomputed). In global memory, not the constant bank: a block's copy to shared
// memory is then coalesced loads, where reading the constant bank with per-thread indices
// serializes a warp's 32 addresses and kept the blocks waiting at the barrier after the copy.
__device__ double g_exp2_64_shifted[64] = {
    0x1.0000000000000p+0, 0x1.fec9a3e778061p-1, 0x1.fd9b0d3158574p-1, 0x1.fc74518759bc8p-1,
    0x1.fb5586cf9890fp-1, 0x1.fa3ec32d3d1a2p-1, 0x1.f9301d0125b51p-1, 0x1.f829aaea92de0p-1,
    0x1.f72b83c7d517bp-1, 0x1.f635beb6fcb75p-1, 0x1.f54873168b9aap-1, 0x1.f463b88628cd6p-1,
    0x1.f387a6e756238p-1, 0x1.f2b4565e27cddp-1, 0x1.f1e9df51fdee1p-1, 0x1.f1285a6e4030bp-1,
    0x1.f06fe0a31b715p-1, 0x1.efc08b26416ffp-1, 0x1.ef1a7373aa9cbp-1, 0x1.ee7db34e59ff7p-1,
    0x1.edea64c123422p-1, 0x1.ed60a21f72e2ap-1, 0x1.ece086061892dp-1, 0x1.ec6a2b5c13cd0p-1,
    0x1.ebfdad5362a27p-1, 0x1.eb9b2769d2ca7p-1, 0x1.eb42b569d4f82p-1, 0x1.eaf4736b527dap-1,
    0x1.eab07dd485429p-1, 0x1.ea76f15ad2148p-1, 0x1.ea47eb03a5585p-1, 0x1.ea23882552225p-1,
    0x1.ea09e667f3bcdp-1, 0x1.e9fb23c651a2fp-1, 0x1.e9f75e8ec5f74p-1, 0x1.e9feb564267c9p-1,
    0x1.ea11473eb0187p-1, 0x1.ea2f336cf4e62p-1, 0x1.ea589994cce13p-1, 0x1.ea8d99b4492edp-1,
    0x1.eace5422aa0dbp-1, 0x1.eb1ae99157736p-1, 0x1.eb737b0cdc5e5p-1, 0x1.ebd829fde4e50p-1,
    0x1.ec49182a3f090p-1, 0x1.ecc667b5de565p-1, 0x1.ed503b23e255dp-1, 0x1.ede6b5579fdbfp-1,
    0x1.ee89f995ad3adp-1, 0x1.ef3a2b84f15fbp-1, 0x1.eff76f2fb5e47p-1, 0x1.f0c1e904bc1d2p-1,
    0x1.f199bdd85529cp-1, 0x1.f27f12e57d14bp-1, 0x1.f3720dcef9069p-1, 0x1.f472d4a07897cp-1,
    0x1.f5818dcfba487p-1, 0x1.f69e603db3285p-1, 0x1.f7c97337b9b5fp-1, 0x1.f902ee78b3ff6p-1,
    0x1.fa4afa2a490dap-1, 0x1.fba1bee615a27p-1, 0x1.fd0765b6e4540p-1, 0x1.fe7c1819e90d8p-1,
};

// Each block copies exp_neg_add's table to shared memory once.
__device__ __forceinline__ void load_exp_table_shifted(double* s) {
  for (int i = threadIdx.x; i < 64; i += blockDim.x) s[i] = __ldg(g_exp2_64_shifted + i);
}

// acc + exp(-y), y >= 0 (`tab`: the shared-window address of g_exp2_64_shifted's copy).
__device__ __forceinline__ double exp_neg_add(double y, unsigned tab, double acc) {
  y = __hiloint2double(min(__double2hiint(y), 0x40862000), __double2loint(y));
  const double shifter = 6755399441055744.0;
  const double t = fma(y, c_exp_poly[0], shifter);
  const double r = fma(t - shifter, c_exp_poly[1], -y);
  double p = c_exp_poly[2];
  p = fma(p, r, c_exp_poly[3]);
  p = fma(p, r, c_exp_poly[4]);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  const int k = __double2loint(t);
  const double s = lds64(tab + (static_cast<unsigned>(k & 63) << 3));
  const double scale = __hiloint2double(__double2hiint(s) + (k << 14), __double2loint(s));
  return fma(p, scale, acc);
}

__device__ __forceinline__ float exp_neg_add(float y, unsigned, float acc) {
  return acc + __expf(-fminf(y, 100.0f));
}

// ---- log_of_sum: the short-sum kernel's log ----
// The log of a sum of exps whose largest term is exp(0) = 1 (so the sum is >= 1 and normal) by a
// table of 64 and a polynomial of degree 9, in place of CUDA's log (~60 instructions). The table,
// in global memory as g_exp2_64_shifted (a coalesced copy to shared memory):
// g_log_table[j] = {inv_j, -ln inv_j}.
// clang-format off
__device__ double2 g_log_table[64] = {
    {0x1.0000000000000p+0, 0x0.0p+0},
    {0x1.f81f81f81f820p-1, 0x1.fc0a8b0fc03c4p-7},
    {0x1.f07c1f07c1f08p-1, 0x1.f829b0e7832f8p-6},
    {0x1.e9131abf0b767p-1, 0x1.77458f632dcffp-5},
    {0x1.e1e1e1e1e1e1ep-1, 0x1.f0a30c01162a8p-5},
    {0x1.dae6076b981dbp-1, 0x1.341d7961bd1d0p-4},
    {0x1.d41d41d41d41dp-1, 0x1.6f0d28ae56b4ep-4},
    {0x1.cd85689039b0bp-1, 0x1.a926d3a4ad562p-4},
    {0x1.c71c71c71c71cp-1, 0x1.e27076e2af2eap-4},
    {0x1.c0e070381c0e0p-1, 0x1.0d77e7cd08e5bp-3},
    {0x1.bacf914c1bad0p-1, 0x1.29552f81ff521p-3},
    {0x1.b4e81b4e81b4fp-1, 0x1.44d2b6ccb7d1cp-3},
    {0x1.af286bca1af28p-1, 0x1.5ff3070a793d6p-3},
    {0x1.a98ef606a63bep-1, 0x1.7ab890210d907p-3},
    {0x1.a41a41a41a41ap-1, 0x1.9525a9cf456b6p-3},
    {0x1.9ec8e951033d9p-1, 0x1.af3c94e80bff3p-3},
    {0x1.999999999999ap-1, 0x1.c8ff7c79a9a20p-3},
    {0x1.948b0fcd6e9e0p-1, 0x1.e27076e2af2e8p-3},
    {0x1.8f9c18f9c18fap-1, 0x1.fb9186d5e3e29p-3},
    {0x1.8acb90f6bf3aap-1, 0x1.0a324e27390e2p-2},
    {0x1.8618618618618p-1, 0x1.1675cababa60fp-2},
    {0x1.8181818181818p-1, 0x1.22941fbcf7966p-2},
    {0x1.7d05f417d05f4p-1, 0x1.2e8e2bae11d31p-2},
    {0x1.78a4c8178a4c8p-1, 0x1.3a64c556945eap-2},
    {0x1.745d1745d1746p-1, 0x1.4618bc21c5ec2p-2},
    {0x1.702e05c0b8170p-1, 0x1.51aad872df82ep-2},
    {0x1.6c16c16c16c17p-1, 0x1.5d1bdbf5809cap-2},
    {0x1.6816816816817p-1, 0x1.686c81e9b14adp-2},
    {0x1.642c8590b2164p-1, 0x1.739d7f6bbd007p-2},
    {0x1.6058160581606p-1, 0x1.7eaf83b82afc2p-2},
    {0x1.5c9882b931057p-1, 0x1.89a3386c1425bp-2},
    {0x1.58ed2308158edp-1, 0x1.947941c2116fbp-2},
    {0x1.5555555555555p-1, 0x1.9f323ecbf984dp-2},
    {0x1.51d07eae2f815p-1, 0x1.a9cec9a9a084ap-2},
    {0x1.4e5e0a72f0539p-1, 0x1.b44f77bcc8f64p-2},
    {0x1.4afd6a052bf5bp-1, 0x1.beb4d9da71b7ap-2},
    {0x1.47ae147ae147bp-1, 0x1.c8ff7c79a9a21p-2},
    {0x1.446f86562d9fbp-1, 0x1.d32fe7e00ebd5p-2},
    {0x1.4141414141414p-1, 0x1.dd46a04c1c4a1p-2},
    {0x1.3e22cbce4a902p-1, 0x1.e744261d68789p-2},
    {0x1.3b13b13b13b14p-1, 0x1.f128f5faf06ecp-2},
    {0x1.3813813813814p-1, 0x1.faf588f78f31dp-2},
    {0x1.3521cfb2b78c1p-1, 0x1.02552a5a5d0ffp-1},
    {0x1.323e34a2b10bfp-1, 0x1.0723e5c1cdf41p-1},
    {0x1.2f684bda12f68p-1, 0x1.0be72e4252a83p-1},
    {0x1.2c9fb4d812ca0p-1, 0x1.109f39e2d4c96p-1},
    {0x1.29e4129e4129ep-1, 0x1.154c3d2f4d5eap-1},
    {0x1.27350b8812735p-1, 0x1.19ee6b467c96fp-1},
    {0x1.2492492492492p-1, 0x1.1e85f5e7040d1p-1},
    {0x1.21fb78121fb78p-1, 0x1.23130d7bebf43p-1},
    {0x1.1f7047dc11f70p-1, 0x1.2795e1289b11bp-1},
    {0x1.1cf06ada2811dp-1, 0x1.2c0e9ed448e8cp-1},
    {0x1.1a7b9611a7b96p-1, 0x1.307d7334f10bep-1},
    {0x1.1811811811812p-1, 0x1.34e289d9ce1d2p-1},
    {0x1.15b1e5f75270dp-1, 0x1.393e0d3562a1ap-1},
    {0x1.135c81135c811p-1, 0x1.3d9026a7156fbp-1},
    {0x1.1111111111111p-1, 0x1.41d8fe84672afp-1},
    {0x1.0ecf56be69c90p-1, 0x1.4618bc21c5ec2p-1},
    {0x1.0c9714fbcda3bp-1, 0x1.4a4f85db03ebbp-1},
    {0x1.0a6810a6810a7p-1, 0x1.4e7d811b75bb0p-1},
    {0x1.0842108421084p-1, 0x1.52a2d265bc5abp-1},
    {0x1.0624dd2f1a9fcp-1, 0x1.56bf9d5b3f399p-1},
    {0x1.0410410410410p-1, 0x1.5ad404c359f2dp-1},
    {0x1.0204081020408p-1, 0x1.5ee02a9241676p-1}
};
// clang-format on
__constant__ double c_log1p[8] = {1.0 / 9, -1.0 / 8, 1.0 / 7, -1.0 / 6,
                                  1.0 / 5, -1.0 / 4, 1.0 / 3, -0.5};

// log(a) for a >= 0.5, normal: a = 2^e m, m in [1, 2); j = m's top six fraction bits,
// c_j = 1 + j/64, r = m / c_j - 1 in [0, 1/64) (one FMA with the rounded 1/c_j; the table's
// log holds -ln of that rounded inverse, so the product's rounding is all that r carries),
// log(a) = e ln2 + ln(c_j) + log1p(r), log1p by its series to r^9 (truncation < 1e-19). Exact
// at a = 1 (the sum of one term). `ltab`: the shared-window address of g_log_table's copy.
__device__ __forceinline__ double log_of_sum(double a, unsigned ltab) {
  const int hi = __double2hiint(a);
  const int e = (hi >> 20) - 1023;
  const unsigned j = static_cast<unsigned>(hi >> 14) & 63u;
  const double m = __hiloint2double((hi & 0x000fffff) | 0x3ff00000, __double2loint(a));
  const double inv = lds64(ltab + 16 * j), lc = lds64(ltab + 16 * j + 8);
  const double r = fma(m, inv, -1.0);
  double p = c_log1p[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) p = fma(p, r, c_log1p[i]);
  return fma(static_cast<double>(e), 0.69314718055994530942, lc) + fma(p * r, r, r);
}

}  // namespace
}  // namespace kinfer::gpu
