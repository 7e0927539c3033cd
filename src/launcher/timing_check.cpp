#include "launcher/timing_check.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace ksol::launcher {
namespace {
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
// The nearest-rank quantile q of a non-empty vector.
double rank_of(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}
}  // namespace

BracketVerdict check_brackets(const std::vector<double>& overhead_us, const std::vector<double>& event_us,
                              const std::vector<double>& bracket_us, const BracketRule& rule) {
  if (overhead_us.empty()) throw std::invalid_argument("check_brackets: no calibration");
  if (event_us.empty() || event_us.size() != bracket_us.size()) throw std::invalid_argument("check_brackets: one bracket per call");
  BracketVerdict v;
  v.overhead_us = median_of(overhead_us);
  v.median_event_us = median_of(event_us);
  v.median_bracket_us = median_of(bracket_us);
  std::vector<double> slack(event_us.size());
  for (size_t i = 0; i < event_us.size(); ++i) {
    slack[i] = bracket_us[i] - event_us[i];
    if (event_us[i] > bracket_us[i] + rule.clock_slack_us) ++v.calls_over_bracket;
  }
  v.median_slack_us = median_of(slack);
  v.slack_p10_us = rank_of(slack, 0.1);
  v.slack_p90_us = rank_of(slack, 0.9);
  v.tolerance_us = rule.tolerance_us + rule.tolerance_rel * v.median_event_us;
  std::ostringstream m;
  m.precision(4);
  if (v.calls_over_bracket > 0) {
    size_t i = 0;
    while (!(event_us[i] > bracket_us[i] + rule.clock_slack_us)) ++i;
    m << v.calls_over_bracket << " call(s) reported longer than the harness's clock saw them take (call " << i << ": " << event_us[i]
      << " us reported, " << bracket_us[i] << " us round trip)";
  } else if (v.median_slack_us > v.overhead_us + v.tolerance_us) {
    m << "the round trips exceed the reported times by " << v.median_slack_us << " us (median; p10 " << v.slack_p10_us << ", p90 "
      << v.slack_p90_us << "), the calibrated overhead is " << v.overhead_us << " us (tolerance " << v.tolerance_us
      << " us): the reported times are shorter than the calls";
  } else if (v.median_event_us < v.median_bracket_us - v.overhead_us - v.tolerance_us) {
    m << "the reported median " << v.median_event_us << " us is below the harness's median round trip " << v.median_bracket_us
      << " us less the calibrated overhead " << v.overhead_us << " us (tolerance " << v.tolerance_us << " us)";
  }
  v.message = m.str();
  v.ok = v.message.empty();
  if (!v.ok) v.message = "timing not consistent with the harness's clock: " + v.message;
  return v;
}

}  // namespace ksol::launcher
