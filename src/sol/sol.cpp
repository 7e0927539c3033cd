#include "sol/sol.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace ksol::sol {
namespace {

constexpr std::array<std::pair<MathUnit, std::string_view>, 3> kMathUnitNames{{
    {MathUnit::tensor, "tensor"},
    {MathUnit::fma, "fma"},
    {MathUnit::none, "none"},
}};

constexpr std::array<std::pair<Precision, std::string_view>, 5> kPrecisionNames{{
    {Precision::fp32, "fp32"},
    {Precision::tf32, "tf32"},
    {Precision::bf16, "bf16"},
    {Precision::fp16, "fp16"},
    {Precision::fp64, "fp64"},
}};

template <typename Enum, std::size_t N>
std::optional<Enum> parse_name(const std::array<std::pair<Enum, std::string_view>, N>& names,
                               std::string_view what, std::string_view text, std::string* error) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  if (error != nullptr) {
    std::string message = "unknown " + std::string(what) + " '" + std::string(text) +
                          "': expected one of ";
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) message += ", ";
      message += names[i].second;
    }
    *error = std::move(message);
  }
  return std::nullopt;
}

template <typename Enum, std::size_t N>
std::string_view name_of(const std::array<std::pair<Enum, std::string_view>, N>& names,
                         Enum value) {
  for (const auto& [candidate, name] : names) {
    if (candidate == value) return name;
  }
  return "?";
}

// Time for `amount` at `rate`; an unknown (zero or negative) rate adds no time.
double time_at(double amount, double rate) {
  if (amount == 0 || !(rate > 0)) return 0;
  return amount / rate;
}

}  // namespace

std::string_view to_string(MathUnit unit) { return name_of(kMathUnitNames, unit); }
std::string_view to_string(Precision precision) { return name_of(kPrecisionNames, precision); }

std::optional<MathUnit> parse_math_unit(std::string_view text, std::string* error) {
  return parse_name(kMathUnitNames, "math unit", text, error);
}

std::optional<Precision> parse_precision(std::string_view text, std::string* error) {
  return parse_name(kPrecisionNames, "precision", text, error);
}

double peak_flops(const DevicePeaks& peaks, MathUnit unit, Precision precision) {
  switch (unit) {
    case MathUnit::none:
      return std::numeric_limits<double>::infinity();
    case MathUnit::fma:
      // TF32 exists only inside the tensor cores, and ksol's map/reduce templates compute
      // bf16 and fp16 data in fp32, so every non-fp64 policy runs at the FP32 FMA rate.
      // Packed half2 math (HFMA2) can run faster on some GPUs; a kernel whose FLOPs really
      // bind it there would show as suspect and be looked at, not silently rewarded.
      return precision == Precision::fp64 ? peaks.fp64_flops : peaks.fp32_flops;
    case MathUnit::tensor:
      switch (precision) {
        case Precision::fp32:
          // Emulated fp32 on tensor cores (3xTF32, bf16x9) can exceed this rate; such a
          // kernel is flagged as suspect rather than the bound being raised for everyone.
          return peaks.fp32_flops;
        case Precision::tf32:
          return peaks.tf32_flops;
        case Precision::bf16:
          return peaks.bf16_flops;
        case Precision::fp16:
          return peaks.fp16_flops;
        case Precision::fp64:
          return peaks.fp64_tensor_flops > 0 ? peaks.fp64_tensor_flops : peaks.fp64_flops;
      }
      break;
  }
  return 0;
}

SolEstimate estimate(double flops, double bytes, MathUnit unit, Precision precision,
                     const DevicePeaks& peaks) {
  if (!std::isfinite(flops) || flops < 0) {
    throw std::invalid_argument("SOL estimate: flops must be finite and >= 0, got " +
                                std::to_string(flops));
  }
  if (!std::isfinite(bytes) || bytes < 0) {
    throw std::invalid_argument("SOL estimate: bytes must be finite and >= 0, got " +
                                std::to_string(bytes));
  }
  SolEstimate e;
  e.peak_flops_per_s = peak_flops(peaks, unit, precision);
  e.bytes_per_s = peaks.hbm_bytes_per_s;
  e.t_flops_s = time_at(flops, e.peak_flops_per_s);
  e.t_bytes_s = time_at(bytes, e.bytes_per_s);
  e.t_sol_s = std::max(e.t_flops_s, e.t_bytes_s);
  e.bound = e.t_flops_s > e.t_bytes_s ? "compute" : "memory";
  return e;
}

double pct_sol(double t_sol_s, double t_measured_s) {
  if (!(t_sol_s > 0)) return 0;
  if (!(t_measured_s > 0)) return std::numeric_limits<double>::infinity();
  return t_sol_s / t_measured_s;
}

double headroom(double t_sol_s, double t_measured_s) {
  if (!(t_sol_s > 0)) return std::numeric_limits<double>::infinity();
  if (!(t_measured_s > 0)) return 0;
  return t_measured_s / t_sol_s;
}

bool suspect(double pct) { return pct > kSuspectPctSol; }

}  // namespace ksol::sol
