// The config search of a standalone Triton kernel (`ksol optimize FILE.py --triton-fn NAME`,
// docs/TRITON.md). The kernel as given (launch's defaults) is verified and timed first: it is the
// baseline. Its configs are then screened (python/ksol_torch/triton_task.py: a coordinate search
// over num_warps, num_stages and the block sizes, each config checked on one case against the
// reference and timed briefly), and the fastest screened ones verified through every gate of the
// Python worker, fastest first. choose_triton_answer picks what is returned from every verified
// contender: the best config, the DSL search's best, eager and torch.compile of the reference.
// The evaluator is an interface, so that tests drive the loop with scripted results.
#pragma once
#include <functional>
#include <string>
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

}  // namespace ksol::search
