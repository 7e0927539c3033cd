// Gate 1 and compilation: a static scan of CUDA sources for forbidden constructs, then nvcc
// into a shared library exporting the candidate ABI, cached by a hash of everything that can
// change the binary (source, flags, toolchain, target, ABI version).
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "task/task.h"

namespace ksol {

struct StaticFinding {
  int line = 0, column = 0;
  std::string construct, reason;
};
// Scans CUDA/C++ source text (comments and string literals ignored) for constructs a candidate
// may not use: its own streams, host threads, host callbacks, timers, device-wide syncs,
// process control and dynamic symbol lookup.
std::vector<StaticFinding> static_scan(const std::string& source);
std::string format_findings(const std::string& file, const std::string& source, const std::vector<StaticFinding>& f);

enum class SourceKind { candidate, reference_cpu, reference_gpu };

struct CompileJob {
  std::string source_path;          // the file as the user wrote it (for messages)
  std::string source_text;          // what is compiled (may be a generated shim around the file)
  SourceKind kind = SourceKind::candidate;
  std::vector<std::string> libs;    // cublas, cusparse, ...
  bool static_gate = true;          // scan before compiling (candidates only)
  std::string language = "cuda";    // cuda | dsl | c_function: what the user wrote
  std::string original;             // the user's source when source_text was generated from it
  bool trusted = false;             // a task's own baseline: may also import what device-wide CUB needs (library_check.h)
  std::string arch = "sm_90";       // nvcc -arch; "sm_90a" for Hopper-only features (WGMMA, TMA via CUTLASS)
  std::vector<std::string> extra_flags;  // more nvcc flags (part of the cache key, like every argument)
};

struct CompileResult {
  bool ok = false;
  std::string stage;                // "static" or "compile" when !ok
  std::string message;              // findings or compiler output
  std::string so_path;
  std::string key;                  // cache key
  bool cache_hit = false;
  bool cancelled = false;           // stopped by compile_all's `cancel`: nothing was cached
  double seconds = 0;
  // What building it costs without the cache: this call's compile, or on a cache hit the time the
  // compile that made the entry took (0 when the entry does not say).
  double cost_seconds = 0;
};

std::string toolchain_version();    // nvcc --version, first line that names the release
// A digest of the regular files directly in `dir` (names and texts, in name order): ksol's headers'
// share of the compile cache's key.
std::string headers_digest(const std::string& dir);
// `cancel` set while it compiles: the compiler is killed, the result is not ok and `cancelled`.
CompileResult compile(const CompileJob& job, const std::atomic<bool>* cancel = nullptr);
// Compiles in parallel on `jobs` threads (0 = all cores), preserving order. Once `cancel` is set,
// the compiles running are killed and no other starts: those are `cancelled`.
std::vector<CompileResult> compile_all(const std::vector<CompileJob>& jobs, int threads = 0, const std::atomic<bool>* cancel = nullptr);

// Builds a compile job for a task's baseline (a user's plain C function gets a generated shim).
CompileJob baseline_job(const Task& t, const BaselineSpec& b);
CompileJob candidate_job(const Task& t, const std::string& path);
CompileJob reference_job(const Task& t, bool gpu);

// A plain C declaration, e.g. "void spmv(int m, const float* x, float* y)", bound to a task.
struct CParam {
  std::string type, name;
  bool pointer = false;
  bool stream = false;
};
struct CFunction {
  std::string return_type, name;
  std::vector<CParam> params;
};
CFunction parse_c_declaration(const std::string& decl);  // throws std::runtime_error with column
// Generates the ksol_run shim: pointer params bind to tensors by name, integer params to dims,
// a cudaStream_t param to the harness stream. Throws when a name binds to nothing.
std::string generate_c_shim(const Task& t, const CFunction& f, const std::string& user_source_path);

}  // namespace ksol
