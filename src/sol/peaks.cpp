#include "sol/peaks.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/util.h"

namespace ksol::sol {
namespace {

constexpr double kTera = 1e12;
constexpr double kMiB = 1024.0 * 1024.0;

struct DatasheetEntry {
  DevicePeaks peaks;
  // Device names in normalized form (see normalize_device_name).
  std::vector<std::string> names;
};

// Vendor datasheet values, dense (without 2:4 structured sparsity). Where a datasheet lists
// only the sparse figure (marked "*" on the Hopper datasheets), the dense value is half of
// it. Tensor-core bf16/fp16 rates are the fp32-accumulate ones, which is what the bf16 and
// fp16 precision policies allow. L2 sizes are the whitepapers' MB taken as MiB, which is how
// cudaDeviceProp::l2CacheSize reports them.
std::vector<DatasheetEntry> build_table() {
  std::vector<DatasheetEntry> table;

  // NVIDIA H100 Tensor Core GPU datasheet, SXM column: FP64 34, FP64 Tensor Core 67,
  // FP32 67, TF32 989*, BF16 1,979*, FP16 1,979*, INT8 3,958* TFLOPS/TOPS; HBM3 3.35 TB/s.
  // 132 SMs, 50 MB L2 (H100 whitepaper).
  DevicePeaks h100_sxm{
      .name = "NVIDIA H100 80GB HBM3",
      .hbm_bytes_per_s = 3.35 * kTera,
      .fp32_flops = 67 * kTera,
      .fp64_flops = 34 * kTera,
      .fp64_tensor_flops = 67 * kTera,
      .tf32_flops = 494.5 * kTera,
      .bf16_flops = 989.5 * kTera,
      .fp16_flops = 989.5 * kTera,
      .int8_ops = 1979 * kTera,
      .l2_bytes = 50 * kMiB,
      .sm_count = 132,
      .source = "datasheet: NVIDIA H100 SXM (dense)",
  };
  table.push_back({h100_sxm, {"h100 80gb hbm3", "h100 sxm5 80gb", "h100 sxm"}});

  // Same datasheet, PCIe column: FP64 26, FP64 Tensor Core 51, FP32 51, TF32 756*,
  // BF16 1,513*, FP16 1,513*, INT8 3,026*; HBM2e 2 TB/s. 114 SMs, 50 MB L2.
  table.push_back({{
                       .name = "NVIDIA H100 PCIe",
                       .hbm_bytes_per_s = 2.0 * kTera,
                       .fp32_flops = 51 * kTera,
                       .fp64_flops = 26 * kTera,
                       .fp64_tensor_flops = 51 * kTera,
                       .tf32_flops = 378 * kTera,
                       .bf16_flops = 756.5 * kTera,
                       .fp16_flops = 756.5 * kTera,
                       .int8_ops = 1513 * kTera,
                       .l2_bytes = 50 * kMiB,
                       .sm_count = 114,
                       .source = "datasheet: NVIDIA H100 PCIe (dense)",
                   },
                   {"h100 pcie"}});

  // NVIDIA H200 Tensor Core GPU datasheet, SXM column: the same compute figures as H100 SXM
  // (the same GH100 configuration), HBM3e 4.8 TB/s. The datasheet gives no L2 size; an H200
  // reports 60 MiB (cudaDeviceProp::l2CacheSize, read by ksol's calibration on one). The
  // H200 NVL has lower clocks and is deliberately absent.
  DevicePeaks h200 = h100_sxm;
  h200.name = "NVIDIA H200";
  h200.hbm_bytes_per_s = 4.8 * kTera;
  h200.l2_bytes = 60 * kMiB;
  h200.source = "datasheet: NVIDIA H200 SXM (dense)";
  table.push_back({h200, {"h200", "h200 sxm"}});

  // NVIDIA A100 Tensor Core GPU datasheet: FP64 9.7, FP64 Tensor Core 19.5, FP32 19.5,
  // TF32 156, BF16 312, FP16 312, INT8 624 (dense figures, listed before the sparse ones).
  // Memory bandwidth: 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB (SXM and PCIe)
  // 1,555 GB/s. 108 SMs, 40 MB L2 (A100 whitepaper).
  DevicePeaks a100{
      .name = "NVIDIA A100-SXM4-80GB",
      .hbm_bytes_per_s = 2.039 * kTera,
      .fp32_flops = 19.5 * kTera,
      .fp64_flops = 9.7 * kTera,
      .fp64_tensor_flops = 19.5 * kTera,
      .tf32_flops = 156 * kTera,
      .bf16_flops = 312 * kTera,
      .fp16_flops = 312 * kTera,
      .int8_ops = 624 * kTera,
      .l2_bytes = 40 * kMiB,
      .sm_count = 108,
      .source = "datasheet: NVIDIA A100 SXM4 80GB (dense)",
  };
  table.push_back({a100, {"a100-sxm4-80gb"}});

  DevicePeaks a100_pcie_80 = a100;
  a100_pcie_80.name = "NVIDIA A100 80GB PCIe";
  a100_pcie_80.hbm_bytes_per_s = 1.935 * kTera;
  a100_pcie_80.source = "datasheet: NVIDIA A100 PCIe 80GB (dense)";
  table.push_back({a100_pcie_80, {"a100 80gb pcie"}});

  DevicePeaks a100_40 = a100;
  a100_40.name = "NVIDIA A100-SXM4-40GB";
  a100_40.hbm_bytes_per_s = 1.555 * kTera;
  a100_40.source = "datasheet: NVIDIA A100 40GB, SXM4 and PCIe (dense)";
  table.push_back({a100_40, {"a100-sxm4-40gb", "a100-pcie-40gb"}});

  // NVIDIA L40S datasheet: FP32 91.6, TF32 Tensor Core 183, BF16 362.05, FP16 362.05,
  // INT8 733 (dense figures, listed before the sparse ones); GDDR6 864 GB/s; 142 SMs.
  // The datasheet gives no FP64 rate; Ada runs FP64 at 1/64 of FP32, and has no FP64 tensor
  // cores. L2: 96 MB, the full AD102 cache (the calibration records the size reported).
  table.push_back({{
                       .name = "NVIDIA L40S",
                       .hbm_bytes_per_s = 0.864 * kTera,
                       .fp32_flops = 91.6 * kTera,
                       .fp64_flops = 91.6 / 64 * kTera,
                       .fp64_tensor_flops = 91.6 / 64 * kTera,
                       .tf32_flops = 183 * kTera,
                       .bf16_flops = 362.05 * kTera,
                       .fp16_flops = 362.05 * kTera,
                       .int8_ops = 733 * kTera,
                       .l2_bytes = 96 * kMiB,
                       .sm_count = 142,
                       .source = "datasheet: NVIDIA L40S (dense)",
                   },
                   {"l40s"}});

  // NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090 column: FP32 82.6,
  // TF32 Tensor 82.6, FP16 and BF16 Tensor with FP32 accumulate 165.2 (GeForce parts run
  // fp32 accumulation at half the fp16-accumulate rate), INT8 Tensor 660.6 (dense figures);
  // GDDR6X 1,008 GB/s; 128 SMs; 72 MB L2. FP64 at 1/64 of FP32, no FP64 tensor cores.
  table.push_back({{
                       .name = "NVIDIA GeForce RTX 4090",
                       .hbm_bytes_per_s = 1.008 * kTera,
                       .fp32_flops = 82.6 * kTera,
                       .fp64_flops = 82.6 / 64 * kTera,
                       .fp64_tensor_flops = 82.6 / 64 * kTera,
                       .tf32_flops = 82.6 * kTera,
                       .bf16_flops = 165.2 * kTera,
                       .fp16_flops = 165.2 * kTera,
                       .int8_ops = 660.6 * kTera,
                       .l2_bytes = 72 * kMiB,
                       .sm_count = 128,
                       .source = "datasheet: NVIDIA GeForce RTX 4090, Ada whitepaper (dense)",
                   },
                   {"geforce rtx 4090", "rtx 4090"}});

  return table;
}

const std::vector<DatasheetEntry>& table() {
  static const std::vector<DatasheetEntry> entries = build_table();
  return entries;
}

std::string normalize_device_name(std::string_view name) {
  std::string out;
  bool pending_space = false;
  for (char c : name) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  constexpr std::string_view kVendor = "nvidia ";
  if (out.starts_with(kVendor)) out.erase(0, kVendor.size());
  return out;
}

// NaN-safe maximum: a NaN never wins, so one bad measurement cannot poison the merge.
double max_rate(double a, double b) {
  if (std::isnan(a)) return std::isnan(b) ? 0 : b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

}  // namespace

bool operator==(const DevicePeaks& a, const DevicePeaks& b) {
  auto fields = [](const DevicePeaks& p) {
    return std::tie(p.name, p.hbm_bytes_per_s, p.fp32_flops, p.fp64_flops, p.fp64_tensor_flops,
                    p.tf32_flops, p.bf16_flops, p.fp16_flops, p.int8_ops, p.l2_bytes, p.sm_count,
                    p.source);
  };
  return fields(a) == fields(b);
}

const std::vector<DevicePeaks>& datasheet_table() {
  static const std::vector<DevicePeaks> peaks = [] {
    std::vector<DevicePeaks> out;
    for (const DatasheetEntry& entry : table()) out.push_back(entry.peaks);
    return out;
  }();
  return peaks;
}

std::optional<DevicePeaks> datasheet_peaks(std::string_view device_name) {
  const std::string key = normalize_device_name(device_name);
  if (key.empty()) return std::nullopt;
  for (const DatasheetEntry& entry : table()) {
    if (std::find(entry.names.begin(), entry.names.end(), key) != entry.names.end()) {
      return entry.peaks;
    }
  }
  return std::nullopt;
}

DevicePeaks merge_max(const DevicePeaks& datasheet, const DevicePeaks& measured) {
  DevicePeaks out;
  out.name = measured.name.empty() ? datasheet.name : measured.name;
  out.hbm_bytes_per_s = max_rate(datasheet.hbm_bytes_per_s, measured.hbm_bytes_per_s);
  out.fp32_flops = max_rate(datasheet.fp32_flops, measured.fp32_flops);
  out.fp64_flops = max_rate(datasheet.fp64_flops, measured.fp64_flops);
  out.fp64_tensor_flops = max_rate(datasheet.fp64_tensor_flops, measured.fp64_tensor_flops);
  out.tf32_flops = max_rate(datasheet.tf32_flops, measured.tf32_flops);
  out.bf16_flops = max_rate(datasheet.bf16_flops, measured.bf16_flops);
  out.fp16_flops = max_rate(datasheet.fp16_flops, measured.fp16_flops);
  out.int8_ops = max_rate(datasheet.int8_ops, measured.int8_ops);
  out.l2_bytes = max_rate(datasheet.l2_bytes, measured.l2_bytes);
  out.sm_count = std::max(datasheet.sm_count, measured.sm_count);
  if (datasheet.source.empty()) {
    out.source = measured.source;
  } else if (measured.source.empty()) {
    out.source = datasheet.source;
  } else {
    out.source = "max(" + datasheet.source + "; " + measured.source + ")";
  }
  return out;
}

void to_json(nlohmann::json& j, const DevicePeaks& p) {
  j = nlohmann::json{
      {"name", p.name},
      {"hbm_bytes_per_s", p.hbm_bytes_per_s},
      {"fp32_flops", p.fp32_flops},
      {"fp64_flops", p.fp64_flops},
      {"fp64_tensor_flops", p.fp64_tensor_flops},
      {"tf32_flops", p.tf32_flops},
      {"bf16_flops", p.bf16_flops},
      {"fp16_flops", p.fp16_flops},
      {"int8_ops", p.int8_ops},
      {"l2_bytes", p.l2_bytes},
      {"sm_count", p.sm_count},
      {"source", p.source},
  };
}

void from_json(const nlohmann::json& j, DevicePeaks& p) {
  p.name = j.value("name", std::string());
  j.at("hbm_bytes_per_s").get_to(p.hbm_bytes_per_s);
  j.at("fp32_flops").get_to(p.fp32_flops);
  j.at("fp64_flops").get_to(p.fp64_flops);
  // Older files may predate the FP64 tensor field; the FMA rate is a safe lower value.
  p.fp64_tensor_flops = j.value("fp64_tensor_flops", p.fp64_flops);
  j.at("tf32_flops").get_to(p.tf32_flops);
  j.at("bf16_flops").get_to(p.bf16_flops);
  j.at("fp16_flops").get_to(p.fp16_flops);
  j.at("int8_ops").get_to(p.int8_ops);
  j.at("l2_bytes").get_to(p.l2_bytes);
  j.at("sm_count").get_to(p.sm_count);
  p.source = j.value("source", std::string());
}

std::filesystem::path cache_root() { return cache_dir(); }

std::filesystem::path calibration_path(std::string_view gpu_uuid) {
  const bool safe = !gpu_uuid.empty() && std::all_of(gpu_uuid.begin(), gpu_uuid.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
  if (!safe) {
    throw std::invalid_argument("invalid GPU UUID for the calibration cache: '" +
                                std::string(gpu_uuid) + "'");
  }
  return cache_root() / "devices" / (std::string(gpu_uuid) + ".json");
}

std::optional<DevicePeaks> load_calibration(std::string_view gpu_uuid) {
  std::filesystem::path path;
  try {
    path = calibration_path(gpu_uuid);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in).get<DevicePeaks>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<std::string> save_calibration(std::string_view gpu_uuid, const DevicePeaks& peaks) {
  std::filesystem::path path;
  try {
    path = calibration_path(gpu_uuid);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return "cannot create " + path.parent_path().string() + ": " + ec.message();

  // Writers on several hosts may share one cache directory (a network home); a temporary
  // name unique to this process and a rename keep readers from ever seeing half a file.
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return "cannot write " + tmp.string();
    out << nlohmann::json(peaks).dump(2) << '\n';
    out.close();
    if (!out) return "cannot write " + tmp.string();
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::string message = "cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message();
    std::filesystem::remove(tmp, ec);
    return message;
  }
  return std::nullopt;
}

}  // namespace ksol::sol
