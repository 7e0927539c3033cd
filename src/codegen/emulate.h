// Runs generated CUDA on the CPU, to check a generator's logic where there is no GPU. The
// source is compiled by the host C++ compiler against a small emulation of what the generated
// code uses from CUDA: blocks run one after another, each block's threads as host threads with
// real barriers (__syncthreads, __syncwarp) and warp shuffles, warp matrix operations (mma.h's WMMA,
// with its alignment rules checked), shared memory per block (dynamic shared memory
// poisoned with 0xFF bytes), launch limits (threads per block, the 48 KB dynamic shared memory
// opt-in, 227 KB) and the few runtime calls (cudaMalloc, cudaFuncSetAttribute, ...). ksol_run
// is then called on host buffers in a child process, so that a crash, a deadlocked barrier or a
// hang is a result, not the end of the caller. Each buffer ends at a guard page, so writing past
// the end of a tensor crashes the child. Numbers are the host's (glibc expf, not CUDA's), so
// results agree with a GPU's to rounding, not bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/parallel.h"

namespace ksol::codegen {

struct HostBuild {
  bool ok = false;
  std::string message;  // compiler output when !ok
  std::string so_path;
};
// Compiles a generated source for the host (cached by content under the ksol cache folder).
HostBuild build_for_host(const std::string& cuda_source);

struct HostRun {
  bool ok = false;      // the call returned; `rc` is its value
  int rc = -1;
  std::string message;  // why not ok: the signal, the timeout, the emulator's report
};
// Calls ksol_run of a host build with `tensors` (task order, bytes in each tensor's dtype) and
// `dims` (task order); outputs are copied back into `tensors`.
HostRun run_on_host(const std::string& so_path, std::vector<HostVec<uint8_t>>& tensors,
                    const std::vector<int64_t>& dims, double timeout_s = 120);

// The source as the host compiler sees it: launches `k<<<g, b, s, st>>>(args)` become calls of
// the emulator, `extern __shared__ T name[]` its dynamic shared memory (exposed for tests).
std::string rewrite_for_host(const std::string& cuda_source);

}  // namespace ksol::codegen
