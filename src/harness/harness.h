// The GPU side of evaluation: gates 2-4 for one candidate at one size. Runs only inside
// ksol-worker, never in the coordinator. See docs/HARNESS.md.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksol {

// Every defence can be switched off by name, for the exploit suite's proof that the defence —
// not luck — catches each hack. Results with any defence off are marked untrusted.
struct Defences {
  std::set<std::string> off;
  bool on(const std::string& name) const { return !off.count(name); }
  static const std::vector<std::string>& all();  // names with one-line descriptions in docs/HARNESS.md
};

struct TimingConfig {
  int min_samples = 10;
  int max_samples = 2000;
  double min_seconds = 0.1;     // keep sampling at least this long
  double max_seconds = 2.0;     // stop here whatever the noise
  double target_rel_ci = 0.005; // stop once the median's 95% CI half-width is this fraction of it
  int rotation_sets = 3;
  // Distinct input cases the timed calls draw from: before every timed call one of the sets
  // receives a case other than the one it holds, chosen at random (the fresh-inputs defence).
  int input_cases = 5;
  // Timed calls whose outputs are kept, chosen uniformly at random among all of them after each
  // has run, and checked once sampling ends (the verify-timed defence); fewer when the outputs
  // are large (at most verify_bytes of copies, and at least 2).
  int verified_calls = 8;
  size_t verify_bytes = size_t{1} << 30;
  int warmup_calls = 3;
  double warmup_seconds = 0.25; // and keep warming up this long, so clocks and power settle first
};

struct EvalRequest {
  std::string task_dir;
  std::string size;
  // The size's dims and options when the coordinator made the size (a Matrix Market file);
  // otherwise the size is looked up by name in the task.
  std::map<std::string, double> size_dims;
  std::map<std::string, std::string> size_options;
  std::string candidate_so;
  std::string reference_cpu_so;
  std::string reference_gpu_so;      // may be empty
  std::vector<uint64_t> seeds;       // correctness seeds (at least 3)
  uint64_t timing_seed = 0;          // rotation-set inputs and the verified timed call
  bool time = true;
  bool check = true;
  // Search screening: > 0 times the candidate first, without verifying it, and stops there
  // (status "failed", gate "screen", error class "slower_than_best") when its median is above
  // this; otherwise the evaluation runs in full. It can only reject, never accept.
  double prune_above_us = 0;
  // A baseline in a search: > 0 calls the candidate once on a timing input before anything else
  // (once more when that call is above this, since a first call may carry a library's one-time
  // setup) and stops there, status "far_slower", when every such call took longer than this (us):
  // far slower than the fastest baseline at this size, it cannot be the comparator. Otherwise the
  // evaluation runs in full, as if the calls had not happened. It can only stop, never accept.
  double stop_above_us = 0;
  TimingConfig timing;
  Defences defences;
};

// Runs the correctness cascade and, when asked and passed, the timing. Returns the result as
// JSON (status, gates, samples, clocks, ...). Throws CudaFatal after a sticky CUDA error: the
// worker must then exit so the coordinator restarts it.
nlohmann::json evaluate(const EvalRequest& req);

// Starts the launcher process the next evaluation or screen will use, so that its CUDA context
// is made before it is needed (docs/HARNESS.md, "Isolation"). A failure to start one shows at
// that evaluation.
void start_spare_launcher();
nlohmann::json device_info(int device);

// Runs the CPU and the GPU float64 references of a task on the same inputs (each seed and
// distribution) and compares them under a float64 tolerance: the GPU reference, which stands in
// for the CPU one at large sizes, must agree with it where both can run.
nlohmann::json check_references(const std::string& task_dir, const std::string& size, const std::string& cpu_so,
                                const std::string& gpu_so, const std::vector<uint64_t>& seeds);

struct CudaFatal : std::runtime_error {
  using std::runtime_error::runtime_error;
  CudaFatal(const std::string& what, int candidate_index) : std::runtime_error(what), candidate(candidate_index) {}
  int candidate = -1;  // in a screen: the index of the candidate whose call broke the context
};

// The search's screen: several candidates timed at one size, timing only (no gate, no
// reference run), interleaved in rounds so that clock and power drifts fall on all of them
// alike. It can only rank; whatever a search returns or reports is evaluated in full first.
struct ScreenRequest {
  std::string task_dir;
  std::string size;
  std::map<std::string, double> size_dims;
  std::map<std::string, std::string> size_options;
  std::vector<std::string> candidates;  // shared libraries exporting ksol_run
  // Only the scope of the worker's case cache: the screen's inputs are the timing inputs a full
  // evaluation with the same timing_seed uses, and nothing runs the references.
  std::string reference_cpu_so, reference_gpu_so;
  uint64_t timing_seed = 0;
  int rotation_sets = 3;
  // Distinct input cases the timed calls draw from: before every timed call one of the sets
  // receives a case other than the one it holds, chosen at random (the fresh-inputs defence).
  int input_cases = 5;
  // Timed calls whose outputs are kept, chosen uniformly at random among all of them after each
  // has run, and checked once sampling ends (the verify-timed defence); fewer when the outputs
  // are large (at most verify_bytes of copies, and at least 2).
  int verified_calls = 8;
  size_t verify_bytes = size_t{1} << 30;
  int rounds = 5;             // each live candidate gets samples_per_round samples per round
  int samples_per_round = 2;
  int warmup_calls = 2;       // per candidate, before the first round (module loading, first-call setup)
  double warmup_seconds = 0.05;  // then all of them, round robin, this long: clocks up
  double max_seconds = 10;    // no round starts after this much sampling
  double drop_above = 3.0;    // after the first round, slower than this x the fastest: no more samples
};
nlohmann::json screen(const ScreenRequest& req);

}  // namespace ksol
