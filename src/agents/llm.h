// LLM backends for the agents: OpenAI-compatible chat completions (hosted APIs, vLLM, llama.cpp
// server, Ollama), Anthropic messages, an exchange folder (requests and answers as files, for
// a person or an outside agent) and batch mode (agents/llm_batch.h: requests written for a
// provider's batch API, answers read when they arrive). The Client around a backend adds what a run needs: answers
// cached by request hash, retries with backoff on rate limits and server errors, a minimum
// interval between requests, token/money/request/time budgets that stop cleanly, and redaction:
// the API key never appears in an answer's text or error, a log line or the cache (whose files
// are the owner's alone: 0600, in 0700 folders).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksol::agents::llm {

struct Message {
  std::string role;  // user | assistant
  std::string content;
};

struct Request {
  std::string system;
  std::vector<Message> messages;
  int max_tokens = 2048;
  double temperature = 0.2;
  std::string purpose;  // for logs and the store: "coder", "repair", ...
  std::string task;     // for the store: the task the request serves (not part of the request hash)
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, requests = 0;
  double dollars = 0;
};

struct Answer {
  bool ok = false;
  std::string text;
  std::string error;        // why not ok (redacted)
  std::string finish_reason;  // stop | length | ... (length: the answer was truncated)
  Usage usage;              // of this request (zero when cached)
  bool cached = false;
  int attempts = 0;
  int http_status = 0;
  double retry_after_s = -1;  // the server's Retry-After, when it sent one
  double seconds = 0;         // wall time of the request, retries included
  std::string path;           // where the answer's text is kept: the cache file, the exchange answer, the batch results
  int64_t record_id = 0;      // the store's llm_requests row (0: not recorded)
  // Batch mode: the request was written for a batch and its answer comes later (`error` says
  // where); nothing was spent on it yet. The agents stop asking until the run is resumed.
  bool deferred = false;
};

// One request as the store keeps it (src/store's llm_requests): what was asked, by what, what
// came back and what it cost. `dollars` is negative when no prices were given.
struct RequestRecord {
  std::string task, purpose, model;
  std::string prompt_hash, prompt;  // the request hash (the cache key) and the request as JSON
  std::string answer_hash, answer;
  std::string path;
  std::string finish_reason, error;
  bool ok = false, cached = false;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int attempts = 0;
  double seconds = 0, dollars = -1;
};
// Receives every request the Client made or answered from its cache; returns the row's id.
using Recorder = std::function<int64_t(const RequestRecord&)>;

// What `--agent` names and the options that go with it.
struct Spec {
  std::string kind;      // openai | anthropic | exchange | batch
  std::string model;     // openai/anthropic/batch
  std::string dir;       // exchange/batch
  std::string format;    // batch: the wire format, openai | anthropic
  std::string base_url;  // default per kind
  std::string key_env;   // environment variable holding the API key (default per kind; "" = none)
  double timeout_s = 120;  // exchange: how long to wait for the answer file (kExchangeWaitSeconds)
  int retries = 3;        // batch: how many more batches a request that expired or met a server error goes into
  double min_interval_s = 0;
  double backoff_s = 1;   // first retry's wait; doubles each time (a Retry-After header wins)
  double price_in = 0, price_out = 0;  // dollars per million tokens, for the money budget
};
// The exchange folder's default wait for one answer file: long enough for a person to read the
// request and paste an answer, short enough that a forgotten run does not sit for an hour.
constexpr double kExchangeWaitSeconds = 600;
// Batch mode's default retries: a request that expired or met a server error goes into one more
// batch. A batch takes up to a day; more rounds of that are the user's call (--llm-retries).
constexpr int kBatchRetries = 1;
// "openai:MODEL", "anthropic:MODEL", "exchange:DIR" or "batch:openai|anthropic:MODEL:DIR" (MODEL
// may hold colons, DIR may not); throws std::invalid_argument otherwise.
Spec parse_spec(const std::string& agent);
bool is_llm_agent(const std::string& agent);

struct HttpResponse {
  int status = 0;          // 0: no response (error says why)
  std::string body, error;
  double retry_after_s = -1;
};
using HttpPost = std::function<HttpResponse(const std::string& url, const std::vector<std::string>& headers,
                                            const std::string& body, double timeout_s)>;
HttpResponse curl_post(const std::string& url, const std::vector<std::string>& headers, const std::string& body, double timeout_s);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string id() const = 0;  // kind and model, part of the cache key
  // One attempt, no retries. The Client retries when `retryable` is set.
  virtual Answer send(const Request& r, bool* retryable) = 0;
  virtual std::string secret() const { return ""; }  // what redaction must remove
  // Where the backend says what it is doing while it waits (the exchange folder's notice).
  virtual void set_log(std::function<void(const std::string&)> log) { (void)log; }
  // Whether the Client may answer from its cache. A batch keeps its answers in its own folder and
  // replays them, with their tokens, in every round, so that budgets span the rounds.
  virtual bool cacheable() const { return true; }
};
std::unique_ptr<Backend> make_backend(const Spec& s, HttpPost post = curl_post);

struct Budget {
  int64_t tokens = 0;  // 0: unlimited
  double dollars = 0;
  int64_t requests = 0;
  double seconds = 0;  // wall time spent waiting for answers
};

class Client {
 public:
  // `cache_dir` empty: no cache. `log` receives one line per request (redacted).
  Client(std::unique_ptr<Backend> b, Spec spec, Budget budget, std::string cache_dir,
         std::function<void(const std::string&)> log = nullptr);
  // Thread-safe: requests from several tasks' searches (one per GPU) are made one at a time, so
  // budgets and the rate limit hold across them.
  Answer ask(const Request& r);
  // True once a budget is spent; `why` names it.
  bool exhausted(std::string* why = nullptr) const;
  const Usage& total() const { return total_; }
  double seconds() const { return seconds_; }
  std::string id() const { return backend_->id(); }
  std::string key(const Request& r) const;  // the request hash (cache file name)
  // Every request from now on goes to `r` as well (the store's llm_requests rows).
  void set_recorder(Recorder r);
  const Spec& spec() const { return spec_; }
  Backend& backend() { return *backend_; }

 private:
  std::string redact(std::string s) const;
  void record(const Request& r, const std::string& key, Answer& a);
  std::unique_ptr<Backend> backend_;
  Spec spec_;
  Budget budget_;
  std::string cache_dir_;
  std::function<void(const std::string&)> log_;
  Recorder recorder_;
  Usage total_;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point last_{};
  mutable std::recursive_mutex mu_;
};

// Whether a live request that met this HTTP status is sent again (0: no response); a batch
// request that did goes into the next batch.
bool retryable_status(int http_status);

// The request hash: the cache key, and a batch request's custom_id (64 hex digits).
std::string request_hash(const std::string& backend_id, const Request& r);

// The wire formats, shared by the live backends and batch mode: the request body of OpenAI's chat
// completions and Anthropic's messages, and what a 200 answer's body says (text, finish reason
// "stop" or "length", tokens). The readers throw on a body they cannot read.
nlohmann::json openai_body(const std::string& model, const Request& r);
nlohmann::json anthropic_body(const std::string& model, const Request& r);
void read_openai_answer(const nlohmann::json& body, Answer& a);
void read_anthropic_answer(const nlohmann::json& body, Answer& a);

// `s` with `secret` and any credential a header or field names (Authorization, Proxy-Authorization,
// x-api-key, api_key, a bearer token) replaced by "[redacted]".
std::string redact_credentials(std::string s, const std::string& secret);

// The first fenced code block of `text` whose language is one of `langs` (or unlabelled when
// `langs` contains ""); empty when there is none. A block cut off by the end of the text is not
// returned (a truncated answer).
std::string extract_code_block(const std::string& text, const std::vector<std::string>& langs);
// The languages of the complete fenced blocks in `text`, in order ("" for an unlabelled one).
std::vector<std::string> code_block_languages(const std::string& text);

}  // namespace ksol::agents::llm
