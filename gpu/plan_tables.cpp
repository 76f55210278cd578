// The planner's offset tables: the odometer that builds them on the host, the page tables both
// variants share, and the host's copy of a page table the device fills.
#ifdef __linux__
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/detail/planner.hpp"
#include "gpu/policy.hpp"

namespace kinfer::gpu {
namespace detail {

namespace {

// A table of `n` zeros; one of several MB in transparent huge pages where the kernel offers
// them on request (madvise), so that its first touch takes one fault per 2 MB instead of one per
// 4 kB: on the H100 machine's host a fresh 25 MB table of linkage_11 took 35 ms to build among
// 16 threads faulting at once, 6 ms on a quiet one (docs/performance.md).
template <class Int>
void zeroed_table(std::vector<Int>& table, std::size_t n) {
  table.clear();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (n * sizeof(Int) >= 2 * kHuge) {
    table.shrink_to_fit();
    table.reserve(n);  // allocated, not yet touched
    const auto begin = reinterpret_cast<std::uintptr_t>(table.data());
    const std::uintptr_t a = (begin + kHuge - 1) & ~(kHuge - 1);
    const std::uintptr_t e = (begin + n * sizeof(Int)) & ~(kHuge - 1);
    if (e > a) madvise(reinterpret_cast<void*>(a), e - a, MADV_HUGEPAGE);  // a hint: ignore errors
  }
#endif
  table.assign(n, 0);
}

}  // namespace

// fill_offsets (planner.hpp). Large tables: the rows of the innermost variables (a block of at most
// kBlockRows rows) are filled once, and every block after it is that block plus its outer
// variables' offsets (a vectorised add), the odometer stepping once per block: linkage_11's 25 MB
// table of page offsets took ~11 ms of odometer alone.
template <class Int>
void fill_offsets(const BucketLayout& lay, int first, int last, int slots, int width,
                  std::vector<Int>& table) {
  std::int64_t rows = 1;
  for (int i = first; i < last; ++i) rows *= lay.card[i];
  zeroed_table(table, static_cast<std::size_t>(rows * width));
  std::int64_t top = 0;
  for (int s = 0; s < slots; ++s) {
    std::int64_t m = 0;
    for (int i = first; i < last; ++i) m += (lay.card[i] - 1) * lay.stride[s][i];
    top = std::max(top, m);
  }
  if (top > static_cast<std::int64_t>(std::numeric_limits<Int>::max()))
    throw std::invalid_argument("offsets of the bucket's tables exceed " +
                                std::to_string(8 * sizeof(Int)) + " bits");
  // the odometer over vars [lo, hi): row r of `out` (rows of `width`) for r in [0, n)
  auto odometer = [&](int lo, int hi, std::int64_t n, Int* out) {
    std::vector<int> digit(lay.card.size(), 0);
    std::vector<std::int64_t> cur(slots, 0);
    for (std::int64_t r = 0; r < n; ++r) {
      for (int s = 0; s < slots; ++s) out[r * width + s] = static_cast<Int>(cur[s]);
      for (int i = hi - 1; i >= lo; --i) {
        for (int s = 0; s < slots; ++s) cur[s] += lay.stride[s][i];
        if (++digit[i] < lay.card[i]) break;
        for (int s = 0; s < slots; ++s) cur[s] -= lay.stride[s][i] * digit[i];
        digit[i] = 0;
      }
    }
  };
  constexpr std::int64_t kBlockRows = 4096;
  int split = last;  // vars [split, last) form the inner block
  std::int64_t block = 1;
  while (split > first && block * lay.card[split - 1] <= kBlockRows) block *= lay.card[--split];
  if (split == first || block < 64) {  // small, or no inner block worth replicating
    odometer(first, last, rows, table.data());
    return;
  }
  odometer(split, last, block, table.data());
  const std::int64_t outer = rows / block;
  std::vector<Int> base(static_cast<std::size_t>(outer * width), 0);
  odometer(first, split, outer, base.data());
  const std::int64_t len = block * width;
  const Int* in = table.data();
  for (std::int64_t o = 1; o < outer; ++o) {
    Int* out = table.data() + o * len;
    const Int* b = base.data() + o * width;
    for (std::int64_t r = 0; r < len; r += width)
      for (int s = 0; s < width; ++s) out[r + s] = in[r + s] + b[s];
  }
}

template void fill_offsets(const BucketLayout&, int, int, int, int, std::vector<std::int32_t>&);
template void fill_offsets(const BucketLayout&, int, int, int, int, std::vector<std::int64_t>&);

bool device_fills_pages(double device_fill, std::int64_t n_pages, int nip) {
  return device_fill > 0 && 8.0 * static_cast<double>(n_pages) * nip >= device_fill &&
         n_pages <= kMaxIndex;
}

void fill_output_tables(const BucketLayout& lay, LaunchPlan& p, int cols, double device_fill) {
  const int first = lay.k - p.page_vars;
  p.P = 1;
  for (int i = first; i < lay.k; ++i) p.P *= lay.card[i];
  std::int64_t n = 1;
  for (int i = 0; i < lay.k; ++i) n *= lay.card[i];
  p.n_pages = n / p.P;
  fill_offsets(lay, first, lay.k, cols, p.nip, p.out_lo);
  p.out_hi_fill = {};
  if (device_fills_pages(device_fill, p.n_pages, p.nip)) {
    p.out_hi.clear();
    p.out_hi.shrink_to_fit();
    p.out_hi_fill.rows = p.n_pages;
    p.out_hi_fill.card.assign(lay.card.begin(), lay.card.begin() + first);
    p.out_hi_fill.stride.assign(static_cast<std::size_t>(first) * p.nip, 0);
    for (int i = 0; i < first; ++i)
      for (int s = 0; s < cols; ++s) p.out_hi_fill.stride[i * p.nip + s] = lay.stride[s][i];
  } else {
    fill_offsets(lay, 0, first, cols, p.nip, p.out_hi);
  }
  p.div_P = FastDiv64(static_cast<std::uint32_t>(p.P));
}

}  // namespace detail

std::vector<std::int64_t> host_out_hi(const LaunchPlan& p) {
  const LaunchPlan::OffsetFill& f = p.out_hi_fill;
  if (f.rows == 0) return p.out_hi;
  // each row's digits by division (the device kernel's way; fill_offsets steps an odometer)
  std::vector<std::int64_t> t(static_cast<std::size_t>(f.rows * p.nip), 0);
  const int nv = static_cast<int>(f.card.size());
  for (std::int64_t r = 0; r < f.rows; ++r) {
    std::int64_t rest = r;
    for (int v = nv - 1; v >= 0; --v) {
      const std::int64_t d = rest % f.card[v];
      rest /= f.card[v];
      for (int s = 0; s < p.nip; ++s) t[r * p.nip + s] += d * f.stride[v * p.nip + s];
    }
  }
  return t;
}

}  // namespace kinfer::gpu
