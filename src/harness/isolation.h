// Internal to src/harness: the worker's side of running candidates in a launcher process
// (src/launcher, docs/HARNESS.md "Isolation"). The worker keeps its context, its buffers, its
// references and the verdict; a launcher maps the buffer sets it is handed through CUDA IPC and
// calls the candidate on them. One launcher per evaluation (or screen), never reused: the next
// one is started as soon as an evaluation has taken its own, and the evaluation waits for it to
// be ready before its timing gate, so that its context is made while inputs are drawn, references
// run and the correctness gate checks, never while anything is timed.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/buffers.h"
#include "launcher/launcher.h"
#include "launcher/timing_check.h"

namespace ksol::harness_detail {

// Page size of the allocations a launcher maps (DeviceBuffer's granule).
constexpr size_t kIpcGranule = size_t{2} << 20;

class Isolated {
 public:
  // Takes the spare launcher (or starts one), waits for its context, gives it the dims and the
  // L2 read size, and calibrates the round trip with empty calls before anything is loaded, each
  // after `prepare` (the worker's own L2 flush, waited for, as before every real call).
  Isolated(const std::vector<int64_t>& dims, size_t flush_bytes, const std::function<void()>& prepare);
  ~Isolated();
  // Loads a library in the launcher: its index for call(). A library that does not load throws
  // LauncherError refused (with dlopen's words); a launcher that dies doing it, died.
  int load(const std::string& so);
  // Calls library `lib` on `s` (mapped on first use). The worker's own queued work must be done
  // (the caller syncs its stream): the launcher's call is bracketed by the worker's clock.
  launcher::CallResult call(int lib, BufferSet& s, const std::function<void()>& on_stream_done = {});
  const std::vector<double>& calibration() const { return calibration_; }
  launcher::BracketVerdict check(const std::vector<double>& event_us, const std::vector<double>& bracket_us) const;
  nlohmann::json describe() const;  // pid, calibration, calls, seconds: the result's `isolation`
  double start_seconds() const { return wait_s_ + setup_s_; }
  double round_trip_seconds() const { return overhead_s_; }

 private:
  std::unique_ptr<launcher::Launcher> l_;
  std::vector<double> calibration_;
  int next_set_ = 0;
  int calls_ = 0;
  double wait_s_ = 0, setup_s_ = 0, overhead_s_ = 0;
};

// Starts the spare launcher now if there is none (the worker's hello, the start and the end of
// an evaluation or screen).
void spawn_spare_launcher();
// Waits until the spare launcher's context exists, so that no context is being made while the
// calling evaluation times its candidate; a spare that fails is dropped (the next evaluation
// starts its own and reports why).
void await_spare_launcher();

// The bracket check's fields for a result's `timing.bracket`.
nlohmann::json bracket_json(const launcher::BracketVerdict& v);

}  // namespace ksol::harness_detail
