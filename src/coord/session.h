// The coordinator's pipeline for one candidate: gate 1 and compilation here, gates 2-4 in the
// worker, SOL, and a store row per size. ksol eval and ksol bench are loops over this.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compiler.h"
#include "core/evaluation.h"
#include "coord/screen_batch.h"
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
  // Search screening, per size name: time first and stop (gate "screen") above this median; the
  // sizes after a screened-out one are not evaluated (see EvalRequest::prune_above_us).
  std::map<std::string, double> prune_above_us;
  // A search's baselines, per size name: stop a baseline after its first call(s) there (status
  // far_slower) above the limit (core/evaluation.h, EvalRequest::stop_above_us). Empty: every
  // kernel verified and timed in full.
  std::map<std::string, FarSlowerLimit> far_slower;
};

struct CandidateOutcome {
  std::string label;
  CompileResult compiled;
  std::vector<SizeEvaluation> sizes;
  bool all_ok() const;
};

// The search's screen (harness.h's ScreenRequest; coord/screen_batch.h): candidates timed at one
// size, timing only, in one worker call. ScreenOptions' `seed` is the search's master seed, so the
// screen's inputs are the timing inputs of the candidates' full evaluations (EvalOptions::seed),
// which then find them cached.

class Session {
 public:
  struct Options {
    std::string store_path;            // "" = no store
    std::vector<std::string> worker_argv;
    std::string assume_gpu = "NVIDIA H200";  // for SOL when no GPU is present
    bool quiet = false;
    std::string name = "GPU 0";        // where its worker runs, for progress lines ("GPU 1", "rank 2 GPU 0")
    int device = 0;                    // the worker's device index on its host
  };
  explicit Session(Options o);
  // A session whose calls go to `worker` (a worker on another MPI rank, or a pool's handle)
  // instead of a local ksol-worker started from Options::worker_argv.
  Session(Options o, std::unique_ptr<Worker> worker);
  ~Session();

  // Starts the worker and reads the device; false when there is no usable GPU (reason()).
  bool has_gpu();
  const std::string& gpu_reason() const { return gpu_reason_; }
  const nlohmann::json& device() const { return device_; }
  const sol::DevicePeaks& peaks() const { return peaks_; }
  store::Store* store() { return store_.get(); }
  Worker& worker() { return *worker_; }
  const std::string& name() const { return opt_.name; }
  int device_index() const { return opt_.device; }
  // The worker command (with --device when the session has one), e.g. for a one-shot worker.
  const std::vector<std::string>& worker_argv() const { return opt_.worker_argv; }

  int64_t begin_run(const std::string& command, const nlohmann::json& extra = {});
  // Records into a run another session (on another GPU, same store file) began.
  void join_run(int64_t id) { run_id_ = id; }
  void finish_run(const std::string& status);
  int64_t run_id() const { return run_id_; }

  // Compiles (cached) the references a task needs for these sizes.
  struct References {
    CompileResult cpu, gpu;
  };
  References compile_references(const Task& t);
  // The same for several tasks at once, on every core (compile_all); later calls are served from memory.
  void compile_references(const std::vector<Task>& tasks);

  CandidateOutcome evaluate(const Task& t, const CompileJob& job, const std::string& label, const std::string& origin,
                            const EvalOptions& o, const CompileResult* precompiled = nullptr);

  // Times the libraries at one size in one worker call (timing only). A candidate that breaks the
  // worker (a sticky CUDA error names it; a crash or hang does not) fails alone: the others are
  // screened again without it, halving the group while the culprit is unknown.
  ScreenBatch screen(const Task& t, const std::vector<std::string>& so_paths, const ScreenOptions& o);

  // One store row for one size of a candidate (no-op without a store or a run); its id.
  // Sets e's worker_restarts.
  int64_t record(const Task& t, int64_t candidate_id, SizeEvaluation& e);

  // SOL for one size on this session's peaks.
  void fill_sol(const Task& t, const SizeSet& s, SizeEvaluation* out) const;

 private:
  // Evaluate's stages for one size: the earlier run's record where the evaluation resumes one,
  // else the worker's verdict (or the compile gate's, or no_gpu), with seeds and provenance.
  std::optional<SizeEvaluation> resumed(const Task& t, const SizeSet& s, int64_t cand_id, const EvalOptions& o) const;
  SizeEvaluation run_size(const Task& t, const SizeSet& s, const CompileResult& compiled, const References& refs,
                          const EvalOptions& o);

  Options opt_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Worker> worker_;
  bool probed_ = false, gpu_ = false;
  std::string gpu_reason_;
  nlohmann::json device_;
  sol::DevicePeaks peaks_;
  int64_t run_id_ = 0;
  std::map<std::string, References> refs_;
};

std::vector<uint64_t> draw_seeds(const EvalOptions& o, int n);
// The timing gate's seed of an evaluation with this master seed (its rotation sets' inputs).
uint64_t timing_seed_of(uint64_t master_seed);

// The store's identity of a candidate (candidates.source_hash): what the user wrote, the source
// compiled from it, and the -D defines it is built with (a task's two baselines from one file,
// such as gemm_bias_gelu_bf16's cublaslt.cu and the same file with -DKSOL_UNFUSED, are two
// candidates). A job with no defines keeps the hash it had before defines counted.
std::string candidate_source_hash(const CompileJob& job);

// The devices of --gpus: "N" means 0..N-1, "0,2" those indices; "" none named (one worker on
// its default device). Throws on anything else.
std::vector<int> parse_gpus(const std::string& spec);

// One session per device in `gpus`, each with a worker started with `--device i` and its own
// connection to the store; one session on the default device when `gpus` is empty.
std::vector<std::unique_ptr<Session>> open_sessions(const Session::Options& base, const std::vector<int>& gpus);

// Calls f(job, worker) for every job in [0, n) from `workers` threads, each taking the next job
// when it is free (one thread: in order, on this thread). The first exception is rethrown once
// every thread has stopped; jobs not yet started when it was thrown are not started.
void run_parallel(size_t n, size_t workers, const std::function<void(size_t job, size_t worker)>& f);

}  // namespace ksol
