// The options of `ksol optimize` and the LLM set-up its two paths share: the schedule search
// (src/cli/optimize.cpp) and the LLM's kernel loop (src/cli/optimize_kernels.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agents/llm.h"

namespace ksol::cli {

struct OptimizeArgs {
  std::vector<std::string> tasks;
  std::string agent = "expert";
  int candidates = 1000;
  double seconds = 0;      // per task (0: none; with the run-wide budget, a cap on each task's share)
  double target_sol = 0.9;
  uint64_t seed = 1;
  int plateau = 4;         // generations without a new best
  int batch = 0;           // proposals built and screened together (0: the machine's cores, 8 to 32)
  bool verbose = false;
  std::string store;  // overrides the global --store when set
  int64_t resume = 0;
  std::string json_out;
  double timeout = 300;
  // LLM agents (openai:MODEL, anthropic:MODEL, exchange:DIR, batch:FORMAT:MODEL:DIR)
  std::string llm_base_url, llm_key_env;
  double llm_timeout = 0;
  int llm_retries = -1;
  double llm_min_interval = 0;
  double price_in = 0, price_out = 0;
  int64_t budget_tokens = 0, budget_requests = 0;
  double budget_dollars = 0, budget_llm_seconds = 0;
  bool no_llm_cache = false;
  int llm_max_tokens = 2048;
  // --answer: the kernel loop's answer language (dsl | cuda | either), or schedule (the schedule
  // search with the LLM as its coder)
  std::string answer = "dsl";
  std::string from;            // --from: the user's kernel (CUDA, or a .ksol program) the LLM starts from
  std::string report_dir;  // default runs/run-<id>
  std::string gpus;        // --gpus: one worker per device, tasks spread over them
  bool mpi = false;        // --mpi: the ranks of an MPI job, each with its --gpus workers
  double prune = 2.0;      // --prune: screen out children slower than this x the best (0: off)
  // --baseline-stop-factor: a baseline whose first call(s) at a size take more than this many times
  // the fastest baseline's median there is stopped early (search::Evaluator::kBaselineStopFactor;
  // 0: every baseline verified and timed in full).
  double baseline_stop_factor = 8;
  bool no_profile = false; // --no-profile: classify by the roofline only
  int schedules_per_kernel = 3;  // --schedules-per-kernel: at most this many schedules by size in a returned kernel
  bool emulate = false;    // --emulate: a module's candidates on the CPU through the CUDA emulator (tests)
  bool fresh_baselines = false;  // --fresh-baselines: a module's eager and torch.compile timed again, not reused
  std::string precision = "default";  // --precision: a module's mode (baselines and candidates alike)
  bool precision_given = false;
  std::string triton_fn;   // --triton-fn: FILE.py is a Triton task, this its kernel (docs/TRITON.md)
  int triton_configs = 48; // --triton-configs: most configs screened
  int triton_verify = 3;   // --triton-verify: the fastest screened configs verified through every gate
  std::string path = "best";  // --path: a module's paths (best: fx and Inductor, the better answer; fx; inductor)
  bool path_given = false;
  std::string plan = "auto";  // --plan: the fx path's plan of a module (auto: own and vendor-call, the faster; own; vendor)
  // --budget-total-seconds: the whole run's wall time (baselines, searches and grades), each
  // task's search taking a share of what is left by its headroom. The default keeps the main
  // job (every task with a seed program) within 15 minutes on one H200.
  double total_seconds = 780;
  bool seconds_given = false;  // --budget-seconds on the command line (a cap on the shares then)
  std::vector<std::string> words;  // the command line, each word shell-quoted: batch mode prints it with --resume RUN
};

// The run's LLM client from the command line (one for the whole run: its budgets and its cache
// span every task).
std::unique_ptr<agents::llm::Client> make_llm_client(const OptimizeArgs& a);

// `ksol optimize` with an LLM agent (unless --answer schedule) or --from FILE: the LLM's kernel
// loop (agents/kernel_loop.h) on each task, on one GPU, with the same store, report and progress
// output as the search.
int run_kernel_optimize(const OptimizeArgs& a, const std::string& store, const std::string& worker, const std::string& assume_gpu,
                        bool json_out, const std::string& cmdline);

}  // namespace ksol::cli
