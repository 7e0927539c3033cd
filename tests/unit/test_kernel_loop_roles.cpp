// Each role of the LLM's kernel loop (agents/kernel_loop.h: planner, coder, reviewer, repairer,
// optimizer) asked over HTTP by a real llm::Client: against the scripted server on loopback
// (tests/llm/fake_llm_server.py) in OpenAI's and in Anthropic's wire format, with DSL and CUDA
// answers, and against llama.cpp's server with a 270M model (the slow tier). The kernels go to
// the scripted evaluator of scripted_kernels.h.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "agents/kernel_loop.h"
#include "agents/llm.h"
#include "core/util.h"

#include "llm_servers.h"
#include "scripted_kernels.h"

using namespace ksol;
using namespace ksol::agents;
using namespace ksol::test_support;
using nlohmann::json;

namespace {

enum class Wire { openai, anthropic };

const char* wire_name(Wire w) { return w == Wire::openai ? "openai" : "anthropic"; }

// What one role's request must carry: its purpose (the store's), its system prompt, and a piece
// of its user message that only this request has.
struct RoleRequest {
  std::string purpose, system, user_has;
};

// The role's request as the server logged it, in the wire format `w`: the endpoint's path, the
// key's header, the model, the system prompt where that format puts it, one user message and the
// loop's token limit.
void expect_wire_request(const json& q, Wire w, const RoleRequest& want, int max_tokens) {
  SCOPED_TRACE(std::string(wire_name(w)) + " " + want.purpose);
  const json& body = q["body"];
  ASSERT_TRUE(body.contains("messages")) << q.dump().substr(0, 2000);
  const json& m = body["messages"];
  EXPECT_EQ(body["max_tokens"], max_tokens);
  std::string user;
  if (w == Wire::openai) {
    EXPECT_EQ(q["path"], "/v1/chat/completions");
    EXPECT_EQ(q["headers"]["Authorization"], "Bearer " + kSecret);
    EXPECT_EQ(body["model"], "test-model");
    EXPECT_FALSE(body.contains("system"));
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0]["role"], "system");
    EXPECT_EQ(m[0]["content"], want.system);
    EXPECT_EQ(m[1]["role"], "user");
    user = m[1]["content"];
  } else {
    EXPECT_EQ(q["path"], "/v1/messages");
    EXPECT_EQ(q["headers"]["x-api-key"], kSecret);
    EXPECT_EQ(q["headers"]["anthropic-version"], "2023-06-01");
    EXPECT_FALSE(q["headers"].contains("Authorization"));
    EXPECT_EQ(body["model"], "claude-test");
    EXPECT_EQ(body["system"], want.system);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0]["role"], "user");
    user = m[0]["content"];
  }
  EXPECT_NE(user.find(want.user_has), std::string::npos) << user.substr(0, 4000);
}

// The scripted server's reply carrying `text`, with its token counts.
json reply(const std::string& text) { return {{"content", text}, {"prompt_tokens", 100}, {"completion_tokens", 50}}; }

// The loop of `lc` asking the scripted server `s` in the wire format `w`.
KernelLoopResult run_over(Wire w, const FakeServer& s, LoopCase& lc) {
  llm::Spec sp = w == Wire::openai ? openai_spec(s) : anthropic_spec(s);
  sp.retries = 0;  // a request the script does not expect fails at once, and the test says so
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  return lc.run(c, lc.seed());
}

// Two branches of DSL answers, one request per role: planner, coder (a program that fails the
// correctness gate), reviewer, repairer (a faster program: the new best), planner, optimizer (from
// the repaired program, one verified but no faster). The requests in the server's log, the
// purposes and outcomes of their rows, the answers as the loop read them and its result.
void each_role_over(Wire w) {
  KeyEnv key;
  LoopCase lc;
  lc.o.answer = AnswerLanguage::dsl;
  lc.o.branches = 2;
  lc.o.max_tokens = 1500;
  std::string seed = lc.seed().source;
  std::string wrong = with(seed, "threads = 256", "threads = 128");
  std::string fast = with(seed, "vector = 1", "vector = 4");
  FakeServer s(json::array({reply("PLAN-ONE: vectorise the rows."), reply("```ksol\n" + wrong + "```"),
                            reply("DIAGNOSIS: the max is taken over the wrong axis."), reply("Fixed:\n```ksol\n" + fast + "```\n"),
                            reply("PLAN-TWO: more threads."), reply("```ksol\n" + with(fast, "threads = 256", "threads = 512") + "```")}));
  ASSERT_GT(s.port, 0);
  KernelLoopResult r = run_over(w, s, lc);

  const std::string coder = RolePrompts::coder_system(AnswerLanguage::dsl, lc.o.dsl_card, lc.o.cuda_card);
  const std::vector<RoleRequest> roles = {
      {"planner", RolePrompts::planner_system(), "# Method cards the decision table chose"},
      {"coder", coder, "PLAN-ONE"},
      {"reviewer", RolePrompts::reviewer_system(), "expected 0.25"},
      {"repairer", coder, "DIAGNOSIS: the max"},
      {"planner", RolePrompts::planner_system(), "- branch 1, repairer (dsl, c2): verified"},
      {"optimizer", coder, "It passed every gate"},
  };
  std::vector<json> req = s.requests();
  ASSERT_EQ(req.size(), roles.size()) << lc.all_progress();
  std::vector<std::string> purposes;
  for (size_t i = 0; i < roles.size(); ++i) {
    expect_wire_request(req[i], w, roles[i], 1500);
    purposes.push_back(roles[i].purpose);
  }
  EXPECT_EQ(lc.purposes, purposes);
  // Every answer was read from the format's reply and used: its row's outcome says how.
  ASSERT_EQ(lc.records.size(), roles.size());
  for (const llm::RequestRecord& q : lc.records) {
    EXPECT_TRUE(q.ok) << q.purpose << ": " << q.error;
    EXPECT_EQ(q.model.rfind(std::string(wire_name(w)) + ":", 0), 0u) << q.model;
    EXPECT_EQ(q.prompt_tokens, 100);
    EXPECT_EQ(q.completion_tokens, 50);
  }
  ASSERT_EQ(lc.outcomes.size(), roles.size()) << lc.all_progress();
  const std::vector<std::string> outcome_starts = {"plan", "failed: ", "diagnosis", "verified, the task's best", "plan", "verified"};
  for (size_t i = 0; i < roles.size(); ++i) {
    EXPECT_EQ(lc.outcomes[i].first, static_cast<int64_t>(i + 1));
    EXPECT_EQ(lc.outcomes[i].second.rfind(outcome_starts[i], 0), 0u) << i << ": " << lc.outcomes[i].second;
  }
  EXPECT_EQ(lc.outcomes[5].second, "verified");
  // The loop: the repaired program is the best, twice as fast as the vendor baseline; the
  // optimizer's is verified but not faster.
  ASSERT_EQ(r.result.trajectory.size(), 4u) << lc.all_progress();
  EXPECT_FALSE(r.result.trajectory[1].outcome.ok());
  EXPECT_TRUE(r.result.trajectory[2].accepted);
  EXPECT_TRUE(r.result.trajectory[3].outcome.ok());
  EXPECT_FALSE(r.result.trajectory[3].accepted);
  EXPECT_EQ(r.result.best, 2);
  EXPECT_NE(r.kernels[2].source.find("vector = 4"), std::string::npos) << r.kernels[2].source;
  EXPECT_EQ(r.kernels[2].origin, "llm c2");
  EXPECT_FALSE(r.result.use_baseline);
  EXPECT_NEAR(r.result.speedup_vs_baseline, 2.0, 1e-9);
  EXPECT_EQ(r.result.stop_reason, "candidates");
  EXPECT_EQ(r.spend.usage.prompt_tokens, 600);
  EXPECT_EQ(r.spend.usage.completion_tokens, 300);
  EXPECT_EQ(r.spend.usage.requests, 6);
}

// One branch of CUDA answers: planner, coder (a kernel with a stream of its own: refused by gate
// 1's source scan before evaluation), reviewer (which reads the scan's finding), repairer (the
// task's kernel: through nvcc, then the new best).
void cuda_roles_over(Wire w) {
  KeyEnv key;
  LoopCase lc;
  lc.o.answer = AnswerLanguage::cuda;
  lc.o.repairs = 1;
  FakeServer s(json::array({reply("PLAN: one warp per row with shuffles."), reply(cuda_answer_with_a_stream()),
                            reply("DIAGNOSIS: the kernel creates a stream; use the caller's."), reply(cuda_answer("FAST"))}));
  ASSERT_GT(s.port, 0);
  KernelLoopResult r = run_over(w, s, lc);

  const std::string coder = RolePrompts::coder_system(AnswerLanguage::cuda, lc.o.dsl_card, lc.o.cuda_card);
  EXPECT_NE(coder.find("# CUDA kernels for ksol"), std::string::npos);
  const std::vector<RoleRequest> roles = {
      {"planner", RolePrompts::planner_system(), "Answers may be written in: cuda."},
      {"coder", coder, "PLAN: one warp per row"},
      {"reviewer", RolePrompts::reviewer_system(), "forbidden construct 'cudaStreamCreate'"},
      {"repairer", coder, "DIAGNOSIS: the kernel creates a stream"},
  };
  std::vector<json> req = s.requests();
  ASSERT_EQ(req.size(), roles.size()) << lc.all_progress();
  for (size_t i = 0; i < roles.size(); ++i) expect_wire_request(req[i], w, roles[i], lc.o.max_tokens);
  EXPECT_EQ(lc.purposes, (std::vector<std::string>{"planner", "coder", "reviewer", "repairer"}));
  ASSERT_EQ(lc.outcomes.size(), 4u) << lc.all_progress();
  EXPECT_EQ(lc.outcomes[0].second, "plan");
  EXPECT_EQ(lc.outcomes[1].second.rfind("rejected: source scan: ", 0), 0u) << lc.outcomes[1].second;
  EXPECT_EQ(lc.outcomes[2].second, "diagnosis");
  EXPECT_EQ(lc.outcomes[3].second, "verified, the task's best");
  EXPECT_EQ(lc.ev.compiles, 1) << "the refused kernel is not compiled";
  ASSERT_EQ(r.result.trajectory.size(), 2u) << lc.all_progress();
  EXPECT_EQ(r.result.best, 1);
  EXPECT_EQ(r.kernels[1].language, "cuda");
  EXPECT_NE(r.kernels[1].source.find("// FAST"), std::string::npos);
  EXPECT_NEAR(r.result.speedup_vs_baseline, 2.0, 1e-9);
}

}  // namespace

TEST(KernelLoopRoles, EachRoleOverTheOpenAIWireFormat) { each_role_over(Wire::openai); }

TEST(KernelLoopRoles, EachRoleOverTheAnthropicWireFormat) { each_role_over(Wire::anthropic); }

// One format each: the CUDA path differs from the DSL's in how an answer is read and evaluated,
// not in how it travels, and each run compiles one kernel with nvcc.
TEST(KernelLoopRoles, CudaAnswersOverTheOpenAIWireFormat) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on the PATH: the compile gate cannot run here";
  cuda_roles_over(Wire::openai);
}

TEST(KernelLoopRoles, CudaAnswersOverTheAnthropicWireFormat) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc is not on the PATH: the compile gate cannot run here";
  cuda_roles_over(Wire::anthropic);
}

namespace {

// What became of every answer of a loop asked by the real server: each request got an answer
// (no "no answer to the ... request"), with tokens, and each answer's row got an outcome that is
// either its use (a plan, a diagnosis, a kernel verified or failed at a gate) or a rejection with
// its class, which the progress output says with the same class.
void expect_every_answer_used_or_rejected(const LoopCase& lc, const std::vector<std::string>& purposes) {
  const std::string p = lc.all_progress();
  std::cout << p << "\n";
  for (const llm::RequestRecord& q : lc.records)
    std::cout << "  " << q.purpose << ": " << q.prompt_tokens << "+" << q.completion_tokens << " tokens, " << fixed(q.seconds, 1) << " s\n";
  EXPECT_EQ(lc.purposes, purposes) << p;
  EXPECT_EQ(p.find("no answer to the"), std::string::npos) << p;
  for (const llm::RequestRecord& q : lc.records) {
    EXPECT_TRUE(q.ok) << q.purpose << ": " << q.error;
    EXPECT_GT(q.completion_tokens, 0) << q.purpose;
  }
  ASSERT_EQ(lc.outcomes.size(), lc.records.size()) << p;
  const std::set<std::string> classes = {"truncated",      "no code block",   "wrong language",     "unclosed block",
                                         "parse error",    "signature mismatch", "cannot generate", "repeats the parent",
                                         "source scan",    "no entry point",  "repeats a tried kernel"};
  for (const auto& [id, outcome] : lc.outcomes) {
    ASSERT_GE(id, 1);
    ASSERT_LE(id, static_cast<int64_t>(lc.records.size()));
    const std::string& role = lc.records[static_cast<size_t>(id - 1)].purpose;
    SCOPED_TRACE(role + ": " + outcome);
    if (role == "planner") {
      EXPECT_EQ(outcome, "plan");
    } else if (role == "reviewer") {
      EXPECT_EQ(outcome, "diagnosis");
    } else if (outcome.rfind("rejected: ", 0) == 0) {
      std::string cls = outcome.substr(10, outcome.find(": ", 10) - 10);
      EXPECT_EQ(classes.count(cls), 1u) << cls;
      EXPECT_NE(p.find("the " + role + " answer was rejected (" + cls + "): "), std::string::npos) << p;
    } else {
      EXPECT_TRUE(outcome.rfind("failed: ", 0) == 0 || outcome.rfind("verified", 0) == 0);
    }
  }
}

}  // namespace

// The roles against a real OpenAI-compatible server on loopback: llama.cpp's server with the
// 270M GGUF model setup.sh installs (skipped, with the reason, where it has not). Such a model
// writes no usable kernel; what is tested is that each role's request is made with its purpose,
// answered, and the answer used or rejected with its class, without a crash.
TEST(LlmServer, KernelLoopRolesAgainstLlamaCpp) {
  LlamaCppServer server;
  if (!server.skip.empty()) GTEST_SKIP() << server.skip;
  ASSERT_EQ(server.error, "");
  llm::Spec sp = server.spec();
  auto t0 = std::chrono::steady_clock::now();

  // Planner, coder, reviewer, repairer: one branch with one repair. Every kernel the model writes
  // fails the correctness gate (answers_fail), so an answer that happens to parse still leads to
  // the reviewer and the repairer instead of ending the branch as a verified kernel.
  LoopCase lc;
  lc.o.answer = AnswerLanguage::dsl;
  lc.o.branches = 1;
  lc.o.repairs = 1;
  lc.o.max_tokens = 128;  // this model writes no usable kernel at any length: fewer tokens, a shorter run on a CPU
  lc.ev.answers_fail = true;
  llm::Client c(llm::make_backend(sp), sp, llm::Budget{0, 0, 8, 0}, "");
  KernelLoopResult r;
  ASSERT_NO_THROW(r = lc.run(c, lc.seed()));
  expect_every_answer_used_or_rejected(lc, {"planner", "coder", "reviewer", "repairer"});
  EXPECT_EQ(r.result.best, 0) << "no kernel of the model's can pass the gates here";

  // The optimizer is asked only when the branch's parent is a kernel the model wrote that passed
  // every gate, which this model never writes (and the first loop fails them all). So a second
  // loop starts from the seed program marked as the model's (the origin the loop gives an answer
  // it evaluates), which passes every gate as attempt 0, and its first branch asks the optimizer.
  LoopCase lo;
  lo.o.answer = AnswerLanguage::dsl;
  lo.o.branches = 1;
  lo.o.repairs = 0;
  lo.o.max_tokens = 128;
  Kernel verified = lo.seed();
  verified.origin = "llm";
  llm::Client c2(llm::make_backend(sp), sp, llm::Budget{0, 0, 4, 0}, "");
  KernelLoopResult r2;
  ASSERT_NO_THROW(r2 = lo.run(c2, verified));
  expect_every_answer_used_or_rejected(lo, {"planner", "optimizer"});

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "tokens " << c.total().prompt_tokens + c2.total().prompt_tokens << "+"
            << c.total().completion_tokens + c2.total().completion_tokens << " in " << c.total().requests + c2.total().requests
            << " requests; the loops took " << fixed(seconds, 1) << " s\n";
}
