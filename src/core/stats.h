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

// The timing gate's stopping rule for a series of samples in the order they were taken. `rel_ci`:
// the median's 95% CI half-width over the median. `drift`: the median of the last quarter of the
// series against that of the first three quarters, their difference over the whole median. The
// series may stop once rel_ci is at most `target_rel_ci` and drift at most 2.5 times that (for
// steady samples the two medians differ by about 2.3 times the whole's CI half-width, at 95%). A
// power-capped GPU's clock steps: on an H200 the bf16 GEMM at 8192^3 ran ~30-50 samples at
// 1345-1370 us and then settled at 1450-1570, and the CI alone stopped it right after the step,
// inside the fast majority; with the drift check sampling goes on until the step is a minority.
// Below 8 samples (a last quarter of one) the drift is not measured: 0.
struct SampleStop {
  bool stop = false;
  double rel_ci = 0, drift = 0;
};
constexpr double kDriftOverCi = 2.5;
SampleStop sampling_settled(const std::vector<double>& samples, double target_rel_ci);

}  // namespace ksol
