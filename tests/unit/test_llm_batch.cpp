// Batch mode (agents/llm_batch.h) on the CPU: the request lines in OpenAI's and Anthropic's batch
// wire formats, the results in both formats with their error forms, and the search and the kernel
// loop driven round by round against scripted results files (a run that waits, a resume that
// reads the answers, an error line, a truncated answer repaired in the next batch), a results file
// for another batch refused, budgets that span the rounds, and the CLI's waiting notice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agents/kernel_loop.h"
#include "agents/llm.h"
#include "agents/llm_agent.h"
#include "agents/llm_batch.h"
#include "scripted_kernels.h"
#include "core/util.h"
#include "search/optimize.h"
#include "store/store.h"
#include "task/task.h"

using namespace ksol;
using namespace ksol::agents;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string seed_source() { return read_file(source_root() + "/tasks/llm/softmax_f32/program.ksol"); }
std::string with(const std::string& from, const std::string& to) {
  std::string s = seed_source();
  return s.replace(s.find(from), from.size(), to);
}
std::string block(const std::string& program) { return "```ksol\n" + program + "```\n"; }

// One line of a results file answering `id` with `text`, in the provider's form.
json answer_line(const std::string& format, const std::string& id, const std::string& text, bool truncated = false) {
  if (format == "anthropic")
    return {{"custom_id", id},
            {"result",
             {{"type", "succeeded"},
              {"message",
               {{"id", "msg_01"}, {"type", "message"}, {"role", "assistant"}, {"model", "test-model"},
                {"content", json::array({{{"type", "text"}, {"text", text}}})},
                {"stop_reason", truncated ? "max_tokens" : "end_turn"},
                {"usage", {{"input_tokens", 60}, {"output_tokens", 40}}}}}}}};
  return {{"id", "batch_req_1"},
          {"custom_id", id},
          {"response",
           {{"status_code", 200},
            {"request_id", "req_1"},
            {"body",
             {{"id", "chatcmpl-1"}, {"object", "chat.completion"}, {"model", "test-model"},
              {"choices", json::array({{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}},
                                        {"finish_reason", truncated ? "length" : "stop"}}})},
              {"usage", {{"prompt_tokens", 60}, {"completion_tokens", 40}, {"total_tokens", 100}}}}}}},
          {"error", nullptr}};
}

// A batch folder in a fresh temporary directory, and the rounds of a search over it.
struct BatchCase {
  std::string root, dir;
  Task task = load_task(resolve_task_path("softmax_f32"));
  dsl::Program seed = dsl::parse_program(seed_source(), "program.ksol");
  Knowledge k = load_knowledge(default_knowledge_dir());

  BatchCase() {
    root = ::testing::TempDir() + "/ksol-batch-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++);
    fs::remove_all(root);
    dir = root + "/batch";
  }
  std::string agent() const { return "batch:openai:test-model:" + dir; }
  // `ksol optimize relu_f32` through the scripted worker (100 ms a call) with this case's batch
  // agent, store (root/k.db) and report folder, `args` after.
  ProcessResult optimize_cli(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {std::string(KSOL_BUILD_DIR) + "/ksol", "--store", root + "/k.db", "--worker",
                                     source_root() + "/tests/e2e/scripted_worker.py", "optimize", "relu_f32", "--agent", agent(),
                                     "--report", root + "/report"};
    argv.insert(argv.end(), args.begin(), args.end());
    ::setenv("SCRIPTED_US", "100000", 1);
    ProcessResult r = run_process(argv, 600);
    ::unsetenv("SCRIPTED_US");
    return r;
  }
  ~BatchCase() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::string agent(const std::string& format) const { return "batch:" + format + ":test-model:" + dir; }
  std::vector<json> lines(const std::string& name) const {
    std::vector<json> out;
    std::ifstream in(dir + "/" + name);
    for (std::string l; std::getline(in, l);) out.push_back(json::parse(l));
    return out;
  }
  void results(int n, const std::vector<json>& lines, const std::string& suffix = "") const {
    std::string s;
    for (const json& l : lines) s += l.dump() + "\n";
    write_file_atomic(dir + "/results-" + std::to_string(n) + suffix + ".jsonl", s);
  }
  json state() const { return json::parse(read_file(dir + "/batch.json")); }
};

// One round of the schedule search, as `ksol optimize` runs it: a fresh client over the folder,
// its requests recorded in a store of its own, the batch written at the end.
struct Round {
  search::OptimizeResult result;
  std::optional<llm::BatchNotice> notice;
  std::vector<std::string> progress;
  std::vector<store::LlmRequestRow> rows;
  llm::Usage total;
  std::string stopped;
  std::string all() const { return join(progress, "\n"); }
  const store::LlmRequestRow* row(const std::string& outcome_prefix) const {
    for (const auto& r : rows)
      if (r.outcome.rfind(outcome_prefix, 0) == 0) return &r;
    return nullptr;
  }
};

Round search_round(BatchCase& bc, const std::string& format, int64_t run, llm::Budget budget = {}) {
  Round out;
  llm::Spec sp = llm::parse_spec(bc.agent(format));
  const std::string cache = bc.root + "/cache";
  llm::Client c(llm::make_backend(sp), sp, budget, cache);
  store::Store st = store::Store::open(bc.root + "/k-" + std::to_string(run) + ".db");
  c.set_recorder([&](const llm::RequestRecord& q) {
    store::LlmRequestRow row = request_row(q);
    row.outcome = q.ok ? "pending" : "no answer";
    return st.record_llm_request(row);
  });
  LlmAgent agent(c, bc.task, bc.k, default_dsl_card());
  agent.set_progress([&](const std::string& l) { out.progress.push_back(l); });
  agent.set_outcome([&](int64_t id, const std::string& o) { st.set_llm_request_outcome(id, o); });
  search::ScriptedEvaluator ev;
  ev.model = {{"vector", {"4", 0.25}}};
  search::OptimizeOptions o;
  o.max_candidates = 10;
  o.agent = "llm";
  o.elites = 1;  // one parent a generation: one request a step
  out.result = search::optimize(bc.task, bc.seed, ev, agent, o);
  agent.review(out.result);
  for (auto& l : out.result.log) out.progress.push_back(l);
  out.notice = llm::batch_backend(c)->close(run, "ksol optimize softmax_f32 --agent " + bc.agent(format) + " --resume " + std::to_string(run));
  out.rows = st.llm_requests_for_run(std::nullopt);
  out.total = c.total();
  c.exhausted(&out.stopped);
  EXPECT_FALSE(fs::exists(cache)) << "a batch answer never goes to the answer cache";
  return out;
}

}  // namespace

TEST(LlmBatch, AgentSpecNamesFormatModelAndFolder) {
  llm::Spec s = llm::parse_spec("batch:openai:gpt-4o-mini:runs/batch");
  EXPECT_EQ(s.kind, "batch");
  EXPECT_EQ(s.format, "openai");
  EXPECT_EQ(s.model, "gpt-4o-mini");
  EXPECT_EQ(s.dir, "runs/batch");
  EXPECT_EQ(s.retries, llm::kBatchRetries);
  EXPECT_TRUE(llm::is_llm_agent("batch:anthropic:claude-x:d"));
  // A fine-tuned model's name holds colons: the folder is what follows the last one.
  llm::Spec ft = llm::parse_spec("batch:openai:ft:gpt-4o-mini:acme::abc123:out");
  EXPECT_EQ(ft.model, "ft:gpt-4o-mini:acme::abc123");
  EXPECT_EQ(ft.dir, "out");
  for (auto [bad, msg] : std::vector<std::pair<std::string, std::string>>{
           {"batch:openai:dir", "expected batch:openai:MODEL:DIR or batch:anthropic:MODEL:DIR"},
           {"batch:openai:m:", "expected batch:openai:MODEL:DIR"},
           {"batch:gemini:m:dir", "unknown batch format 'gemini' (openai, anthropic)"}}) {
    try {
      llm::parse_spec(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << bad << ": " << e.what();
    }
  }
}

// Both providers' result lines, with each error form: the answer, or the class and the message.
TEST(LlmBatch, ResultLinesInBothFormatsWithTheirErrors) {
  llm::BatchResult ok = llm::read_batch_result(answer_line("openai", "a", "hi"));
  EXPECT_EQ(ok.kind, "answered");
  EXPECT_EQ(ok.answer.text, "hi");
  EXPECT_EQ(ok.answer.finish_reason, "stop");
  EXPECT_EQ(ok.answer.usage.prompt_tokens, 60);
  EXPECT_EQ(llm::read_batch_result(answer_line("anthropic", "a", "hi", true)).answer.finish_reason, "length");
  EXPECT_EQ(llm::read_batch_result(answer_line("anthropic", "a", "hi")).answer.usage.completion_tokens, 40);

  llm::BatchResult e400 = llm::read_batch_result(
      {{"custom_id", "a"},
       {"response", {{"status_code", 400}, {"body", {{"error", {{"message", "max_tokens is too large"}, {"type", "invalid_request_error"}}}}}}},
       {"error", nullptr}});
  EXPECT_EQ(e400.kind, "errored");
  EXPECT_EQ(e400.error, "HTTP 400 (invalid_request_error): max_tokens is too large");
  EXPECT_FALSE(e400.retryable);
  EXPECT_TRUE(llm::read_batch_result({{"custom_id", "a"}, {"response", {{"status_code", 500}, {"body", {{"error", {{"message", "oops"}}}}}}}}).retryable);
  llm::BatchResult exp = llm::read_batch_result(
      {{"custom_id", "a"}, {"response", nullptr}, {"error", {{"code", "batch_expired"}, {"message", "This request could not be executed before the completion window expired."}}}});
  EXPECT_EQ(exp.kind, "expired");
  EXPECT_TRUE(exp.retryable);

  llm::BatchResult ae = llm::read_batch_result(
      {{"custom_id", "a"},
       {"result", {{"type", "errored"}, {"error", {{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", "bad max_tokens"}}}}}}}});
  EXPECT_EQ(ae.kind, "errored");
  EXPECT_EQ(ae.error, "invalid_request_error: bad max_tokens");
  EXPECT_FALSE(ae.retryable);
  EXPECT_TRUE(llm::read_batch_result({{"custom_id", "a"}, {"result", {{"type", "errored"}, {"error", {{"type", "overloaded_error"}, {"message", "busy"}}}}}}).retryable);
  EXPECT_EQ(llm::read_batch_result({{"custom_id", "a"}, {"result", {{"type", "expired"}}}}).kind, "expired");
  llm::BatchResult can = llm::read_batch_result({{"custom_id", "a"}, {"result", {{"type", "canceled"}}}});
  EXPECT_EQ(can.kind, "canceled");
  EXPECT_FALSE(can.retryable);

  for (auto [line, msg] : std::vector<std::pair<json, std::string>>{
           {json{{"response", nullptr}}, "no \"custom_id\""},
           {json{{"custom_id", "a"}, {"method", "POST"}, {"url", "/v1/chat/completions"}, {"body", json::object()}}, "a request line, not a result"},
           {json{{"custom_id", "a"}, {"params", json::object()}}, "a request line, not a result"},
           {json{{"custom_id", "a"}, {"result", {{"type", "pending"}}}}, "unknown type 'pending'"}}) {
    try {
      llm::read_batch_result(line);
      ADD_FAILURE() << line.dump();
    } catch (const llm::BatchError& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
    }
  }
}

// The whole loop over OpenAI's format: the run waits with its request written, the resume reads
// the answer (the same gates and store rows as a live answer) and writes the next batch, and an
// error line ends that branch with its message.
TEST(LlmBatch, SearchWaitsForItsBatchAndGoesOnWithTheOpenAIResults) {
  BatchCase bc;
  Round r1 = search_round(bc, "openai", 7);
  ASSERT_EQ(r1.result.trajectory.size(), 1u) << r1.all();  // the seed: nothing else until the answer
  EXPECT_EQ(r1.result.stop_reason, "exhausted");
  ASSERT_TRUE(r1.notice) << r1.all();
  EXPECT_EQ(r1.notice->batch, 1);
  EXPECT_EQ(r1.notice->requests, 1);
  EXPECT_TRUE(r1.notice->written);
  const std::string requests1 = fs::absolute(bc.dir + "/requests-1.jsonl").lexically_normal().string();
  EXPECT_EQ(r1.notice->requests_file, requests1);
  EXPECT_NE(r1.all().find("llm: the coder request goes into batch 1 (" + requests1 + ") when the run ends"), std::string::npos) << r1.all();
  // The request line, exactly as OpenAI's Batch API takes it.
  std::vector<json> q1 = bc.lines("requests-1.jsonl");
  ASSERT_EQ(q1.size(), 1u);
  const std::string id1 = q1[0]["custom_id"];
  EXPECT_EQ(id1.size(), 64u);
  EXPECT_EQ(q1[0]["method"], "POST");
  EXPECT_EQ(q1[0]["url"], "/v1/chat/completions");
  const json& body = q1[0]["body"];
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["max_tokens"], 2048);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_NE(body["messages"][0]["content"].get<std::string>().find("```ksol"), std::string::npos);
  EXPECT_EQ(body["messages"][1]["role"], "user");
  EXPECT_NE(body["messages"][1]["content"].get<std::string>().find("softmax_f32"), std::string::npos);
  EXPECT_EQ(q1[0].size(), 4u) << q1[0].dump();
  // The state and what to do next.
  json st = bc.state();
  EXPECT_EQ(st["format"], "openai");
  EXPECT_EQ(st["batches"][0]["run"], 7);
  EXPECT_EQ(st["batches"][0]["requests"][0], (json{{"custom_id", id1}, {"task", "softmax_f32"}, {"purpose", "coder"}}));
  std::string next = read_file(bc.dir + "/next.txt");
  EXPECT_NE(next.find("curl https://api.openai.com/v1/files -H \"Authorization: Bearer $OPENAI_API_KEY\" -F purpose=batch -F file=@" + requests1),
            std::string::npos) << next;
  EXPECT_NE(next.find("\"endpoint\": \"/v1/chat/completions\", \"completion_window\": \"24h\""), std::string::npos) << next;
  EXPECT_NE(next.find("save its output file as " + fs::absolute(bc.dir + "/results-1.jsonl").lexically_normal().string()), std::string::npos) << next;
  EXPECT_NE(next.find("--resume 7"), std::string::npos) << next;
  // The store has the request, waiting.
  ASSERT_EQ(r1.rows.size(), 1u);
  EXPECT_EQ(r1.rows[0].model, "batch:openai:test-model");
  EXPECT_EQ(r1.rows[0].prompt_hash, id1);
  EXPECT_FALSE(r1.rows[0].ok);
  EXPECT_EQ(r1.rows[0].outcome.rfind("batched: goes into batch 1 (", 0), 0u) << r1.rows[0].outcome;
  EXPECT_EQ(r1.rows[0].prompt_tokens, 0);

  // A re-run before the results are in: nothing new is written, the same batch still awaited.
  {
    llm::BatchBackend waiting(llm::parse_spec(bc.agent("openai")));
    ASSERT_TRUE(waiting.waiting());
    EXPECT_EQ(waiting.waiting()->batch, 1);
    EXPECT_FALSE(waiting.waiting()->written);
    EXPECT_NE(waiting.waiting()->next.find("its results are not in yet"), std::string::npos) << waiting.waiting()->next;
  }

  // The results arrive: the program is evaluated, wins, and the next step's request is batch 2.
  bc.results(1, {answer_line("openai", id1, "Vectorise.\n" + block(with("vector = 1", "vector = 4")))});
  Round r2 = search_round(bc, "openai", 8);
  ASSERT_GE(r2.result.trajectory.size(), 2u) << r2.all();
  EXPECT_EQ(r2.result.trajectory[1].method.rfind("llm/", 0), 0u);
  EXPECT_TRUE(r2.result.trajectory[1].outcome.ok());
  EXPECT_EQ(r2.result.best, 1) << r2.all();
  ASSERT_TRUE(r2.notice) << r2.all();
  EXPECT_EQ(r2.notice->batch, 2);
  std::vector<json> q2 = bc.lines("requests-2.jsonl");
  ASSERT_EQ(q2.size(), 1u);
  const std::string id2 = q2[0]["custom_id"];
  EXPECT_NE(id2, id1);
  EXPECT_NE(q2[0]["body"]["messages"][1]["content"].get<std::string>().find("vector = 4"), std::string::npos) << "the new best is the parent";
  // The answer's row, as a live answer's: tokens, where it is kept, what became of it. The search's
  // look-ahead asks the same request again: that row is cached, without tokens.
  const store::LlmRequestRow* answered = nullptr;
  for (const auto& r : r2.rows)
    if (r.prompt_hash == id1 && r.ok && !r.cached && !answered) answered = &r;
  ASSERT_NE(answered, nullptr) << r2.all();
  EXPECT_EQ(answered->prompt_tokens, 60);
  EXPECT_EQ(answered->completion_tokens, 40);
  EXPECT_EQ(answered->path, fs::absolute(bc.dir + "/results-1.jsonl").lexically_normal().string());
  EXPECT_NE(answered->answer.find("vector = 4"), std::string::npos);
  EXPECT_NE(r2.row("verified, the task's best"), nullptr) << r2.all();
  EXPECT_NE(r2.row("batched: goes into batch 2"), nullptr) << r2.all();
  EXPECT_EQ(r2.total.prompt_tokens, 60);
  EXPECT_EQ(r2.total.requests, 2);  // the answer and the request for batch 2

  // Batch 2 comes back with an error line: its own message, and the search ends without a batch 3.
  bc.results(2, {{{"id", "batch_req_2"},
                  {"custom_id", id2},
                  {"response", {{"status_code", 400}, {"request_id", "req_2"},
                                {"body", {{"error", {{"message", "max_tokens is too large"}, {"type", "invalid_request_error"}, {"param", nullptr}, {"code", nullptr}}}}}}},
                  {"error", nullptr}}});
  Round r3 = search_round(bc, "openai", 9);
  EXPECT_FALSE(r3.notice) << r3.all();
  EXPECT_EQ(r3.result.best, 1);
  const std::string results2 = fs::absolute(bc.dir + "/results-2.jsonl").lexically_normal().string();
  EXPECT_NE(r3.all().find("no answer to the coder request: errored in batch 2 (results-2.jsonl:1): HTTP 400 (invalid_request_error): "
                          "max_tokens is too large"),
            std::string::npos)
      << r3.all();
  EXPECT_NE(r3.row("no answer: errored in batch 2"), nullptr);
  EXPECT_FALSE(fs::exists(bc.dir + "/requests-3.jsonl"));
}

// Anthropic's format: the request line, a truncated answer rejected by the same class and
// repaired through the next batch, and a canceled line.
TEST(LlmBatch, AnthropicResultsDriveTheSameRejectionsAndRepairs) {
  BatchCase bc;
  Round r1 = search_round(bc, "anthropic", 3);
  ASSERT_TRUE(r1.notice);
  std::vector<json> q1 = bc.lines("requests-1.jsonl");
  ASSERT_EQ(q1.size(), 1u);
  EXPECT_EQ(q1[0].size(), 2u) << q1[0].dump();  // custom_id and params, nothing else
  const json& params = q1[0]["params"];
  EXPECT_EQ(params["model"], "test-model");
  EXPECT_EQ(params["max_tokens"], 2048);
  EXPECT_NE(params["system"].get<std::string>().find("```ksol"), std::string::npos);
  EXPECT_EQ(params["messages"].size(), 1u);
  EXPECT_EQ(params["messages"][0]["role"], "user");
  const std::string id1 = q1[0]["custom_id"];
  std::string next = r1.notice->next;
  EXPECT_NE(next.find("paste -sd, "), std::string::npos) << next;
  EXPECT_NE(next.find("https://api.anthropic.com/v1/messages/batches -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\""),
            std::string::npos) << next;
  EXPECT_NE(next.find("processing_status is \"ended\""), std::string::npos) << next;

  // Cut off at the token limit: the truncated class, one repair prompt, which is batch 2.
  bc.results(1, {answer_line("anthropic", id1, "```ksol\nkernel softmax(X: f32[R, C]) -> (Y: f32[R, C]) {\n", true)});
  Round r2 = search_round(bc, "anthropic", 4);
  EXPECT_NE(r2.all().find("the coder answer was rejected (truncated): the answer was cut off at the token limit"), std::string::npos) << r2.all();
  EXPECT_NE(r2.all().find("the repair request goes into batch 2"), std::string::npos) << r2.all();
  EXPECT_NE(r2.row("rejected: truncated: "), nullptr);
  ASSERT_TRUE(r2.notice);
  std::vector<json> q2 = bc.lines("requests-2.jsonl");
  ASSERT_EQ(q2.size(), 1u);
  ASSERT_EQ(q2[0]["params"]["messages"].size(), 3u);  // the prompt, the cut-off answer, the repair
  EXPECT_EQ(q2[0]["params"]["messages"][1]["role"], "assistant");

  // The repair answers: accepted and evaluated; the next step's request is batch 3, canceled.
  bc.results(2, {answer_line("anthropic", q2[0]["custom_id"], block(with("vector = 1", "vector = 4")))});
  Round r3 = search_round(bc, "anthropic", 5);
  EXPECT_NE(r3.all().find("repaired answer accepted"), std::string::npos) << r3.all();
  EXPECT_EQ(r3.result.best, 1) << r3.all();
  ASSERT_TRUE(r3.notice);
  EXPECT_EQ(r3.notice->batch, 3);
  bc.results(3, {{{"custom_id", bc.lines("requests-3.jsonl")[0]["custom_id"]}, {"result", {{"type", "canceled"}}}}});
  Round r4 = search_round(bc, "anthropic", 6);
  EXPECT_FALSE(r4.notice);
  EXPECT_NE(r4.all().find("canceled in batch 3 (results-3.jsonl:1): the batch was canceled before the provider answered it"), std::string::npos)
      << r4.all();
}

// An expired request goes into one more batch (--llm-retries, default 1), then is an error; a
// request the results lack is an error saying so.
TEST(LlmBatch, ExpiredGoesIntoTheNextBatchOnceAndMissingIsSaid) {
  BatchCase bc;
  llm::Request a, b;
  a.messages = {{"user", "first"}};
  b.messages = {{"user", "second"}};
  a.purpose = b.purpose = "test";
  auto round = [&](int run) {
    llm::Spec sp = llm::parse_spec(bc.agent("openai"));
    llm::Client c(llm::make_backend(sp), sp, {}, "");
    std::pair<llm::Answer, llm::Answer> out{c.ask(a), c.ask(b)};
    llm::batch_backend(c)->close(run, "resume");
    return out;
  };
  auto [a1, b1] = round(1);
  EXPECT_TRUE(a1.deferred);
  EXPECT_TRUE(b1.deferred);
  std::vector<json> q = bc.lines("requests-1.jsonl");
  ASSERT_EQ(q.size(), 2u);
  json expired = {{"custom_id", q[0]["custom_id"]}, {"response", nullptr},
                  {"error", {{"code", "batch_expired"}, {"message", "This request could not be executed before the completion window expired."}}}};
  bc.results(1, {expired});
  auto [a2, b2] = round(2);
  EXPECT_TRUE(a2.deferred);
  EXPECT_EQ(a2.error.rfind("expired in batch 1 (results-1.jsonl:1): the batch's completion window closed", 0), 0u) << a2.error;
  EXPECT_NE(a2.error.find("; goes into batch 2 ("), std::string::npos) << a2.error;
  EXPECT_FALSE(b2.ok);
  EXPECT_FALSE(b2.deferred);
  EXPECT_EQ(b2.error.rfind("missing from batch 1's results: no line has custom_id " + q[1]["custom_id"].get<std::string>(), 0), 0u) << b2.error;
  EXPECT_NE(b2.error.find("results-1.errors.jsonl"), std::string::npos) << b2.error;
  ASSERT_EQ(bc.lines("requests-2.jsonl").size(), 1u);
  EXPECT_EQ(bc.lines("requests-2.jsonl")[0]["custom_id"], q[0]["custom_id"]);
  // OpenAI's error file beside the output is read too.
  bc.results(2, {}, "");
  bc.results(2, {expired}, ".errors");
  auto [a3, b3] = round(3);
  EXPECT_FALSE(a3.ok);
  EXPECT_FALSE(a3.deferred);
  EXPECT_EQ(a3.attempts, 2);
  EXPECT_EQ(a3.error.rfind("expired in batch 2 (results-2.errors.jsonl:1): ", 0), 0u) << a3.error;
  EXPECT_NE(a3.error.find("(it went into 2 batch(es); --llm-retries allows more)"), std::string::npos) << a3.error;
  EXPECT_FALSE(fs::exists(bc.dir + "/requests-3.jsonl"));
  // A round that does not ask a request again (another path, or a budget) leaves its answer unused.
  llm::Spec sp = llm::parse_spec(bc.agent("openai"));
  llm::Client c(llm::make_backend(sp), sp, {}, "");
  c.ask(a);
  EXPECT_EQ(llm::batch_backend(c)->unused(), 1);
  c.ask(b);
  EXPECT_EQ(llm::batch_backend(c)->unused(), 0);
}

// A results file that is not its batch's is refused whole, with the file, the line and why.
TEST(LlmBatch, ResultsOfAnotherBatchAreRefused) {
  BatchCase bc;
  llm::Spec sp = llm::parse_spec(bc.agent("openai"));
  std::string id1, id2;
  for (int n : {1, 2}) {
    llm::Client c(llm::make_backend(sp), sp, {}, "");
    llm::Request r;
    r.messages = {{"user", "question " + std::to_string(n)}};
    c.ask(r);
    llm::batch_backend(c)->close(n, "resume");
    (n == 1 ? id1 : id2) = bc.lines("requests-" + std::to_string(n) + ".jsonl")[0]["custom_id"];
    if (n == 1) bc.results(1, {answer_line("openai", id1, "one")});
  }
  auto refused = [&](const std::string& want) {
    try {
      llm::BatchBackend b(sp);
      ADD_FAILURE() << "accepted; expected: " << want;
    } catch (const llm::BatchError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  const std::string r2 = fs::absolute(bc.dir + "/results-2.jsonl").lexically_normal().string();
  bc.results(2, {answer_line("openai", id1, "one")});
  refused(r2 + ":1: custom_id '" + id1 + "' is not one of batch 2's 1 requests (requests-2.jsonl); it is a request of batch 1 "
          "(requests-1.jsonl): results-2.jsonl holds the results of another batch; put batch 2's results there");
  bc.results(2, {answer_line("openai", id2, "two"), answer_line("openai", "request-1", "?")});
  refused(r2 + ":2: custom_id 'request-1' is not one of batch 2's 1 requests (requests-2.jsonl); nor of any batch in this folder");
  fs::copy_file(bc.dir + "/requests-2.jsonl", r2, fs::copy_options::overwrite_existing);
  refused(r2 + ":1: a request line, not a result");
  bc.results(2, {answer_line("openai", id2, "two")});
  bc.results(5, {answer_line("openai", id2, "two")});
  refused("results-5.jsonl answers batch 5, which this folder never wrote (its last is batch 2, requests-2.jsonl)");
  fs::remove(bc.dir + "/results-5.jsonl");
  EXPECT_NO_THROW(llm::BatchBackend{sp});
  // Another model or format cannot go on in the same folder.
  try {
    llm::BatchBackend other(llm::parse_spec("batch:anthropic:other-model:" + bc.dir));
    ADD_FAILURE() << "another format and model were accepted";
  } catch (const llm::BatchError& e) {
    EXPECT_NE(std::string(e.what()).find("holds the batches of batch:openai:test-model, not of batch:anthropic:other-model"), std::string::npos)
        << e.what();
  }
}

// The budgets span the rounds: every round replays the answers with their tokens, and a
// deferred request counts against the request budget.
TEST(LlmBatch, BudgetsSpanTheRounds) {
  BatchCase bc;
  Round r1 = search_round(bc, "openai", 1, llm::Budget{150, 0, 0, 0});
  ASSERT_TRUE(r1.notice);
  bc.results(1, {answer_line("openai", bc.lines("requests-1.jsonl")[0]["custom_id"], block(with("vector = 1", "vector = 4")))});
  Round r2 = search_round(bc, "openai", 2, llm::Budget{150, 0, 0, 0});
  ASSERT_TRUE(r2.notice) << r2.all();
  EXPECT_EQ(r2.total.prompt_tokens + r2.total.completion_tokens, 100) << r2.all();
  bc.results(2, {answer_line("openai", bc.lines("requests-2.jsonl")[0]["custom_id"], block(with("threads = 256", "threads = 512")))});
  // Two answers of 100 tokens each: the budget of 150 is spent, nothing more is batched.
  Round r3 = search_round(bc, "openai", 3, llm::Budget{150, 0, 0, 0});
  EXPECT_FALSE(r3.notice) << r3.all();
  EXPECT_NE(r3.stopped.find("token budget spent"), std::string::npos) << r3.stopped;
  EXPECT_NE(r3.all().find("stopped: token budget spent"), std::string::npos) << r3.all();
  EXPECT_FALSE(fs::exists(bc.dir + "/requests-3.jsonl"));

  // A request budget of one: the deferred request is that one; the resumed round stops after its answer.
  BatchCase one;
  Round q1 = search_round(one, "openai", 1, llm::Budget{0, 0, 1, 0});
  ASSERT_TRUE(q1.notice);
  one.results(1, {answer_line("openai", one.lines("requests-1.jsonl")[0]["custom_id"], block(with("vector = 1", "vector = 4")))});
  Round q2 = search_round(one, "openai", 2, llm::Budget{0, 0, 1, 0});
  EXPECT_FALSE(q2.notice) << q2.all();
  EXPECT_EQ(q2.result.best, 1);
  EXPECT_NE(q2.stopped.find("request budget spent (1)"), std::string::npos) << q2.stopped;
}

namespace {
// DSL kernels only, scripted: "vector = 4" runs in 100 us, anything else in 300 us.
struct ScriptedDsl : KernelEvaluator {
  search::Outcome evaluate(const Task& t, const Kernel& k, const std::string& label, int64_t, const std::string&) override {
    return test_support::scripted_outcome(t, label, k.source.find("vector = 4") != std::string::npos ? 100 : 300);
  }
  std::map<std::string, search::Outcome> baselines(const Task& t) override {
    search::Outcome b = evaluate(t, Kernel{"dsl", "", std::nullopt, "naive"}, "baseline:naive", 0, "");
    return {{"naive", b}};
  }
};
}  // namespace

// The kernel loop in batch mode: each round one role's request, the planner's plan then the
// coder's kernel, until the branch's kernel is verified.
TEST(LlmBatch, KernelLoopGoesOnRoleByRole) {
  BatchCase bc;
  auto round = [&](int run, std::vector<std::string>* progress) {
    llm::Spec sp = llm::parse_spec(bc.agent("openai"));
    llm::Client c(llm::make_backend(sp), sp, {}, "");
    ScriptedDsl ev;
    KernelLoopOptions o;
    o.answer = AnswerLanguage::dsl;
    o.branches = 1;
    o.family = "rowwise";
    o.dsl_card = default_dsl_card();
    o.progress = [&](const std::string& l) { progress->push_back(l); };
    Kernel start = kernel_from_file(bc.task.dir + "/program.ksol");
    KernelLoopResult r = run_kernel_loop(bc.task, start, c, bc.k, ev, o);
    std::optional<llm::BatchNotice> n = llm::batch_backend(c)->close(run, "resume");
    return std::make_pair(r, n);
  };
  std::vector<std::string> p1, p2, p3;
  auto [k1, n1] = round(1, &p1);
  ASSERT_TRUE(n1);
  EXPECT_EQ(k1.result.stop_reason, "exhausted");
  EXPECT_NE(join(p1, "\n").find("llm: the planner request goes into batch 1"), std::string::npos) << join(p1, "\n");
  std::vector<json> q1 = bc.lines("requests-1.jsonl");
  ASSERT_EQ(q1.size(), 1u);
  bc.results(1, {answer_line("openai", q1[0]["custom_id"], "Load four floats at a time.")});
  auto [k2, n2] = round(2, &p2);
  ASSERT_TRUE(n2);
  EXPECT_EQ(k2.result.stop_reason, "exhausted");
  EXPECT_NE(join(p2, "\n").find("llm: the coder request goes into batch 2"), std::string::npos) << join(p2, "\n");
  std::vector<json> q2 = bc.lines("requests-2.jsonl");
  ASSERT_EQ(q2.size(), 1u);
  EXPECT_NE(q2[0]["body"]["messages"][1]["content"].get<std::string>().find("Load four floats at a time."), std::string::npos);
  bc.results(2, {answer_line("openai", q2[0]["custom_id"], block(with("vector = 1", "vector = 4")))});
  auto [k3, n3] = round(3, &p3);
  EXPECT_FALSE(n3) << join(p3, "\n");
  ASSERT_EQ(k3.result.trajectory.size(), 2u) << join(p3, "\n");
  EXPECT_EQ(k3.result.best, 1);
  EXPECT_EQ(k3.spend.usage.prompt_tokens, 120);  // both answers, replayed with their tokens
}

// `ksol optimize --answer schedule` through the scripted worker: the run writes its batch and ends
// with exit status 75 and what to do; a re-run before the results are in, a results file for
// another batch and a missing --resume are each said before anything runs; scripts/batch_answer.py
// answers the batch and the printed command goes on.
TEST(LlmBatchCli, OptimizeWaitsWritesTheBatchAndGoesOn) {
  BatchCase bc;
  fs::create_directories(bc.root);
  const std::string db = bc.root + "/k.db";
  auto optimize = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--answer", "schedule", "--budget-candidates", "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    return bc.optimize_cli(args);
  };
  ProcessResult first = optimize({});
  ASSERT_EQ(first.exit_code, 75) << first.output;
  const std::string requests1 = fs::absolute(bc.dir + "/requests-1.jsonl").lexically_normal().string();
  EXPECT_NE(first.output.find("ksol optimize: batch 1: 1 request(s) written to " + requests1), std::string::npos) << first.output;
  json state = bc.state();
  const int64_t run = state["batches"][0]["run"];
  const std::string resume = state["batches"][0]["resume"];
  EXPECT_NE(first.output.find("  3. go on:\n       " + resume + "\n"), std::string::npos) << first.output;
  EXPECT_EQ(resume.substr(resume.size() - 10 - std::to_string(run).size()), " --resume " + std::to_string(run)) << resume;
  json results = json::parse(read_file(bc.root + "/report/results.json"));
  EXPECT_EQ(results["llm"]["batch"]["batch"], 1) << results["llm"].dump();
  EXPECT_EQ(results["llm"]["batch"]["requests_file"], requests1);

  // Before the results are in: said at once, nothing run.
  ProcessResult early = optimize({"--resume", std::to_string(run)});
  EXPECT_EQ(early.exit_code, 75) << early.output;
  EXPECT_NE(early.output.find("batch 1: 1 request(s) written earlier to " + requests1 + " (OpenAI Batch API"), std::string::npos) << early.output;
  EXPECT_EQ(early.output.find("[1/1] optimizing"), std::string::npos) << early.output;

  const std::string id = bc.lines("requests-1.jsonl")[0]["custom_id"];
  bc.results(1, {answer_line("openai", "batch-of-someone-else", "?")});
  ProcessResult wrong = optimize({"--resume", std::to_string(run)});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("results-1.jsonl holds the results of another batch"), std::string::npos) << wrong.output;

  // The results from scripts/batch_answer.py, the offline answerer.
  fs::remove(bc.dir + "/results-1.jsonl");
  std::string relu = read_file(source_root() + "/tasks/tensor/relu_f32/program.ksol");
  relu.replace(relu.find("vector = 1"), 10, "vector = 4");
  write_file_atomic(bc.root + "/answer.md", "Four at a time.\n" + block(relu));
  ProcessResult answered = run_process({"python3", source_root() + "/scripts/batch_answer.py", bc.dir, bc.root + "/answer.md"}, 60);
  ASSERT_EQ(answered.exit_code, 0) << answered.output;
  EXPECT_NE(answered.output.find("answered batch 1: 1 request(s)"), std::string::npos) << answered.output;
  ProcessResult no_store =
      run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "optimize", "relu_f32", "--agent", bc.agent(), "--answer", "schedule",
                   "--resume", std::to_string(run)},
                  60);
  EXPECT_EQ(no_store.exit_code, 2) << no_store.output;
  EXPECT_NE(no_store.output.find("batch mode needs the store"), std::string::npos) << no_store.output;
  ProcessResult no_resume = optimize({});
  EXPECT_EQ(no_resume.exit_code, 2) << no_resume.output;
  EXPECT_NE(no_resume.output.find("holds batches, the last written by run " + std::to_string(run) + ": go on with --resume " + std::to_string(run)),
            std::string::npos) << no_resume.output;

  // The printed command goes on: the answer is read, recorded and evaluated as a live one.
  ProcessResult second = optimize({"--resume", std::to_string(run)});
  EXPECT_TRUE(second.exit_code == 0 || second.exit_code == 75) << second.output;
  store::Store st = store::Store::open(db);
  std::vector<store::LlmRequestRow> rows = st.llm_requests_for_run(run + 1);
  ASSERT_FALSE(rows.empty()) << second.output;
  EXPECT_TRUE(rows[0].ok) << rows[0].error;
  EXPECT_EQ(rows[0].prompt_hash, id);
  EXPECT_EQ(rows[0].purpose, "coder");
  EXPECT_EQ(rows[0].model, "batch:openai:test-model");
  EXPECT_NE(rows[0].answer.find("vector = 4"), std::string::npos);
  EXPECT_EQ(rows[0].path, fs::absolute(bc.dir + "/results-1.jsonl").lexically_normal().string());
  EXPECT_NE(rows[0].outcome, "pending");
  EXPECT_NE(rows[0].outcome.find("screened out"), std::string::npos) << rows[0].outcome;  // the scripted worker times every program alike
}

// With the default answer an LLM agent runs the kernel loop from the task's seed program, one
// role a round: the planner's request is batch 1, the coder's (carrying the plan) batch 2, and the
// coder's program is evaluated in the round after, each request recorded with its purpose.
TEST(LlmBatchCli, DefaultAnswerRunsTheKernelLoopsRolesRoundByRound) {
  BatchCase bc;
  fs::create_directories(bc.root);
  const std::string db = bc.root + "/k.db";
  auto optimize = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--budget-candidates", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return bc.optimize_cli(args);
  };
  auto answer = [&](const std::string& text) {
    write_file_atomic(bc.root + "/answer.md", text);
    ProcessResult r = run_process({"python3", source_root() + "/scripts/batch_answer.py", bc.dir, bc.root + "/answer.md"}, 60);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  };
  const std::string seed = (fs::path(source_root()) / "tasks/tensor/relu_f32/program.ksol").lexically_normal().string();
  ProcessResult first = optimize({});
  ASSERT_EQ(first.exit_code, 75) << first.output;
  EXPECT_NE(first.output.find("optimizing relu_f32 from "), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("program.ksol (dsl) with " + bc.agent() + ", dsl answers"), std::string::npos) << first.output;
  json state = bc.state();
  ASSERT_EQ(state["batches"][0]["requests"].size(), 1u) << state.dump();
  EXPECT_EQ(state["batches"][0]["requests"][0]["purpose"], "planner") << state.dump();
  const int64_t run1 = state["batches"][0]["run"];
  answer("Load four floats at a time.\n");

  ProcessResult second = optimize({"--resume", std::to_string(run1)});
  ASSERT_EQ(second.exit_code, 75) << second.output;
  state = bc.state();
  ASSERT_EQ(state["batches"].size(), 2u) << state.dump();
  EXPECT_EQ(state["batches"][1]["requests"][0]["purpose"], "coder") << state.dump();
  std::vector<json> q2 = bc.lines("requests-2.jsonl");
  ASSERT_EQ(q2.size(), 1u);
  EXPECT_NE(q2[0]["body"]["messages"][1]["content"].get<std::string>().find("Load four floats at a time."), std::string::npos);
  const int64_t run2 = state["batches"][1]["run"];
  std::string relu = read_file(seed);
  relu.replace(relu.find("vector = 1"), 10, "vector = 4");
  answer("Four at a time.\n" + block(relu));

  ProcessResult third = optimize({"--resume", std::to_string(run2)});
  EXPECT_TRUE(third.exit_code == 0 || third.exit_code == 75) << third.output;
  store::Store st = store::Store::open(db);
  std::vector<store::LlmRequestRow> rows = st.llm_requests_for_run(run2 + 1);
  ASSERT_GE(rows.size(), 2u) << third.output;
  EXPECT_EQ(rows[0].purpose, "planner");
  EXPECT_EQ(rows[0].outcome, "plan");
  EXPECT_EQ(rows[1].purpose, "coder");
  EXPECT_EQ(rows[1].outcome.rfind("verified", 0), 0u) << rows[1].outcome << "\n" << third.output;
  json results = json::parse(read_file(bc.root + "/report/results.json"));
  EXPECT_EQ(results["answer"], "dsl");
  EXPECT_EQ(results["results"][0]["start"]["language"], "dsl") << results.dump();
}

TEST(LlmBatchCli, HelpSaysTheWaitingExitStatus) {
  ProcessResult r = run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--help"}, 60);
  EXPECT_NE(r.output.find("\n  75   waiting: optimize with a batch agent wrote requests for a batch"), std::string::npos) << r.output;
  ProcessResult o = run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "optimize", "--help"}, 60);
  EXPECT_NE(o.output.find("batch:openai:MODEL:DIR / batch:anthropic:MODEL:DIR"), std::string::npos) << o.output;
}
