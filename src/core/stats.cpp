#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace ksol {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

MedianCI median_ci(std::vector<double> v) {
  MedianCI r;
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  r.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  // The number of samples below the median is Binomial(n, 1/2); its normal approximation gives
  // the ranks that bracket the median with 95% confidence.
  double half = 1.96 * std::sqrt(static_cast<double>(n)) / 2.0;
  // 1-based ranks floor(n/2 - half) and ceil(1 + n/2 + half), as 0-based indices.
  long lo = static_cast<long>(std::floor(n / 2.0 - half)) - 1, hi = static_cast<long>(std::ceil(n / 2.0 + half));
  lo = std::clamp<long>(lo, 0, static_cast<long>(n) - 1);
  hi = std::clamp<long>(hi, 0, static_cast<long>(n) - 1);
  r.low = v[lo];
  r.high = v[hi];
  return r;
}

double relative_spread(const std::vector<double>& v) {
  if (v.empty()) return 0;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return (*hi - *lo) / median(v);
}

SampleStop sampling_settled(const std::vector<double>& samples, double target_rel_ci) {
  SampleStop r;
  if (samples.size() < 2) return r;
  MedianCI ci = median_ci(samples);
  if (ci.median <= 0) return r;
  auto mid = samples.begin() + static_cast<std::ptrdiff_t>(samples.size() - samples.size() / 4);
  double earlier = median(std::vector<double>(samples.begin(), mid)), last = median(std::vector<double>(mid, samples.end()));
  r.rel_ci = (ci.high - ci.low) / 2 / ci.median;
  r.drift = samples.size() < 8 ? 0 : std::abs(last - earlier) / ci.median;
  r.stop = r.rel_ci <= target_rel_ci && r.drift <= kDriftOverCi * target_rel_ci;
  return r;
}

}  // namespace ksol
