#include "gpu/random_bucket.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

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

namespace {

[[noreturn]] void bad_spec(const std::string& spec, const std::string& what) {
  throw std::invalid_argument("bucket spec '" + spec + "': " + what +
                              " (expected CARDS/N_MARG/INPUT/..., e.g. 6,2,3/1/0,2/1,2)");
}

// The fields of `s` between `sep`s (none for an empty `s`: an input over no variable).
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  if (s.empty() && sep == ',') return parts;
  for (std::size_t p = 0;;) {
    const std::size_t q = s.find(sep, p);
    parts.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) return parts;
    p = q + 1;
  }
}

// A non-negative integer, all of `field`.
int spec_int(const std::string& spec, const std::string& field, const char* what) {
  std::size_t used = 0;
  int v = -1;
  try {
    v = std::stoi(field, &used);
  } catch (const std::exception&) {
  }
  if (field.empty() || used != field.size() || v < 0)
    bad_spec(spec, std::string(what) + " '" + field + "' is not a non-negative integer");
  return v;
}

}  // namespace

BucketSpec parse_bucket_spec(const std::string& spec) {
  const std::vector<std::string> parts = split(spec, '/');
  if (parts.size() < 3) bad_spec(spec, "fewer than three '/'-separated parts");
  BucketSpec b;
  for (const std::string& c : split(parts[0], ',')) {
    const int card = spec_int(spec, c, "cardinality");
    if (card < 1) bad_spec(spec, "a cardinality of 0");
    b.shape.card.push_back(card);
  }
  const int nv = static_cast<int>(b.shape.card.size());
  for (int i = 0; i < nv; ++i) b.shape.vars.push_back(i);
  b.shape.n_marg = spec_int(spec, parts[1], "the number of summed variables");
  if (b.shape.n_marg > nv)
    bad_spec(spec, std::to_string(b.shape.n_marg) + " summed variables of " + std::to_string(nv));
  for (std::size_t i = 2; i < parts.size(); ++i) {
    std::vector<int> sc;
    for (const std::string& v : split(parts[i], ',')) {
      const int pos = spec_int(spec, v, "variable position");
      if (pos >= nv)
        bad_spec(spec, "input " + std::to_string(i - 1) + " names position " + std::to_string(pos) +
                           " of " + std::to_string(nv) + " variables");
      if (!sc.empty() && pos <= sc.back())
        bad_spec(spec, "input " + std::to_string(i - 1) + "'s positions are not increasing");
      sc.push_back(pos);
    }
    b.scopes.push_back(std::move(sc));
  }
  return b;
}

std::string bucket_spec(const BucketShape& shape, const std::vector<std::vector<int>>& scopes) {
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) s.push_back(',');
      s.append(std::to_string(v[i]));
    }
    return s;
  };
  std::string spec = list(shape.card);
  spec.push_back('/');
  spec.append(std::to_string(shape.n_marg));
  for (const auto& sc : scopes) {
    std::vector<int> pos;
    for (int v : sc)
      pos.push_back(static_cast<int>(std::find(shape.vars.begin(), shape.vars.end(), v) -
                                     shape.vars.begin()));
    spec.push_back('/');
    spec.append(list(pos));
  }
  return spec;
}

RandomBucket spec_bucket(const std::string& spec, std::uint64_t seed) {
  BucketSpec parsed = parse_bucket_spec(spec);
  RandomBucket b;
  b.shape = std::move(parsed.shape);
  b.scopes = std::move(parsed.scopes);
  std::vector<std::int64_t> st(b.shape.vars.size());
  for (std::size_t i = 0; i < b.scopes.size(); ++i) {
    const std::int64_t n = input_strides(b.shape, b.scopes[i], st.data());
    b.data.emplace_back(static_cast<std::size_t>(n));
    double* d = b.data.back().data();
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < n; ++e) {
      std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i + 1) * 0xbf58476d1ce4e5b9ull +
                        static_cast<std::uint64_t>(e) * 0x94d049bb133111ebull;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      d[e] = z % 100 == 0 ? -std::numeric_limits<double>::infinity()
                          : -4.0 * static_cast<double>(z >> 11) * 0x1p-53;
    }
  }
  return b;
}

}  // namespace kinfer::gpu
