// The one record of an evaluation: a candidate at one size, as the harness decided it. The worker
// writes it as JSON (docs/PROTOCOL.md, "The evaluation record"); from_worker_result reads that
// once, and the same value goes on to the search, the store (Store::record) and the reports.
#pragma once

#include <cstdint>
#include <ostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksol {

// What an evaluation of one size concluded.
enum class Status {
  ok,           // every gate passed; the time is the candidate's
  failed,       // a gate refused it (failed_gate says which)
  suspect,      // passed the gates but measured faster than speed-of-light: never a result
  no_gpu,       // compiled and checked as far as a machine without a GPU can, not run
  skipped,      // already evaluated in the run this one resumes (its time is that run's)
  unsupported,  // no code generator implements this program for the task: an answer, not a failure
  // A baseline stopped after its first call(s) at a size: far slower than the fastest baseline
  // verified there, so it cannot be the comparator; neither verified nor timed in full, and never
  // a result (probe_us holds its one call's time, not a median).
  far_slower,
};

// Where an evaluation stopped, in the order the gates run (docs/HARNESS.md).
enum class Gate {
  none,         // no gate failed
  static_scan,  // gate 1: the source scan and the built library's imports ("static")
  compile,      // nvcc
  load,         // the built library or module could not be loaded (the Python worker)
  launch,       // the candidate returned an error or raised a CUDA error
  correctness,  // gate 2
  timing,       // gate 3, including the checks on timed calls
  integrity,    // the worker's own memory changed under the call
  screen,       // the search timed it beside the best and stopped: slower, never verified
  worker,       // the worker died, timed out or broke the protocol under it
};

const char* to_string(Status s);
const char* to_string(Gate g);
std::optional<Status> parse_status(std::string_view s);
std::optional<Gate> parse_gate(std::string_view s);  // "" is Gate::none
inline std::ostream& operator<<(std::ostream& o, Status s) { return o << to_string(s); }
inline std::ostream& operator<<(std::ostream& o, Gate g) { return o << (g == Gate::none ? "(none)" : to_string(g)); }

struct SizeEvaluation {
  std::string size;
  bool hidden = false;
  Status status = Status::failed;
  Gate failed_gate = Gate::none;
  std::string error_class;  // within the gate: wrong_result, timeout, forbidden_construct, ...
  std::string message;
  // The harness's measurement (zeros when it was not timed).
  double median_us = 0, ci_low_us = 0, ci_high_us = 0;
  double clock_mhz = 0;            // SM clock after the timed samples
  bool throttled = false;
  std::vector<double> samples_us;  // raw timings, in the order taken
  // Speed-of-light at this size (filled by the coordinator from the task and the GPU's peaks).
  double sol_us = 0, pct_sol = 0, headroom = 0;
  std::string bound;  // memory | compute
  // far_slower: the fastest of the calls that stopped it (one or two), in us; 0 otherwise.
  double probe_us = 0;
  // Every gate's record as the harness wrote it ({gate, ok, ...}), in order.
  nlohmann::json gates = nlohmann::json::array();
  // Provenance: the seeds drawn and what re-running it needs (task, compile key, toolchain, ksol
  // version, defences off, GPU, clocks, precision, the harness's time per phase).
  std::vector<uint64_t> seeds;
  nlohmann::json provenance = nlohmann::json::object();
  nlohmann::json raw;  // the worker's result object, unparsed (diagnostics only)
  int64_t evaluation_id = 0;
  int worker_restarts = 0;

  bool ok() const { return status == Status::ok; }
  // The harness's wall time on this size (its harness_seconds.total; 0 when unknown).
  double harness_seconds() const;
};

// The worker's "result" object for an eval request as a SizeEvaluation: status, gate, error
// class, message, timing and gates. A result that is not one (not an object, a status or gate
// the protocol does not have) is a failure at the worker gate, class protocol_violation, saying
// what was wrong. SOL, seeds and provenance are the caller's to fill.
SizeEvaluation from_worker_result(const nlohmann::json& result);

// A baseline's early stop at one size (status far_slower): its first call(s) there taking more
// than `factor` times the median of `than`, the fastest baseline verified there so far, it cannot
// be the comparator and is not verified or timed in full.
struct FarSlowerLimit {
  std::string than;    // the fastest baseline's name
  double than_us = 0;  // its verified median at the size
  double factor = 0;
  double above_us() const { return than_us * factor; }
};
// What a far_slower evaluation says: "far slower than cublas (one call: 2204310 us, above 8x its
// median of 7700 us): not verified or timed in full".
std::string far_slower_message(const FarSlowerLimit& limit, double probe_us);

// The time of a far_slower evaluation's stopping calls, from its gates (the "probe" record the
// worker writes, which the store keeps); 0 when there is none.
double probe_us_of(const nlohmann::json& gates);

// The record as JSON (results.json, --json): the enums by name.
nlohmann::json to_json(const SizeEvaluation& e);

}  // namespace ksol
