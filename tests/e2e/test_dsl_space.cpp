// ksol dsl space: the legal and refused schedules of a program, counted per family.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/util.h"

TEST(DslSpace, CountsLegalAndRefusedWithReasons) {
  std::string ksol = std::string(KSOL_BUILD_DIR) + "/ksol";
  auto space = [&](const std::string& rel) {
    ksol::ProcessResult r = ksol::run_process({ksol, "--json", "dsl", "space", ksol::source_root() + "/" + rel}, 300);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  };
  nlohmann::json g = space("tests/golden/dsl/gemm_bias_gelu.ksol");
  EXPECT_EQ(g["family"], "gemm");
  EXPECT_GE(g["legal"].get<int>(), 100);  // the floor for the GEMM family
  EXPECT_GT(g["refused"].get<int>(), 0);
  bool tf32 = false;
  nlohmann::json f = space("tests/golden/dsl/gemm_f32.ksol");
  for (auto& r : f["reasons"]) tf32 |= r["reason"].get<std::string>().find("TF32") != std::string::npos;
  EXPECT_TRUE(tf32);  // an fp32 program refuses tensor-core mainloops, saying why
  nlohmann::json s = space("tasks/llm/softmax_f32/program.ksol");
  EXPECT_EQ(s["family"], "rowwise");
  EXPECT_EQ(s["legal"].get<size_t>(), s["legal_schedules"].size());
  for (auto& r : s["reasons"]) EXPECT_FALSE(r["reason"].get<std::string>().empty());
}

// Without --task, a sparse parameter binds as its pieces (A_row_ptr, ...) and the space assumes
// the dims its format has (NNZ, W); with --task the task's names bind. Both give legal schedules.
TEST(DslSpace, SparseProgramsHaveLegalSchedulesWithAndWithoutTheirTask) {
  std::string ksol = std::string(KSOL_BUILD_DIR) + "/ksol";
  for (const char* t : {"spmv_csr_f32", "spmv_coo_f32", "spmv_ell_f32", "spmm_csr_f32"}) {
    const std::string prog = ksol::source_root() + "/tasks/sparse/" + t + "/program.ksol";
    for (bool with_task : {false, true}) {
      std::vector<std::string> cmd = {ksol, "--json", "dsl", "space", prog};
      if (with_task) cmd.insert(cmd.end(), {"--task", t});
      ksol::ProcessResult r = ksol::run_process(cmd, 300);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      nlohmann::json j = nlohmann::json::parse(r.output);
      EXPECT_EQ(j["family"], "sparse") << t;
      EXPECT_GE(j["legal"].get<int>(), 72) << t << (with_task ? " with its task" : " alone") << ": " << r.output.substr(0, 600);
    }
  }
}

// ksol dsl cuda prints the source that eval compiles (the task's binding with --task), and refuses a
// schedule the target cannot run with the reason, exit status 1, and nothing on stdout.
TEST(DslCuda, PrintsTheGeneratedSourceOrTheRefusal) {
  const std::string ksol = std::string(KSOL_BUILD_DIR) + "/ksol";
  const std::string prog = ksol::source_root() + "/examples/tuned/gemm_f32.ksol";
  ksol::ProcessResult r = ksol::run_process({ksol, "dsl", "cuda", prog, "--task", "gemm_f32"}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("extern \"C\" int ksol_run(const ksol_call* call)"), std::string::npos);
  EXPECT_NE(r.output.find("ksol_gemm_splitk_reduce"), std::string::npos);  // the program's split_k = 16
  EXPECT_NE(r.output.find("__launch_bounds__(kThreads, 2)"), std::string::npos);

  const std::string bad =
      (std::filesystem::temp_directory_path() / ("dsl_cuda_refused_" + std::to_string(::getpid()) + ".ksol")).string();
  std::string text = ksol::read_file(prog);
  text.replace(text.find("split_k = 16"), 12, "stream_k = 1");
  ksol::write_file_atomic(bad, text);
  r = ksol::run_process({ksol, "dsl", "cuda", bad}, 120);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, bad + ": refused: stream_k needs the CUTLASS stream-K scheduler; mainloop = simt splits K with split_k\n");
  std::filesystem::remove(bad);
}
