// SOL arithmetic, datasheet lookup, merging and the calibration cache. No GPU needed.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "sol/peaks.h"
#include "sol/sol.h"

namespace ksol::sol {
namespace {

constexpr double kTera = 1e12;
constexpr double kInf = std::numeric_limits<double>::infinity();

DevicePeaks h200() {
  auto peaks = datasheet_peaks("NVIDIA H200");
  EXPECT_TRUE(peaks.has_value());
  return peaks.value_or(DevicePeaks{});
}

// ---- datasheet lookup ------------------------------------------------------------------

TEST(SolPeaks, LooksUpH200ByCudaName) {
  auto peaks = datasheet_peaks("NVIDIA H200");
  ASSERT_TRUE(peaks.has_value());
  EXPECT_EQ(peaks->name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(peaks->hbm_bytes_per_s, 4.8 * kTera);
  EXPECT_DOUBLE_EQ(peaks->bf16_flops, 989.5 * kTera);
  EXPECT_DOUBLE_EQ(peaks->fp32_flops, 67 * kTera);
  EXPECT_EQ(peaks->sm_count, 132);
}

TEST(SolPeaks, H200HasTheComputeOfH100SxmAndMoreBandwidth) {
  auto h100 = datasheet_peaks("NVIDIA H100 80GB HBM3");
  auto h200 = datasheet_peaks("NVIDIA H200");
  ASSERT_TRUE(h100 && h200);
  EXPECT_DOUBLE_EQ(h100->hbm_bytes_per_s, 3.35 * kTera);
  EXPECT_DOUBLE_EQ(h100->bf16_flops, h200->bf16_flops);
  EXPECT_DOUBLE_EQ(h100->tf32_flops, h200->tf32_flops);
  EXPECT_DOUBLE_EQ(h100->fp64_tensor_flops, h200->fp64_tensor_flops);
  EXPECT_GT(h200->hbm_bytes_per_s, h100->hbm_bytes_per_s);
}

TEST(SolPeaks, TellsH100SxmFromPcie) {
  auto pcie = datasheet_peaks("NVIDIA H100 PCIe");
  ASSERT_TRUE(pcie.has_value());
  EXPECT_EQ(pcie->sm_count, 114);
  EXPECT_DOUBLE_EQ(pcie->hbm_bytes_per_s, 2.0 * kTera);
  EXPECT_LT(pcie->bf16_flops, datasheet_peaks("NVIDIA H100 80GB HBM3")->bf16_flops);
}

TEST(SolPeaks, MatchingIgnoresCaseSpacingAndVendor) {
  EXPECT_TRUE(datasheet_peaks("  nvidia   h200 ").has_value());
  EXPECT_TRUE(datasheet_peaks("H200").has_value());
  EXPECT_TRUE(datasheet_peaks("NVIDIA A100-SXM4-80GB").has_value());
  EXPECT_TRUE(datasheet_peaks("NVIDIA A100-PCIE-40GB").has_value());
  EXPECT_TRUE(datasheet_peaks("NVIDIA L40S").has_value());
  EXPECT_TRUE(datasheet_peaks("NVIDIA GeForce RTX 4090").has_value());
}

TEST(SolPeaks, A100BandwidthFollowsTheMemoryVariant) {
  EXPECT_DOUBLE_EQ(datasheet_peaks("NVIDIA A100-SXM4-80GB")->hbm_bytes_per_s, 2.039 * kTera);
  EXPECT_DOUBLE_EQ(datasheet_peaks("NVIDIA A100 80GB PCIe")->hbm_bytes_per_s, 1.935 * kTera);
  EXPECT_DOUBLE_EQ(datasheet_peaks("NVIDIA A100-SXM4-40GB")->hbm_bytes_per_s, 1.555 * kTera);
}

TEST(SolPeaks, UnknownAndLookalikeDevicesAreNotGuessed) {
  EXPECT_FALSE(datasheet_peaks("NVIDIA GeForce GTX 1080").has_value());
  EXPECT_FALSE(datasheet_peaks("").has_value());
  // Variants with other clocks, memory or SM counts must not borrow a neighbour's peaks.
  EXPECT_FALSE(datasheet_peaks("NVIDIA H200 NVL").has_value());
  EXPECT_FALSE(datasheet_peaks("NVIDIA GH200 480GB").has_value());
  EXPECT_FALSE(datasheet_peaks("NVIDIA H100 80GB HBM3 MIG 1g.10gb").has_value());
}

TEST(SolPeaks, TableIsDenseAndComplete) {
  for (const DevicePeaks& p : datasheet_table()) {
    SCOPED_TRACE(p.name);
    EXPECT_GT(p.hbm_bytes_per_s, 0);
    EXPECT_GT(p.fp32_flops, 0);
    EXPECT_GT(p.fp64_flops, 0);
    EXPECT_GE(p.fp64_tensor_flops, p.fp64_flops);
    EXPECT_GE(p.tf32_flops, p.fp32_flops);
    EXPECT_GE(p.bf16_flops, p.tf32_flops);
    EXPECT_GT(p.int8_ops, 0);
    EXPECT_GT(p.l2_bytes, 0);
    EXPECT_GT(p.sm_count, 0);
    EXPECT_NE(p.source.find("dense"), std::string::npos);
    // Every table entry must be reachable by its own CUDA name.
    auto found = datasheet_peaks(p.name);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(*found, p);
  }
}

// ---- merge -------------------------------------------------------------------------------

TEST(SolPeaks, MergeTakesTheFieldWiseMaximum) {
  DevicePeaks datasheet = h200();
  DevicePeaks measured;
  measured.name = "NVIDIA H200";
  measured.hbm_bytes_per_s = 4.1 * kTera;      // below the datasheet
  measured.fp32_flops = 70 * kTera;            // above (boost clock above the rated one)
  measured.bf16_flops = 700 * kTera;
  measured.fp64_flops = std::nan("");          // a broken measurement never wins
  measured.l2_bytes = 64 * 1024.0 * 1024.0;
  measured.source = "calibration: GPU-1";
  DevicePeaks merged = merge_max(datasheet, measured);
  EXPECT_DOUBLE_EQ(merged.hbm_bytes_per_s, 4.8 * kTera);
  EXPECT_DOUBLE_EQ(merged.fp32_flops, 70 * kTera);
  EXPECT_DOUBLE_EQ(merged.bf16_flops, 989.5 * kTera);
  EXPECT_DOUBLE_EQ(merged.fp64_flops, 34 * kTera);
  EXPECT_DOUBLE_EQ(merged.int8_ops, datasheet.int8_ops);  // 0 (unmeasured) keeps the datasheet
  EXPECT_DOUBLE_EQ(merged.l2_bytes, 64 * 1024.0 * 1024.0);
  EXPECT_EQ(merged.sm_count, 132);
  EXPECT_EQ(merged.name, "NVIDIA H200");
  EXPECT_EQ(merged.source, "max(datasheet: NVIDIA H200 SXM (dense); calibration: GPU-1)");
}

TEST(SolPeaks, MergeWithNothingMeasuredIsTheDatasheet) {
  EXPECT_EQ(merge_max(h200(), DevicePeaks{}), h200());
}

// ---- SOL arithmetic ----------------------------------------------------------------------

TEST(Sol, Bf16Gemm8192OnH200IsComputeBound) {
  const double n = 8192;
  const double flops = 2 * n * n * n;          // 1,099,511,627,776
  const double bytes = 2 * (3 * n * n);        // A, B read once, C written once: 402,653,184
  SolEstimate e = estimate(flops, bytes, MathUnit::tensor, Precision::bf16, h200());
  // 1.099511627776e12 / 989.5e12 and 402653184 / 4.8e12, by hand.
  EXPECT_NEAR(e.t_flops_s, 1.1111790073532087e-3, 1e-15);
  EXPECT_NEAR(e.t_bytes_s, 8.388608e-5, 1e-15);
  EXPECT_DOUBLE_EQ(e.t_sol_s, e.t_flops_s);
  EXPECT_EQ(e.bound, "compute");
  EXPECT_DOUBLE_EQ(e.peak_flops_per_s, 989.5 * kTera);
  EXPECT_DOUBLE_EQ(e.bytes_per_s, 4.8 * kTera);

  // cuBLAS at ~1.4 ms would be at 79% of SOL with 1.26x headroom.
  EXPECT_NEAR(pct_sol(e.t_sol_s, 1.4e-3), 0.79369929, 1e-8);
  EXPECT_NEAR(headroom(e.t_sol_s, 1.4e-3), 1.4e-3 / 1.1111790073532087e-3, 1e-12);
  EXPECT_FALSE(suspect(pct_sol(e.t_sol_s, 1.4e-3)));
}

TEST(Sol, OneGibCopyOnH200IsMemoryBound) {
  const double bytes = 2.0 * (1 << 30);        // read 1 GiB, write 1 GiB
  SolEstimate e = estimate(0, bytes, MathUnit::none, Precision::fp32, h200());
  EXPECT_NEAR(e.t_bytes_s, 4.4739242666666664e-4, 1e-16);
  EXPECT_DOUBLE_EQ(e.t_flops_s, 0);
  EXPECT_DOUBLE_EQ(e.t_sol_s, e.t_bytes_s);
  EXPECT_EQ(e.bound, "memory");
}

TEST(Sol, PeakFollowsUnitAndPrecision) {
  DevicePeaks p = h200();
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::tensor, Precision::bf16), p.bf16_flops);
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::tensor, Precision::fp16), p.fp16_flops);
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::tensor, Precision::tf32), p.tf32_flops);
  // TF32 is not allowed under fp32, so a GEMM is bound by the FMA pipes.
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::tensor, Precision::fp32), 67 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::tensor, Precision::fp64), 67 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::fma, Precision::fp64), 34 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::fma, Precision::bf16), 67 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::fma, Precision::tf32), 67 * kTera);
  EXPECT_EQ(peak_flops(p, MathUnit::none, Precision::fp32), kInf);

  p.fp64_tensor_flops = 0;  // unknown: fall back to the FMA rate
  EXPECT_DOUBLE_EQ(peak_flops(p, MathUnit::tensor, Precision::fp64), 34 * kTera);
}

TEST(Sol, Fp32GemmUnderFp32PolicyUsesFmaRate) {
  const double n = 8192;
  SolEstimate e = estimate(2 * n * n * n, 4 * 3 * n * n, MathUnit::tensor, Precision::fp32, h200());
  EXPECT_NEAR(e.t_flops_s, 1.099511627776e12 / 67e12, 1e-15);
  EXPECT_EQ(e.bound, "compute");
}

TEST(Sol, UnknownPeakAddsNoTime) {
  DevicePeaks p;  // nothing known
  p.hbm_bytes_per_s = 1e12;
  SolEstimate e = estimate(1e12, 1e9, MathUnit::tensor, Precision::bf16, p);
  EXPECT_DOUBLE_EQ(e.t_flops_s, 0);
  EXPECT_DOUBLE_EQ(e.t_sol_s, 1e-3);
  EXPECT_EQ(e.bound, "memory");
}

TEST(Sol, RejectsNegativeOrNonFiniteWork) {
  EXPECT_THROW(estimate(-1, 0, MathUnit::fma, Precision::fp32, h200()), std::invalid_argument);
  EXPECT_THROW(estimate(0, std::nan(""), MathUnit::fma, Precision::fp32, h200()),
               std::invalid_argument);
  EXPECT_THROW(estimate(kInf, 0, MathUnit::fma, Precision::fp32, h200()), std::invalid_argument);
}

TEST(Sol, PctSolAndHeadroomAreReciprocal) {
  EXPECT_DOUBLE_EQ(pct_sol(1.0, 4.0), 0.25);
  EXPECT_DOUBLE_EQ(headroom(1.0, 4.0), 4.0);
  EXPECT_DOUBLE_EQ(pct_sol(0, 4.0), 0);          // nothing bounds the task
  EXPECT_EQ(headroom(0, 4.0), kInf);
  EXPECT_EQ(pct_sol(1.0, 0), kInf);              // a zero time beats any bound
  EXPECT_DOUBLE_EQ(headroom(1.0, 0), 0);
}

TEST(Sol, SuspectAbove105Percent) {
  EXPECT_FALSE(suspect(1.0));
  EXPECT_FALSE(suspect(1.05));
  EXPECT_TRUE(suspect(1.0501));
  EXPECT_TRUE(suspect(pct_sol(1.0, 0.9)));       // 111%
  EXPECT_FALSE(suspect(pct_sol(1.0, 0.96)));     // 104%
  EXPECT_TRUE(suspect(kInf));
  EXPECT_FALSE(suspect(std::nan("")));
}

// ---- parsing -----------------------------------------------------------------------------

TEST(SolParse, PrecisionRoundTrips) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16,
                      Precision::fp64}) {
    EXPECT_EQ(parse_precision(to_string(p)), p);
  }
  for (MathUnit u : {MathUnit::tensor, MathUnit::fma, MathUnit::none}) {
    EXPECT_EQ(parse_math_unit(to_string(u)), u);
  }
}

TEST(SolParse, PrecisionErrorsListTheChoices) {
  std::string error;
  EXPECT_FALSE(parse_precision("fp8", &error).has_value());
  EXPECT_EQ(error, "unknown precision 'fp8': expected one of fp32, tf32, bf16, fp16, fp64");
  EXPECT_FALSE(parse_precision("FP32", &error).has_value());  // spellings are exact
  EXPECT_EQ(error, "unknown precision 'FP32': expected one of fp32, tf32, bf16, fp16, fp64");
  EXPECT_FALSE(parse_precision("", &error).has_value());
  EXPECT_EQ(error, "unknown precision '': expected one of fp32, tf32, bf16, fp16, fp64");
  EXPECT_FALSE(parse_precision(" bf16").has_value());        // no error text asked for
}

TEST(SolParse, MathUnitErrorsListTheChoices) {
  std::string error;
  EXPECT_FALSE(parse_math_unit("simt", &error).has_value());
  EXPECT_EQ(error, "unknown math unit 'simt': expected one of tensor, fma, none");
}

// ---- JSON and the calibration cache ------------------------------------------------------

TEST(SolPeaks, JsonRoundTrip) {
  DevicePeaks p = h200();
  nlohmann::json j = p;
  EXPECT_EQ(j.at("hbm_bytes_per_s").get<double>(), 4.8 * kTera);
  EXPECT_EQ(j.get<DevicePeaks>(), p);
}

TEST(SolPeaks, JsonMissingRateThrows) {
  nlohmann::json j = h200();
  j.erase("bf16_flops");
  EXPECT_THROW(j.get<DevicePeaks>(), nlohmann::json::exception);
}

class CalibrationCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ksol_test_sol_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    const char* old = std::getenv("KSOL_CACHE_DIR");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    setenv("KSOL_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_) {
      setenv("KSOL_CACHE_DIR", old_.c_str(), 1);
    } else {
      unsetenv("KSOL_CACHE_DIR");
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::filesystem::path dir_;
  std::string old_;
  bool had_old_ = false;
};

TEST_F(CalibrationCache, SaveThenLoadGivesTheSamePeaks) {
  const std::string uuid = "GPU-8f6d1c2a-0b1e-4c3d-9a7b-123456789abc";
  EXPECT_FALSE(load_calibration(uuid).has_value());

  DevicePeaks measured = h200();
  measured.hbm_bytes_per_s = 4.31e12;
  measured.bf16_flops = 712.25e12;
  measured.source = "calibration: " + uuid;
  EXPECT_EQ(save_calibration(uuid, measured), std::nullopt);

  EXPECT_EQ(calibration_path(uuid), dir_ / "devices" / (uuid + ".json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "devices" / (uuid + ".json")));
  auto loaded = load_calibration(uuid);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, measured);

  // Saving again replaces the entry and leaves no temporary files behind.
  measured.hbm_bytes_per_s = 4.4e12;
  EXPECT_EQ(save_calibration(uuid, measured), std::nullopt);
  EXPECT_DOUBLE_EQ(load_calibration(uuid)->hbm_bytes_per_s, 4.4e12);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_ / "devices")) {
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(CalibrationCache, CorruptEntryReadsAsMissing) {
  const std::string uuid = "GPU-corrupt";
  std::filesystem::create_directories(dir_ / "devices");
  std::ofstream(dir_ / "devices" / "GPU-corrupt.json") << "{\"hbm_bytes_per_s\": ";
  EXPECT_FALSE(load_calibration(uuid).has_value());
}

TEST_F(CalibrationCache, RejectsUuidsThatAreNotFileNames) {
  EXPECT_THROW(calibration_path("../escape"), std::invalid_argument);
  EXPECT_THROW(calibration_path(""), std::invalid_argument);
  EXPECT_FALSE(load_calibration("a/b").has_value());
  auto error = save_calibration("../escape", h200());
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(*error, "invalid GPU UUID for the calibration cache: '../escape'");
}

TEST(CalibrationCacheRoot, FallsBackToXdgThenHome) {
  const char* saved_ksol = std::getenv("KSOL_CACHE_DIR");
  const char* saved_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string ksol_value = saved_ksol ? saved_ksol : "";
  const std::string xdg_value = saved_xdg ? saved_xdg : "";

  unsetenv("KSOL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(cache_root(), std::filesystem::path("/tmp/xdg-test/ksol"));
  unsetenv("XDG_CACHE_HOME");
  if (const char* home = std::getenv("HOME")) {
    EXPECT_EQ(cache_root(), std::filesystem::path(home) / ".cache" / "ksol");
  }
  setenv("KSOL_CACHE_DIR", "/tmp/ksol-explicit", 1);
  EXPECT_EQ(cache_root(), std::filesystem::path("/tmp/ksol-explicit"));

  if (saved_ksol) setenv("KSOL_CACHE_DIR", ksol_value.c_str(), 1); else unsetenv("KSOL_CACHE_DIR");
  if (saved_xdg) setenv("XDG_CACHE_HOME", xdg_value.c_str(), 1); else unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace ksol::sol
