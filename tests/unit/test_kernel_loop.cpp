// The LLM's kernel loop (agents/kernel_loop.h) against a scripted model and a scripted
// evaluator whose CUDA path is the real gate 1 and nvcc: CUDA answers accepted through the
// gates or refused by the source scan, --answer dsl refusing a CUDA block, a user's CUDA file
// as the start, each role's prompt and store purpose, and the repair loop not repeating a fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "agents/kernel_loop.h"
#include "core/util.h"
#include "report/optimize_report.h"
#include "store/store.h"

#include "scripted_kernels.h"

using namespace ksol;
using namespace ksol::agents;
using namespace ksol::test_support;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A model that answers from a script, in order, and keeps every request it was sent.
class ScriptedModel : public llm::Backend {
 public:
  explicit ScriptedModel(std::vector<std::string> answers, std::vector<llm::Request>* seen) : answers_(std::move(answers)), seen_(seen) {}
  std::string id() const override { return "scripted:model"; }
  llm::Answer send(const llm::Request& r, bool* retryable) override {
    *retryable = false;
    seen_->push_back(r);
    llm::Answer a;
    if (next_ >= answers_.size()) {
      a.error = "script exhausted";
      return a;
    }
    a.ok = true;
    a.text = answers_[next_++];
    a.finish_reason = "stop";
    a.usage.prompt_tokens = 100;
    a.usage.completion_tokens = 50;
    return a;
  }

 private:
  std::vector<std::string> answers_;
  std::vector<llm::Request>* seen_;
  size_t next_ = 0;
};

// The shared bench with the scripted model: `seen` keeps every request it was sent.
struct ScriptedLoop : LoopCase {
  std::vector<llm::Request> seen;
  using LoopCase::run;
  KernelLoopResult run(const std::vector<std::string>& answers, const Kernel& start) {
    llm::Spec sp;
    sp.kind = "scripted";
    llm::Client c(std::make_unique<ScriptedModel>(answers, &seen), sp, {}, "");
    return run(c, start);
  }
};

}  // namespace

TEST(KernelLoop, CudaAnswerPassesGateOneAndTheCompileAndIsAccepted) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on the PATH: the compile gate cannot run here";
  ScriptedLoop lc;
  lc.o.answer = AnswerLanguage::cuda;
  KernelLoopResult r = lc.run({"Use one warp per row with shuffles.", cuda_answer()}, lc.seed());
  ASSERT_EQ(r.result.trajectory.size(), 2u) << lc.all_progress();
  EXPECT_EQ(lc.ev.compiles, 1);
  EXPECT_EQ(r.kernels[0].language, "dsl");
  EXPECT_EQ(r.kernels[1].language, "cuda");
  EXPECT_TRUE(r.result.trajectory[1].outcome.ok()) << r.result.trajectory[1].outcome.error;
  EXPECT_EQ(r.result.best, 1);
  EXPECT_FALSE(r.result.use_baseline);
  EXPECT_NEAR(r.result.speedup_vs_baseline, 2.0, 1e-9);
  EXPECT_EQ(lc.purposes, (std::vector<std::string>{"planner", "coder"}));
  // The language of the returned kernel is on record and in the report.
  json j = r.to_json();
  EXPECT_EQ(j["best"]["language"], "cuda");
  EXPECT_EQ(j["trajectory"][1]["language"], "cuda");
  json doc = {{"run", 1}, {"agent", "openai:m"}, {"results", json::array({j})}};
  std::string md = report::optimize_markdown(doc);
  EXPECT_NE(md.find("(cuda)"), std::string::npos) << md;
  ASSERT_FALSE(lc.outcomes.empty());
  EXPECT_EQ(lc.outcomes.back().second, "verified, the task's best");
}

TEST(KernelLoop, CudaAnswerRefusedBySourceScanSaysTheConstruct) {
  ScriptedLoop lc;
  lc.o.answer = AnswerLanguage::cuda;
  lc.o.repairs = 0;
  KernelLoopResult r = lc.run({"plan", cuda_answer_with_a_stream()}, lc.seed());
  EXPECT_EQ(lc.ev.evaluations, 1) << "only the start is evaluated";
  ASSERT_EQ(r.tried.size(), 1u);
  EXPECT_EQ(r.tried[0].result.rfind("rejected (source scan): gate 1 (the source scan) refuses the kernel", 0), 0u) << r.tried[0].result;
  std::string p = lc.all_progress();
  EXPECT_NE(p.find("the coder answer was rejected (source scan)"), std::string::npos) << p;
  ASSERT_EQ(lc.outcomes.size(), 2u);
  EXPECT_NE(lc.outcomes[1].second.find("answer.cu:"), std::string::npos) << lc.outcomes[1].second;
  EXPECT_NE(lc.outcomes[1].second.find("forbidden construct 'cudaStreamCreate'"), std::string::npos) << lc.outcomes[1].second;
}

TEST(KernelLoop, AnswerDslRefusesACudaBlockWithItsClass) {
  ScriptedLoop lc;
  lc.o.answer = AnswerLanguage::dsl;
  lc.o.repairs = 0;
  KernelLoopResult r = lc.run({"plan", cuda_answer()}, lc.seed());
  ASSERT_EQ(r.tried.size(), 1u);
  EXPECT_EQ(r.tried[0].result,
            "rejected (wrong language): the answer is a ```cuda block, but a ksol DSL program (--answer dsl) was asked for, in a ```ksol block");
  EXPECT_EQ(lc.ev.evaluations, 1);
  // The DSL-only prompt carries no CUDA card.
  ASSERT_GE(lc.seen.size(), 2u);
  EXPECT_EQ(lc.seen[1].system.find("# CUDA kernels for ksol"), std::string::npos);
  EXPECT_NE(lc.seen[1].system.find("# The ksol DSL"), std::string::npos);
}

TEST(KernelLoop, StartsFromAUsersCudaFile) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on the PATH: the compile gate cannot run here";
  ScriptedLoop lc;
  lc.o.answer = AnswerLanguage::cuda;
  std::string mine = lc.dir + "/my_kernel.cu";
  write_file_atomic(mine, read_file(source_root() + "/tasks/llm/softmax_f32/naive.cu"));
  Kernel start = kernel_from_file(mine);
  EXPECT_EQ(start.language, "cuda");
  KernelLoopResult r = lc.run({"plan", cuda_answer()}, start);
  ASSERT_EQ(r.result.trajectory.size(), 2u) << lc.all_progress();
  EXPECT_EQ(r.result.trajectory[0].method, "start");
  EXPECT_EQ(r.kernels[0].origin, mine);
  EXPECT_EQ(lc.ev.languages, (std::vector<std::string>{"cuda", "cuda"}));
  EXPECT_EQ(r.result.best, 1);
  // The coder saw the user's kernel as CUDA.
  ASSERT_GE(lc.seen.size(), 2u);
  EXPECT_NE(lc.seen[1].messages[0].content.find("# The current kernel (c0, cuda)\n\n```cuda\n"), std::string::npos);
}

// Each role is its own request with its own purpose and prompt: planner (cards, profile,
// trajectory), coder (the plan), reviewer (the result), repairer (the diagnosis and the
// trajectory), optimizer (the next branch, from the model's verified kernel).
TEST(KernelLoop, EachRoleHasItsPromptAndPurpose) {
  ScriptedLoop lc;
  lc.o.answer = AnswerLanguage::dsl;
  lc.o.branches = 2;
  std::string seed = lc.seed().source;
  std::string wrong = with(seed, "threads = 256", "threads = 128");
  std::string fast = with(seed, "vector = 1", "vector = 4");
  KernelLoopResult r = lc.run({"PLAN-ONE: vectorise the rows.", "```ksol\n" + wrong + "```", "DIAGNOSIS: the max is taken over the wrong axis.",
                               "```ksol\n" + fast + "```", "PLAN-TWO: more threads.", "```ksol\n" + with(fast, "threads = 256", "threads = 512") + "```"},
                              lc.seed());
  EXPECT_EQ(lc.purposes, (std::vector<std::string>{"planner", "coder", "reviewer", "repairer", "planner", "optimizer"})) << lc.all_progress();
  ASSERT_EQ(lc.seen.size(), 6u);
  auto user = [&](size_t i) { return lc.seen[i].messages[0].content; };
  EXPECT_EQ(lc.seen[0].system, RolePrompts::planner_system());
  EXPECT_NE(user(0).find("# Method cards the decision table chose"), std::string::npos);
  EXPECT_NE(user(0).find("rule R"), std::string::npos) << user(0);
  EXPECT_NE(user(0).find("Bottleneck class at the size that weighs most: memory"), std::string::npos) << user(0);
  EXPECT_NE(user(1).find("PLAN-ONE"), std::string::npos);
  EXPECT_EQ(lc.seen[2].system, RolePrompts::reviewer_system());
  EXPECT_NE(user(2).find("expected 0.25"), std::string::npos) << user(2);
  EXPECT_NE(user(3).find("DIAGNOSIS: the max"), std::string::npos);
  EXPECT_NE(user(3).find("do not repeat a failed fix"), std::string::npos);
  EXPECT_NE(user(3).find("failed: "), std::string::npos) << user(3);
  // The second plan knows what the first branch tried, and the cards it offered are not offered again.
  EXPECT_NE(user(4).find("- branch 1, repairer (dsl, c2): verified"), std::string::npos) << user(4);
  EXPECT_NE(user(4).find("diagnosis: DIAGNOSIS: the max"), std::string::npos) << user(4);
  EXPECT_NE(user(5).find("It passed every gate"), std::string::npos) << user(5);
  EXPECT_EQ(r.result.best, 2);
}

// A repair that writes the failed kernel again is refused without a second evaluation, and the
// next repair prompt lists it among what failed.
TEST(KernelLoop, RepairDoesNotRepeatAFailedFix) {
  ScriptedLoop lc;
  lc.o.answer = AnswerLanguage::dsl;
  std::string wrong = with(lc.seed().source, "threads = 256", "threads = 128");
  KernelLoopResult r = lc.run({"plan", "```ksol\n" + wrong + "```", "diagnosis one", "```ksol\n" + wrong + "```", "diagnosis two",
                               "```ksol\n" + with(lc.seed().source, "vector = 1", "vector = 4") + "```"},
                              lc.seed());
  EXPECT_EQ(lc.ev.evaluations, 3) << "start, the failed kernel, the last repair: the repeat is not evaluated\n" << lc.all_progress();
  ASSERT_EQ(r.tried.size(), 3u);
  EXPECT_EQ(r.tried[1].result.rfind("rejected (repeats a tried kernel): the answer is c1 again (failed: ", 0), 0u) << r.tried[1].result;
  ASSERT_EQ(lc.seen.size(), 6u);
  std::string last_repair = lc.seen[5].messages[0].content;
  EXPECT_NE(last_repair.find("coder (dsl, c1): failed: "), std::string::npos) << last_repair;
  EXPECT_NE(last_repair.find("repairer (dsl): rejected (repeats a tried kernel)"), std::string::npos) << last_repair;
  EXPECT_EQ(r.result.best, 2);
}

TEST(KernelLoop, AnswerLanguagesParse) {
  EXPECT_EQ(parse_answer_language("either"), AnswerLanguage::either);
  EXPECT_THROW(parse_answer_language("ptx"), std::invalid_argument);
  Rejection why;
  EXPECT_FALSE(read_cuda_answer("```cuda\n__global__ void k() {}\n```", "stop", 100, &why));
  EXPECT_EQ(why.kind, Rejection::Kind::no_entry_point);
  EXPECT_FALSE(read_cuda_answer("```ksol\nkernel x\n```", "stop", 100, &why, "a CUDA kernel (--answer cuda)"));
  EXPECT_EQ(why.message, "the answer is a ```ksol block, but a CUDA kernel (--answer cuda) was asked for, in a ```cuda block");
  EXPECT_FALSE(read_cuda_answer("```cuda\nint ksol_run(", "length", 100, &why));
  EXPECT_EQ(why.kind, Rejection::Kind::truncated);
}

// The command line: --from needs an LLM agent, and without a GPU the user's kernel is taken
// through gate 1 and the compile, then the run stops with 77 as the search's does.
TEST(KernelLoopCli, FromNeedsAnLlmAgent) {
  std::string mine = ::testing::TempDir() + "/ksol-from-" + std::to_string(::getpid()) + ".cu";
  write_file_atomic(mine, read_file(source_root() + "/tasks/llm/softmax_f32/naive.cu"));
  ProcessResult r = run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "optimize", "--task", "softmax_f32", "--from", mine}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--from needs an LLM agent (--agent openai:MODEL, anthropic:MODEL, exchange:DIR or batch:FORMAT:MODEL:DIR): the expert agent "
                          "writes DSL schedules only"),
            std::string::npos)
      << r.output;
  fs::remove(mine);
}

TEST(KernelLoopCli, FromAUserCudaFileWithoutAGpuCompilesIt) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on the PATH: the compile gate cannot run here";
  std::string dir = ::testing::TempDir() + "/ksol-from-cli-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic(dir + "/my_kernel.cu", read_file(source_root() + "/tasks/llm/softmax_f32/naive.cu"));
  ProcessResult r = run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "optimize", "--task", "softmax_f32", "--from",
                                 dir + "/my_kernel.cu", "--agent", "exchange:" + dir + "/x"},
                                300);
  if (r.output.find("no GPU") == std::string::npos && r.output.find("GPU") != std::string::npos && r.exit_code != 77)
    GTEST_SKIP() << "a GPU is present: this case is the CPU path\n" << r.output;
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("softmax_f32: " + dir + "/my_kernel.cu (cuda) compiles"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/x/requests")) << "nothing is asked before a GPU can time the answers";
  fs::remove_all(dir);
}

// With an LLM agent and the default answer, `ksol optimize TASK` is the kernel loop from the
// task's seed program (without a GPU: its seed checked and compiled, nothing asked); the schedule
// search with the LLM as coder is asked for by name, and only with an LLM agent and no --from.
TEST(KernelLoopCli, LlmAgentWithTheDefaultAnswerRunsTheKernelLoop) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on the PATH: the compile gate cannot run here";
  std::string dir = ::testing::TempDir() + "/ksol-default-answer-" + std::to_string(::getpid());
  fs::remove_all(dir);
  ProcessResult r = run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "optimize", "softmax_f32", "--agent",
                                 "exchange:" + dir + "/x", "--llm-timeout", "5", "--budget-candidates", "1", "--report", dir + "/report"},
                                300);
  if (r.output.find("no GPU") == std::string::npos && r.output.find("GPU") != std::string::npos && r.exit_code != 77)
    GTEST_SKIP() << "a GPU is present: this case is the CPU path\n" << r.output;
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("checking and compiling the 1 starting kernel(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("softmax_f32/program.ksol (dsl) compiles"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/x/requests")) << "nothing is asked before a GPU can time the answers";
  fs::remove_all(dir);
}

TEST(KernelLoopCli, AnswerScheduleNeedsAnLlmAgentAndNoFrom) {
  const std::string ksol = std::string(KSOL_BUILD_DIR) + "/ksol";
  ProcessResult expert = run_process({ksol, "--store", "", "optimize", "softmax_f32", "--answer", "schedule"}, 60);
  EXPECT_EQ(expert.exit_code, 2) << expert.output;
  EXPECT_NE(expert.output.find("--answer schedule makes an LLM agent the schedule search's coder: the expert agent searches schedules already"),
            std::string::npos)
      << expert.output;
  ProcessResult from = run_process({ksol, "--store", "", "optimize", "--task", "softmax_f32", "--from",
                                    source_root() + "/tasks/llm/softmax_f32/naive.cu", "--agent", "exchange:/nonexistent/x", "--answer", "schedule"},
                                   60);
  EXPECT_EQ(from.exit_code, 2) << from.output;
  EXPECT_NE(from.output.find("--from starts the kernel loop: the schedule search (--answer schedule) starts from the task's seed program"),
            std::string::npos)
      << from.output;
  ProcessResult help = run_process({ksol, "optimize", "--help"}, 60);
  EXPECT_NE(help.output.find("or schedule (no kernel loop: the schedule search"), std::string::npos) << help.output;
}
