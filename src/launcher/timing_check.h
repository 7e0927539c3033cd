// Whether a launcher's reported call times agree with the worker's own clock. The launcher
// times each call with CUDA events in its own context, which the worker cannot read; the worker
// brackets every call's round trip with its host clock and, before the candidate is loaded,
// measures the round trip of empty calls (the calibration). A reported time is accepted only
// when it is consistent with both: docs/HARNESS.md, "Isolation", states what a launcher that
// lies can gain within these bounds.
#pragma once
#include <string>
#include <vector>

namespace ksol::launcher {

struct BracketRule {
  double clock_slack_us = 2.0;  // a call's reported time may exceed its bracket by this (clock and event resolution)
  double tolerance_us = 10.0;   // the medians may disagree by this ...
  // ... plus this fraction of the reported median: on the H200 an honest 3 ms call's bracket
  // exceeded the calibrated overhead by 200 us (6.5%) when the worker slept through it.
  double tolerance_rel = 0.10;
};

struct BracketVerdict {
  bool ok = true;
  std::string message;             // why not, when not
  double overhead_us = 0;          // median round-trip overhead of the empty calls
  double median_event_us = 0;      // the launcher's median
  double median_bracket_us = 0;    // the worker's own median
  double median_slack_us = 0;      // median of bracket - event over the calls
  double slack_p10_us = 0, slack_p90_us = 0;  // its spread: a shift of every call, or a tail of some
  double tolerance_us = 0;         // the tolerance applied to the medians
  int calls_over_bracket = 0;      // calls reported longer than their bracket (+ slack)
};

// `overhead_us`: bracket - event of each empty calibration call; `event_us`, `bracket_us`: per
// call, the launcher's time and the worker's. Rules: (1) no call may be reported longer than its
// bracket plus the clock slack; (2) the median of bracket - event may exceed the calibrated
// overhead by at most the tolerance; (3) the reported median may be below the worker's median
// bracket minus the calibrated overhead by at most the tolerance. Throws std::invalid_argument on
// empty or mismatched inputs.
BracketVerdict check_brackets(const std::vector<double>& overhead_us, const std::vector<double>& event_us,
                              const std::vector<double>& bracket_us, const BracketRule& rule = {});

}  // namespace ksol::launcher
