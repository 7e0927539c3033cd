// ksol optimize FILE.py --triton-fn NAME: a standalone Triton kernel (docs/TRITON.md), verified
// and timed by the Python worker like any candidate, optimized by a search over its own configs
// (num_warps, num_stages, its block sizes) and, where the file gives a PyTorch reference, by the
// module path's DSL search on that reference; eager and torch.compile of the reference are
// baselines beside the kernel as given (src/cli/optimize_triton.cpp).
#pragma once
#include <string>

#include "cli/optimize_module.h"

namespace ksol::cli {

struct TritonOptimizeArgs {
  ModuleOptimizeArgs module;  // the file, the DSL search's options for the reference, report, JSON, emulate, precision
  std::string fn;             // --triton-fn: the @triton.jit kernel
  int configs = 48;           // --triton-configs: most configs screened
  int verify = 3;             // --triton-verify: the fastest screened configs verified through every gate
  std::string store_path;     // "" records nothing
  std::string cmdline;        // as the store records it
};

// Exit status (cli/usage.h): ok; no_gpu (parsed, configs listed, the reference lowered and
// compiled); error (a bad task file, nothing verified, no PyTorch); usage; 128+signal.
int run_optimize_triton(const TritonOptimizeArgs& a, bool json_out);

}  // namespace ksol::cli
