// The log-domain sum-product kernels of one bucket (paper 000 Fig. 4, paper 001 Fig. 3),
//   out(o) = ln sum_m exp( sum_f in_f(o, m) ),
// templated on the element type (double, float) and on the number of inputs that vary with
// the summed variables (NF), so the per-input loops unroll and the pointers stay in registers.
//
// `cached`: a block owns consecutive cache pages (P consecutive outputs each) and stages the
// segments of the cached inputs in shared memory, transposed to [summed index][output row] so
// the threads of a warp read consecutive words; segments are restaged only when the CPU-made
// refetch table says the page changed them. `plain`: the same arithmetic reading global memory
// through L1/L2, with the summed range optionally split over blocks (few outputs, many terms).
//
// Numerics: a running (max, sum) pair per lane, one exp per term; lanes that share an output
// merge their pairs with shuffles, splits through a second kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "gpu/cuda_check.cuh"
#include "gpu/sum_product.cuh"

namespace kinfer::gpu {

namespace {

constexpr unsigned kFull = 0xffffffffu;

struct DevDiv {
  unsigned mul, shift;
};

__device__ __forceinline__ unsigned fdiv(unsigned n, DevDiv d) {
  return (__umulhi(n, d.mul) + n) >> d.shift;
}

DevDiv dev_div(const FastDiv& f) { return {f.mul, f.shift}; }

struct DevDiv64 {
  unsigned long long mul;
  unsigned shift;
};

__device__ __forceinline__ unsigned long long fdiv64(unsigned long long n, DevDiv64 d) {
  return (__umul64hi(n, d.mul) + n) >> d.shift;
}

DevDiv64 dev_div(const FastDiv64& f) { return {f.mul, f.shift}; }

// Everything a launch needs, passed by value: it lives in the constant bank (the papers'
// policy tables in constant memory); the larger tables are behind read-only pointers.
template <class T>
struct KernelArgs {
  const T* in[kMaxSlots];
  T* out;
  T* partial;
  const int* out_lo;
  const long long* out_hi;
  const int* sum_lo;
  const long long* sum_hi;
  const long long* sum_mid;
  const int* cache_lo;
  const unsigned* refetch;
  int n_in, nip, nfp;  // n_in: slots; column n_in of the plain tables is the output
  unsigned P;
  long long n_out, n_items, n_pages;
  int Mi, splits, lanes_log2;
  long long Mh, Mh2, mh_per_split;
  DevDiv64 div_P, div_items;
  unsigned cached_mask;
  unsigned direct_mask;  // plain: slots read at mi (no offset table)
  int seg_off[kMaxVarying], seg_size[kMaxVarying], pitch[kMaxVarying], m_f[kMaxVarying];
  DevDiv div_mf[kMaxVarying];
  int pages_per_block, sum_table_offset;
  // plain, tile of 2 (tiled kernel): the varying offsets of configuration 1 (the first
  // tile_dep slots), every slot's and the output column's
  bool tile_summed;
  int tile_off1[kMaxVarying];
  long long tile_all1[kMaxSlots + 1];
};

// 2^(j/64), j = 0..63, correctly rounded: the table of the double-precision exp below.
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

// Each block copies the table to shared memory once; the exp reads it with a per-lane index.
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

// Adds one term: the smaller of (running max, x) is shifted by the larger, one exp per term.
template <class T>
__device__ __forceinline__ void lse_add(T& mx, T& acc, T x, const double* tab) {
  const T hi = fmax(mx, x), lo = fmin(mx, x);
  const T e = expneg(lo - hi, tab);
  acc = x > mx ? fma(acc, e, T(1)) : acc + e;
  mx = hi;
}

template <class T>
__device__ __forceinline__ void lse_merge(T& mx, T& acc, T mx2, T acc2, const double* tab) {
  const T hi = fmax(mx, mx2), lo = fmin(mx, mx2);
  const T e = expneg(lo - hi, tab);
  acc = mx2 > mx ? fma(acc, e, acc2) : fma(acc2, e, acc);
  mx = hi;
}

template <class T>
__device__ __forceinline__ T lse_value(T mx, T acc) {
  return mx == neg_inf(mx) ? mx : mx + log_of(acc);
}

// ---- kernel 2's arithmetic (issue 12 part 4) ----
// The first device run of kernel 2 showed the plain kernel bound by instruction issue (~90
// instructions per term and warp, of which ~18 double-precision): shared-memory addresses
// rebuilt from generic pointers at every load, the clamp and max as compare-and-select
// sequences. Kernel 2 therefore reads shared memory through 32-bit shared-window addresses,
// keeps the running max finite (-max_value: no NaN can arise), compares each term with it
// (one predicate per term, a rarely taken branch when a term exceeds it) and clamps the exp's
// argument with one integer min on its high word.

// The 32-bit shared-window address of a __shared__ object, and loads through such addresses.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ int lds32(unsigned a) {
  int v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ double lds64(unsigned a) {
  double v;
  asm volatile("ld.shared.f64 %0, [%1];" : "=d"(v) : "r"(a));
  return v;
}

__device__ __forceinline__ double lowest(double) { return -1.7976931348623157e308; }
__device__ __forceinline__ float lowest(float) { return -3.402823466e38f; }

// ---- the exp of the kernels' inner loops (kernels 2 and 3, issue 12 part 4) ----
// acc + exp(-y) for y >= 0 (+inf included). A non-negative double's high word, read as a signed
// int, grows with its value, so one integer min clamps y to 708 (+inf too; the low word is
// kept, which moves the clamped value by less than 2^-11: the result stays normal). Table
// method: y = -(64 k + j) ln2/64 + r, exp = 2^(k >> 6) 2^(j/64) p(r), p of degree 5, the last
// multiply fused into the sum. The low part of ln2/64 is left out: it moves r by at most
// y 3.3e-17, i.e. a term's error by at most y e^-y 3.3e-17 of the largest term (< 1.3e-17);
// host check over 2e7 arguments: within 3.4 ulp for y <= 5, absolute error <= 2.4e-16.
// Kernel 3 cut its integer instructions (counted in the machine code):
// the table entry j holds 2^(j/64) with (j << 14) subtracted from its high word, so the scale
// 2^(k >> 6) is one shift-add of the whole k: hi + (k << 14) = hi(2^(j/64)) + ((k >> 6) << 20),
// since k = 64 (k >> 6) + j (two's complement, k >= -65376: no overflow). The polynomial's
// constants that are no double immediates come from the constant bank (an operand of the DFMA,
// not a register pair rebuilt every chunk).
__constant__ double c_exp3[5] = {-92.332482616893658, -0.010830424696249145, 1.0 / 120.0,
                                 1.0 / 24.0, 1.0 / 6.0};

// Kernel 3's table: 2^(j/64) with j << 14 taken off its high word (c_exp2_64's entries so
// changed, precomputed), in global memory: a block's copy to shared memory is coalesced loads,
// where reading the constant bank with per-thread indices serializes a warp's 32 addresses
// (kernel 9's blocks waited at the barrier after that copy for 12% of their stall samples).
__device__ double g_exp3[64] = {
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

// Each block copies kernel 3's table to shared memory once.
__device__ __forceinline__ void load_exp_table3(double* s) {
  for (int i = threadIdx.x; i < 64; i += blockDim.x) s[i] = __ldg(g_exp3 + i);
}

// acc + exp(-y), y >= 0 (`tab`: the shared-window address of kernel 3's table).
__device__ __forceinline__ double exp_neg_add3(double y, unsigned tab, double acc) {
  y = __hiloint2double(min(__double2hiint(y), 0x40862000), __double2loint(y));
  const double shifter = 6755399441055744.0;
  const double t = fma(y, c_exp3[0], shifter);
  const double r = fma(t - shifter, c_exp3[1], -y);
  double p = c_exp3[2];
  p = fma(p, r, c_exp3[3]);
  p = fma(p, r, c_exp3[4]);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  const int k = __double2loint(t);
  const double s = lds64(tab + (static_cast<unsigned>(k & 63) << 3));
  const double scale = __hiloint2double(__double2hiint(s) + (k << 14), __double2loint(s));
  return fma(p, scale, acc);
}

__device__ __forceinline__ float exp_neg_add3(float y, unsigned, float acc) {
  return acc + __expf(-fminf(y, 100.0f));
}

// The running pair of kernel 2: mx starts at the lowest finite value (never -inf, so mx - x is
// never NaN), acc >= 1 once a finite term was added (the largest contributes exp(0) = 1), so
// acc < 0.5 means every term was -inf.
template <class T>
__device__ __forceinline__ T lse_value2(T mx, T acc) {
  return acc < T(0.5) ? neg_inf(mx) : mx + log_of(acc);
}

template <class T>
__device__ __forceinline__ void lse_merge2(T& mx, T& acc, T mx2, T acc2, unsigned tab) {
  const T e = exp_neg_add3(fabs(mx - mx2), tab, T(0));
  acc = mx2 > mx ? fma(acc, e, acc2) : fma(acc2, e, acc);
  mx = fmax(mx, mx2);
}

// Adds C terms: each is compared with the running max (a predicate), and only when one exceeds
// it (rare once the largest terms were seen) the max moves and the sum is rescaled; then one
// exp and one FMA per term.
template <int C, class T>
__device__ __forceinline__ void lse_chunk(T& mx, T& acc, const T (&x)[C], unsigned tab) {
  bool up = x[0] > mx;
#pragma unroll
  for (int c = 1; c < C; ++c) up |= x[c] > mx;
  if (up) {
    T cm = x[0];
#pragma unroll
    for (int c = 1; c < C; ++c) cm = fmax(cm, x[c]);
    acc *= exp_neg_add3(cm - mx, tab, T(0));
    mx = cm;
  }
#pragma unroll
  for (int c = 0; c < C; ++c) acc = exp_neg_add3(mx - x[c], tab, acc);
}

template <class T>
__device__ __forceinline__ void lanes_merge2(T& mx, T& acc, int G, unsigned tab) {
  for (int d = G >> 1; d > 0; d >>= 1) {
    const T mx2 = __shfl_xor_sync(kFull, mx, d);
    const T acc2 = __shfl_xor_sync(kFull, acc, d);
    lse_merge2(mx, acc, mx2, acc2, tab);
  }
}

// Kernel 2's pair in the form the split combine (and lse_value) expect: (-inf, 0) when empty.
template <class T>
__device__ __forceinline__ void canonical2(T& mx, T& acc) {
  if (acc < T(0.5)) {
    mx = neg_inf(mx);
    acc = 0;
  }
}

// Lanes 2^log2 apart... merge within groups of G consecutive lanes (butterfly).
template <class T>
__device__ __forceinline__ void lanes_merge(T& mx, T& acc, int G, const double* tab) {
  for (int d = G >> 1; d > 0; d >>= 1) {
    const T mx2 = __shfl_xor_sync(kFull, mx, d);
    const T acc2 = __shfl_xor_sync(kFull, acc, d);
    lse_merge(mx, acc, mx2, acc2, tab);
  }
}

// One row of an int table with NF entries, as 16-byte loads (rows are padded to 4 or 8).
template <int NF>
__device__ __forceinline__ void load_row(const int* row, int (&v)[NF > 0 ? NF : 1]) {
#pragma unroll
  for (int j = 0; j < NF; j += 4) {
    const int4 a = *reinterpret_cast<const int4*>(row + j);
    v[j] = a.x;
    if (j + 1 < NF) v[j + 1] = a.y;
    if (j + 2 < NF) v[j + 2] = a.z;
    if (j + 3 < NF) v[j + 3] = a.w;
  }
}

template <class T>
__device__ __forceinline__ T const_part(const KernelArgs<T>& a, int nf, const int* lo,
                                        const long long* hi) {
  T c = 0;
  for (int s = nf; s < a.n_in; ++s) c += __ldg(a.in[s] + hi[s] + lo[s]);
  return c;
}

// ---- plain: global loads through L1/L2 (kernel 3, issue 12 part 4) ----
// One item = (output, split), 2^lanes lanes per item reading interleaved summed steps; per lane
// the steps go in chunks of four terms (lse_chunk). GC: lanes per item known at compile time (1:
// kernel 7, one lane and 4 blocks per SM for LaunchPlan::lean (DeviceLimits::lean); 32,
// the large sums: the four terms' addresses then differ by immediates), or 0 (a run-time G). The
// inner-block offset table sits in shared memory column by column (a 4-byte load per input and
// term, consecutive lanes on consecutive words), and inputs holding every inner summed variable
// (direct_mask) read at mi itself, without it. Kernels 1 and 2 (the versions before) are gone.
template <int NF, int R = 1, int GC = 0>
constexpr int plain_min_blocks() {
  // a tile's second chain: registers; the one-lane kernel (GC 1, kernel 7): 64 registers
  return NF > 8 ? 1 : R > 1 ? 2 : GC == 1 && NF <= kLeanMaxVarying ? 4 : NF <= 4 ? 3 : 2;
}

// Kernel 3 is kernel 2 (the chunks of four, direct inputs, column-wise offset table) with the
// integer work per term cut (counted in the machine code): (1) each input's
// row pointer is made opaque to the compiler, so a table-read address is one IMAD.WIDE (index x 8
// + pointer) instead of a 64-bit add and shift from the element offset; (2) the lane's
// offset-column address is one register, made opaque so it is kept rather than rebuilt from the
// shared window every chunk, advanced by 16 G bytes per chunk, with the columns a uniform stride
// apart; (3) kernel 3's exp (exp_neg_add3): the scale in one shift-add, constants from the
// constant bank.
__device__ __forceinline__ unsigned opaque(unsigned v) {
  asm("" : "+r"(v));
  return v;
}
template <class T>
__device__ __forceinline__ const T* opaque(const T* p) {
  asm("" : "+l"(p));
  return p;
}

// One row (mh) of the lane's summed steps. MODE 1: every input direct; 2: none; 0: direct_mask.
template <class T, int NF, int GC, int MODE>
__device__ __forceinline__ void plain3_row(const T* const (&rp)[NF], T c, int g, int G, int Mi,
                                           unsigned col0, unsigned colstride, unsigned dmask, T& mx,
                                           T& acc, unsigned tab_a) {
  auto direct = [&](int f) { return MODE == 1 || (MODE == 0 && (dmask >> f & 1)); };
  int mi = g;
  unsigned ad = col0;
  for (; mi + 3 * G < Mi; mi += 4 * G, ad += 16 * G) {
    T x[4] = {c, c, c, c};
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      if (direct(f)) {
        const T* p = rp[f] + mi;
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] += __ldg(p + k * G);
      } else {
        const unsigned af = ad + f * colstride;
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] += __ldg(rp[f] + lds32(af + 4 * k * G));
      }
    }
    lse_chunk<4>(mx, acc, x, tab_a);
  }
  for (; mi < Mi; mi += G, ad += 4 * G) {
    T x[1] = {c};
#pragma unroll
    for (int f = 0; f < NF; ++f)
      x[0] += __ldg(rp[f] + (direct(f) ? mi : lds32(ad + f * colstride)));
    lse_chunk<1>(mx, acc, x, tab_a);
  }
}

// One row of the tiled kernel: the lane's summed steps for two configurations of a binary tile
// variable (two outputs, or two summed configurations of one output). The first TD varying
// slots hold the tile variable and load a second value toff[f] further; the others are loaded
// once and added to both, and the offset column is read once for both.
template <class T, int NF, int GC, int MODE, int TD>
__device__ __forceinline__ void plain3_row2(const T* const (&rp)[NF], T c0, T c1, int g, int G,
                                            int Mi, unsigned col0, unsigned colstride,
                                            unsigned dmask, const int* toff, T (&mx)[2],
                                            T (&acc)[2], unsigned tab_a) {
  auto direct = [&](int f) { return MODE == 1 || (MODE == 0 && (dmask >> f & 1)); };
  int mi = g;
  unsigned ad = col0;
  for (; mi + 3 * G < Mi; mi += 4 * G, ad += 16 * G) {
    T x[4] = {c0, c0, c0, c0}, y[4] = {c1, c1, c1, c1};
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      if (direct(f)) {
        const T* p = rp[f] + mi;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const T v = __ldg(p + k * G);
          x[k] += v;
          y[k] += f < TD ? __ldg(p + k * G + toff[f]) : v;
        }
      } else {
        const unsigned af = ad + f * colstride;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const T* p = rp[f] + lds32(af + 4 * k * G);
          const T v = __ldg(p);
          x[k] += v;
          y[k] += f < TD ? __ldg(p + toff[f]) : v;
        }
      }
    }
    lse_chunk<4>(mx[0], acc[0], x, tab_a);
    lse_chunk<4>(mx[1], acc[1], y, tab_a);
  }
  for (; mi < Mi; mi += G, ad += 4 * G) {
    T x[1] = {c0}, y[1] = {c1};
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      const T* p = rp[f] + (direct(f) ? mi : lds32(ad + f * colstride));
      const T v = __ldg(p);
      x[0] += v;
      y[0] += f < TD ? __ldg(p + toff[f]) : v;
    }
    lse_chunk<1>(mx[0], acc[0], x, tab_a);
    lse_chunk<1>(mx[1], acc[1], y, tab_a);
  }
}

// The inner summed block's offset table in shared memory, column by column ([f][Mi]: a 4-byte
// load per input and term, consecutive lanes on consecutive words); the columns of direct
// inputs (read at mi itself) are left unwritten.
template <class T, int NF>
__device__ __forceinline__ void fill_sum_columns(const KernelArgs<T>& a, int* sumtab) {
#pragma unroll
  for (int f = 0; f < NF; ++f)
    if (!(a.direct_mask >> f & 1))
      for (int i = threadIdx.x; i < a.Mi; i += blockDim.x)
        sumtab[f * a.Mi + i] = __ldg(a.sum_lo + i * a.nfp + f);
}

// TD: 0 untiled; 1 or 2: a tile of two configurations, TD varying slots holding its variable.
// OUTS (kernel 8, one lane only): outputs per thread, a grid-stride apart.
template <class T, int NF, int GC, int TD, int OUTS = 1>
__global__ void __launch_bounds__(256, plain_min_blocks<NF, TD ? 2 : 1, GC>())
    plain3_kernel(const __grid_constant__ KernelArgs<T> a) {
  static_assert(OUTS == 1 || (GC == 1 && TD == 0), "several outputs per thread: one lane, untiled");
  constexpr int R = TD ? 2 : 1;
  static_assert(TD <= NF, "the tile's slots are varying slots");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double tab[64];
  load_exp_table3(tab);
  int* sumtab = reinterpret_cast<int*>(smem);
  const int Mi = a.Mi;
  fill_sum_columns<T, NF>(a, sumtab);
  __syncthreads();
  const unsigned tab_a = opaque(smem_addr(tab));
  const int G = GC ? GC : 1 << a.lanes_log2;
  const unsigned long long stride =
      OUTS > 1 ? static_cast<unsigned long long>(gridDim.x) * blockDim.x : 0;
#pragma unroll
  for (int u = 0; u < OUTS; ++u) {
    const unsigned long long gid =
        static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x + u * stride;
    const long long item = static_cast<long long>(gid >> a.lanes_log2);
    const int g = static_cast<int>(gid & (G - 1));
    const bool active = item < a.n_items * a.splits;
    T mx[R], acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      mx[r] = lowest(T(0));
      acc[r] = 0;
    }
    long long obase = 0, sp = 0;
    if (active) {
      sp = a.splits == 1 ? 0 : static_cast<long long>(fdiv64(item, a.div_items));
      const long long o = item - sp * a.n_items;
      const long long page = static_cast<long long>(fdiv64(o, a.div_P));
      const long long ol = o - page * a.P;
      const int* lo = a.out_lo + ol * a.nip;
      const long long* hi = a.out_hi + page * a.nip;
      obase = hi[a.n_in] + lo[a.n_in];
      T c = 0, c1 = 0;
      for (int s = NF; s < a.n_in; ++s) {
        const T* p = a.in[s] + hi[s] + lo[s];
        c += __ldg(p);
        if constexpr (R == 2) c1 += __ldg(p + a.tile_all1[s]);
      }
      const long long mh0 = sp * a.mh_per_split;
      const long long mh1 = min(a.Mh, mh0 + a.mh_per_split);
      if constexpr (NF == 0) {
        // nothing varies with m: the lane's terms are all c
        const long long per = (Mi - g + G - 1) / G;
        const T cnt = static_cast<T>(per * (mh1 - mh0));
        if (cnt > 0 && c != neg_inf(c)) {
          mx[0] = c;
          acc[0] = cnt;
        }
      } else {
        const T* q[NF];
#pragma unroll
        for (int f = 0; f < NF; ++f) q[f] = a.in[f] + hi[f] + lo[f];
        const unsigned col0 = opaque(smem_addr(sumtab + g));  // column 0, the lane's first entry
        const unsigned colstride = 4u * static_cast<unsigned>(Mi);
        // mh = mt * Mh2 + mm: one division per thread, then a carry per row
        long long mm = mh0 % a.Mh2;
        const long long* top = a.sum_hi + (mh0 / a.Mh2) * a.nfp;
        const long long* mid = a.sum_mid + mm * a.nfp;
        for (long long mh = mh0; mh < mh1; ++mh) {
          const T* rp[NF];
#pragma unroll
          for (int f = 0; f < NF; ++f) rp[f] = opaque(q[f] + (__ldg(top + f) + __ldg(mid + f)));
          mid += a.nfp;
          if (++mm == a.Mh2) {
            mm = 0;
            mid = a.sum_mid;
            top += a.nfp;
          }
          const T* const(&rpc)[NF] = rp;
          // every input direct, none, or a mix (a uniform branch per row, not per term: with the
          // mix the compiler predicates both paths of each input, so the pure cases get their own)
          if constexpr (R == 1) {
            if (a.direct_mask == (1u << NF) - 1)
              plain3_row<T, NF, GC, 1>(rpc, c, g, G, Mi, col0, colstride, 0, mx[0], acc[0], tab_a);
            else if (a.direct_mask == 0)
              plain3_row<T, NF, GC, 2>(rpc, c, g, G, Mi, col0, colstride, 0, mx[0], acc[0], tab_a);
            else
              plain3_row<T, NF, GC, 0>(rpc, c, g, G, Mi, col0, colstride, a.direct_mask, mx[0],
                                       acc[0], tab_a);
          } else {
            if (a.direct_mask == (1u << NF) - 1)
              plain3_row2<T, NF, GC, 1, TD>(rpc, c, c1, g, G, Mi, col0, colstride, 0, a.tile_off1, mx,
                                            acc, tab_a);
            else if (a.direct_mask == 0)
              plain3_row2<T, NF, GC, 2, TD>(rpc, c, c1, g, G, Mi, col0, colstride, 0, a.tile_off1, mx,
                                            acc, tab_a);
            else
              plain3_row2<T, NF, GC, 0, TD>(rpc, c, c1, g, G, Mi, col0, colstride, a.direct_mask,
                                            a.tile_off1, mx, acc, tab_a);
          }
        }
      }
    }
    // a summed tile is one output: its two configurations' pairs merge first
    const bool summed = R == 2 && a.tile_summed;
    if (summed) lse_merge2(mx[0], acc[0], mx[R - 1], acc[R - 1], tab_a);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r > 0 && summed) break;
      lanes_merge2(mx[r], acc[r], G, tab_a);
      canonical2(mx[r], acc[r]);
      if (active && g == 0) {
        const long long ob = obase + (r > 0 ? a.tile_all1[a.n_in] : 0);
        if (a.splits == 1) {
          a.out[ob] = lse_value(mx[r], acc[r]);
        } else {
          a.partial[2 * (sp * a.n_out + ob)] = mx[r];
          a.partial[2 * (sp * a.n_out + ob) + 1] = acc[r];
        }
      }
    }
  }
}

// ---- kernel 9: the one-lane kernel of LaunchPlan::lean_chunks (issue 12 part 4) ----
// Kernel 7/8's one-lane path spent ~410 instructions per output on pedigree50's largest
// buckets (2^30.4 outputs, 3 terms; ncu's source counters), 69 of
// them double-precision: a runtime loop of single terms each with the running max's rescale
// (an exp), fmax's NaN handling (6-8 instructions each), 64-bit arithmetic on page-local
// indices, one load per table entry, the outer row's loop and a 64-bit division per output, and
// CUDA's log (~60). Kernel 9, a kernel of its own for plans of one lane (M <= 16, Mh = 1, one
// split) with 1-3 varying inputs and output-table rows of 4 or 8 columns: the page-local part in
// 32 bits, each output-table row in one or two 16-byte loads, the terms in chunks of four (the
// last predicated; every load of a chunk before its arithmetic; the first chunk's max is the
// running max, no rescale), the max as a compare and select (no NaN can arise: terms are finite
// or -inf, the running max starts finite), and the log of the sum (>= 1 when any term is
// finite) by a table of 64 and a polynomial of degree 9.

// Kernel 9's log table in global memory, as g_exp3 (a coalesced copy to shared memory):
// g_log9[j] = {inv_j, -ln inv_j} (log_sum9 below).
__device__ double2 g_log9[64] = {
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
__constant__ double c_log1p[8] = {1.0 / 9, -1.0 / 8, 1.0 / 7, -1.0 / 6,
                                  1.0 / 5, -1.0 / 4, 1.0 / 3, -0.5};

// log(a) for a >= 0.5, normal: a = 2^e m, m in [1, 2); j = m's top six fraction bits,
// c_j = 1 + j/64, r = m / c_j - 1 in [0, 1/64) (one FMA with the rounded 1/c_j; the table's
// log holds -ln of that rounded inverse, so the product's rounding is all that r carries),
// log(a) = e ln2 + ln(c_j) + log1p(r), log1p by its series to r^9 (truncation < 1e-19). Exact
// at a = 1 (the sum of one term). `ltab`: the shared-window address of g_log9's copy.
__device__ __forceinline__ double log_sum9(double a, unsigned ltab) {
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

__device__ __forceinline__ double dmax9(double x, double y) { return x > y ? x : y; }

// The log-sum-exp of MI terms known at compile time (kernel 9): the knockout round r matches
// x[i] with x[i + 2^r] (i a multiple of 2^(r+1)), the winner kept in x[i], the loser in lo[]
// (x's values in another order: a term is finite or -inf); every index known once the loops
// unroll (registers). A loser of -inf adds exp(-708) (the exp's clamp) to 1: nothing; when the
// winner is -inf every term is, and the select drops the NaN of -inf - -inf.
template <int MI>
__device__ __forceinline__ double lse_knockout9(double (&x)[MI], unsigned tab_a, unsigned ltab_a) {
  double lo[MI - 1];
  int n_lo = 0;
#pragma unroll
  for (int r = 0; (1 << r) < MI; ++r) {
#pragma unroll
    for (int i = 0; i + (1 << r) < MI; i += 2 << r) {
      const double y = x[i + (1 << r)];
      lo[n_lo++] = x[i] > y ? y : x[i];
      x[i] = dmax9(x[i], y);
    }
  }
  const double mx = x[0];
  double acc = 1.0;
#pragma unroll
  for (int k = 0; k < MI - 1; ++k) acc = exp_neg_add3(mx - lo[k], tab_a, acc);
  return mx == -INFINITY ? -INFINITY : mx + log_sum9(acc, ltab_a);
}

// ALL_DIRECT: every varying input holds the summed variables last (its terms consecutive: the
// common case, one summed variable), known at compile time so a term's load is an immediate
// offset from a pointer advanced per chunk; else the direct mask decides per input.
// MI: the number of terms known at compile time, one of kLeanFixedTerms (0: a.Mi at run time,
// in chunks of four). Then the terms are loaded at once, the max found by a knockout whose
// losers alone take an exp (the winner's exp(0) = 1 is the sum's start), with no loop, no
// predicated empty slots and no running rescale: at M = 2 one exp and the log per output where
// the chunk issued the loads and adds of four slots and two exps.
// TD: 0, or a tile of two outputs (an output variable of two values dropped from the items):
// the first TD varying slots hold its variable and load the second output's terms tile_off1[f]
// further, the others are loaded once for both (terms compiled in, every input direct, one
// output a thread).
template <int NF, int NIP, int OUTS, bool ALL_DIRECT, int MI = 0, int TD = 0>
__global__ void __launch_bounds__(256, 4)
    lean9_kernel(const __grid_constant__ KernelArgs<double> a) {
  static_assert(NF >= 1 && NF < NIP && (NIP == 4 || NIP == 8),
                "1-3 varying inputs, rows of 4 or 8");
  static_assert(MI == 0 || (MI >= 2 && MI <= 8), "2-8 terms compiled in");
  static_assert(TD == 0 || (MI > 0 && ALL_DIRECT && OUTS == 1 && TD < NF),
                "a tile: terms compiled in, direct inputs, one output a thread, a shared input");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double tab[64];
  __shared__ double2 ltab[64];
  for (int i = threadIdx.x; i < 64; i += blockDim.x) {  // load_exp_table3's copy, fused
    tab[i] = __ldg(g_exp3 + i);
    ltab[i] = __ldg(g_log9 + i);
  }
  int* sumtab = reinterpret_cast<int*>(smem);
  const int Mi = a.Mi;
  if constexpr (!ALL_DIRECT) fill_sum_columns<double, NF>(a, sumtab);
  __syncthreads();
  const unsigned tab_a = opaque(smem_addr(tab)), ltab_a = smem_addr(ltab);
  const unsigned col0 = smem_addr(sumtab), colstride = 4u * static_cast<unsigned>(Mi);
  const unsigned dmask = a.direct_mask;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long item = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
  for (int u = 0; u < OUTS; ++u, item += stride) {
    if (item >= static_cast<unsigned long long>(a.n_items)) break;
    // pages hold at most 2^31 outputs and number at most 2^20 (the planner): 32-bit parts
    const unsigned long long page = fdiv64(item, a.div_P);
    const unsigned ol = static_cast<unsigned>(item) - static_cast<unsigned>(page) * a.P;
    int4 lv[NIP / 4];
    longlong2 hv[NIP / 2];
    const int4* lr = reinterpret_cast<const int4*>(a.out_lo) + ol * (NIP / 4);
    const longlong2* hr =
        reinterpret_cast<const longlong2*>(a.out_hi) + static_cast<unsigned>(page) * (NIP / 2);
#pragma unroll
    for (int v = 0; v < NIP / 4; ++v) lv[v] = __ldg(lr + v);
#pragma unroll
    for (int v = 0; v < NIP / 2; ++v) hv[v] = __ldg(hr + v);
    // column s's offset (s known at compile time once the loops unroll: registers, no stack)
    auto off = [&](int s) -> long long {
      const int4 l = lv[s >> 2];
      const longlong2 h = hv[s >> 1];
      const int lo = (s & 3) == 0 ? l.x : (s & 3) == 1 ? l.y : (s & 3) == 2 ? l.z : l.w;
      return ((s & 1) ? h.y : h.x) + lo;
    };
    // the constant inputs (slots NF .. n_in - 1) and the output (column n_in)
    double c = 0;
    long long ob = 0;
#pragma unroll
    for (int s = NF; s < NIP; ++s) {
      const long long o = off(s);
      if (s < a.n_in) c += __ldg(a.in[s] + o);
      ob = s == a.n_in ? o : ob;  // a select: a branch let the compiler index the rows at run time
    }
    const double* q[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) q[f] = a.in[f] + off(f);
    if constexpr (MI > 0 && TD > 0) {
      // the tile's second output: its constant part, its place, its terms
      double c1 = 0;
#pragma unroll
      for (int s = NF; s < NIP; ++s)
        if (s < a.n_in) c1 += __ldg(a.in[s] + off(s) + a.tile_all1[s]);
      const long long ob1 = ob + a.tile_all1[a.n_in];
      double x[MI], y[MI];
#pragma unroll
      for (int k = 0; k < MI; ++k) {
        double v = c, w = c1;
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          const double t = __ldg(q[f] + k);
          v += t;
          w += f < TD ? __ldg(q[f] + a.tile_off1[f] + k) : t;
        }
        x[k] = v;
        y[k] = w;
      }
      a.out[ob] = lse_knockout9<MI>(x, tab_a, ltab_a);
      a.out[ob1] = lse_knockout9<MI>(y, tab_a, ltab_a);
      continue;
    } else if constexpr (MI > 0) {
      double x[MI];
#pragma unroll
      for (int k = 0; k < MI; ++k) {
        double v = c;
#pragma unroll
        for (int f = 0; f < NF; ++f)
          v += __ldg(ALL_DIRECT || (dmask >> f & 1)
                         ? q[f] + k
                         : q[f] + lds32(col0 + f * colstride + 4 * k));
        x[k] = v;
      }
      a.out[ob] = lse_knockout9<MI>(x, tab_a, ltab_a);
      continue;
    }
    double mx = lowest(0.0), acc = 0;
    const double* p[NF];  // direct inputs: the chunk's first term
#pragma unroll
    for (int f = 0; f < NF; ++f) p[f] = q[f];
    for (int m0 = 0; m0 < Mi; m0 += 4) {
      double x[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const bool valid = m0 + k < Mi;
        double v = c;
#pragma unroll
        for (int f = 0; f < NF; ++f)
          if (valid)
            v += __ldg(ALL_DIRECT || (dmask >> f & 1)
                           ? p[f] + k
                           : q[f] + lds32(col0 + f * colstride + 4 * (m0 + k)));
        x[k] = valid ? v : lowest(0.0);
      }
#pragma unroll
      for (int f = 0; f < NF; ++f) p[f] += 4;
      const double cm = dmax9(dmax9(x[0], x[1]), dmax9(x[2], x[3]));
      if (m0 == 0) {
        mx = dmax9(mx, cm);
      } else if (cm > mx) {
        acc *= exp_neg_add3(cm - mx, tab_a, 0.0);
        mx = cm;
      }
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (m0 + k < Mi) acc = exp_neg_add3(mx - x[k], tab_a, acc);
    }
    // acc >= 1 once a finite term was added; below 0.5 every term was -inf
    a.out[ob] = acc < 0.5 ? -INFINITY : Mi == 1 ? mx : mx + log_sum9(acc, ltab_a);
  }
}

// One warp per output merges the splits' partial pairs.
template <class T>
__global__ void combine_kernel(const T* __restrict__ partial, T* __restrict__ out, long long n_out,
                               int splits) {
  __shared__ double tab[64];
  load_exp_table(tab);
  __syncthreads();
  const long long warp = static_cast<long long>(
      (static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  const int lane = threadIdx.x & 31;
  if (warp >= n_out) return;  // whole warps leave together
  T mx = neg_inf(T(0)), acc = 0;
  for (int s = lane; s < splits; s += 32) {
    const long long i = 2 * (static_cast<long long>(s) * n_out + warp);
    lse_merge(mx, acc, partial[i], partial[i + 1], tab);
  }
  lanes_merge(mx, acc, 32, tab);
  if (lane == 0) out[warp] = lse_value(mx, acc);
}

// ---- cached: the software-managed cache ----
// Terms in chunks of four (lse_chunk, kernel 3's exp: device call 4, 1.00-1.10x over kernel 2's).
template <class T, int NF, bool ALL_CACHED>
__global__ void __launch_bounds__(256, 4) cached_kernel(const __grid_constant__ KernelArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ double tab[64];
  load_exp_table3(tab);
  T* cache = reinterpret_cast<T*>(smem);
  int* sumtab = reinterpret_cast<int*>(smem + a.sum_table_offset);
  const int rows = a.Mi * a.nfp;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) sumtab[i] = __ldg(a.sum_lo + i);
  // (both made visible by the barrier after the first page's staging: every block stages first)
  const unsigned tab_a = opaque(smem_addr(tab));
  const int G = 1 << a.lanes_log2;
  const int g = threadIdx.x & (G - 1);
  const int item0 = threadIdx.x >> a.lanes_log2;
  const int per_pass = blockDim.x >> a.lanes_log2;
  const long long first = static_cast<long long>(blockIdx.x) * a.pages_per_block;
  const long long last = min(a.n_pages, first + a.pages_per_block);
  for (long long page = first; page < last; ++page) {
    const long long* hi = a.out_hi + page * a.nip;
    const unsigned bits = page == first ? a.cached_mask : __ldg(a.refetch + page);
    if (bits) {
      __syncthreads();  // everyone is done with the segments about to be overwritten
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        if (!(bits >> f & 1)) continue;
        const T* src = a.in[f] + hi[f];
        T* dst = cache + a.seg_off[f];
        const int mf = a.m_f[f], pitch = a.pitch[f], n = a.seg_size[f];
        const DevDiv d = a.div_mf[f];
        // coalesced global reads; transposed so the compute loop's warp reads are contiguous
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
          const int lo = fdiv(e, d);
          dst[(e - lo * mf) * pitch + lo] = __ldg(src + e);
        }
      }
      __syncthreads();
    }
    for (int base = 0; base < static_cast<int>(a.P); base += per_pass) {
      const int ol = base + item0;
      const bool active = ol < static_cast<int>(a.P);
      T mx = lowest(T(0)), acc = 0;
      if (active) {
        const int* lo = a.out_lo + static_cast<long long>(ol) * a.nip;
        const int* clo = a.cache_lo + static_cast<long long>(ol) * a.nfp;
        const T c = const_part(a, NF, lo, hi);
        const T* q[NF];
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          if (ALL_CACHED || (a.cached_mask >> f & 1))
            q[f] = cache + a.seg_off[f] + clo[f];
          else
            q[f] = a.in[f] + hi[f] + clo[f];
        }
        auto term = [&](int m) {
          int idx[NF];
          load_row<NF>(sumtab + m * a.nfp, idx);
          T x = c;
#pragma unroll
          for (int f = 0; f < NF; ++f) x += q[f][idx[f]];
          return x;
        };
        int m = g;
        for (; m + 3 * G < a.Mi; m += 4 * G) {
          const T x[4] = {term(m), term(m + G), term(m + 2 * G), term(m + 3 * G)};
          lse_chunk<4>(mx, acc, x, tab_a);
        }
        for (; m < a.Mi; m += G) {
          const T x[1] = {term(m)};
          lse_chunk<1>(mx, acc, x, tab_a);
        }
      }
      lanes_merge2(mx, acc, G, tab_a);
      canonical2(mx, acc);
      if (active && g == 0) a.out[page * a.P + ol] = lse_value(mx, acc);
    }
  }
}

// A kernel's opt-in to shared memory is an attribute per device, and a __device__ variable has
// an address per device: what is looked up once is looked up once per device (with once per
// process, every launch needing more than 48 KiB failed on the second GPU, issue 13).
constexpr int kMaxDevices = 64;
using DeviceFlags = std::array<std::once_flag, kMaxDevices>;

int current_device() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= kMaxDevices) throw std::runtime_error("more CUDA devices than kinfer takes");
  return dev;
}

int max_dynamic_shared() {
  static std::array<int, kMaxDevices> value{};
  static DeviceFlags flags;
  const int dev = current_device();
  std::call_once(flags[dev], [&] {
    int max_optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    value[dev] = max_optin - kStaticShared;
  });
  return value[dev];
}

template <class K>
void allow_shared(K kernel, int bytes, DeviceFlags& flags) {
  // opt in to all the dynamic shared memory the device allows next to the static exp table
  const int dev = current_device();
  std::call_once(flags[dev], [&] {
    int max_optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    max_optin - static_cast<int>(attr.sharedSizeBytes)));
  });
  if (bytes > max_dynamic_shared())
    throw std::invalid_argument("policy needs more shared memory than a block gets");
}

// load_only: the kernel loaded (and its shared memory allowed) but not launched (load_kernels).
template <class T, int NF, int GC, int TD = 0, int OUTS = 1>
void launch_plain3(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream,
                   bool load_only) {
  static DeviceFlags flags;
  allow_shared(plain3_kernel<T, NF, GC, TD, OUTS>, p.shared_bytes, flags);
  if (load_only) return;
  plain3_kernel<T, NF, GC, TD, OUTS>
      <<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, stream>>>(a);
}

template <int NF, int NIP, int OUTS, bool ALL_DIRECT, int MI = 0, int TD = 0>
void launch_lean9_(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                   bool load_only) {
  static DeviceFlags flags;
  allow_shared(lean9_kernel<NF, NIP, OUTS, ALL_DIRECT, MI, TD>, p.shared_bytes, flags);
  if (load_only) return;
  lean9_kernel<NF, NIP, OUTS, ALL_DIRECT, MI, TD>
      <<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, stream>>>(a);
}

// Kernel 9 with a tile of two outputs (LaunchPlan::lean9_tile: terms compiled in, direct inputs).
template <int NF, int NIP, int TD>
void launch_lean9_tiled(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                        bool load_only) {
  switch (p.Mi) {
    case 2:
      return launch_lean9_<NF, NIP, 1, true, 2, TD>(p, a, stream, load_only);
    case 3:
      return launch_lean9_<NF, NIP, 1, true, 3, TD>(p, a, stream, load_only);
    case 4:
      return launch_lean9_<NF, NIP, 1, true, 4, TD>(p, a, stream, load_only);
    case 6:
      return launch_lean9_<NF, NIP, 1, true, 6, TD>(p, a, stream, load_only);
    case 8:
      return launch_lean9_<NF, NIP, 1, true, 8, TD>(p, a, stream, load_only);
  }
  throw std::invalid_argument("kernel 9's tile: no case for this many terms");
}

template <int NF, int NIP, int OUTS, bool ALL_DIRECT>
void launch_lean9_terms(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                        bool load_only) {
  // a case for each of kLeanFixedTerms (2 or 3 terms: one summed variable, held last by every
  // input that varies with it: direct)
  if constexpr (ALL_DIRECT) {
    if (p.lean_fixed_terms && p.Mi == 2)
      return launch_lean9_<NF, NIP, OUTS, true, 2>(p, a, stream, load_only);
    if (p.lean_fixed_terms && p.Mi == 3)
      return launch_lean9_<NF, NIP, OUTS, true, 3>(p, a, stream, load_only);
  }
  if (p.lean_fixed_terms && p.Mi == 4)
    return launch_lean9_<NF, NIP, OUTS, ALL_DIRECT, 4>(p, a, stream, load_only);
  if (p.lean_fixed_terms && p.Mi == 6)
    return launch_lean9_<NF, NIP, OUTS, ALL_DIRECT, 6>(p, a, stream, load_only);
  if (p.lean_fixed_terms && p.Mi == 8)
    return launch_lean9_<NF, NIP, OUTS, ALL_DIRECT, 8>(p, a, stream, load_only);
  launch_lean9_<NF, NIP, OUTS, ALL_DIRECT>(p, a, stream, load_only);
}

template <int NF, int NIP, int OUTS>
void launch_lean9(const LaunchPlan& p, const KernelArgs<double>& a, cudaStream_t stream,
                  bool load_only) {
  if (p.direct_mask == (1u << NF) - 1)
    launch_lean9_terms<NF, NIP, OUTS, true>(p, a, stream, load_only);
  else
    launch_lean9_terms<NF, NIP, OUTS, false>(p, a, stream, load_only);
}

template <class T, int NF, bool ALL>
void launch_cached(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream,
                   bool load_only) {
  static DeviceFlags flags;
  allow_shared(cached_kernel<T, NF, ALL>, p.shared_bytes, flags);
  if (load_only) return;
  cached_kernel<T, NF, ALL>
      <<<static_cast<unsigned>(p.blocks), p.threads, p.shared_bytes, stream>>>(a);
}

// The plain kernel (TD: the tile's slots, 0 untiled) with its lanes per output known at compile
// time where they are common: 32 (large sums), 8 and 4 (M = 64-512 under the default lanes rule;
// double only, to bound the number of kernels).
template <class T, int NF, int TD = 0>
void launch_plain_lanes(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream,
                        bool load_only) {
  constexpr bool dbl = std::is_same_v<T, double>;
  if constexpr (dbl && TD > 0 && TD < NF && NF <= kLeanMaxVarying) {
    if (p.lean9_tile) {
      if (p.nip == 4) return launch_lean9_tiled<NF, 4, TD>(p, a, stream, load_only);
      return launch_lean9_tiled<NF, 8, TD>(p, a, stream, load_only);
    }
  }
  if constexpr (dbl && TD == 0 && NF <= kLeanMaxVarying) {
    if (p.lean) {              // lean plans have one lane
      if constexpr (NF > 0) {  // kernel 9 where it takes the plan (rows of 4 or 8), else 7/8
        if (p.lean_chunks) {
          if (p.nip == 4)
            return p.outs == 2 ? launch_lean9<NF, 4, 2>(p, a, stream, load_only)
                               : launch_lean9<NF, 4, 1>(p, a, stream, load_only);
          return p.outs == 2 ? launch_lean9<NF, 8, 2>(p, a, stream, load_only)
                             : launch_lean9<NF, 8, 1>(p, a, stream, load_only);
        }
      }
      return p.outs == 2 ? launch_plain3<T, NF, 1, 0, 2>(p, a, stream, load_only)
                         : launch_plain3<T, NF, 1, 0>(p, a, stream, load_only);
    }
  }
  // the grid of a two-outputs plan covers half its items: only the one-lane kernel takes it
  if (p.outs != 1) throw std::invalid_argument("two outputs per thread: one-lane double plans only");
  if (p.lanes_log2 == 5)
    launch_plain3<T, NF, 32, TD>(p, a, stream, load_only);
  else if (dbl && p.lanes_log2 == 3)
    launch_plain3<T, NF, dbl ? 8 : 0, TD>(p, a, stream, load_only);
  else if (dbl && p.lanes_log2 == 2)
    launch_plain3<T, NF, dbl ? 4 : 0, TD>(p, a, stream, load_only);
  else
    launch_plain3<T, NF, 0, TD>(p, a, stream, load_only);
}

template <class T, int NF>
void launch_nf(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream, bool load_only) {
  if (p.variant == Variant::plain && p.tile != 1) {
    // tiles of 2 (double, 1-8 or 12 varying inputs, 1 or 2 of them holding the tile variable)
    if constexpr (std::is_same_v<T, double> && NF > 0 && NF <= kMaxTiledVarying) {
      if (p.tile != 2 || p.tile_dep < 1 || p.tile_dep > 2)
        throw std::invalid_argument("no kernel takes this tile");
      if (p.tile_dep == 1)
        launch_plain_lanes<T, NF, 1>(p, a, stream, load_only);
      else if constexpr (NF >= 2)
        launch_plain_lanes<T, NF, 2>(p, a, stream, load_only);
    } else {
      throw std::invalid_argument("no kernel takes a tiled plan of this element type or size");
    }
  } else if (p.variant == Variant::plain) {
    launch_plain_lanes<T, NF>(p, a, stream, load_only);
  } else if constexpr (NF > 0 && NF <= kMaxCachedVarying) {
    if (p.cached_mask == (1u << NF) - 1)
      launch_cached<T, NF, true>(p, a, stream, load_only);
    else
      launch_cached<T, NF, false>(p, a, stream, load_only);
  }
  CUDA_CHECK(cudaGetLastError());
}

// ---- compute ceiling: the inner loop with register operands ----
// Flips the lowest mantissa bit of each operand per term (an integer op, as the real loop's
// address arithmetic) so nothing can be hoisted, while the floating-point work per term is
// exactly the kernels': NF adds and one lse_add.
__device__ __forceinline__ double flip(double v) {
  return __longlong_as_double(__double_as_longlong(v) ^ 1);
}
__device__ __forceinline__ float flip(float v) { return __int_as_float(__float_as_int(v) ^ 1); }

template <class T, int NF>
__global__ void __launch_bounds__(256) ceiling_kernel(T* out, int iters, T seed) {
  __shared__ double tab[64];
  load_exp_table(tab);
  __syncthreads();
  T v[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) v[f] = seed * (threadIdx.x % 7 + f + 1);
  T mx = neg_inf(T(0)), acc = 0;
#pragma unroll 4
  for (int i = 0; i < iters; ++i) {
    T x = seed;  // the constant part of the real loop
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      x += v[f];
      v[f] = flip(v[f]);
    }
    lse_add(mx, acc, x, tab);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = lse_value(mx, acc);
}

// The kernels' arithmetic on register operands (terms in chunks of four, lse_chunk; kernel 2's
// exp until device call 4, kernel 3's since: the same double operations).
template <class T, int NF>
__global__ void __launch_bounds__(256) ceiling2_kernel(T* out, int iters, T seed) {
  __shared__ double tab[64];
  load_exp_table3(tab);
  __syncthreads();
  const unsigned tab_a = opaque(smem_addr(tab));
  T v[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) v[f] = seed * (threadIdx.x % 7 + f + 1);
  T mx = lowest(T(0)), acc = 0;
  for (int i = 0; i < iters; i += 4) {
    T x[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      x[c] = seed;
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        x[c] += v[f];
        v[f] = flip(v[f]);
      }
    }
    lse_chunk(mx, acc, x, tab_a);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = lse_value2(mx, acc);
}

template <class T, int NF, int KERNEL = 1>
double ceiling_nf(cudaStream_t stream) {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int blocks = sms * 8, threads = 256, iters = 4096;
  T* out = nullptr;
  CUDA_CHECK(cudaMallocAsync(&out, sizeof(T) * blocks * threads, stream));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0, stream));
    if constexpr (KERNEL == 2)
      ceiling2_kernel<T, NF><<<blocks, threads, 0, stream>>>(out, iters, T(-0.5));
    else
      ceiling_kernel<T, NF><<<blocks, threads, 0, stream>>>(out, iters, T(-0.5));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0) best = std::min(best, ms);  // the first run warms up
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaFreeAsync(out, stream));
  return static_cast<double>(blocks) * threads * iters / (best * 1e-3);
}

}  // namespace

namespace {

std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

// out_hi_fill's parameters as the fill kernel reads them: the page variables' cardinalities,
// then their strides [var][nip].
std::vector<long long> fill_params(const LaunchPlan& p) {
  const LaunchPlan::OffsetFill& f = p.out_hi_fill;
  std::vector<long long> v(f.card.begin(), f.card.end());
  v.insert(v.end(), f.stride.begin(), f.stride.end());
  return v;
}

// out[r][s] = sum over the nv page variables of digit_v(r) * stride[v][s] (the last variable
// fastest), a thread per row and four columns at a time; rows < 2^31 (policy.cpp).
__global__ void fill_offsets_kernel(long long* out, long long rows, int nip, int nv,
                                    const long long* params) {
  const long long* card = params;
  const long long* stride = params + nv;
  for (long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<long long>(gridDim.x) * blockDim.x) {
    for (int s0 = 0; s0 < nip; s0 += 4) {
      long long a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      unsigned rest = static_cast<unsigned>(r);
      for (int v = nv - 1; v >= 0 && rest > 0; --v) {
        const unsigned c = static_cast<unsigned>(card[v]);
        const long long d = rest % c;
        rest /= c;
        const long long* st = stride + static_cast<long long>(v) * nip + s0;
        a0 += d * st[0];
        a1 += d * st[1];
        a2 += d * st[2];
        a3 += d * st[3];
      }
      long long* row = out + r * nip + s0;
      row[0] = a0;
      row[1] = a1;
      row[2] = a2;
      row[3] = a3;
    }
  }
}

// A thread per child entry (Context::fold), its digits by 64-bit division.
__global__ void fold_kernel(double* child, const double* factor, const FoldArgs a) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < a.n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long rest = static_cast<unsigned long long>(i);
    long long f = 0;
    for (int v = a.nv - 1; v >= 0 && rest > 0; --v) {
      const unsigned long long c = static_cast<unsigned long long>(a.card[v]);
      const unsigned long long d = rest % c;
      rest /= c;
      f += static_cast<long long>(d) * a.stride[v];
    }
    child[i] += factor[f];
  }
}

}  // namespace

void launch_fold(double* child, const double* factor, const FoldArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  const int threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>((a.n + threads - 1) / threads, 1 << 20));
  fold_kernel<<<blocks, threads, 0, stream>>>(child, factor, a);
  CUDA_CHECK(cudaGetLastError());
}

std::size_t table_image_bytes(const LaunchPlan& p) {
  std::size_t b = 0;
  LaunchPlan::for_each_device_table(p, [&](const auto& t) { b += align16(sizeof(t[0]) * t.size()); });
  if (p.out_hi_fill.rows > 0)  // the table the device fills, then the fill's parameters
    b += align16(8 * static_cast<std::size_t>(p.out_hi_fill.rows) * p.nip) +
         align16(8 * fill_params(p).size());
  return b;
}

DeviceTables upload_table_image(const LaunchPlan& p, void* dev, cudaStream_t stream) {
  DeviceTables t;
  std::size_t off = 0;
  auto put = [&](const void* src, std::size_t bytes) {
    void* d = static_cast<char*>(dev) + off;
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, stream));
    off += (bytes + 15) / 16 * 16;
    return static_cast<const void*>(d);
  };
  t.out_lo = static_cast<const int*>(put(p.out_lo.data(), 4 * p.out_lo.size()));
  t.out_hi = static_cast<const long long*>(put(p.out_hi.data(), 8 * p.out_hi.size()));
  t.sum_lo = static_cast<const int*>(put(p.sum_lo.data(), 4 * p.sum_lo.size()));
  t.sum_hi = static_cast<const long long*>(put(p.sum_hi.data(), 8 * p.sum_hi.size()));
  t.sum_mid = static_cast<const long long*>(put(p.sum_mid.data(), 8 * p.sum_mid.size()));
  t.cache_lo = static_cast<const int*>(put(p.cache_lo.data(), 4 * p.cache_lo.size()));
  t.refetch = static_cast<const unsigned*>(put(p.refetch.data(), 4 * p.refetch.size()));
  if (const std::int64_t rows = p.out_hi_fill.rows; rows > 0) {
    // out_hi filled here from its strides (p.out_hi is empty), on the same stream as the copies
    if (p.nip % 4 != 0) throw std::logic_error("out_hi_fill: rows of a multiple of 4 expected");
    long long* hi = reinterpret_cast<long long*>(static_cast<char*>(dev) + off);
    off += align16(8 * static_cast<std::size_t>(rows) * p.nip);
    const std::vector<long long> params = fill_params(p);
    const auto* dp = static_cast<const long long*>(put(params.data(), 8 * params.size()));
    const int threads = 256;
    const unsigned blocks =
        static_cast<unsigned>(std::min<std::int64_t>((rows + threads - 1) / threads, 1 << 16));
    fill_offsets_kernel<<<blocks, threads, 0, stream>>>(
        hi, rows, p.nip, static_cast<int>(p.out_hi_fill.card.size()), dp);
    CUDA_CHECK(cudaGetLastError());
    t.out_hi = hi;
  }
  return t;
}

__device__ double g_zero_f64 = 0;
__device__ float g_zero_f32 = 0;

// The one-entry zero table that padding slots read (its address looked up per device).
template <class T>
const T* zero_table() {
  static std::array<const T*, kMaxDevices> ptr{};
  static DeviceFlags flags;
  const int dev = current_device();
  std::call_once(flags[dev], [&] {
    void* p = nullptr;
    if constexpr (sizeof(T) == 8)
      CUDA_CHECK(cudaGetSymbolAddress(&p, g_zero_f64));
    else
      CUDA_CHECK(cudaGetSymbolAddress(&p, g_zero_f32));
    ptr[dev] = static_cast<const T*>(p);
  });
  return ptr[dev];
}

// The kernel of p's number of varying inputs.
template <class T>
void dispatch_nf(const LaunchPlan& p, const KernelArgs<T>& a, cudaStream_t stream, bool load_only) {
  switch (p.nf) {
    case 0:
      launch_nf<T, 0>(p, a, stream, load_only);
      break;
    case 1:
      launch_nf<T, 1>(p, a, stream, load_only);
      break;
    case 2:
      launch_nf<T, 2>(p, a, stream, load_only);
      break;
    case 3:
      launch_nf<T, 3>(p, a, stream, load_only);
      break;
    case 4:
      launch_nf<T, 4>(p, a, stream, load_only);
      break;
    case 5:
      launch_nf<T, 5>(p, a, stream, load_only);
      break;
    case 6:
      launch_nf<T, 6>(p, a, stream, load_only);
      break;
    case 7:
      launch_nf<T, 7>(p, a, stream, load_only);
      break;
    case 8:
      launch_nf<T, 8>(p, a, stream, load_only);
      break;
    case 12:
      launch_nf<T, 12>(p, a, stream, load_only);
      break;
    case 16:
      launch_nf<T, 16>(p, a, stream, load_only);
      break;
    default:
      throw std::invalid_argument("more varying inputs than the kernels take");
  }
}

template <class T>
void launch_sum_product(const LaunchPlan& p, const DeviceTables& t, const T* const* in, T* out,
                        T* partial, cudaStream_t stream) {
  KernelArgs<T> a{};
  const int n_in = p.nf + p.nc;
  if (n_in > kMaxSlots) throw std::invalid_argument("more input slots than a launch takes");
  for (int s = 0; s < n_in; ++s) a.in[s] = in[s] ? in[s] : zero_table<T>();
  a.out = out;
  a.partial = partial;
  a.out_lo = t.out_lo;
  a.out_hi = t.out_hi;
  a.sum_lo = t.sum_lo;
  a.sum_hi = t.sum_hi;
  a.sum_mid = t.sum_mid;
  a.cache_lo = t.cache_lo;
  a.refetch = t.refetch;
  a.n_in = n_in;
  a.nip = p.nip;
  a.nfp = p.nfp;
  a.n_out = p.n_out;
  a.n_items = p.n_items;
  a.P = static_cast<unsigned>(p.P);
  a.n_pages = p.n_pages;
  a.Mi = static_cast<int>(p.Mi);
  a.splits = p.splits;
  a.lanes_log2 = p.lanes_log2;
  a.Mh = p.Mh;
  a.Mh2 = p.Mh2;
  a.mh_per_split = p.mh_per_split;
  a.div_P = dev_div(p.div_P);
  a.div_items = dev_div(p.div_items);
  a.cached_mask = p.cached_mask;
  a.direct_mask = p.direct_mask;
  for (int f = 0; f < p.nf && p.variant == Variant::cached; ++f) {
    a.seg_off[f] = p.seg_off[f];
    a.seg_size[f] = p.seg_size[f];
    a.pitch[f] = p.pitch[f];
    a.div_mf[f] = dev_div(p.div_mf[f]);
    a.m_f[f] = static_cast<int>(p.div_mf[f].d);
  }
  a.pages_per_block = p.pages_per_block;
  a.sum_table_offset = p.sum_table_offset;
  if (p.variant == Variant::plain && p.tile == 2) {
    a.tile_summed = p.tile_summed;
    for (int f = 0; f < p.nf; ++f) a.tile_off1[f] = p.tile_off[p.nfp + f];
    for (int s = 0; s <= n_in; ++s) a.tile_all1[s] = p.tile_all[p.nip + s];
  }
  dispatch_nf(p, a, stream, false);
  if (p.variant == Variant::plain && p.splits > 1) {
    const unsigned warps_per_block = 8;
    const unsigned blocks =
        static_cast<unsigned>((p.n_out + warps_per_block - 1) / warps_per_block);
    combine_kernel<T><<<blocks, 32 * warps_per_block, 0, stream>>>(partial, out, p.n_out, p.splits);
    CUDA_CHECK(cudaGetLastError());
  }
}

template <class T>
void load_kernels(const LaunchPlan& p) {
  dispatch_nf(p, KernelArgs<T>{}, nullptr, true);
  if (p.variant == Variant::plain && p.splits > 1) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, combine_kernel<T>));
  }
}

void load_module() {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, combine_kernel<double>));
}

template <class T>
double measure_element_rate(int nf, cudaStream_t stream) {
  switch (nf) {
    case 1:
      return ceiling_nf<T, 1>(stream);
    case 2:
      return ceiling_nf<T, 2>(stream);
    case 3:
      return ceiling_nf<T, 3>(stream);
    case 4:
      return ceiling_nf<T, 4>(stream);
    case 5:
      return ceiling_nf<T, 5>(stream);
    case 6:
      return ceiling_nf<T, 6>(stream);
    case 7:
      return ceiling_nf<T, 7>(stream);
    default:
      return ceiling_nf<T, 8>(stream);
  }
}

double measure_element_rate2(int nf, cudaStream_t stream) {
  switch (nf) {
    case 1:
      return ceiling_nf<double, 1, 2>(stream);
    case 2:
      return ceiling_nf<double, 2, 2>(stream);
    case 3:
      return ceiling_nf<double, 3, 2>(stream);
    case 4:
      return ceiling_nf<double, 4, 2>(stream);
    case 5:
      return ceiling_nf<double, 5, 2>(stream);
    case 6:
      return ceiling_nf<double, 6, 2>(stream);
    case 7:
      return ceiling_nf<double, 7, 2>(stream);
    default:
      return ceiling_nf<double, 8, 2>(stream);
  }
}

template void launch_sum_product<double>(const LaunchPlan&, const DeviceTables&,
                                         const double* const*, double*, double*, cudaStream_t);
template void launch_sum_product<float>(const LaunchPlan&, const DeviceTables&, const float* const*,
                                        float*, float*, cudaStream_t);
template void load_kernels<double>(const LaunchPlan&);
template void load_kernels<float>(const LaunchPlan&);
template double measure_element_rate<double>(int, cudaStream_t);
template double measure_element_rate<float>(int, cudaStream_t);

}  // namespace kinfer::gpu
