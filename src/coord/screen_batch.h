// A search's screen as the coordinator sees it: libraries timed in one worker call (ksol-worker's
// "screen" op, or the Python worker's for a module's candidates), and what happens when the
// worker breaks under a batch.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "coord/worker_client.h"

namespace ksol {

struct ScreenOptions {
  std::string size;
  uint64_t seed = 0;
  int rounds = 5, samples_per_round = 2;
  double warmup_seconds = 0.05;
  double max_seconds = 10;
  double drop_above = 3.0;
  double timeout_s = 120;  // per worker call
};

struct ScreenTime {
  std::string status = "failed";  // ok | failed (never a verdict on correctness: nothing was checked)
  double median_us = 0, ci_low_us = 0, ci_high_us = 0, min_us = 0;
  int samples = 0;
  bool dropped = false;            // stopped after the first round: far slower than the fastest
  std::string error_class, message;
};

struct ScreenBatch {
  std::vector<ScreenTime> times;   // one per library, in order
  double worker_seconds = 0;       // wall time of the worker calls (the GPU held)
  int calls = 0;                   // worker calls (more than one when a candidate broke one)
  int bracket_refused_first = 0;   // libraries the first pass's bracket rule refused: the batch was screened again
};

// Screens `n` libraries: `call` sends one worker request for a group of them (indices into the
// batch, in order) and returns the reply, whose result's "results" hold one time per library of
// the group (status, median_us, ci_low_us, ci_high_us, min_us, samples: the raw times, dropped,
// error_class, message). A worker that answers with an error of its own (it lives on, but could
// not screen) fails the group with it. Where the worker breaks under a group (a crash, a timeout,
// a malformed reply), a reply that names its culprit ("candidate": its index in the group, a
// sticky CUDA error; or, after a timeout, the last "screen: candidate K" line of its log) has that
// library blamed and the rest screened again; otherwise the group is halved until a broken call
// holds one library, which is blamed (timeout, crash or worker_error). When the bracket rule
// refused any library's times (error_class timing_inconsistent: the round trips on the host's clock
// exceed the reported times by more than the calibrated overhead allows), the libraries that ran are
// screened once more together, in a fresh launcher calibrated before it loads them, and theirs are
// the second pass's times (those blamed for breaking the worker keep the first verdict); the
// timing gate of a full evaluation also times a refusal once more.
ScreenBatch screen_in_groups(size_t n, const std::function<WorkerReply(const std::vector<size_t>&)>& call);

}  // namespace ksol
