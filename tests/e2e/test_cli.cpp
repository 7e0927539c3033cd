// The ksol binary end to end, as a user runs it (no GPU needed: everything up to the launch).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/util.h"

namespace {
std::string ksol_bin() { return std::string(KSOL_BUILD_DIR) + "/ksol"; }
std::string src(const std::string& p) { return std::string(KSOL_SOURCE_DIR) + "/" + p; }
std::string store() { return (std::filesystem::temp_directory_path() / ("ksol-cli-" + std::to_string(::getpid()) + ".db")).string(); }
}  // namespace

TEST(Cli, DslCandidateIsGeneratedCompiledAndStoredAsDsl) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--json", "--store", store(), "eval", "--task", "softmax_f32", "--candidate",
                                             src("tests/golden/codegen/softmax_f32.ksol"), "--sizes", "small", "--compare", "none"},
                                            600);
  size_t brace = r.output.find("{\n");
  ASSERT_NE(brace, std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output.substr(brace));
  EXPECT_TRUE(j["candidate"]["compiled"].get<bool>()) << j["candidate"]["compile_message"];
  std::string status = j["candidate"]["sizes"][0]["status"];
  EXPECT_TRUE(status == "no_gpu" || status == "ok") << status;
}

TEST(Cli, UnsupportedScheduleIsRefusedBeforeCompiling) {
  std::string bad = (std::filesystem::temp_directory_path() / "ksol-bad-schedule.ksol").string();
  ksol::write_file_atomic(bad,
                          "kernel softmax(X: f32[R, C]) -> (Y: f32[R, C]) {\n"
                          "  m[r] = max(X[r, c]) over c\n  e[r, c] = exp(X[r, c] - m[r])\n"
                          "  s[r] = sum(e[r, c]) over c\n  Y[r, c] = e[r, c] / s[r]\n}\n"
                          "schedule {\n  threads = 100\n}\n");
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", store(), "eval", "--task", "softmax_f32", "--candidate", bad}, 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unsupported for task softmax_f32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("threads"), std::string::npos) << r.output;
}

TEST(Cli, DslPrintShowsTheTypedIrAndErrorsPointAtTheSource) {
  ksol::ProcessResult ok = ksol::run_process({ksol_bin(), "dsl", "print", src("tests/golden/codegen/softmax_f32.ksol")}, 60);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_NE(ok.output.find("family rowwise"), std::string::npos) << ok.output;
  std::string bad = (std::filesystem::temp_directory_path() / "ksol-bad.ksol").string();
  ksol::write_file_atomic(bad, "kernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[j]\n}\n");
  ksol::ProcessResult err = ksol::run_process({ksol_bin(), "dsl", "print", bad}, 60);
  EXPECT_EQ(err.exit_code, 2);
  EXPECT_NE(err.output.find(bad + ":2:"), std::string::npos) << err.output;
}

TEST(Cli, HelpListsEveryCommand) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--help"}, 60);
  for (const char* c : {"eval", "sol", "device", "bench", "tasks", "refcheck", "dsl", "optimize", "import"})
    EXPECT_NE(r.output.find(c), std::string::npos) << c;
}

// Without a GPU, optimize goes as far as it can (seed parsed, checked, compiled) and says why it
// stops, with its own exit status; a malformed agent is refused by name.
TEST(Cli, OptimizeWithoutAGpuStopsAfterCompilingTheSeed) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", "", "optimize", "relu_f32"}, 300);
  if (r.output.find("evaluation needs a GPU") == std::string::npos) GTEST_SKIP() << "a GPU is present: " << r.output;
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("relu_f32: seed elementwise_relu_f32"), std::string::npos) << r.output;
  ksol::ProcessResult bad = ksol::run_process({ksol_bin(), "optimize", "relu_f32", "--agent", "ollama:x"}, 60);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("unknown backend 'ollama'"), std::string::npos) << bad.output;
}
