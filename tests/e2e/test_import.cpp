// ksol import kernelbench end to end: the CLI drives the PyTorch front end (PyTorch on the CPU)
// on the test problems in tests/torch, and the front end's own unit tests run from here too.
#include <gtest/gtest.h>

#include <regex>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "coord/worker_client.h"
#include "core/util.h"
#include "codegen/job.h"
#include "dsl/ir.h"
#include "task/lowered.h"

namespace {
std::string ksol_bin() { return std::string(KSOL_BUILD_DIR) + "/ksol"; }
std::string src(const std::string& rel) { return ksol::source_root() + "/" + rel; }
// An empty folder of the temp dir for one test, named by `name` and this process.
std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("ksol-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

TEST(Import, FrontEndUnitTests) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  ksol::ProcessResult r = ksol::run_process({"env", "PYTHONPATH=" + src("python"), py, "-W", "error::ResourceWarning", "-m", "unittest",
                                             "discover", "-s", src("tests/torch"), "-t", src("tests/torch")},
                                            600);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The Python evaluation worker speaks ksol-worker's protocol: the coordinator's WorkerClient
// drives it (hello, eval of a KernelBench-format candidate on the CPU, exit).
TEST(Import, PythonWorkerSpeaksTheWorkerProtocol) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  ksol::WorkerClient w({"env", "PYTHONPATH=" + src("python"), py, "-m", "ksol_torch", "worker"});
  ksol::WorkerReply hello = w.call({{"op", "hello"}}, 120);
  ASSERT_TRUE(hello.ok) << hello.message;
  EXPECT_EQ(hello.body["protocol"], 1);
  EXPECT_EQ(hello.body["kind"], "python");
  nlohmann::json req = {{"op", "eval"}, {"problem", src("tests/torch/problems/01_gemm_relu.py")},
                        {"candidate", src("tests/torch/candidates/gemm_relu_numpy.py")}, {"device", "cpu"},
                        {"seeds", {5, 6, 7}}, {"baselines", false}};
  ksol::WorkerReply r = w.call(req, 300);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.body["result"]["status"], "ok") << r.body.dump();
  EXPECT_GT(r.body["result"]["timing"]["median_us"].get<double>(), 0);
  req["candidate"] = src("tests/torch/candidates/gemm_relu_fallback.py");
  r = w.call(req, 300);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.body["result"]["error_class"], "pytorch_fallback") << r.body.dump();
  // A candidate that leaves a thread running ends its worker, and the reply says why (not "sticky
  // CUDA error"); the next call gets a fresh worker. Baselines on: PyTorch's own threads do not count.
  req["candidate"] = src("tests/torch/candidates/gemm_relu_thread.py");
  r = w.call(req, 300);
  EXPECT_EQ(r.failure, "fatal") << r.body.dump();
  EXPECT_NE(r.message.find("started a thread"), std::string::npos) << r.message;
  req["candidate"] = src("tests/torch/candidates/gemm_relu_numpy.py");
  req["baselines"] = true;
  r = w.call(req, 300);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.body["result"]["status"], "ok") << r.body.dump();
}

// ksol eval-module: a ModelNew file, an ABI library and CUDA source for one problem, through the
// Python worker; the table and the JSON say which passed and why the others did not.
TEST(Import, EvalModuleRunsCandidatesThroughThePythonWorker) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  std::string dir = (std::filesystem::temp_directory_path() / ("ksol-evalmod-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string so = dir + "/gemm_relu.so", js = dir + "/out.json";
  ASSERT_EQ(ksol::run_process({"cc", "-O2", "-shared", "-fPIC", "-I", src("include"), src("tests/torch/candidates/gemm_relu_abi.c"), "-o", so}, 120).exit_code, 0);
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "eval-module", src("tests/torch/problems/01_gemm_relu.py"),
                                             "--candidate", src("tests/torch/candidates/gemm_relu_numpy.py"),
                                             "--candidate", src("tests/torch/candidates/gemm_relu_fallback.py"),
                                             "--candidate", so, "--dims", "8,32,16", "--device", "cpu", "--json-out", js},
                                            600);
  EXPECT_EQ(r.exit_code, 1) << r.output;  // one candidate failed
  EXPECT_NE(r.output.find("correctness/pytorch_fallback"), std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(ksol::read_file(js));
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["status"], "ok");
  EXPECT_EQ(j["results"][1]["error_class"], "pytorch_fallback");
  EXPECT_EQ(j["results"][2]["status"], "ok");
  EXPECT_GT(j["results"][2]["baselines"]["eager"]["median_us"].get<double>(), 0);
  ksol::ProcessResult few = ksol::run_process({ksol_bin(), "eval-module", src("tests/torch/problems/01_gemm_relu.py"), "--candidate", so, "--seeds", "1,2"}, 60);
  EXPECT_NE(few.exit_code, 0);
  EXPECT_NE(few.output.find("at least 3 seeds"), std::string::npos) << few.output;
  std::filesystem::remove_all(dir);
}

TEST(Import, KernelbenchTableAndErrors) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  std::string out = ::testing::TempDir() + "/ksol-cards";
  ksol::ProcessResult ok = ksol::run_process({ksol_bin(), "import", "kernelbench", src("tests/torch/problems/01_gemm_relu.py"),
                                              src("tests/torch/problems/07_zero.py"), "--out", out},
                                             600);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("01_gemm_relu"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("gemm:linear+relu"), std::string::npos) << ok.output;
  // The vendor-call plan beside it: the linear cuBLAS's, the ReLU a piece.
  EXPECT_NE(ok.output.find("linear(vendor) | elementwise:relu"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("zero"), std::string::npos) << ok.output;
  std::string card = ksol::read_file(out + "/01_gemm_relu.json");
  EXPECT_NE(card.find("\"family\": \"gemm\""), std::string::npos) << card;

  // A broken file is reported with file:line:col and a failing exit status; the good one still imports.
  std::string bad = src("tests/torch/bad/syntax_error.py");
  ksol::ProcessResult mixed = ksol::run_process({ksol_bin(), "import", "kernelbench", bad, src("tests/torch/problems/02_softmax.py")}, 600);
  EXPECT_EQ(mixed.exit_code, 1) << mixed.output;
  EXPECT_NE(mixed.output.find(bad + ":5:25: error: syntax error"), std::string::npos) << mixed.output;
  EXPECT_NE(mixed.output.find("rowwise:softmax"), std::string::npos) << mixed.output;

  ksol::ProcessResult missing = ksol::run_process({ksol_bin(), "import", "kernelbench", "/nonexistent/problem.py"}, 60);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output, "ksol import kernelbench: /nonexistent/problem.py: no such file\nrun 'ksol import kernelbench --help' for usage\n");
}

// ksol optimize FILE.py: the module is traced and lowered to one DSL program whose CUDA compiles
// (gate 1); without a GPU it stops there with 77. A forward that is not one program says why.
TEST(Import, OptimizeModuleLowersCompilesAndSaysWhyNot) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/02_layernorm_logsoftmax.py")}, 600);
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is visible to PyTorch here: the search ran (covered on the GPU host)";
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("the forward is one DSL program (rowwise)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kernel model(input0: f32[R, C], w_ln_weight: f32[C], w_ln_bias: f32[C])"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": compiles"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("evaluation needs a GPU"), std::string::npos) << r.output;

  // nn.Linear (W[n, k]) with a parameter along n and an epilogue that reads the GEMM twice: one
  // output definition on the SIMT path.
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/03_linear_epilogue.py")}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("the forward is one DSL program (gemm)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("seed gemm_f32_128x128x8_simt_sk16_bnk_rn_epi: compiles"), std::string::npos) << r.output;

  // A convolution under the default precision multiplies in TF32, as cuDNN may then: the tensor
  // cores' kernel (mma for NCHW); under strict, IEEE float32 products on the CUDA cores.
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/10_conv_bias_relu.py")}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("the convolution's products are TF32: precision default lets cuDNN use TF32"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("sum(tf32(input0[n, c, h+r-1, w+s-1]) * tf32(w_conv_weight[k, c, r, s]))"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("seed conv_model_f32_tf32_mma_128x16x16_w1x1: compiles"), std::string::npos) << r.output;  // 5 filters
  // A GEMM under --precision tf32 multiplies in TF32; an epilogue CUTLASS cannot fuse takes the
  // fallback schedule (for this small GEMM the CUDA cores'), said so.
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/03_linear_epilogue.py"), "--precision", "tf32"}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("the GEMM's products are TF32: precision tf32 lets matmul use TF32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the lowered program's schedule is refused (mainloop = cooperative: the epilogue has no exact CUTLASS fusion"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("seed gemm_tf32_128x128x8_simt_sk16_bnk_rn_epi: compiles"), std::string::npos) << r.output;
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/10_conv_bias_relu.py"), "--precision", "strict"}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_EQ(r.output.find("tf32("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("seed conv_model_f32_64x64x16_t4x4: compiles"), std::string::npos) << r.output;

  // An argmin writes int64 indices: the lowered task takes an i64 output.
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/25_argmin.py")}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("-> (output0: i64[B, C])"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("seed direct_model_i64_t256: compiles"), std::string::npos) << r.output;

  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/problems/03_conv_bn_relu.py")}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("not one DSL program: no DSL form for conv2d"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 DSL piece(s) (elementwise, direct)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("piece 0 (elementwise, nodes relu): elementwise_model_f32_t256_v4_i1: compiles"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("piece 1 (direct, nodes max_pool2d): direct_model_f32_t256: compiles"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cut into 2 DSL piece(s) that compile"), std::string::npos) << r.output;

  // --plan vendor: the conv stays cuDNN's, channels-last and without its bias: a piece writes its
  // image permuted to NHWC, and its epilogue is the next piece, which reads the conv's output
  // through the permutation back and adds the bias (both through tiles in shared memory); the one
  // program is not compiled. A forward with no conv or GEMM has no vendor-call plan: said, nothing
  // to search.
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/synth_problems/10_conv_bias_relu.py"), "--plan", "vendor"}, 600);
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("--plan vendor: the forward's convolutions and GEMMs stay PyTorch's calls"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("seed conv_model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("vendor-call plan: piece 0 (elementwise, nodes permute): elementwise_model_f32_t256_v1_i1_tt: compiles"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("vendor-call plan: piece 1 (elementwise, nodes permute_1, add, relu): elementwise_model_f32_t256_v1_i1_tt: "
                          "compiles"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cut into 2 DSL piece(s) that compile"), std::string::npos) << r.output;
  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/problems/02_softmax.py"), "--plan", "vendor"}, 600);
  EXPECT_NE(r.output.find("the vendor-call plan: the module has no convolution or GEMM to leave to a vendor library"), std::string::npos)
      << r.output;
  r = ksol::run_process({ksol_bin(), "optimize", "gemm_f32", "--plan", "vendor"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--plan applies to a PyTorch module file"), std::string::npos) << r.output;

  r = ksol::run_process({ksol_bin(), "optimize", src("tests/torch/problems/02_softmax.py"), "softmax_f32"}, 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("takes one module file"), std::string::npos) << r.output;
}

// Stitching end to end on the CPU: the plan of a module with a kept convolution, batch norm and
// pool (python3 -m ksol_torch stitch), each DSL piece generated and built for the host's CUDA
// emulator (codegen::build_for_host), then the Python worker evaluates the stitched module through
// its gates: the pieces' libraries on the module's tensors, the kept calls as PyTorch, the whole
// against the module in float64. A piece built from another program fails the correctness gate.
TEST(Import, StitchedPiecesPassThePythonWorkersGates) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  std::string file = src("tests/torch/problems/03_conv_bn_relu.py");
  std::string plan_path = (std::filesystem::temp_directory_path() / ("ksol-stitch-" + std::to_string(getpid()) + ".json")).string();
  ksol::ProcessResult r =
      ksol::run_process({"env", "PYTHONPATH=" + src("python"), py, "-m", "ksol_torch", "stitch", file, "--out", plan_path}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json plan = nlohmann::json::parse(ksol::read_file(plan_path));
  std::filesystem::remove(plan_path);
  // The ReLU after the kept convolution, and the max pool (the direct family).
  ASSERT_EQ(plan["pieces"].size(), 2u) << plan.dump(1);

  auto build = [&](const nlohmann::json& piece) {
    ksol::Task t = ksol::lowered_task(piece, file, "_piece");
    ksol::dsl::Program prog = ksol::dsl::parse_program(piece["program"].get<std::string>(), "piece.ksol");
    ksol::codegen::HostBuild hb = ksol::codegen::build_for_host(ksol::codegen::generate_cuda(prog, ksol::codegen::binding_for(t)));
    EXPECT_TRUE(hb.ok) << hb.message;
    std::vector<int64_t> dims;
    for (auto& d : t.dims) dims.push_back(static_cast<int64_t>(t.sizes[0].dims.at(d)));
    return nlohmann::json{{"nodes", piece["nodes"]}, {"so", hb.so_path}, {"dims", dims}};
  };
  nlohmann::json pieces = nlohmann::json::array();
  for (auto& p : plan["pieces"]) pieces.push_back(build(p));

  ksol::WorkerClient w({"env", "PYTHONPATH=" + src("python"), py, "-m", "ksol_torch", "worker"});
  nlohmann::json req = {{"op", "eval"}, {"problem", file}, {"stitch", pieces}, {"device", "cpu"}, {"seeds", {5, 6, 7}}, {"baselines", false}};
  ksol::WorkerReply ok = w.call(req, 300);
  ASSERT_TRUE(ok.ok) << ok.message;
  EXPECT_EQ(ok.body["result"]["status"], "ok") << ok.body.dump(1);
  EXPECT_EQ(ok.body["result"]["correctness"]["cases"].size(), 9u) << ok.body.dump(1);

  // The same piece with a program that computes something else (ReLU became |x|).
  nlohmann::json wrong_piece = plan["pieces"][0];
  std::string prog = wrong_piece["program"];
  auto at = prog.find("relu(");
  ASSERT_NE(at, std::string::npos) << prog;
  prog.replace(at, 5, "abs(");
  wrong_piece["program"] = prog;
  req["stitch"] = nlohmann::json::array({build(wrong_piece), pieces[1]});
  ksol::WorkerReply bad = w.call(req, 300);
  ASSERT_TRUE(bad.ok) << bad.message;
  EXPECT_EQ(bad.body["result"]["status"], "failed") << bad.body.dump(1);
  EXPECT_EQ(bad.body["result"]["error_class"], "wrong_result") << bad.body.dump(1);

  // Pieces that are not the module's plan are refused before anything runs.
  req["stitch"][0]["nodes"] = {"conv"};
  ksol::WorkerReply other = w.call(req, 300);
  ASSERT_TRUE(other.ok) << other.message;
  EXPECT_EQ(other.body["result"]["error_class"], "binding") << other.body.dump(1);
}

// ksol optimize FILE.py --emulate: the whole flow without a GPU, candidates built for the host's
// CUDA emulator and the Python worker on the CPU (times are the emulator's: the result is the
// baseline, never the emulated kernel). One module that is one DSL program (searched), one that is
// stitched from a piece around kept calls (the piece searched, the module evaluated whole).
TEST(Import, OptimizeModuleRunsTheWholeFlowOnTheEmulator) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  auto dir = std::filesystem::temp_directory_path() / ("ksol-emu-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string last_output;
  auto run = [&](const std::string& rel, const std::string& name, std::vector<std::string> more = {}) {
    std::string json_path = (dir / (name + ".json")).string();
    std::vector<std::string> cmd = {ksol_bin(), "optimize", src(rel), "--emulate", "--budget-candidates", "3", "--json-out",
                                    json_path, "--report", (dir / name).string()};
    cmd.insert(cmd.end(), more.begin(), more.end());
    ksol::ProcessResult r = ksol::run_process(cmd, 900);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("never a result"), std::string::npos) << r.output;
    last_output = r.output;
    return nlohmann::json::parse(ksol::read_file(json_path));
  };
  // An earlier run's kept programs in the report folder go before this run's report is written.
  std::filesystem::create_directories(dir / "one");
  for (const char* f : {"best.ksol", "best.cu", "piece-3.ksol"}) ksol::write_file_atomic((dir / "one" / f).string(), "stale\n");
  nlohmann::json one = run("tests/torch/synth_problems/01_activation_chain.py", "one", {"--precision", "strict"});
  EXPECT_TRUE(one.value("emulated", false));
  // The precision mode the baselines and candidates ran under, in the JSON and the report.
  EXPECT_EQ(one["precision"].value("mode", ""), "strict") << one.dump(1);
  EXPECT_EQ(one["precision"].value("arithmetic", ""), "fp32") << one.dump(1);
  EXPECT_NE(ksol::read_file((dir / "one" / "report.md").string()).find("Precision: strict (fp32:"), std::string::npos);
  const auto& r1 = one["results"][0];
  EXPECT_EQ(r1["candidates"], 3) << r1.dump(1);
  // The seed in full; the rest screened together in the Python worker, its contenders then in full.
  EXPECT_EQ(r1["trajectory"][0]["status"], "ok") << r1.dump(1);
  for (size_t c = 1; c < r1["trajectory"].size(); ++c) {
    const auto& a = r1["trajectory"][c];
    EXPECT_TRUE(a["status"] == "ok" || a["status"] == "screened") << a.dump(1);
    EXPECT_EQ(a["screen"].value("sizes", ""), "module") << a.dump(1);
    EXPECT_GT(a["screen"].value("ratio_to_best", 0.0), 0.0) << a.dump(1);
  }
  EXPECT_TRUE(r1["use_baseline"].get<bool>()) << "an emulated kernel is never faster than eager on the CPU";
  // The worker's screening for degenerate outputs travels with the baselines into the JSON.
  EXPECT_EQ(r1["screen"].value("verdict", ""), "ok") << r1.dump(1);
  EXPECT_FALSE(r1["screen"].value("degenerate", true));
  // KernelBench's own protocol on the best verified program, beside ksol's gates.
  EXPECT_TRUE(r1["kernelbench"].value("correct", false)) << r1["kernelbench"].dump(1);
  EXPECT_GT(r1["kernelbench"].value("mean_us", 0.0), 0.0) << r1["kernelbench"].dump(1);
  EXPECT_GT(r1["kernelbench"].value("eager_mean_us", 0.0), 0.0) << r1["kernelbench"].dump(1);
  EXPECT_TRUE(std::filesystem::exists(dir / "one" / "report.html"));
  for (const char* f : {"best.ksol", "best.cu", "piece-3.ksol"}) EXPECT_FALSE(std::filesystem::exists(dir / "one" / f)) << f;

  nlohmann::json st = run("tests/torch/problems/03_conv_bn_relu.py", "stitched");
  const auto& r2 = st["results"][0];
  EXPECT_EQ(st["precision"].value("mode", ""), "default") << st.dump(1);
  EXPECT_EQ(r2["stop_reason"], "stitched") << r2.dump(1);
  EXPECT_EQ(r2["screen"].value("verdict", ""), "ok") << r2.dump(1);
  EXPECT_TRUE(r2["kernelbench"].value("correct", false)) << r2["kernelbench"].dump(1);
  EXPECT_GT(r2["kernelbench"].value("mean_us", 0.0), 0.0) << r2["kernelbench"].dump(1);
  EXPECT_EQ(r2["stitched"]["status"], "ok") << r2.dump(1);
  // Two pieces around the kept convolution: the ReLU and the max pool (the direct family).
  ASSERT_EQ(r2["piece_search"].size(), 2u) << r2.dump(1);
  for (auto& ps : r2["piece_search"]) EXPECT_EQ(ps["candidates"], 3) << r2.dump(1);
  // A generation of a piece is its candidates screened together (without a screen, one each).
  EXPECT_TRUE(std::regex_search(last_output, std::regex("\\[piece 0\\] [^\n]*: gen 1: 2 tried"))) << last_output;
  EXPECT_EQ(r2["pieces"].size(), 2u);
  // PyTorch's own calls are each piece's candidate too. On the emulator they are far faster than
  // any emulated kernel, so the first piece stays PyTorch's; the second is not offered, since with
  // both kept the module would be the forward itself.
  ASSERT_TRUE(r2["piece_search"][0].contains("pytorch")) << r2.dump(1);
  EXPECT_GT(r2["piece_search"][0]["pytorch"].value("module_us", 0.0), 0.0) << r2.dump(1);
  EXPECT_TRUE(r2["piece_search"][0].value("kept_as_pytorch", false)) << r2.dump(1);
  EXPECT_TRUE(r2["pieces"][0].value("keep", false)) << r2.dump(1);
  EXPECT_FALSE(r2["pieces"][0].contains("so")) << r2.dump(1);
  EXPECT_FALSE(r2["piece_search"][1].contains("pytorch")) << r2.dump(1);
  EXPECT_FALSE(r2["pieces"][1].value("keep", false)) << r2.dump(1);
  // The stitched module's report folder: the JSON, the Markdown and HTML showing the stitched
  // result, and the piece's program where its search found a faster schedule (not for a kept piece).
  for (const char* f : {"results.json", "report.md", "report.html"}) EXPECT_TRUE(std::filesystem::exists(dir / "stitched" / f)) << f;
  EXPECT_EQ(nlohmann::json::parse(ksol::read_file((dir / "stitched" / "results.json").string())), st);
  std::string md = ksol::read_file((dir / "stitched" / "report.md").string());
  EXPECT_NE(md.find("| stitched |"), std::string::npos) << md;
  EXPECT_NE(md.find("Stitched from 1 DSL piece(s) around the ops kept as PyTorch calls (1 more piece(s) left as PyTorch's calls: see "
                    "the pieces): ok"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("PyTorch's calls (faster)"), std::string::npos) << md;
  EXPECT_NE(md.find("Reason: --emulate"), std::string::npos) << md;
  EXPECT_NE(md.find("Emulated:"), std::string::npos) << md;
  EXPECT_NE(ksol::read_file((dir / "stitched" / "report.html").string()).find("Stitched from 1 DSL piece(s)"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "stitched" / "piece-0.ksol")) << r2.dump(1);
  bool improved = r2["piece_search"][1].contains("best");
  EXPECT_EQ(std::filesystem::exists(dir / "stitched" / "piece-1.ksol"), improved) << r2.dump(1);
  EXPECT_EQ(std::filesystem::exists(dir / "stitched" / "piece-1.cu"), improved) << r2.dump(1);
  if (improved) {
    EXPECT_EQ(ksol::read_file((dir / "stitched" / "piece-1.ksol").string()), r2["pieces"][1]["program"].get<std::string>());
  }

  // A conv whose epilogue reduces over its filters into an intermediate that tanh twice reads (the
  // forward one conv program: [N, 1, P, Q] out, its filter count a number of the program): through
  // the worker's binding check and every gate.
  nlohmann::json cr = run("tests/torch/synth_problems/28_conv_min_then_tanh.py", "reduced");
  const auto& r3 = cr["results"][0];
  const std::string seed = r3.value("seed_program", "");
  EXPECT_NE(seed.find("v1[n, h, w] = min("), std::string::npos) << seed;
  EXPECT_NE(seed.find("output0[n, h, w] = (tanh((tanh(v1[n, h, w]))))"), std::string::npos) << seed;
  EXPECT_NE(seed.find("w_conv_weight: f32[20, C, 3, 3]"), std::string::npos) << seed;
  ASSERT_FALSE(r3["trajectory"].empty()) << r3.dump(1);
  EXPECT_EQ(r3["trajectory"][0]["status"], "ok") << r3.dump(1);  // the seed passed every gate
  EXPECT_EQ(r3["best"].value("kernel", "").rfind("conv_model_f32_", 0), 0u) << r3.dump(1);
  EXPECT_TRUE(r3["kernelbench"].value("correct", false)) << r3["kernelbench"].dump(1);
  // --plan auto: the vendor-call plan beside the one program (the conv cuDNN's; the reduction over
  // its filters with the tanh chain as its epilogue, one column-reduction piece), through every
  // gate, not returned on the emulator.
  ASSERT_TRUE(r3.contains("vendor_plan")) << r3.dump(1);
  EXPECT_EQ(r3["vendor_plan"].value("status", ""), "ok") << r3["vendor_plan"].dump(1);
  ASSERT_EQ(r3["vendor_plan"]["pieces"].size(), 1u) << r3["vendor_plan"].dump(1);
  EXPECT_EQ(r3["vendor_plan"]["pieces"][0].value("kernel", "").rfind("colwise_model_f32_", 0), 0u) << r3["vendor_plan"].dump(1);
  for (const auto& p : r3["vendor_plan"]["pieces"]) EXPECT_TRUE(p.value("vendor", false)) << p.dump(1);
  EXPECT_NE(r3["vendor_plan"].value("reason", "").find("--emulate"), std::string::npos) << r3["vendor_plan"].dump(1);
  EXPECT_NE(ksol::read_file((dir / "reduced" / "report.md").string()).find("Not returned: the vendor-call plan"), std::string::npos);
  // The stitched module above: its vendor-call plan would be its own plan's pieces, so not tried.
  EXPECT_FALSE(r2.contains("vendor_plan")) << r2.dump(1);
  std::filesystem::remove_all(dir);
}

// A piece ksol cannot build stays PyTorch's calls, with the reason, and the others go on: the
// emulator's flow with an nvcc that refuses the max pool's kernel (a fresh compile cache, so no
// earlier build of it is found there).
TEST(Import, APieceThatDoesNotCompileStaysPyTorchCalls) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  auto dir = fresh_dir("keep");
  const std::string nvcc = (dir / "nvcc").string();
  ksol::write_file_atomic(nvcc,
                          "#!/bin/sh\n"
                          "for a; do case \"$a\" in *.cu) if grep -q 'void __launch_bounds__(kThreads) direct_' \"$a\"; then\n"
                          "  echo 'a test nvcc: this kernel is refused' >&2; exit 1; fi;; esac; done\n"
                          "exec nvcc \"$@\"\n");
  std::filesystem::permissions(nvcc, std::filesystem::perms::owner_all);
  const std::string json_path = (dir / "r.json").string();
  ksol::ProcessResult r = ksol::run_process({"env", "KSOL_NVCC=" + nvcc, "KSOL_CACHE_DIR=" + (dir / "cache").string(), ksol_bin(), "optimize",
                                             src("tests/torch/problems/03_conv_bn_relu.py"), "--emulate", "--budget-candidates", "2",
                                             "--json-out", json_path, "--report", (dir / "report").string()},
                                            900);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("piece 1: does not compile"), std::string::npos) << r.output;
  const auto item = nlohmann::json::parse(ksol::read_file(json_path))["results"][0];
  ASSERT_EQ(item["stop_reason"], "stitched") << item.dump(1);
  ASSERT_EQ(item["pieces"].size(), 2u) << item.dump(1);
  EXPECT_FALSE(item["pieces"][0].value("keep", false)) << item.dump(1);
  EXPECT_TRUE(item["pieces"][1].value("keep", false)) << item.dump(1);
  EXPECT_NE(item["pieces"][1].value("why", std::string()).find("this kernel is refused"), std::string::npos) << item.dump(1);
  // The module with the ReLU's library passes every gate; the kept piece is not searched, and
  // the ReLU's PyTorch calls are not offered (with both kept it would be the forward itself).
  EXPECT_EQ(item["stitched"]["status"], "ok") << item.dump(1);
  ASSERT_EQ(item["piece_search"].size(), 2u) << item.dump(1);
  EXPECT_FALSE(item["piece_search"][0].contains("pytorch")) << item.dump(1);
  EXPECT_EQ(item["piece_search"][1]["candidates"], 0) << item.dump(1);
  EXPECT_EQ(item["piece_search"][1]["stop_reason"], "kept as PyTorch calls") << item.dump(1);
  EXPECT_NE(ksol::read_file((dir / "report" / "report.md").string()).find("PyTorch's calls (does not compile"), std::string::npos);

  // Without a GPU (and without --emulate): exit 77, and --json lists the kept piece with its reason.
  ksol::ProcessResult ng = ksol::run_process({"env", "CUDA_VISIBLE_DEVICES=", "KSOL_NVCC=" + nvcc, "KSOL_CACHE_DIR=" + (dir / "cache").string(),
                                              ksol_bin(), "--store", "", "optimize", src("tests/torch/problems/03_conv_bn_relu.py"), "--json"},
                                             900);
  ASSERT_EQ(ng.exit_code, 77) << ng.output;
  EXPECT_NE(ng.output.find("cut into 1 DSL piece(s) that compile and 1 left as PyTorch calls (they do not build)"), std::string::npos)
      << ng.output;
  const size_t at = ng.output.find("\n{\n");
  ASSERT_NE(at, std::string::npos) << ng.output;
  const nlohmann::json doc = nlohmann::json::parse(ng.output.substr(at + 1, ng.output.rfind('}') - at));
  ASSERT_EQ(doc["pieces"].size(), 2u) << doc.dump(1);
  EXPECT_FALSE(doc["pieces"][0]["kernel"].get<std::string>().empty()) << doc.dump(1);
  EXPECT_TRUE(doc["pieces"][1].value("keep", false)) << doc.dump(1);
  EXPECT_EQ(doc["pieces"][1]["kernel"], "") << doc.dump(1);
  EXPECT_NE(doc["pieces"][1].value("why", std::string()).find("this kernel is refused"), std::string::npos) << doc.dump(1);
  std::filesystem::remove_all(dir);
}

// Eager's and torch.compile's times are kept in ksol's cache and reused by the next run on the
// same problem file (same precision mode, GPU, PyTorch and worker code); --fresh-baselines and a
// changed file time them again, and the JSON and the report say when they were reused.
TEST(Import, OptimizeModuleReusesAnEarlierRunsBaselines) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  auto dir = fresh_dir("reuse");
  const std::string problem = (dir / "chain.py").string();
  std::filesystem::copy_file(src("tests/torch/synth_problems/01_activation_chain.py"), problem);
  int n = 0;
  auto run = [&](std::vector<std::string> more = {}) {
    std::string name = "run" + std::to_string(++n), json_path = (dir / (name + ".json")).string();
    std::vector<std::string> cmd = {"env", "KSOL_CACHE_DIR=" + (dir / "cache").string(), ksol_bin(), "optimize", problem, "--emulate",
                                    "--budget-candidates", "1", "--path", "fx", "--json-out", json_path, "--report", (dir / name).string()};
    cmd.insert(cmd.end(), more.begin(), more.end());
    ksol::ProcessResult r = ksol::run_process(cmd, 900);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::make_pair(nlohmann::json::parse(ksol::read_file(json_path)), r.output);
  };
  auto [first, out1] = run();
  EXPECT_FALSE(first.contains("baselines_reused")) << first.dump(1);
  auto [second, out2] = run();
  ASSERT_TRUE(second.contains("baselines_reused")) << out2;
  EXPECT_NE(out2.find("baselines: eager's and torch.compile's times reused from a run at"), std::string::npos) << out2;
  EXPECT_EQ(second["results"][0]["baseline_us"], first["results"][0]["baseline_us"]);
  EXPECT_NE(ksol::read_file((dir / "run2" / "report.md").string()).find("Baselines: eager's and torch.compile's times are an earlier run's"),
            std::string::npos);
  auto [fresh, out3] = run({"--fresh-baselines"});
  EXPECT_FALSE(fresh.contains("baselines_reused")) << out3;
  // Another problem file (one byte more) is another key.
  ksol::write_file_atomic(problem, ksol::read_file(problem) + "\n");
  auto [changed, out4] = run();
  EXPECT_FALSE(changed.contains("baselines_reused")) << out4;
  std::filesystem::remove_all(dir);
}
