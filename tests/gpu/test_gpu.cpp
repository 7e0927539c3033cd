// GPU tier: runs only where ksol-worker sees a GPU; elsewhere each test is skipped with the
// worker's reason. These are checks, not benchmarks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "codegen/codegen.h"
#include "compile/compiler.h"
#include "coord/session.h"
#include "coord/worker_client.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "task/task.h"

#include <nlohmann/json.hpp>

namespace {
// Where ksol and ksol-worker are: the build tree, or KSOL_TEST_BIN_DIR (a GPU host that runs
// binaries built elsewhere, scripts/carry.sh's .carry/bin).
std::string bin_dir() {
  if (const char* d = std::getenv("KSOL_TEST_BIN_DIR"); d && *d) return d;
  return KSOL_BUILD_DIR;
}

std::string gpu_absent_reason() {
  ksol::WorkerClient w({bin_dir() + "/ksol-worker"});
  ksol::WorkerReply r = w.call({{"op", "hello"}}, 120);
  if (!r.ok) return "the worker did not start: " + r.message;
  if (!r.body.value("gpu", false)) return r.body.value("reason", "no CUDA device");
  return "";
}
}  // namespace

TEST(Gpu, CpuAndGpuReferencesAgreeOnSmallSizes) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "refcheck"}, 1800);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Buffers whose byte size is not a multiple of 8 (a scalar output, odd-length index arrays) put
// the trailing guard zone at an unaligned address; the canary fill and fingerprint must cope.
TEST(Gpu, BaselinesWithOddSizedBuffersPassTheGate) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "bench", "--tasks",
                                             "dot_f32,spmv_csr_f32,reduction_sum_f32", "--sizes", "small,odd,odd_tall"},
                                            1800);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The tuned row programs store their outputs through inline PTX (store_hint = evict_last) that the
// host emulation replaces with plain stores: on the GPU, every size through the gates, the odd
// ones (C = 1001, 777, 5000) on the one-element packs' 2- and 4-byte store forms. softmax_bf16's
// vocab size (C = 128256) is longer than its register cache holds and runs its uncached kernel.
TEST(Gpu, TunedRowProgramsPassTheGatesAtEverySize) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  for (const std::string t : {"softmax_bf16", "softmax_f32", "rmsnorm_bf16", "rmsnorm_f32", "layernorm_bf16",
                              "layernorm_f32"}) {
    std::vector<std::string> argv = {bin_dir() + "/ksol", "--store", "", "eval", "--task", t,
                                     "--no-time", "--compare", "none", "--candidate",
                                     ksol::source_root() + "/examples/tuned/" + t + ".ksol"};
    ksol::ProcessResult r = ksol::run_process(argv, 900);
    EXPECT_EQ(r.exit_code, 0) << t << "\n" << r.output;
  }
}

// A kernel with schedules by size (tests/golden/dsl/rmsnorm_by_size.ksol: a scalar schedule for rows
// that are not a multiple of 8, the register cache for large problems, four-wide packs otherwise)
// passes every gate at every size of its task, hidden ones included: each size takes one of them.
TEST(Gpu, ScheduleBySizePassesTheGatesAtEverySize) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  std::vector<std::string> argv = {bin_dir() + "/ksol", "--store", "", "eval", "--task", "rmsnorm_bf16", "--no-time", "--compare", "none",
                                   "--candidate", ksol::source_root() + "/tests/golden/dsl/rmsnorm_by_size.ksol"};
  ksol::ProcessResult r = ksol::run_process(argv, 900);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Cases made and checked on the device (harness/device_cases.h) give the host path's verdicts:
// the same candidates, with the same seeds, pass or fail alike, and their worst error over the
// tolerance agrees (the two generators may differ in the last place of a float64 transcendental,
// so not bit for bit). At a size within cpu_max_work (axpy's medium) the host path is judged by
// the CPU reference and the device path by the GPU one; spmm's sparse inputs are drawn on the
// host and uploaded into device cases (harness/case_plan.h). A hack that halves its work fails in
// both.
TEST(Gpu, DeviceCasesGiveTheHostsVerdicts) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  struct Case {
    std::string task, size, candidate;
    bool ok;
  };
  const std::string root = ksol::source_root();
  std::vector<Case> cases = {{"relu_f32", "large", root + "/tasks/tensor/relu_f32/program.ksol", true},
                             {"softmax_bf16", "large", root + "/tasks/llm/softmax_bf16/program.ksol", true},
                             {"gemm_f32", "large", root + "/tasks/dense/gemm_f32/program.ksol", true},
                             {"layernorm_f32", "large", root + "/tasks/llm/layernorm_f32/program.ksol", true},
                             {"axpy_f32", "medium", root + "/tasks/dense/axpy_f32/program.ksol", true},
                             {"spmm_csr_f32", "large_banded", root + "/tasks/sparse/spmm_csr_f32/program.ksol", true},
                             {"gemm_f32", "large", root + "/tests/hacks/07_subsample.cu", false}};
  for (const Case& c : cases) {
    double worst[2] = {0, 0};
    for (int host = 0; host < 2; ++host) {
      if (host) ::setenv("KSOL_HOST_CASES", "1", 1);
      ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--json", "--store", "", "eval", "--task", c.task, "--sizes", c.size,
                                                 "--no-time", "--compare", "none", "--seed", "12345", "--candidate", c.candidate},
                                                900);
      ::unsetenv("KSOL_HOST_CASES");
      size_t brace = r.output.find("{\n");
      ASSERT_NE(brace, std::string::npos) << r.output;
      nlohmann::json j = nlohmann::json::parse(r.output.substr(brace));
      const nlohmann::json& s = j["candidate"]["sizes"][0];
      EXPECT_EQ(s["status"] == "ok", c.ok) << c.task << " " << c.candidate << (host ? " (host cases)" : " (device cases)") << "\n" << s.dump(1);
      const nlohmann::json& raw = s["result"];
      ASSERT_TRUE(raw.is_object()) << s.dump(1);
      EXPECT_EQ(raw["case_cache"].value("cases", ""), host ? "host" : "device") << raw.dump(1);
      if (!host) {
        EXPECT_EQ(raw.value("reference", ""), "gpu") << raw.dump(1);
      }
      if (c.ok) worst[host] = raw["correctness"].value("worst_error_over_tolerance", -1.0);
    }
    if (c.ok) {
      EXPECT_NEAR(worst[0], worst[1], 0.05 * worst[1] + 1e-9) << c.task;
    }
  }
}

// A baseline's early stop on the device (EvalRequest::stop_above_us): gemm_f32's naive kernel at
// 2048^3 against a limit of 1 us stops after its first calls (far_slower, their time recorded,
// no correctness or timing gate run, in a fraction of a full evaluation's time); against a limit
// it is under, the same evaluation runs every gate as without one, its probe call on record.
TEST(Gpu, AFarSlowerBaselineStopsAfterItsFirstCalls) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  ksol::Task t = ksol::load_task(ksol::resolve_task_path("gemm_f32"));
  const ksol::BaselineSpec* naive = nullptr;
  for (const auto& b : t.baselines)
    if (b.name == "naive") naive = &b;
  ASSERT_TRUE(naive);
  ksol::Session::Options so;
  so.worker_argv = {bin_dir() + "/ksol-worker"};
  ksol::Session s(so);
  ASSERT_TRUE(s.has_gpu()) << s.gpu_reason();
  ksol::EvalOptions o;
  o.sizes = {"medium"};
  o.seed = 12345;
  o.far_slower = {{"medium", {"cublas", 1.0 / 8, 8}}};
  ksol::CandidateOutcome stopped = s.evaluate(t, ksol::baseline_job(t, *naive), "baseline:naive", "baseline:naive", o);
  ASSERT_EQ(stopped.sizes.size(), 1u);
  const ksol::SizeEvaluation& e = stopped.sizes[0];
  EXPECT_EQ(e.status, ksol::Status::far_slower) << e.message << "\n" << e.raw.dump(1);
  EXPECT_GT(e.probe_us, 1.0);
  EXPECT_EQ(e.median_us, 0);
  EXPECT_NE(e.message.find("far slower than cublas"), std::string::npos) << e.message;
  EXPECT_EQ(e.raw["probe"]["calls_us"].size(), 2u) << e.raw.dump(1);  // the first call above the limit gets a second
  for (const auto& g : e.gates) EXPECT_NE(g.value("gate", ""), "correctness") << e.raw.dump(1);
  o.far_slower = {{"medium", {"cublas", 1e9, 8}}};
  ksol::CandidateOutcome full = s.evaluate(t, ksol::baseline_job(t, *naive), "baseline:naive", "baseline:naive", o);
  ASSERT_EQ(full.sizes.size(), 1u);
  const ksol::SizeEvaluation& f = full.sizes[0];
  EXPECT_EQ(f.status, ksol::Status::ok) << f.message;
  EXPECT_GT(f.median_us, 0);
  EXPECT_EQ(f.raw["probe"]["stopped"], false) << f.raw.dump(1);
  EXPECT_EQ(f.raw["probe"]["calls_us"].size(), 1u) << f.raw.dump(1);
  // The probe's one call agrees with the timed median within the factor it is judged by.
  double call = f.raw["probe"]["us"].get<double>();
  EXPECT_LT(call, 8 * f.median_us);
  EXPECT_GT(call, f.median_us / 8);
  EXPECT_LT(e.harness_seconds(), f.harness_seconds()) << "stopping early must be cheaper than the full evaluation";
}

// The warp-level tensor-core kernels (mainloop = mma) through every gate on the GPU: the conv
// family's on the NHWC TF32 (staged through registers, and pipelined by cp.async) and bf16 tasks
// at every visible size, and the direct family's through the module path under the default
// precision (TF32 convolutions): a 3-D and a transposed 2-D convolution (tests/gpu/problems), and
// the conv family's with a reduction over the filters as its epilogue, each seed verified against
// its module in float64; and a stride-1 transposed convolution as the conv family's piece.
TEST(Gpu, WarpLevelTensorCoreKernelsPassTheGates) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  const std::string tmp = (std::filesystem::temp_directory_path() / ("ksol-gpu-mma-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(tmp);
  // The TF32 task also through the cp.async pipeline in dynamic shared memory past 48 KB (3 x 33 KB);
  // the gemm family's mma kernel at its default warp tile and at a smaller one with more stages.
  const std::vector<std::pair<std::string, ksol::codegen::Schedule>> runs = {
      {"conv2d_nhwc_tf32", {{"mainloop", "mma"}, {"tile", "[128, 128, 16]"}, {"thread_tile", "[4, 2]"}}},
      {"conv2d_nhwc_tf32", {{"mainloop", "mma"}, {"tile", "[128, 128, 32]"}, {"thread_tile", "[4, 2]"}, {"stages", "3"}}},
      {"conv2d_nhwc_bf16", {{"mainloop", "mma"}, {"tile", "[128, 128, 16]"}, {"thread_tile", "[4, 2]"}}},
      {"linear_tf32", {{"mainloop", "mma"}, {"tile", "[128, 128, 16]"}, {"split_k", "1"}}},
      {"linear_tf32", {{"mainloop", "mma"}, {"tile", "[64, 128, 32]"}, {"warp_tile", "[32, 64]"}, {"stages", "4"}, {"split_k", "1"}}}};
  for (const auto& [t, sched] : runs) {
    const ksol::Task task = ksol::load_task(ksol::resolve_task_path(t));
    const std::string path = task.dir + "/program.ksol";
    ksol::dsl::Program p = ksol::codegen::with_schedule(ksol::dsl::parse_program(ksol::read_file(path), path), sched);
    ASSERT_NE(ksol::codegen::kernel_name(p).find("_mma_"), std::string::npos);
    const std::string cand = tmp + "/" + ksol::codegen::kernel_name(p) + ".ksol";
    ksol::write_file_atomic(cand, ksol::dsl::print_source(p));
    ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "eval", "--task", t, "--no-time", "--compare",
                                               "none", "--candidate", cand},
                                              900);
    EXPECT_EQ(r.exit_code, 0) << t << "\n" << r.output;
  }
  // Modules whose seeds are one TF32 program each: the direct family's conv3d and transposed conv,
  // and a conv whose epilogue reduces over its 48 filters (the lanes' and warps' partials).
  for (const std::string f : {"conv3d_relu.py", "conv_transpose2d_bias.py", "conv_channel_min_tanh.py"}) {
    const std::string json = tmp + "/" + f + ".json";
    ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "optimize", ksol::source_root() + "/tests/gpu/problems/" + f,
                                               "--budget-candidates", "1", "--fresh-baselines", "--plan", "own", "--json-out", json},
                                              900);
    EXPECT_EQ(r.exit_code, 0) << f << "\n" << r.output;
    EXPECT_NE(r.output.find("the convolution's products are TF32"), std::string::npos) << r.output;
    const nlohmann::json doc = nlohmann::json::parse(ksol::read_file(json));
    const nlohmann::json& seed = doc["results"][0]["trajectory"][0];
    EXPECT_EQ(seed.value("status", ""), "ok") << f << "\n" << seed.dump(1);
    EXPECT_NE(seed.value("kernel", "").find("_mma_"), std::string::npos) << seed.dump(1);
  }
  // A stride-1 transposed conv: the stitched module's one conv piece by the flipped filter (weight
  // preparation), the TF32 mma kernel, through every gate.
  ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "optimize",
                                             ksol::source_root() + "/tests/gpu/problems/conv_transpose2d_stride1.py",
                                             "--budget-candidates", "1", "--path", "fx", "--plan", "own", "--fresh-baselines"},
                                            900);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("piece 0 (conv, nodes conv2d, tanh): conv_model_f32_tf32_mma_"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stitched (1 piece(s)): ok"), std::string::npos) << r.output;
  // The vendor-call plan of the conv reduction: cuDNN's conv, then the minimum over its channels
  // with the two tanh as the column reduction's epilogue, one piece through every gate.
  const std::string vjson = tmp + "/vendor.json";
  r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "optimize", ksol::source_root() + "/tests/gpu/problems/conv_channel_min_tanh.py",
                         "--budget-candidates", "1", "--path", "fx", "--plan", "vendor", "--fresh-baselines", "--json-out", vjson},
                        900);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("vendor-call plan: piece 0 (rowwise, nodes min_1, getitem, tanh, tanh_1): colwise_model_f32_"),
            std::string::npos)
      << r.output;
  const nlohmann::json vdoc = nlohmann::json::parse(ksol::read_file(vjson));
  EXPECT_EQ(vdoc["results"][0]["stitched"].value("status", ""), "ok") << vdoc["results"][0].dump(1);
}

// One module's vendor-call plan through `ksol optimize` (two candidates): the output names the
// piece `piece`, and the stitched module passed every gate against float64, with the kernels of
// one profiled call of torch.compile and of ksol by name.
static void vendor_plan_passes_the_gates(const std::string& tmp, const std::string& f, const std::string& piece) {
  const std::string json = tmp + "/" + f + ".json";
  ksol::ProcessResult r = ksol::run_process({bin_dir() + "/ksol", "--store", "", "optimize", ksol::source_root() + "/tests/gpu/problems/" + f,
                                             "--budget-candidates", "2", "--path", "fx", "--plan", "vendor", "--fresh-baselines",
                                             "--json-out", json},
                                            900);
  EXPECT_EQ(r.exit_code, 0) << f << "\n" << r.output;
  EXPECT_NE(r.output.find(piece), std::string::npos) << f << "\n" << r.output;
  const nlohmann::json doc = nlohmann::json::parse(ksol::read_file(json));
  EXPECT_EQ(doc["results"][0]["stitched"].value("status", ""), "ok") << f << "\n" << doc["results"][0].dump(1);
  const nlohmann::json ku = doc["results"][0].value("kernel_us", nlohmann::json::object());
  for (const char* who : {"compile", "ksol"}) {
    ASSERT_TRUE(ku.contains(who) && ku[who].is_array() && !ku[who].empty()) << who << "\n" << ku.dump(1);
    EXPECT_GT(ku[who][0].value("us", 0.0), 0.0) << ku.dump(1);
  }
  EXPECT_NE(r.output.find("torch.compile, one profiled call, slowest kernels: "), std::string::npos) << r.output;
}

static std::string gpu_tmp(const std::string& what) {
  const std::string tmp = (std::filesystem::temp_directory_path() / ("ksol-gpu-" + what + "-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(tmp);
  return tmp;
}

// The vendor-call plan's channels-last convolutions (stitch.ChannelsLastConv): a piece writes the
// image permuted to NHWC (piece 0, shared-memory tiles), cuDNN runs NHWC without its bias, and the
// piece after it reads the output through the permutation, adds the bias and runs the chain: a
// pool decoding its channel fastest (`_o`), an elementwise piece through shared-memory tiles
// (`_tt`).
TEST(Gpu, ChannelsLastVendorPlanPassesTheGates) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  const std::string tmp = gpu_tmp("cl");
  vendor_plan_passes_the_gates(tmp, "conv_hardswish_pool_mish.py",
                               "vendor-call plan: piece 1 (direct, nodes permute_1, add, sub, hardswish, max_pool2d, mish): direct_model_f32_t256_o");
  vendor_plan_passes_the_gates(tmp, "conv_transpose3d_clamp_div.py",
                               "vendor-call plan: piece 1 (elementwise, nodes permute_1, add, clamp, truediv): elementwise_model_f32_t256_v1_i1_tt");
}

// A long GroupNorm after cuDNN's convolution: its mean, then 1/sqrt(var + eps) reading the mean
// at [r] (row-wise pieces), and the pool reading its window through the normalization, the affine
// and the scale (a direct piece).
TEST(Gpu, GroupNormStatisticsPlanPassesTheGates) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  vendor_plan_passes_the_gates(gpu_tmp("gn"), "conv_groupnorm_pool.py",
                               "vendor-call plan: piece 2 (direct, nodes sub_1, mul_2, mul_3, add_1, mul, max_pool2d, clamp): direct_model_f32_");
}
