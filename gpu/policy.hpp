#pragma once
// The CPU half of the GPU sum-product kernel (papers 000 section 5, 001 section 3.2): everything
// about a bucket's index space and its cache policy is computed here, once per bucket shape, and
// the GPU only follows the tables. Plain C++ (no CUDA type), so the tables can be checked on a
// machine without a GPU: emulate() runs the kernels' exact table walk on the host.
//
// Index space of a bucket: output o in [0, n_out), summed configuration m in [0, M); repo order
// puts the summed variables last, so for each input f and output o the entries f(o, .) are one
// contiguous run of M_f values (M_f = product of f's summed cardinalities).
//   o = page * P + ol   (ol: the lowest output variables, "cache tag" digits above the summed ones)
//   m = mh * Mi + mi    (mi: the lowest summed variables)
//   mh = mt * Mh2 + mm  (plain: the outer summed configuration in two levels)
//   offset_f(o, m) = out_hi[page][f] + out_lo[ol][f] + sum_hi[mt][f] + sum_mid[mm][f] +
//   sum_lo[mi][f]
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu_kernel.hpp"
#include "gpu/device_api.hpp"

namespace kinfer::gpu {

constexpr int kMaxInputs = 60;        // input tables one kernel launch takes
constexpr int kMaxVarying = 16;       // inputs that vary with the summed variables (plain kernel)
constexpr int kMaxCachedVarying = 8;  // the cached kernel's template cases
constexpr int kMaxTiledVarying = 12;  // the tiled plain kernel's (1-8, 12)
constexpr int kMaxSlots = 64;         // kernel slots: inputs plus the zero tables that pad NF
constexpr int kStaticShared = 512;    // static shared memory of every kernel (the exp table)
// The one-lane kernels (LaunchPlan::lean): plans of at most kLeanMaxTerms summed configurations
// per output and kLeanMaxVarying varying inputs (their template cases: at 4 blocks per SM a
// fourth input spills).
constexpr std::int64_t kLeanMaxTerms = 16;
constexpr int kLeanMaxVarying = 3;
// The short-sum kernel's compiled term counts (LaunchPlan::lean_fixed_terms;
// gpu/detail/launch.cuh's launch_short_sum_terms has a case for each). Its tile of two outputs
// is compiled for each of them too: every case adds kernels to the binary, whose resident size
// the memory accountant's process base counts.
constexpr int kLeanFixedTerms[] = {2, 3, 4, 6, 8};
constexpr bool lean_fixed_terms_compiled(std::int64_t mi) {
  for (int t : kLeanFixedTerms)
    if (mi == t) return true;
  return false;
}

// n / d for 0 <= n < 2^31 with a multiply and a shift (Granlund-Montgomery, round-up variant).
struct FastDiv {
  std::uint32_t d = 1, mul = 0, shift = 0;
  FastDiv() = default;
  explicit FastDiv(std::uint32_t divisor);
  std::uint32_t div(std::uint32_t n) const {
    const std::uint32_t t = static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * mul) >> 32);
    return (t + n) >> shift;
  }
};

// n / d for 0 <= n < 2^63 and d < 2^32 (the same method on 64-bit words).
struct FastDiv64 {
  std::uint64_t d = 1, mul = 0;
  std::uint32_t shift = 0;
  FastDiv64() = default;
  explicit FastDiv64(std::uint32_t divisor);
  std::uint64_t div(std::uint64_t n) const {
    const std::uint64_t t =
        static_cast<std::uint64_t>((static_cast<unsigned __int128>(n) * mul) >> 64);
    return (t + n) >> shift;
  }
};

// The selector gives the short-sum kernel the one-lane buckets it takes of up to this many summed
// configurations, before the cached kernel's one-lane rule (on the H100, linkage buckets of
// M = 2-12 ran faster in the short-sum kernel, one of M = 16 faster cached).
constexpr std::int64_t kShortSumMaxTerms = 12;

// What the planner needs to know about the device (read off it by the Context), and the
// planner's options: a Context uses their defaults unless its creator adjusts them
// (Context::create's PlannerOptions: the kernel tests and bucket_bench run the other variants).
struct DeviceLimits {
  int sm_count = 132;
  int max_threads_per_sm = 2048;
  int shared_per_block = 227 * 1024 - kStaticShared;  // dynamic shared memory a block may opt into
  int shared_per_sm = 228 * 1024;
  int block_overhead = 1024 + kStaticShared;  // per resident block: reserved + static shared
  // Planner option, not a device property: let the plain kernel share loads over tiles of at
  // most `max_tile` configurations (tiles of 2, double only, ran the many-input buckets
  // 1.2-1.67x faster on the H100); float plans never tile. tile_fill = false and
  // tile_min_nf = 1 also tile outputs that then leave the device idle (tests).
  bool tiles = true;
  int max_tile = 2;
  int max_tile_dep = 2;   // varying inputs holding a tile variable (the kernels' template cases)
  int tile_min_nf = 2;    // tiles only for buckets with this many varying inputs or more
  bool tile_fill = true;  // output tiles only where the launch still fills the device
  // Planner options for the plain kernel: skip the offset table for inputs that hold every
  // inner summed variable (`direct`); lanes per output: the most (up to 32) that leave each lane
  // 16 configurations of the inner summed block, reduced while a lane would sum fewer than
  // `lane_terms` configurations of the whole sum, but not below `lanes_floor` by that reduction
  // (4 and 64 made the M = 144-512 buckets 1.14-1.46x faster than the 16-term rule, 32:16).
  bool direct = true;
  int lanes_floor = 4;
  int lane_terms = 64;
  // Planner option: rows of the plain kernel's middle summed table (sum_mid); the outer summed
  // block goes through two tables of at most this many and Mh / this many rows instead of one
  // of Mh rows (a one-output bucket of 2^30 terms had 2^20 rows, 67 MB built in 74-155 ms on
  // the H100's host). Tests set it small to walk both levels.
  std::int64_t mid_rows_max = 4096;
  // Planner option: a plain launch splits a large summed range over blocks (partials combined)
  // until the device holds two waves of threads, but each lane keeps at least this many terms
  // (each block stages the inner summed table in shared memory: 256 terms a lane left
  // linkage_17's one-output bucket 554 at 0.47 of the roofline, 1024 at 0.54, 4096 at 0.18;
  // pe's plans of linkage_11-18 and pedigree50 the same; docs/performance.md).
  std::int64_t split_min_terms = 1024;
  // Planner option: the plain kernel's page-offset table (out_hi) of at least this many bytes is
  // not built on the host but filled by a kernel from its strides (0: always on the host): a
  // fresh 25 MB table took 20-50 ms of the host's page faults and odometer on the H100 machine
  // (docs/performance.md).
  double device_fill_bytes = 1 << 20;
  // Planner option (the one-lane plain kernel): plain plans of at most 16 summed configurations
  // per output (one lane) and at most 3 varying inputs run untiled in a kernel compiled for one
  // lane that holds 4 blocks of 256 per SM (the general one holds 2-3: registers): 1.03-1.22x on
  // those buckets.
  bool lean = true;
  // Planner option (two outputs per thread): a one-lane launch of at least lean_two_min_items
  // outputs gives each thread two of them (a grid-stride apart: two independent chains of
  // dependent loads per thread); 0 turns it off.
  std::int64_t lean_two_min_items = std::int64_t{1} << 22;
  // Planner option (the short-sum kernel): one-lane plans of 1-3 varying inputs and output-table
  // rows of 4 or 8 columns run in the short-sum kernel (gpu/detail/short_sum_kernel.cuh: terms in
  // chunks of four, the last predicated, 32-bit page-local indices, vector row loads, a table
  // log) instead of the plain kernel's one-lane path; its plans of 2, 3, 4, 6 or 8 terms run in
  // the short-sum kernel compiled for that many (no chunk loop).
  bool lean_chunks = true;
  // Planner option (the short-sum kernel's tile): a one-lane plan with terms compiled in and
  // direct inputs takes a tile of two outputs (an output variable of two values that some varying
  // input lacks: that input's loads serve both outputs) when it saves a fifth of the loads.
  bool lean_tiles = true;
  // Planner option (plain and short-sum kernels): when the bucket's largest input table holds at
  // least reuse_min_bytes and reuse_over_rest times the entries of the output and the other
  // inputs together, and lacks some output variables with at least reuse_near outputs below
  // them, those (up to a product of reuse_max_group values) are enumerated innermost, so that
  // the threads of a warp reading the same entries of it are neighbours and the table is read
  // from memory once instead of once per value of them (pedigree50's bucket 209: an 11 GB
  // input lacking the output's first variable, 4 values: 17.3 -> 11.1 ms). reuse_min_bytes 0:
  // off; 1, reuse_near 1 and reuse_over_rest 0: every bucket (the tests).
  double reuse_min_bytes = 32e6;
  double reuse_over_rest = 1.5;
  std::int64_t reuse_max_group = 8;
  std::int64_t reuse_near = 1024;  // outputs below a lacking variable that leave it in place
};

// The bucket's index space, independent of the kernel variant.
struct BucketLayout {
  int n_in = 0;                 // inputs
  int nf = 0;                   // inputs varying with the summed variables: slots [0, nf)
  std::vector<int> slot_input;  // slot -> index into the caller's inputs; constant ones last
  std::vector<std::vector<std::int64_t>> stride;  // [slot][bucket var] (0: not in the input)
  std::vector<int> card;
  int k = 0;  // output variables: bucket vars [0, k)
  std::int64_t n_out = 1, M = 1;
  std::vector<std::int64_t> m_f;         // [varying slot] entries of its contiguous summed run
  std::vector<std::int64_t> in_size;     // [slot] entries of the input table
  std::vector<std::int64_t> out_stride;  // [bucket var] stride in the output (0: summed var)
  std::string unsupported;               // non-empty: no kernel takes this bucket (why)
};

BucketLayout describe(const BucketShape& shape, std::span<const std::vector<int>> scopes);

// The layout with its output variables reordered for the largest input's reuse
// (DeviceLimits::reuse_min_bytes); the same layout when nothing moves. The plans' tables give
// every output its offset, so the enumeration order is free.
BucketLayout reuse_order(const BucketLayout& lay, const DeviceLimits& lim);

// One kernel launch, fully decided on the CPU. Tables are row-major, rows padded to `nip`
// (all inputs) or `nfp` (varying inputs) entries so a row is one or two 16-byte loads.
//
// Slots: [0, nf) vary with the summed variables (the kernel's template NF; slots past the
// layout's varying inputs read a one-entry zero table: x + 0 is exact), [nf, nf + nc) do not.
// The plain kernel's tables have one more column, `nf + nc`: the output offset itself.
// Tile (plain): each thread shares its loads over `tile` configurations of the tile variables
// (outputs o + tile_out[r], or summed configurations): inputs without those variables are
// loaded once for all of them, the others at offset tile_off[r][f].
struct LaunchPlan {
  Variant variant = Variant::plain;
  int nf = 0, nc = 0, nip = 4, nfp = 4;
  int nf_inputs = 0;            // varying inputs of the bucket (nf less the padding)
  std::vector<int> slot_input;  // slot -> caller's input index; -1: the zero table
  std::int64_t n_out = 1, M = 1;
  // output split: P outputs per page
  int page_vars = 0;
  std::int64_t P = 1, n_pages = 1;
  // summed split (plain: Mi inner; cached: Mi = M); plain: Mh = (Mh / Mh2) x Mh2
  std::int64_t Mi = 1, Mh = 1, Mh2 = 1;
  std::int64_t n_items = 1;  // plain: outputs / tile (reduced output space)
  // plain: bit f set when input slot f holds every inner summed variable, so its offset in the
  // inner block is mi itself (no table load)
  std::uint32_t direct_mask = 0;
  // tile (plain)
  int tile = 1;
  bool tile_summed = false;            // tile over summed variables (merged) instead of outputs
  std::vector<int> tile_vars;          // bucket var positions
  std::vector<std::int32_t> tile_off;  // [tile][nfp] varying slots
  std::vector<std::int64_t> tile_all;  // [tile][nip] every slot and the output column
  int tile_dep = 0;  // varying slots holding a tile variable: the first ones, [0, tile_dep)
  // launch shape
  int lanes_log2 = 0;  // 2^lanes_log2 threads share one output (interleaved m)
  // plain, M <= 16, <= 3 varying, untiled or short_sum_tile: a one-lane kernel
  bool lean = false;
  int outs = 1;  // lean: outputs per thread, a grid-stride apart (1 or 2)
  // lean, 1-3 varying inputs, rows of 4 or 8 columns, 32-bit page-local indices: the plan runs
  // in the short-sum kernel (double; DeviceLimits::lean_chunks)
  bool lean_chunks = false;
  // lean_chunks and Mi one of kLeanFixedTerms: the short-sum kernel with Mi known at compile time
  bool lean_fixed_terms = false;
  // lean_fixed_terms with a tile of two outputs (the short-sum kernel's tile;
  // DeviceLimits::lean_tiles)
  bool short_sum_tile = false;
  int threads = 256;
  std::int64_t blocks = 1;
  int splits = 1;  // plain: blocks of outputs split over mh (partials combined)
  std::int64_t mh_per_split = 1;
  int pages_per_block = 1;   // cached: consecutive pages one block walks
  int shared_bytes = 0;      // dynamic shared memory per block
  int sum_table_offset = 0;  // byte offset of the sum table in shared memory
  // cached variant: per varying slot
  std::uint32_t cached_mask = 0;
  std::vector<int> seg_off, seg_size, pitch;  // in elements; pitch: odd row length of a segment
  double hit_fraction = 0;                    // element loads served from shared memory
  double min_reuse = 0;         // least uses per staged element over the cached inputs
  double resident_threads = 0;  // threads with an output that one SM holds at once
  double launch_threads = 0;    // threads with an output in the whole launch
  // tables (host copies; uploaded once per shape)
  std::vector<std::int32_t> out_lo;    // [P][nip]   global offset of a page-local output
  std::vector<std::int64_t> out_hi;    // [n_pages][nip]   ("PageOffsets")
  std::vector<std::int32_t> sum_lo;    // [Mi][nfp]  plain: global offset; cached: cache offset
  std::vector<std::int64_t> sum_hi;    // [Mh / Mh2][nfp]
  std::vector<std::int64_t> sum_mid;   // [Mh2][nfp]
  std::vector<std::int32_t> cache_lo;  // [P][nfp]   cached: cache row or global offset per input
  std::vector<std::uint32_t> refetch;  // [n_pages]  bit f: segment f changes ("PageValid", negated)
  // out_hi filled by the device instead (DeviceLimits::device_fill_bytes; out_hi left empty):
  // row r = sum over the page variables of digit(r) * stride, the last variable fastest.
  struct OffsetFill {
    std::int64_t rows = 0;             // 0: none (out_hi is on the host)
    std::vector<int> card;             // [var] the page variables' cardinalities
    std::vector<std::int64_t> stride;  // [var][nip] each column's stride (0 past the slots)
  } out_hi_fill;
  FastDiv64 div_P, div_items;
  std::vector<FastDiv> div_mf;  // [varying slot] for staging
  double table_bytes() const;
  // f(table) for each table the device reads, in the order of its device image (sum_product.cu:
  // table_image_bytes, upload_table_image); `P` is LaunchPlan or const LaunchPlan.
  template <class P, class F>
  static void for_each_device_table(P& p, F&& f) {
    f(p.out_lo);
    f(p.out_hi);
    f(p.sum_lo);
    f(p.sum_hi);
    f(p.sum_mid);
    f(p.cache_lo);
    f(p.refetch);
  }
};

// The selector's decision for a bucket, with the numbers behind it.
struct Selection {
  Variant variant = Variant::plain;
  std::string why;
};

// Builds the launch for `want` (automatic: the selector picks). `elem_bytes`: 8 or 4.
// Throws std::invalid_argument when the layout is unsupported or the variant cannot take it.
LaunchPlan make_launch_plan(const BucketLayout& lay, Variant want, const DeviceLimits& lim,
                            int elem_bytes = 8, Selection* sel = nullptr);
// p's page-offset table as the kernel reads it: out_hi, or out_hi_fill expanded on the host
// (the emulator and the tests; the device fills its own copy).
std::vector<std::int64_t> host_out_hi(const LaunchPlan& p);

// The bytes of the tables make_launch_plan(lay, want, lim, elem_bytes) builds on the host
// (before they go to the device), from the selector's choice without building them: what a
// bucket's kernel plan costs the host while it is prepared (the memory accountant's term).
double launch_table_bytes(const BucketLayout& lay, const DeviceLimits& lim, int elem_bytes = 8,
                          Variant want = Variant::automatic);

// The cached variant's launch (throws std::invalid_argument when it cannot take the bucket).
// Without tables: the launch shape and the selector's measures only (min_reuse counted from the
// page structure, equal to what the tables give), none of the tables, which for a large bucket
// are tens of MiB: the selector decides on these and builds the tables of the winner alone.
LaunchPlan cached_launch_plan(const BucketLayout& lay, const DeviceLimits& lim, int elem_bytes,
                              bool with_tables = true);

// Does the cached variant fit this bucket? Returns the policy, or an explanation in `why`.
bool cached_possible(const BucketLayout& lay, const DeviceLimits& lim, int elem_bytes,
                     std::string& why);

KernelChoice summarize(const LaunchPlan& p, const Selection& s);

// Debug log of one shape's kernel plan prepared ahead of its run (Context::prepare), with its
// tables then on the host (table_bytes): milliseconds building it, waiting for the context's lock,
// uploading.
void log_plan_prepared(const LaunchPlan& p, double table_bytes, double build_ms, double wait_ms,
                       double upload_ms);

// Runs the kernel's table walk on the host (same staging, layouts, splits and combines), in
// double. For tests without a GPU: the tables are right when this matches the reference.
void emulate(const LaunchPlan& p, const BucketLayout& lay, std::span<const InputTable> inputs,
             double* out);

}  // namespace kinfer::gpu
