#include "gpu/random_bucket.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kinfer::gpu {

std::vector<InputTable> RandomBucket::inputs() const {
  std::vector<InputTable> in;
  for (std::size_t f = 0; f < data.size(); ++f) in.push_back({data[f].data(), scopes[f]});
  return in;
}

double RandomBucket::states() const {
  return static_cast<double>(shape.output_size()) * static_cast<double>(shape.marg_size());
}

RandomBucket random_bucket(std::mt19937_64& rng, const RandomBucketOptions& opt) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto real = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  RandomBucket b;
  // pass 1: summed variables whose configurations multiply to a number in [min_marg, max_marg]
  const int target_marg = uni(opt.min_marg, opt.max_marg);
  std::vector<int> marg_card;
  int m = 1;
  while (m < target_marg) {
    const int c = std::min(uni(2, std::min(opt.max_card, 8)), std::max(2, target_marg / m));
    if (m * c > opt.max_marg) break;
    marg_card.push_back(c);
    m *= c;
  }
  if (marg_card.empty()) marg_card.push_back(std::max(2, opt.min_marg));
  // pass 2: output variables until the state space reaches its drawn size
  const double log2_target = real(opt.min_log2_states, opt.max_log2_states);
  double log2_states = 0;
  for (int c : marg_card) log2_states += std::log2(c);
  std::vector<int> out_card;
  const int max_vars = opt.max_vars_per_function;
  while (log2_states < log2_target &&
         static_cast<int>(out_card.size() + marg_card.size()) < max_vars) {
    int c = uni(1, opt.max_card);
    if (log2_states + std::log2(c) > opt.max_log2_states) c = 2;
    if (log2_states + std::log2(c) > opt.max_log2_states) break;
    out_card.push_back(c);
    log2_states += std::log2(c);
  }
  const int nv = static_cast<int>(out_card.size() + marg_card.size());
  b.shape.n_marg = static_cast<int>(marg_card.size());
  std::vector<int> ids(nv);
  for (int i = 0; i < nv; ++i) ids[i] = 100 + i * 3;  // variable ids need not be dense
  b.shape.vars = ids;
  b.shape.card = out_card;
  b.shape.card.insert(b.shape.card.end(), marg_card.begin(), marg_card.end());
  // pass 3: function scopes: random subsets, every variable in some function, at least one
  // function with a summed variable, and one function over most of the bucket (as the
  // largest child message of a real bucket)
  const int nfun = uni(opt.min_functions, opt.max_functions);
  std::vector<std::vector<char>> in(nfun, std::vector<char>(nv, 0));
  const double keep = real(0.3, 0.9);
  for (int f = 0; f < nfun; ++f)
    for (int i = 0; i < nv; ++i) in[f][i] = real(0, 1) < keep;
  for (int i = 0; i < nv; ++i) in[0][i] = in[0][i] || real(0, 1) < 0.6;
  for (int i = 0; i < nv; ++i) {
    bool any = false;
    for (int f = 0; f < nfun; ++f) any = any || in[f][i];
    if (!any) in[uni(0, nfun - 1)][i] = 1;
  }
  in[0][nv - 1] = 1;
  for (int f = 0; f < nfun; ++f) {
    std::vector<int> sc;
    std::int64_t size = 1;
    for (int i = 0; i < nv; ++i)
      if (in[f][i]) {
        sc.push_back(ids[i]);
        size *= b.shape.card[i];
      }
    // data: log values in a range drawn per function (some very wide), a few zeros
    const double range = real(0, 1) < 0.2 ? 600.0 : real(0.5, 8.0);
    const double shift = real(-5, 2);
    std::vector<double> d(size);
    for (auto& x : d)
      x = real(0, 1) < opt.zero_fraction ? -std::numeric_limits<double>::infinity()
                                         : shift - real(0, range);
    b.scopes.push_back(std::move(sc));
    b.data.push_back(std::move(d));
  }
  return b;
}

}  // namespace kinfer::gpu
