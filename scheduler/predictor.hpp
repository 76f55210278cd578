#pragma once
// Runtime of a bucket's kernel on one device, predicted from its features and fitted to
// calibration measurements. Three candidates, the best chosen by 5-fold cross-validation on
// the median relative error (the figure the scheduler is judged by):
//   loglinear:      t = exp(c) + exp(w . x)  (a fixed overhead plus a power law in the
//                   features; fitted by Levenberg-Marquardt on log t). Extrapolates sanely to
//                   buckets larger than any calibrated one.
//   loglinear+tree: the above times exp(a regression tree on its log residuals), for the
//                   kernel's regimes (code paths) that a power law misses.
//   tree:           a regression tree on log t alone (paper 001's choice); cannot extrapolate.
#include <array>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scheduler/features.hpp"

namespace kinfer::sched {

struct Sample {
  BucketFeatures f;
  double seconds = 0;
};

using FeatureVector = std::array<double, BucketFeatures::kCount>;

// CART for regression: splits minimize the squared error, leaves hold the mean.
struct RegressionTree {
  struct Node {
    int feature = -1;  // -1: leaf
    double threshold = 0;
    int left = -1, right = -1;
    double value = 0;
  };
  std::vector<Node> nodes;
  double predict(const FeatureVector& x) const;
  static RegressionTree fit(std::span<const FeatureVector> x, std::span<const double> y,
                            int max_depth, int min_leaf);
};

enum class ModelKind { loglinear, loglinear_tree, tree };
const char* to_string(ModelKind k);

struct RuntimeModel {
  ModelKind kind = ModelKind::loglinear;
  double c = -30;                                      // log seconds of the fixed overhead
  std::array<double, BucketFeatures::kCount + 1> w{};  // intercept, then standardized features
  FeatureVector mean{}, scale{};
  RegressionTree tree;
  int samples = 0;
  // Cross-validated median relative error of each candidate (NaN when not evaluated).
  double cv_loglinear = 0, cv_loglinear_tree = 0, cv_tree = 0;

  double predict(const BucketFeatures& f) const;  // seconds
  // The same model with its predictions above the fixed overhead exp(c) times `factor` (the
  // tree kind, which has no separate overhead: every prediction).
  RuntimeModel scaled(double factor) const;
  static RuntimeModel fit(std::span<const Sample> samples);
  // One candidate only, no cross-validation.
  static RuntimeModel fit_kind(std::span<const Sample> samples, ModelKind kind);

  nlohmann::json to_json() const;
  static RuntimeModel from_json(const nlohmann::json& j);  // throws std::invalid_argument
};

// median over samples of |predicted / measured - 1|
double median_relative_error(const RuntimeModel& m, std::span<const Sample> samples);

}  // namespace kinfer::sched
