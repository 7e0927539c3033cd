// Order statistics for timing samples: the median and a distribution-free confidence interval.
#pragma once
#include <vector>

namespace ksol {

struct MedianCI {
  double median = 0, low = 0, high = 0;  // 95% CI of the median from order statistics
};
double median(std::vector<double> v);
double mean(const std::vector<double>& v);
MedianCI median_ci(std::vector<double> v);
// Relative spread (max-min)/median of a few medians, for cross-process stability reports.
double relative_spread(const std::vector<double>& v);

}  // namespace ksol
