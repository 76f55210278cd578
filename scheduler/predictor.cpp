#include "scheduler/predictor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include "engine/json.hpp"
#include "engine/util.hpp"

namespace kinfer::sched {

namespace {

constexpr int K = BucketFeatures::kCount;
constexpr int P = K + 1;  // linear parameters: intercept + features
using Vec = std::array<double, P>;
using Mat = std::array<std::array<double, P + 1>, P + 1>;  // room for c as well

// Solves A x = b (n x n, symmetric positive definite after damping) by Gaussian elimination
// with partial pivoting; returns false when singular.
bool solve(Mat a, std::array<double, P + 1> b, int n, std::array<double, P + 1>& x) {
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[piv][col])) piv = r;
    if (std::abs(a[piv][col]) < 1e-300) return false;
    std::swap(a[piv], a[col]);
    std::swap(b[piv], b[col]);
    for (int r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int k = col; k < n; ++k) a[r][k] -= f * a[col][k];
      b[r] -= f * b[col];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < n; ++k) s -= a[r][k] * x[k];
    x[r] = s / a[r][r];
  }
  return true;
}

struct Standardized {
  std::vector<Vec> x;  // with a leading 1
  std::vector<double> logt;
};

// log(exp(c) + exp(z)) without overflow
double log_add(double c, double z) {
  const double m = std::max(c, z);
  return m + std::log(std::exp(c - m) + std::exp(z - m));
}

double linear(const RuntimeModel& m, const Vec& x) {
  double z = 0;
  for (int j = 0; j < P; ++j) z += m.w[j] * x[j];
  return z;
}

Vec standardize(const RuntimeModel& m, const FeatureVector& f) {
  Vec x;
  x[0] = 1;
  for (int j = 0; j < K; ++j) x[j + 1] = (f[j] - m.mean[j]) / m.scale[j];
  return x;
}

// Levenberg-Marquardt on r_i = log t_i - log(exp(c) + exp(w . x_i)), with a small ridge on w
// (features are correlated: states = out x marg) so that the fit stays well-posed.
void fit_loglinear(RuntimeModel& m, std::span<const Sample> s) {
  const std::size_t n = s.size();
  m.mean.fill(0);
  m.scale.fill(0);
  for (const Sample& x : s) {
    const auto v = x.f.values();
    for (int j = 0; j < K; ++j) m.mean[j] += v[j] / n;
  }
  for (const Sample& x : s) {
    const auto v = x.f.values();
    for (int j = 0; j < K; ++j) m.scale[j] += (v[j] - m.mean[j]) * (v[j] - m.mean[j]) / n;
  }
  for (double& sc : m.scale) sc = sc > 1e-12 ? std::sqrt(sc) : 1.0;
  Standardized d;
  double tmin = std::numeric_limits<double>::infinity();
  for (const Sample& x : s) {
    d.x.push_back(standardize(m, x.f.values()));
    d.logt.push_back(std::log(x.seconds));
    tmin = std::min(tmin, x.seconds);
  }
  const double ridge = 1e-3 * n;
  // Start: the overhead at half the fastest sample, w by ridge least squares on log t.
  m.c = std::log(0.5 * tmin);
  {
    Mat a{};
    std::array<double, P + 1> b{}, sol{};
    for (std::size_t i = 0; i < n; ++i)
      for (int j = 0; j < P; ++j) {
        b[j] += d.x[i][j] * d.logt[i];
        for (int k = 0; k < P; ++k) a[j][k] += d.x[i][j] * d.x[i][k];
      }
    for (int j = 1; j < P; ++j) a[j][j] += ridge;
    if (solve(a, b, P, sol))
      for (int j = 0; j < P; ++j) m.w[j] = sol[j];
  }
  auto sse = [&](const RuntimeModel& mm) {
    double e = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double r = d.logt[i] - log_add(mm.c, linear(mm, d.x[i]));
      e += r * r;
    }
    for (int j = 1; j < P; ++j) e += ridge * mm.w[j] * mm.w[j];
    return e;
  };
  double lambda = 1e-2, err = sse(m);
  for (int it = 0; it < 200; ++it) {
    // parameters: [c, w0..wK]
    Mat a{};
    std::array<double, P + 1> g{}, step{};
    for (std::size_t i = 0; i < n; ++i) {
      const double z = linear(m, d.x[i]);
      const double pred = log_add(m.c, z);
      const double r = d.logt[i] - pred;
      std::array<double, P + 1> jac;
      jac[0] = std::exp(m.c - pred);
      const double gz = std::exp(z - pred);
      for (int j = 0; j < P; ++j) jac[j + 1] = gz * d.x[i][j];
      for (int j = 0; j <= P; ++j) {
        g[j] += jac[j] * r;
        for (int k = 0; k <= P; ++k) a[j][k] += jac[j] * jac[k];
      }
    }
    for (int j = 2; j <= P; ++j) {
      a[j][j] += ridge;
      g[j] -= ridge * m.w[j - 1];
    }
    bool improved = false;
    while (lambda < 1e10) {
      Mat damped = a;
      for (int j = 0; j <= P; ++j) damped[j][j] += lambda * (a[j][j] + 1e-12);
      if (!solve(damped, g, P + 1, step)) {
        lambda *= 10;
        continue;
      }
      RuntimeModel trial = m;
      trial.c += step[0];
      for (int j = 0; j < P; ++j) trial.w[j] += step[j + 1];
      const double e = sse(trial);
      if (e < err) {
        const double gain = err - e;
        m = trial;
        err = e;
        lambda = std::max(1e-9, lambda / 3);
        improved = gain > 1e-12 * (1 + err);
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
  }
}

void split_node(RegressionTree& t, int node, std::vector<int>& idx,
                std::span<const FeatureVector> x, std::span<const double> y, int depth,
                int max_depth, int min_leaf) {
  double sum = 0;
  for (int i : idx) sum += y[i];
  t.nodes[node].value = sum / idx.size();
  if (depth >= max_depth || static_cast<int>(idx.size()) < 2 * min_leaf) return;
  double best_gain = 1e-12, best_thr = 0;
  int best_f = -1;
  const double n = static_cast<double>(idx.size());
  for (int f = 0; f < K; ++f) {
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a][f] < x[b][f]; });
    double left = 0;
    for (std::size_t k = 0; k + 1 < idx.size(); ++k) {
      left += y[idx[k]];
      const int nl = static_cast<int>(k + 1), nr = static_cast<int>(idx.size()) - nl;
      if (nl < min_leaf || nr < min_leaf) continue;
      if (x[idx[k]][f] == x[idx[k + 1]][f]) continue;
      // reduction of the squared error = nl*ml^2 + nr*mr^2 - n*m^2
      const double ml = left / nl, mr = (sum - left) / nr, mm = sum / n;
      const double gain = nl * ml * ml + nr * mr * mr - n * mm * mm;
      if (gain > best_gain) {
        best_gain = gain;
        best_f = f;
        best_thr = 0.5 * (x[idx[k]][f] + x[idx[k + 1]][f]);
      }
    }
  }
  if (best_f < 0) return;
  std::vector<int> l, r;
  for (int i : idx) (x[i][best_f] <= best_thr ? l : r).push_back(i);
  t.nodes[node].feature = best_f;
  t.nodes[node].threshold = best_thr;
  const int li = static_cast<int>(t.nodes.size());
  t.nodes.emplace_back();
  const int ri = static_cast<int>(t.nodes.size());
  t.nodes.emplace_back();
  t.nodes[node].left = li;
  t.nodes[node].right = ri;
  split_node(t, li, l, x, y, depth + 1, max_depth, min_leaf);
  split_node(t, ri, r, x, y, depth + 1, max_depth, min_leaf);
}

constexpr int kTreeDepth = 5, kTreeLeaf = 6;

}  // namespace

double RegressionTree::predict(const FeatureVector& x) const {
  if (nodes.empty()) return 0;
  int n = 0;
  while (nodes[n].feature >= 0)
    n = x[nodes[n].feature] <= nodes[n].threshold ? nodes[n].left : nodes[n].right;
  return nodes[n].value;
}

RegressionTree RegressionTree::fit(std::span<const FeatureVector> x, std::span<const double> y,
                                   int max_depth, int min_leaf) {
  RegressionTree t;
  if (x.empty()) return t;
  t.nodes.emplace_back();
  std::vector<int> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  split_node(t, 0, idx, x, y, 0, max_depth, min_leaf);
  return t;
}

const char* to_string(ModelKind k) {
  switch (k) {
    case ModelKind::loglinear:
      return "loglinear";
    case ModelKind::loglinear_tree:
      return "loglinear+tree";
    case ModelKind::tree:
      return "tree";
  }
  return "?";
}

double RuntimeModel::predict(const BucketFeatures& f) const {
  const FeatureVector v = f.values();
  if (kind == ModelKind::tree) return std::exp(tree.predict(v));
  double lp = log_add(c, linear(*this, standardize(*this, v)));
  if (kind == ModelKind::loglinear_tree) lp += tree.predict(v);
  return std::exp(lp);
}

RuntimeModel RuntimeModel::scaled(double factor) const {
  if (!(factor > 0)) throw std::invalid_argument("a model's scale must be positive");
  RuntimeModel m = *this;
  const double l = std::log(factor);
  if (kind == ModelKind::tree) {
    for (RegressionTree::Node& n : m.tree.nodes)
      if (n.feature < 0) n.value += l;
  } else {
    m.w[0] += l;  // the intercept of the power law, on top of the overhead exp(c)
  }
  return m;
}

RuntimeModel RuntimeModel::fit_kind(std::span<const Sample> s, ModelKind kind) {
  if (s.empty()) throw std::invalid_argument("no calibration samples to fit");
  for (const Sample& x : s)
    if (!(x.seconds > 0)) throw std::invalid_argument("a calibration sample has no positive time");
  RuntimeModel m;
  m.kind = kind;
  m.samples = static_cast<int>(s.size());
  std::vector<FeatureVector> x;
  std::vector<double> y;
  for (const Sample& v : s) x.push_back(v.f.values());
  if (kind != ModelKind::tree) fit_loglinear(m, s);
  if (kind != ModelKind::loglinear) {
    for (const Sample& v : s) {
      double target = std::log(v.seconds);
      if (kind == ModelKind::loglinear_tree)
        target -= log_add(m.c, linear(m, standardize(m, v.f.values())));
      y.push_back(target);
    }
    m.tree = RegressionTree::fit(x, y, kTreeDepth, kTreeLeaf);
  }
  return m;
}

double median_relative_error(const RuntimeModel& m, std::span<const Sample> s) {
  std::vector<double> e;
  for (const Sample& x : s) e.push_back(std::abs(m.predict(x.f) / x.seconds - 1));
  return median(e);
}

RuntimeModel RuntimeModel::fit(std::span<const Sample> s) {
  // 5-fold cross-validation; folds by a fixed stride so that results are reproducible.
  const ModelKind kinds[] = {ModelKind::loglinear, ModelKind::loglinear_tree, ModelKind::tree};
  double cv[3];
  const int folds = s.size() >= 25 ? 5 : 0;
  for (int k = 0; k < 3; ++k) {
    if (folds == 0 || (kinds[k] != ModelKind::loglinear && s.size() < 40)) {
      cv[k] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    std::vector<double> errors;
    for (int fold = 0; fold < folds; ++fold) {
      std::vector<Sample> train, test;
      for (std::size_t i = 0; i < s.size(); ++i)
        (static_cast<int>(i % folds) == fold ? test : train).push_back(s[i]);
      const RuntimeModel m = fit_kind(train, kinds[k]);
      for (const Sample& x : test) errors.push_back(std::abs(m.predict(x.f) / x.seconds - 1));
    }
    cv[k] = median(errors);
  }
  int best = 0;
  for (int k = 1; k < 3; ++k)
    if (!std::isnan(cv[k]) && !(cv[k] >= cv[best])) best = k;
  RuntimeModel m = fit_kind(s, kinds[best]);
  m.cv_loglinear = cv[0];
  m.cv_loglinear_tree = cv[1];
  m.cv_tree = cv[2];
  return m;
}

namespace {
double num(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}
}  // namespace

nlohmann::json RuntimeModel::to_json() const {
  nlohmann::json tree_nodes = nlohmann::json::array();
  for (const auto& n : tree.nodes)
    tree_nodes.push_back({n.feature, n.threshold, n.left, n.right, n.value});
  return {{"kind", to_string(kind)},
          {"features", BucketFeatures::names()},
          {"log_overhead", c},
          {"w", w},
          {"mean", mean},
          {"scale", scale},
          {"tree", tree_nodes},
          {"samples", samples},
          {"cv_median_relative_error",
           {{"loglinear", number_or_null(cv_loglinear)},
            {"loglinear+tree", number_or_null(cv_loglinear_tree)},
            {"tree", number_or_null(cv_tree)}}}};
}

RuntimeModel RuntimeModel::from_json(const nlohmann::json& j) {
  try {
    RuntimeModel m;
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "loglinear")
      m.kind = ModelKind::loglinear;
    else if (kind == "loglinear+tree")
      m.kind = ModelKind::loglinear_tree;
    else if (kind == "tree")
      m.kind = ModelKind::tree;
    else
      throw std::invalid_argument("unknown model kind '" + kind + "'");
    const auto names = j.at("features").get<std::vector<std::string>>();
    if (names.size() != static_cast<std::size_t>(K) ||
        !std::equal(names.begin(), names.end(), BucketFeatures::names().begin()))
      throw std::invalid_argument("the model was fitted on other features; calibrate again");
    m.c = j.at("log_overhead").get<double>();
    m.w = j.at("w").get<decltype(m.w)>();
    m.mean = j.at("mean").get<FeatureVector>();
    m.scale = j.at("scale").get<FeatureVector>();
    for (const auto& n : j.at("tree")) {
      RegressionTree::Node node;
      node.feature = n.at(0).get<int>();
      node.threshold = n.at(1).get<double>();
      node.left = n.at(2).get<int>();
      node.right = n.at(3).get<int>();
      node.value = n.at(4).get<double>();
      // children after their parent: prediction always walks forward and ends
      const int size = static_cast<int>(j.at("tree").size()),
                here = static_cast<int>(m.tree.nodes.size());
      if (node.feature >= K || (node.feature >= 0 && (node.left <= here || node.left >= size ||
                                                      node.right <= here || node.right >= size)))
        throw std::invalid_argument("a regression tree node points outside the tree");
      m.tree.nodes.push_back(node);
    }
    m.samples = j.value("samples", 0);
    if (j.contains("cv_median_relative_error")) {
      const auto& cv = j["cv_median_relative_error"];
      m.cv_loglinear = num(cv.value("loglinear", nlohmann::json(nullptr)));
      m.cv_loglinear_tree = num(cv.value("loglinear+tree", nlohmann::json(nullptr)));
      m.cv_tree = num(cv.value("tree", nlohmann::json(nullptr)));
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed runtime model: ") + e.what());
  }
}

}  // namespace kinfer::sched
