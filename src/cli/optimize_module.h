// ksol optimize FILE.py: a PyTorch module whose forward is one DSL program, searched and verified
// on the module's own tensors through the Python worker (src/cli/optimize_module.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "search/optimize.h"

namespace ksol::cli {

struct ModuleOptimizeArgs {
  std::string file;
  search::OptimizeOptions search;  // agent (expert | random), budgets, target, seed, plateau
  double timeout = 600;     // seconds per worker call
  std::string report_dir;   // default runs/module-<stem>
  std::string json_path;    // --json-out
  bool emulate = false;     // --emulate: candidates built for the host's CUDA emulator, the worker on the CPU
  std::string precision = "default";  // --precision: the worker's mode for baselines and candidates alike
  std::string path = "best";  // --path: best (fx and Inductor, the better answer), fx, inductor
  std::string plan = "auto";  // --plan: auto (the module's own plan and the vendor-call plan, the faster), own, vendor
  bool fresh_baselines = false;  // --fresh-baselines: never reuse an earlier run's eager and torch.compile times
};

// Exit status (cli/usage.h): ok; no_gpu (traced, lowered and compiled only); error (a failed
// compile or front end, no PyTorch); usage (no such file); 128+signal when interrupted.
int run_optimize_module(const ModuleOptimizeArgs& a, bool json_out);

}  // namespace ksol::cli
