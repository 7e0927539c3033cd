// Device calibration: measure what this GPU actually delivers, for the SOL peaks.
//
// `ksol device calibrate` runs this in the worker. It measures device-to-device copy
// bandwidth, FP32 and FP64 FMA rates with ksol's own kernels, and cuBLAS GEMM rates at
// 8192^3 for bf16, fp16, tf32, fp32 and fp64. Each measurement is timed with CUDA events
// after a warm-up, over random non-zero data (zeros draw less power and would flatter the
// clocks), and reported as the median of its samples, which are kept. The result converts to
// sol::DevicePeaks, which the coordinator merges with the datasheet (sol::merge_max) and
// caches per GPU UUID (sol::save_calibration).
//
// No CUDA types in this header: the worker's C++ code includes it, calibrate.cu implements
// it. C++17, because nvcc compiles it too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sol/peaks.h"

namespace ksol::harness {

struct CalibrationMeasurement {
  // copy_memcpy, copy_kernel, fma_fp32, fma_fp64, gemm_bf16, gemm_fp16, gemm_tf32,
  // gemm_fp32, gemm_fp64
  std::string name;
  std::string unit;             // "bytes/s" or "flop/s"
  double work = 0;              // bytes moved (read + written) or FLOPs, per repetition
  double median_s = 0;
  double rate = 0;              // work / median_s
  std::vector<double> samples_s;  // every timed repetition, in order
  std::string config;           // how it ran (sizes, launch shape, cuBLAS compute type)
};

struct CalibrationResult {
  std::string error;            // empty when every measurement ran; otherwise what failed
  int device = 0;
  std::string name;             // cudaDeviceProp::name
  std::string uuid;             // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi
  int compute_capability = 0;   // major * 10 + minor
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  int sm_clock_khz = 0;         // peak SM clock the driver reports
  int memory_clock_khz = 0;     // peak memory clock the driver reports
  int memory_bus_bits = 0;
  double sm_clock_under_load_hz = 0;  // measured: clock64 against %globaltimer during fma_fp32
  int runtime_version = 0;      // cudaRuntimeGetVersion
  int driver_version = 0;       // cudaDriverGetVersion
  int cublas_version = 0;       // cublasGetVersion
  // Measurements that completed; after an error, those before it.
  std::vector<CalibrationMeasurement> measurements;

  // The rate of the named measurement, or 0 when it is absent.
  double rate(std::string_view measurement_name) const;
};

// Runs every measurement on `device` (a CUDA ordinal), then restores the caller's current
// device. Never throws and never exits: a CUDA or cuBLAS failure, or too little memory,
// comes back in `error`, and all memory and handles are freed. After an error from a kernel
// the context may be unusable (sticky errors); the worker should then restart, as for any
// candidate crash. Takes some seconds on an H100-class GPU; tens on GPUs with slow FP64.
CalibrationResult calibrate_device(int device);

// The measured peaks: copy bandwidth as hbm_bytes_per_s, the best of the FMA kernel and
// SGEMM as fp32_flops, the FMA kernel as fp64_flops, DGEMM as fp64_tensor_flops (at least
// fp64_flops), the GEMMs for tf32/bf16/fp16. int8_ops is not measured (0). source names the
// calibration. Returns the same for a result with an error; missing rates are 0.
sol::DevicePeaks measured_peaks(const CalibrationResult& result);

void to_json(nlohmann::json& j, const CalibrationMeasurement& m);
void to_json(nlohmann::json& j, const CalibrationResult& r);

}  // namespace ksol::harness
