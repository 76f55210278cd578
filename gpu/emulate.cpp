// The host emulation of the bucket kernels' table walk (emulate): the same staging, layouts,
// splits and combines as the kernels, in double, so the plans' tables can be checked against the
// CPU reference on a machine without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "gpu/policy.hpp"

namespace kinfer::gpu {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct HostLse {
  double mx = kNegInf, acc = 0;
  void add(double x) {
    if (x == kNegInf) return;
    if (x > mx) {
      acc = acc * std::exp(mx - x) + 1;
      mx = x;
    } else {
      acc += std::exp(x - mx);
    }
  }
  void merge(const HostLse& o) {
    if (o.mx == kNegInf) return;
    if (o.mx > mx) {
      acc = acc * std::exp(mx - o.mx) + o.acc;
      mx = o.mx;
    } else {
      acc += o.acc * std::exp(o.mx - mx);
    }
  }
  double value() const { return mx == kNegInf ? kNegInf : mx + std::log(acc); }
};

// The inputs by kernel slot; padding slots read a one-entry zero table.
std::vector<const double*> slot_inputs(const LaunchPlan& p, std::span<const InputTable> inputs) {
  static const double zero = 0;
  const int slots = p.nf + p.nc;
  std::vector<const double*> in(slots);
  for (int s = 0; s < slots; ++s)
    in[s] = p.slot_input[s] < 0 ? &zero : inputs[p.slot_input[s]].data;
  return in;
}

// The plain kernel: items (output, split) of G lanes each, over the tile's configurations, then
// the split combine.
void emulate_plain(const LaunchPlan& p, const std::vector<std::int64_t>& out_hi,
                   const std::vector<const double*>& in, double* out) {
  const int slots = p.nf + p.nc;
  const int G = 1 << p.lanes_log2;
  const int nf = p.nf;
  std::vector<HostLse> part(static_cast<std::size_t>(p.n_out) * p.splits);
  const int R = p.tile;
  for (std::int64_t item = 0; item < p.n_items * p.splits; ++item) {
    const std::int64_t sp = p.splits == 1 ? 0 : static_cast<std::int64_t>(p.div_items.div(item));
    const std::int64_t o = item - sp * p.n_items;
    const std::int64_t page = p.div_P.div(o), ol = o - page * p.P;
    std::vector<std::int64_t> base(slots + 1);
    for (int s = 0; s <= slots; ++s) base[s] = out_hi[page * p.nip + s] + p.out_lo[ol * p.nip + s];
    std::vector<HostLse> acc(R);
    for (int r = 0; r < R; ++r) {
      double c = 0;
      for (int s = nf; s < slots; ++s) c += in[s][base[s] + p.tile_all[r * p.nip + s]];
      for (int g = 0; g < G; ++g) {
        HostLse l;
        const std::int64_t mh_end = std::min(p.Mh, (sp + 1) * p.mh_per_split);
        for (std::int64_t mh = sp * p.mh_per_split; mh < mh_end; ++mh) {
          const std::int64_t mt = mh / p.Mh2, mm = mh % p.Mh2;
          for (std::int64_t mi = g; mi < p.Mi; mi += G) {
            double x = c;
            for (int f = 0; f < nf; ++f) {
              // the kernels read a direct input at mi itself, without the table
              const std::int64_t lo = (p.direct_mask >> f & 1) ? mi : p.sum_lo[mi * p.nfp + f];
              x += in[f][base[f] + p.sum_hi[mt * p.nfp + f] + p.sum_mid[mm * p.nfp + f] + lo +
                         p.tile_off[r * p.nfp + f]];
            }
            l.add(x);
          }
        }
        acc[r].merge(l);
      }
    }
    if (p.tile_summed) {
      for (int r = 1; r < R; ++r) acc[0].merge(acc[r]);
      part[sp * p.n_out + base[slots]] = acc[0];
    } else {
      for (int r = 0; r < R; ++r)
        part[sp * p.n_out + base[slots] + p.tile_all[r * p.nip + slots]] = acc[r];
    }
  }
  for (std::int64_t o = 0; o < p.n_out; ++o) {
    HostLse t;
    for (int sp = 0; sp < p.splits; ++sp) t.merge(part[sp * p.n_out + o]);
    out[o] = t.value();
  }
}

// The cached kernel: blocks walk pages_per_block pages, restaging only the segments the policy
// marks (a new block's cache holds NaNs, so a segment read before it is staged shows).
void emulate_cached(const LaunchPlan& p, const BucketLayout& lay,
                    const std::vector<std::int64_t>& out_hi, const std::vector<const double*>& in,
                    double* out) {
  const int slots = p.nf + p.nc;
  const int G = 1 << p.lanes_log2;
  const int nf = p.nf;
  auto const_part = [&](std::int64_t page, std::int64_t ol) {
    double c = 0;
    for (int s = nf; s < slots; ++s)
      c += in[s][out_hi[page * p.nip + s] + p.out_lo[ol * p.nip + s]];
    return c;
  };
  std::size_t cache_elems = 0;
  for (int f = 0; f < nf; ++f)
    if (p.cached_mask >> f & 1) cache_elems += lay.m_f[f] * p.pitch[f];
  std::vector<double> cache(cache_elems, std::nan(""));
  for (std::int64_t b = 0; b < p.blocks; ++b) {
    const std::int64_t first = b * p.pages_per_block;
    const std::int64_t last = std::min(p.n_pages, first + p.pages_per_block);
    std::fill(cache.begin(), cache.end(), std::nan(""));  // a new block sees garbage
    for (std::int64_t page = first; page < last; ++page) {
      const std::uint32_t bits = page == first ? p.cached_mask : p.refetch[page];
      for (int f = 0; f < nf; ++f) {
        if (!(bits >> f & 1)) continue;
        const double* src = in[f] + out_hi[page * p.nip + f];
        for (int e = 0; e < p.seg_size[f]; ++e) {
          const int lo = static_cast<int>(p.div_mf[f].div(e));
          const int s = e - lo * static_cast<int>(lay.m_f[f]);
          cache.at(p.seg_off[f] + s * p.pitch[f] + lo) = src[e];
        }
      }
      for (std::int64_t ol = 0; ol < p.P; ++ol) {
        const double c = const_part(page, ol);
        HostLse total;
        for (int g = 0; g < G; ++g) {
          HostLse l;
          for (std::int64_t m = g; m < p.M; m += G) {
            double x = c;
            for (int f = 0; f < nf; ++f) {
              const std::int32_t t = p.sum_lo[m * p.nfp + f];
              if (p.cached_mask >> f & 1)
                x += cache.at(p.seg_off[f] + p.cache_lo[ol * p.nfp + f] + t);
              else
                x += in[f][out_hi[page * p.nip + f] + p.cache_lo[ol * p.nfp + f] + t];
            }
            l.add(x);
          }
          total.merge(l);
        }
        out[page * p.P + ol] = total.value();
      }
    }
  }
}

}  // namespace

void emulate(const LaunchPlan& p, const BucketLayout& lay, std::span<const InputTable> inputs,
             double* out) {
  const std::vector<std::int64_t> out_hi = host_out_hi(p);  // the device may fill its own
  const std::vector<const double*> in = slot_inputs(p, inputs);
  if (p.variant == Variant::plain)
    emulate_plain(p, out_hi, in, out);
  else
    emulate_cached(p, lay, out_hi, in, out);
}

}  // namespace kinfer::gpu
