// GPU tier: the candidate's launcher process (docs/HARNESS.md, "Isolation"). Runs only where
// ksol-worker sees a GPU; elsewhere each test is skipped with the worker's reason. The CPU side
// of the protocol is tests/unit/test_launcher.cpp; the attacks it stops are hacks 19-21.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include <nlohmann/json.hpp>

#include "coord/worker_client.h"
#include "core/util.h"

namespace {

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

// `ksol --json eval` of the tests-only gemm_f32 at `size`; the candidates' JSON.
nlohmann::json eval(const std::vector<std::string>& candidates, const std::string& size, const std::vector<std::string>& extra = {}) {
  const std::string root = ksol::source_root();
  std::vector<std::string> argv = {bin_dir() + "/ksol", "--json", "--store", "", "eval", "--task", root + "/tests/hacks/tasks/gemm_f32",
                                   "--sizes", size, "--compare", "none"};
  for (const std::string& c : candidates) argv.insert(argv.end(), {"--candidate", c});
  argv.insert(argv.end(), extra.begin(), extra.end());
  ksol::ProcessResult r = ksol::run_process(argv, 900);
  size_t brace = r.output.find("{\n");
  if (brace == std::string::npos) throw std::runtime_error("no JSON from ksol eval:\n" + r.output);
  return nlohmann::json::parse(r.output.substr(brace));
}

const nlohmann::json& first_size(const nlohmann::json& candidate) { return candidate["sizes"][0]; }

}  // namespace

// An honest candidate through the launcher: ok, the launcher named, its times consistent with
// the worker's clock, and what the launcher cost (printed: the per-evaluation overhead).
TEST(Gpu, IsolatedEvaluationReportsItsLauncherAndBracket) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  const std::string naive = ksol::source_root() + "/tests/hacks/tasks/gemm_f32/naive.cu";
  for (const std::string size : {"tiny", "medium"}) {
    nlohmann::json j = eval({naive}, size);
    const nlohmann::json& s = first_size(j["candidate"]);
    ASSERT_EQ(s["status"], "ok") << s.dump(1);
    const nlohmann::json& raw = s["result"];
    EXPECT_GT(raw["isolation"].value("launcher_pid", -1), 0) << raw.dump(1);
    EXPECT_TRUE(raw["timing"]["bracket"].value("ok", false)) << raw["timing"]["bracket"].dump(1);
    const nlohmann::json& h = raw["harness_seconds"];
    std::cout << "gemm_f32 " << size << ": launcher_start " << 1e3 * h.value("launcher_start", -1.0) << " ms, launcher_round_trips "
              << 1e3 * h.value("launcher_round_trips", -1.0) << " ms, total " << h.value("total", -1.0) << " s; isolation "
              << raw["isolation"].dump() << "; bracket " << raw["timing"]["bracket"].dump() << "\n";
  }
}

// A candidate's illegal address stays in its launcher's context: it fails at gate launch, and the
// next candidate in the same run passes (no fatal reply, no restarted worker needed).
TEST(Gpu, ACandidatesStickyErrorStaysInItsLauncher) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  const std::string root = ksol::source_root();
  nlohmann::json j = eval({root + "/tests/e2e/candidates/illegal_address.cu", root + "/tests/hacks/tasks/gemm_f32/naive.cu"}, "tiny");
  ASSERT_TRUE(j.contains("candidates") || j.contains("candidate")) << j.dump(1);
  const nlohmann::json& all = j.contains("candidates") ? j["candidates"] : nlohmann::json::array({j["candidate"]});
  ASSERT_EQ(all.size(), 2u) << j.dump(1);
  const nlohmann::json& bad = first_size(all[0]);
  EXPECT_EQ(bad["status"], "failed") << bad.dump(1);
  EXPECT_EQ(bad.value("failed_gate", ""), "launch") << bad.dump(1);
  EXPECT_EQ(bad.value("error_class", ""), "cuda_error") << bad.dump(1);
  EXPECT_EQ(first_size(all[1])["status"], "ok") << first_size(all[1]).dump(1);
}

// With the defence off the candidate runs in the worker, as the exploit suite needs.
TEST(Gpu, IsolationOffRunsTheCandidateInTheWorker) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  nlohmann::json j = eval({ksol::source_root() + "/tests/hacks/tasks/gemm_f32/naive.cu"}, "tiny", {"--defence-off", "isolation"});
  const nlohmann::json& s = first_size(j["candidate"]);
  ASSERT_EQ(s["status"], "ok") << s.dump(1);
  EXPECT_TRUE(s["result"]["isolation"].value("off", false)) << s["result"].dump(1);
}
