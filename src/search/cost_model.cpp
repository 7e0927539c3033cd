#include "search/cost_model.h"

#include <cmath>
#include <numeric>

namespace ksol::search {

std::vector<int> CostModel::features(const codegen::Schedule& s, bool grow) {
  std::vector<int> f;
  for (auto& [k, v] : s) {
    std::string key = k + "=" + v;
    auto it = index_.find(key);
    if (it == index_.end()) {
      if (!grow) continue;
      it = index_.emplace(key, static_cast<int>(index_.size())).first;
    }
    f.push_back(it->second);
  }
  return f;
}

void CostModel::observe(const codegen::Schedule& s, double log_time) {
  if (!std::isfinite(log_time)) return;
  rows_.push_back(features(s, true));
  y_.push_back(log_time);
}

void CostModel::fit(double lambda) {
  const size_t n = index_.size();
  w_.assign(n, 0.0);
  if (y_.empty()) return;
  bias_ = std::accumulate(y_.begin(), y_.end(), 0.0) / static_cast<double>(y_.size());
  if (n == 0) return;
  // Normal equations (X'X + lambda I) w = X'(y - mean), X one-hot: X'X counts co-occurrences.
  std::vector<double> a(n * n, 0.0), b(n, 0.0);
  for (size_t r = 0; r < rows_.size(); ++r) {
    double t = y_[r] - bias_;
    for (int i : rows_[r]) {
      b[static_cast<size_t>(i)] += t;
      for (int j : rows_[r]) a[static_cast<size_t>(i) * n + static_cast<size_t>(j)] += 1.0;
    }
  }
  for (size_t i = 0; i < n; ++i) a[i * n + i] += lambda;
  // Gaussian elimination with partial pivoting (the matrix is symmetric positive definite).
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[p * n + c])) p = r;
    if (p != c) {
      for (size_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[p * n + k]);
      std::swap(b[c], b[p]);
    }
    double d = a[c * n + c];
    if (std::fabs(d) < 1e-12) continue;
    for (size_t r = c + 1; r < n; ++r) {
      double f = a[r * n + c] / d;
      if (f == 0) continue;
      for (size_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    double d = a[c * n + c];
    if (std::fabs(d) < 1e-12) continue;
    double v = b[c];
    for (size_t k = c + 1; k < n; ++k) v -= a[c * n + k] * w_[k];
    w_[c] = v / d;
  }
}

double CostModel::predict(const codegen::Schedule& s) const {
  double v = bias_;
  for (auto& [k, val] : s) {
    auto it = index_.find(k + "=" + val);
    if (it != index_.end() && static_cast<size_t>(it->second) < w_.size()) v += w_[static_cast<size_t>(it->second)];
  }
  return v;
}

}  // namespace ksol::search
