// The config search of a standalone Triton kernel (`ksol optimize FILE.py --triton-fn NAME`,
// docs/TRITON.md). The kernel as given (launch's defaults) is verified and timed first: it is the
// baseline. Its configs are then screened (python/ksol_torch/triton_task.py: a coordinate search
// over num_warps, num_stages and the block sizes, each config checked on one case against the
// reference and timed briefly; run_screen drives that process until it answers), and the fastest
// screened ones verified through every gate of the Python worker, fastest first. The contenders of
// the answer (the kernel as given, the verified configs, the DSL search's answer, eager and
// torch.compile of the reference) are then timed side by side in one process (side_by_side_request
// asks for them, side_by_side_of reads the timings), and choose_triton_answer picks among those
// timings, so that no two contenders are compared by times of two processes. The evaluator and the
// screening process are interfaces, so that tests drive the loop with scripted results.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/evaluation.h"

namespace ksol::search {

struct TritonConfig {
  std::string label;      // the kernel's name with its config: softmax_kernel_block_size2048_w8
  nlohmann::json config;  // {"BLOCK_SIZE": 2048, "num_warps": 8, "num_stages": null} (null: as launch passes it)
  std::string text;       // "BLOCK_SIZE=2048 num_warps=8"
  std::string candidate;  // the ModelNew file that runs it, for the worker
};

struct ScreenedConfig {
  TritonConfig config;
  bool ok = false;
  double median_us = 0;  // the screening's short timing
  std::string error;     // why it failed the screening
};

struct TritonScreen {
  bool ok = false;
  std::string error;                     // why the screening did not run to its end
  std::string stop;                      // converged | passes | configs | seconds
  std::vector<ScreenedConfig> screened;  // in the order measured, the default config first
  std::vector<ScreenedConfig> verify;    // the fastest passing configs but the default, fastest first
  int runs = 0;                          // screening processes it took (run_screen)
};

struct VerifiedConfig {
  TritonConfig config;
  SizeEvaluation eval;  // the worker's record (every gate); status failed until verified
  double worker_seconds = 0;
  double screen_us = 0;  // its screening time (0: not screened)
  bool ok() const { return eval.ok() && eval.median_us > 0; }
};

class TritonEvaluator {
 public:
  virtual ~TritonEvaluator() = default;
  // Screens at most `max_configs` configs within `seconds` (0: no limit) and returns the `top`
  // fastest passing ones for verification.
  virtual TritonScreen screen(int max_configs, int top, double seconds) = 0;
  // Every gate of the Python worker on one config's ModelNew.
  virtual VerifiedConfig verify(const TritonConfig& c) = 0;
};

struct TritonSearchOptions {
  int max_configs = 48;       // --triton-configs
  int verify = 3;             // --triton-verify
  double budget_seconds = 0;  // 0: none; the screening gets three quarters, the first verification always runs
  std::function<void(const std::string&)> progress;
  std::function<bool()> stop;      // true: start nothing more (a signal)
  std::function<double()> clock;   // seconds; a steady clock by default
};

struct TritonSearchResult {
  VerifiedConfig baseline;               // the kernel as given
  TritonScreen screen;
  std::vector<VerifiedConfig> verified;  // the screened configs verified, in that order
  int best = -1;                         // into verified: the fastest that passed every gate
  std::string stop_reason;               // verified | budget | interrupted | screen_failed | nothing_to_verify
  double seconds = 0;
  const VerifiedConfig* best_config() const { return best >= 0 ? &verified[best] : nullptr; }
  // The trajectory as the optimize report shows it: every screened config (status "screened"
  // when it was not verified, "failed" when the screening refused it) and every verified one.
  nlohmann::json trajectory() const;
};

TritonSearchResult search_triton_configs(const TritonConfig& as_given, TritonEvaluator& ev, const TritonSearchOptions& o);

// One verified contender for the answer: a baseline (the kernel as given, eager, torch.compile)
// or a candidate (the best config, the DSL search's best); us 0 when it was not verified.
struct Contender {
  std::string name;      // "triton", "eager", "compile", a config's label, a DSL kernel's name
  bool baseline = false;
  std::string language;  // triton | dsl | pytorch
  double us = 0;
};

struct TritonAnswer {
  bool use_baseline = true;
  std::string returned;       // the returned contender's name; "" when none was verified
  std::string language;
  std::string best_baseline;  // the fastest verified baseline; "" when none was
  double returned_us = 0, best_baseline_us = 0;
  double speedup_vs_best_baseline = 1;  // 1 when a baseline is returned
  double speedup_vs_kernel = 0;         // the kernel as given over the returned; 0 when it was not verified
  std::string reason;                   // why a baseline is returned, or nothing is
};

// The fastest candidate when it beats the fastest baseline, else that baseline. kernel_us: the
// kernel as given (0: it did not pass).
TritonAnswer choose_triton_answer(const std::vector<Contender>& contenders, double kernel_us);

// --- the screening process, run until it answers ---------------------------------------------------

// How one run of `python3 -m ksol_torch.triton_task screen` ended.
struct ScreenRun {
  int exit_code = -1;         // -1: killed at its time limit or by a signal
  bool timed_out = false;     // killed at its time limit
  double limit_seconds = 0;   // that limit
  nlohmann::json out;         // what it wrote to --out (null: nothing)
  std::string output;         // what it printed
};

// The screening's log (one JSON line per event, triton_task.Measurements) as the driver reads it
// between runs.
struct ScreenLog {
  int results = 0;           // configs with a result
  nlohmann::json running;    // the config started with no result: running when the process ended (null: none)
  std::string running_label;
  double running_since = 0;  // the Unix time it started (0: not logged)
};
ScreenLog read_screen_log(const std::string& path);

struct ScreenDriverOptions {
  double per_config_seconds = 600;        // --timeout: what one config may take; a run's limit leaves each started config this long
  int max_runs = 50;                      // a bound only: every run but the last measures or settles a config
  std::function<double()> unix_clock;     // seconds since the epoch; the system clock by default
  std::function<void(const std::string&)> progress;
};

// Runs the screening by run_once() until it answers: again after a run whose share of the time was
// up between configs (stop "batch"), and after a run that ended under a config (killed at its time
// limit, a signal, a dead CUDA context), that config marked failed in the log with why (only it:
// the one the log shows running); never after a run that measured nothing and settled nothing, and
// never to measure a config twice (a run replays the log). Each decision is said by `progress`.
TritonScreen run_screen(const std::function<ScreenRun()>& run_once, const std::string& log, const ScreenDriverOptions& o);

// The screening's answer (its --out JSON) as a TritonScreen.
TritonScreen screen_of(const nlohmann::json& out);

// --- the answer's contenders, side by side ----------------------------------------------------------

// The contenders for `python3 -m ksol_torch.triton_task compare`: the kernel as given ("triton")
// and every config that passed every gate, the DSL search's answer where it returned one (its
// report folder `dsl_dir`, named `dsl_name`), and, with a reference, eager and torch.compile (and
// torch.compile max-autotune where the module path timed it: `reference_baselines`, its names).
nlohmann::json side_by_side_request(const TritonSearchResult& r, bool has_reference, const std::vector<std::string>& reference_baselines,
                                    const std::string& dsl_dir, const std::string& dsl_name);

struct SideBySide {
  bool ok = false;
  std::string error;                                          // why there are no timings
  int rounds = 0;
  std::vector<Contender> timed;                               // checked and timed in the one process
  std::vector<std::pair<std::string, std::string>> left_out;  // name, why it was not timed
  nlohmann::json dsl = nlohmann::json::object();              // the DSL contender's record: answer, kernel, library, dims
};
SideBySide side_by_side_of(const nlohmann::json& out);

// What the answer is chosen from: the side-by-side timings where they ran; else the kernel as given
// and the fastest verified config as the Python worker timed them (one process), the DSL search's
// answer and the reference's baselines left out, since they were timed in another.
std::vector<Contender> answer_contenders(const TritonSearchResult& r, const SideBySide& s);

// The command that verifies and times the returned kernel again, pasted as is: `ksol eval-module
// DIR/problem.py --candidate C` with C the returned config's ModelNew (DIR/best.py), a returned
// DSL program's library (DIR/FN/best.so with its --dims), or, where a baseline is returned, the
// kernel as given (DIR/as_given.py; eval-module times eager and torch.compile beside it); a
// returned stitched module is checked again by ksol.load on DIR/dsl (`python` runs it).
std::string triton_rerun(const TritonAnswer& a, const std::string& dir, const std::string& fn, const nlohmann::json& dsl,
                         const std::string& python);

}  // namespace ksol::search
