// The coordinator's pipeline for one candidate: gate 1 and compilation here, gates 2-4 in the
// worker, SOL, and a store row per size. ksol eval and ksol bench are loops over this.
#pragma once
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compiler.h"
#include "coord/worker_client.h"
#include "sol/peaks.h"
#include "store/store.h"
#include "task/task.h"

namespace ksol {

struct EvalOptions {
  std::vector<std::string> sizes;      // empty: every size, hidden ones included
  std::set<std::string> defences_off;  // names from Defences::all()
  std::optional<uint64_t> seed;        // fixes the seeds (for re-running); default: fresh per evaluation
  bool time = true;
  double timeout_s = 300;              // per worker call
  nlohmann::json timing;               // overrides of TimingConfig fields
  int64_t resume_run = 0;              // skip (candidate, size) pairs this run already has
  bool lenient_sizes = false;          // a named size a task lacks is skipped, not an error (bench)
};

struct SizeOutcome {
  std::string size;
  bool hidden = false;
  std::string status;                  // ok, failed, suspect, no_gpu, skipped
  std::string failed_gate, error_class, message;
  double median_us = 0, ci_low_us = 0, ci_high_us = 0;
  double sol_us = 0, pct_sol = 0, headroom = 0;
  std::string bound;
  nlohmann::json raw;                  // the worker's result
  int64_t evaluation_id = 0;
};

struct CandidateOutcome {
  std::string label;
  CompileResult compiled;
  std::vector<SizeOutcome> sizes;
  bool all_ok() const;
};

class Session {
 public:
  struct Options {
    std::string store_path;            // "" = no store
    std::vector<std::string> worker_argv;
    std::string assume_gpu = "NVIDIA H200";  // for SOL when no GPU is present
    bool quiet = false;
  };
  explicit Session(Options o);
  ~Session();

  // Starts the worker and reads the device; false when there is no usable GPU (reason()).
  bool has_gpu();
  const std::string& gpu_reason() const { return gpu_reason_; }
  const nlohmann::json& device() const { return device_; }
  const sol::DevicePeaks& peaks() const { return peaks_; }
  store::Store* store() { return store_.get(); }
  WorkerClient& worker() { return *worker_; }

  int64_t begin_run(const std::string& command, const nlohmann::json& extra = {});
  void finish_run(const std::string& status);
  int64_t run_id() const { return run_id_; }

  // Compiles (cached) the references a task needs for these sizes.
  struct References {
    CompileResult cpu, gpu;
  };
  References compile_references(const Task& t);

  CandidateOutcome evaluate(const Task& t, const CompileJob& job, const std::string& label, const std::string& origin,
                            const EvalOptions& o, const CompileResult* precompiled = nullptr);

  // SOL for one size on this session's peaks.
  void fill_sol(const Task& t, const SizeSet& s, SizeOutcome* out) const;

 private:
  Options opt_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<WorkerClient> worker_;
  bool probed_ = false, gpu_ = false;
  std::string gpu_reason_;
  nlohmann::json device_;
  sol::DevicePeaks peaks_;
  int64_t run_id_ = 0;
  std::map<std::string, References> refs_;
};

std::vector<uint64_t> draw_seeds(const EvalOptions& o, int n);

}  // namespace ksol
