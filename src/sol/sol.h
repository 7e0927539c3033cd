// Speed of light (SOL): the least time a task could take on a device, and how far a measured
// time is from it.
//
//   T_sol    = max(flops / peak_flops(math, precision), bytes / hbm_bandwidth)
//   %SOL     = T_sol / T_measured      (a fraction: 1.0 is at SOL; reports print it x100)
//   headroom = T_measured / T_sol      (how many times faster SOL would be)
//
// flops and bytes come from the task's [cost] formulas at one size (useful FLOPs, and the
// compulsory DRAM traffic: each input read once, each output written once), math and
// precision from the task spec, the peaks from peaks.h. Above 105% of SOL a result is
// suspect: the timing or the kernel is lying, and it is never rewarded.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sol/peaks.h"

namespace ksol::sol {

// Which units bound a task's FLOPs (task.toml [cost].math).
enum class MathUnit {
  tensor,  // matrix units (GEMM, convolution, attention)
  fma,     // the CUDA cores' FMA pipes (elementwise math, reductions, stencils)
  none,    // FLOPs do not bound the task; only its bytes do
};

// The arithmetic a candidate may use (task.toml [task].precision).
enum class Precision {
  fp32,  // IEEE fp32 throughout; TF32 tensor-core math is not allowed
  tf32,  // fp32 data, TF32 tensor-core multiplies, fp32 accumulation
  bf16,  // bf16 data, fp32 accumulation
  fp16,  // fp16 data, fp32 accumulation
  fp64,
};

std::string_view to_string(MathUnit unit);
std::string_view to_string(Precision precision);

// Exact, lower-case spellings as in task.toml ("tensor", "fma", "none"; "fp32", "tf32",
// "bf16", "fp16", "fp64"). On failure, std::nullopt and, when `error` is given, a message
// that quotes the text and lists the accepted spellings, e.g.
//   unknown precision 'fp8': expected one of fp32, tf32, bf16, fp16, fp64
std::optional<MathUnit> parse_math_unit(std::string_view text, std::string* error = nullptr);
std::optional<Precision> parse_precision(std::string_view text, std::string* error = nullptr);

// The FLOP rate that bounds work on `unit` under `precision`:
//   tensor + fp32 -> fp32_flops (TF32 is not allowed, so the FMA pipes do the math)
//   tensor + tf32 -> tf32_flops;  + bf16 -> bf16_flops;  + fp16 -> fp16_flops
//   tensor + fp64 -> fp64_tensor_flops (fp64_flops where that is unknown)
//   fma + fp64    -> fp64_flops;  fma + any other -> fp32_flops
//   none          -> +infinity (FLOPs add no time)
// 0 means the peak is unknown (see estimate).
double peak_flops(const DevicePeaks& peaks, MathUnit unit, Precision precision);

struct SolEstimate {
  double t_flops_s = 0;       // flops / peak, seconds
  double t_bytes_s = 0;       // bytes / bandwidth, seconds
  double t_sol_s = 0;         // max of the two
  std::string bound;          // "compute" when t_flops_s > t_bytes_s, else "memory"
  double peak_flops_per_s = 0;  // the rates used, so a result row can be re-derived
  double bytes_per_s = 0;
};

// T_sol for `flops` useful operations and `bytes` compulsory DRAM traffic. A peak that is 0
// (unknown: an uncalibrated rate of a GPU missing from the datasheet table) contributes no
// time rather than infinite time, so SOL stays a lower bound and no honest result is ever
// flagged because of a gap in the peaks. Throws std::invalid_argument when flops or bytes is
// negative or not finite; the task layer rejects such formulas before they get here.
SolEstimate estimate(double flops, double bytes, MathUnit unit, Precision precision,
                     const DevicePeaks& peaks);

// %SOL as a fraction, T_sol / T_measured. 0 when T_sol is 0 (nothing bounds the task);
// +infinity when T_measured <= 0 but T_sol > 0 (a zero time beats any bound).
double pct_sol(double t_sol_s, double t_measured_s);

// T_measured / T_sol, the reciprocal of pct_sol: +infinity when T_sol is 0.
double headroom(double t_sol_s, double t_measured_s);

// Above this %SOL (105%) a result is held as suspect.
inline constexpr double kSuspectPctSol = 1.05;

// True when `pct` (a fraction, from pct_sol) exceeds kSuspectPctSol. NaN is not suspect.
bool suspect(double pct);

}  // namespace ksol::sol
