// Device peaks: what one GPU can do at most, from its datasheet or from calibration.
//
// The SOL bound of a task divides its FLOPs and bytes by these numbers (see sol.h). Two
// sources exist: the vendor datasheet (dense rates, no 2:4 sparsity) and `ksol device
// calibrate`, which measures copy bandwidth, FMA rates and cuBLAS GEMM rates on the GPU
// itself (src/harness/calibrate.h). %SOL uses the field-wise maximum of the two, so an
// honest kernel never "beats" SOL by much. No CUDA headers here: the coordinator, which
// needs no GPU, computes SOL too. This header stays C++17 so that nvcc-compiled harness
// code (calibrate.cu) can fill a DevicePeaks.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ksol::sol {

// Rates in operations per second, sizes in bytes. A rate of 0 means "unknown" (calibration
// did not measure it, or the datasheet does not list it); merge_max then keeps the other.
struct DevicePeaks {
  std::string name;               // CUDA device name, e.g. "NVIDIA H200"
  double hbm_bytes_per_s = 0;     // DRAM bandwidth, reads plus writes
  double fp32_flops = 0;          // FP32 FMA units (CUDA cores), an FMA counted as 2 FLOPs
  double fp64_flops = 0;          // FP64 FMA units
  double fp64_tensor_flops = 0;   // FP64 tensor cores (DMMA); equals fp64_flops where absent
  double tf32_flops = 0;          // tensor cores, dense
  double bf16_flops = 0;          // tensor cores, fp32 accumulate, dense
  double fp16_flops = 0;          // tensor cores, fp32 accumulate, dense
  double int8_ops = 0;            // tensor cores, int32 accumulate, dense
  double l2_bytes = 0;
  int sm_count = 0;
  std::string source;             // "datasheet: ...", "calibration: ...", or a merge of both
};

// Every field equal (exact floating-point comparison; for round-trip tests).
bool operator==(const DevicePeaks& a, const DevicePeaks& b);
inline bool operator!=(const DevicePeaks& a, const DevicePeaks& b) { return !(a == b); }

// The datasheet table, one entry per product. Listed for `ksol device list` and tests.
const std::vector<DevicePeaks>& datasheet_table();

// Datasheet peaks for a CUDA device name (cudaDeviceProp::name, as nvidia-smi prints it).
//
// Matching rule: both names are lower-cased, runs of white space collapse to one space and a
// leading "nvidia " is dropped; then the name must equal one of the product's known device
// names exactly. No prefix or substring matching: "NVIDIA H200 NVL" (lower clocks),
// "NVIDIA GH200 480GB" (other memory) and MIG slices ("NVIDIA H100 80GB HBM3 MIG 1g.10gb",
// fewer SMs) are different devices, and treating them as the product they contain would
// put SOL in the wrong place. Those, and any GPU not in the table, give std::nullopt; the
// caller then uses calibration alone. Short forms such as "h200" or "L40S" match as well,
// which is handy on the command line.
std::optional<DevicePeaks> datasheet_peaks(std::string_view device_name);

// Field-wise maximum of every rate and size. name and source come from whichever side has
// them; source records that both were used. A field that is 0 (unknown) on one side takes
// the other side's value.
DevicePeaks merge_max(const DevicePeaks& datasheet, const DevicePeaks& measured);

// nlohmann::json conversions, found by ADL. Every field is written; from_json requires the
// rates and sizes and throws nlohmann::json::exception when one is missing or mistyped.
void to_json(nlohmann::json& j, const DevicePeaks& peaks);
void from_json(const nlohmann::json& j, DevicePeaks& peaks);

// The calibration cache: one JSON file per physical GPU, keyed by its UUID
// ("GPU-8f6d1c2a-..."), at $KSOL_CACHE_DIR/devices/<uuid>.json. Without KSOL_CACHE_DIR the
// root is $XDG_CACHE_HOME/ksol, then ~/.cache/ksol (ksol::cache_dir). KSOL_CACHE_DIR is a
// location only and changes no compile cache key.
std::filesystem::path cache_root();
// Throws std::invalid_argument for a UUID that is empty or holds characters other than
// letters, digits, '-' and '_', so a UUID can never name a path outside the cache.
std::filesystem::path calibration_path(std::string_view gpu_uuid);

// std::nullopt when the GPU was never calibrated, and also when its file cannot be read or
// parsed: a cache entry is never worth more than a fresh calibration, and callers fall back
// to the datasheet or recalibrate. A bad UUID gives std::nullopt as well.
std::optional<DevicePeaks> load_calibration(std::string_view gpu_uuid);

// Writes the file atomically (temporary file, then rename), creating directories as needed.
// Returns an error message, or std::nullopt on success.
std::optional<std::string> save_calibration(std::string_view gpu_uuid, const DevicePeaks& peaks);

}  // namespace ksol::sol
