#include "agents/llm.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <thread>

#include "agents/llm_batch.h"
#include "core/hash.h"
#include "core/util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::agents::llm {

bool is_llm_agent(const std::string& agent) {
  for (const char* kind : {"openai:", "anthropic:", "exchange:", "batch:"})
    if (agent.rfind(kind, 0) == 0) return true;
  return false;
}

Spec parse_spec(const std::string& agent) {
  Spec s;
  auto colon = agent.find(':');
  if (colon == std::string::npos || colon + 1 >= agent.size())
    throw std::invalid_argument("agent '" + agent +
                                "': expected expert, random, openai:MODEL, anthropic:MODEL, exchange:DIR or batch:openai|anthropic:MODEL:DIR");
  s.kind = agent.substr(0, colon);
  std::string rest = agent.substr(colon + 1);
  if (s.kind == "openai") {
    s.model = rest;
    s.base_url = "https://api.openai.com/v1";
    s.key_env = "OPENAI_API_KEY";
  } else if (s.kind == "anthropic") {
    s.model = rest;
    s.base_url = "https://api.anthropic.com";
    s.key_env = "ANTHROPIC_API_KEY";
  } else if (s.kind == "exchange") {
    s.dir = rest;
    s.timeout_s = kExchangeWaitSeconds;  // a person answers
    s.retries = 0;
  } else if (s.kind == "batch") {
    // batch:FORMAT:MODEL:DIR. A model name may hold colons (OpenAI's fine-tuned "ft:..." ones), so
    // the folder is what follows the last colon.
    auto second = rest.find(':'), last = rest.rfind(':');
    s.format = rest.substr(0, second);
    if (second == std::string::npos || second == last || last + 1 >= rest.size() || last == second + 1)
      throw std::invalid_argument("agent '" + agent + "': expected batch:openai:MODEL:DIR or batch:anthropic:MODEL:DIR");
    if (s.format != "openai" && s.format != "anthropic")
      throw std::invalid_argument("agent '" + agent + "': unknown batch format '" + s.format + "' (openai, anthropic)");
    s.model = rest.substr(second + 1, last - second - 1);
    s.dir = rest.substr(last + 1);
    s.base_url = s.format == "openai" ? "https://api.openai.com/v1" : "https://api.anthropic.com";
    s.key_env = s.format == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    s.retries = kBatchRetries;
  } else {
    throw std::invalid_argument("agent '" + agent + "': unknown backend '" + s.kind + "' (openai, anthropic, exchange, batch)");
  }
  return s;
}

namespace {

size_t on_body(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}
size_t on_header(char* p, size_t size, size_t n, void* out) {
  std::string h(p, size * n);
  std::string lower = h;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.rfind("retry-after:", 0) == 0) {
    try {
      *static_cast<double*>(out) = std::stod(trim(h.substr(12)));
    } catch (...) {  // an HTTP date instead of seconds: use our own backoff
    }
  }
  return size * n;
}

std::string snippet(const std::string& s, size_t n = 300) { return s.size() > n ? s.substr(0, n) + "..." : s; }

// The API key from the environment; empty when the variable is unset. A hosted endpoint
// without a key is an error, a local server (llama.cpp, vLLM, Ollama) usually needs none.
std::string key_from_env(const Spec& s, bool hosted) {
  if (s.key_env.empty()) return "";
  const char* v = std::getenv(s.key_env.c_str());
  if ((!v || !*v) && hosted) throw std::runtime_error("the environment variable " + s.key_env + " (the API key) is not set");
  return v ? v : "";
}

// One request to a JSON chat API: the status decides success and whether to retry; `parse`
// reads a 200 body into the answer (a body it cannot read is retried: proxies cut them off).
template <class Parse>
Answer post_json(const HttpPost& post, const std::string& url, const std::vector<std::string>& headers, const json& body,
                 double timeout_s, const char* what, bool* retryable, Parse parse) {
  HttpResponse h = post(url, headers, body.dump(), timeout_s);
  Answer a;
  a.http_status = h.status;
  a.retry_after_s = h.retry_after_s;
  *retryable = retryable_status(h.status);
  if (h.status != 200) {
    a.error = h.status ? "HTTP " + std::to_string(h.status) + ": " + snippet(h.body) : h.error;
    return a;
  }
  try {
    parse(json::parse(h.body), a);
    a.ok = true;
  } catch (const std::exception& e) {
    a.error = std::string("malformed ") + what + " response (" + e.what() + "): " + snippet(h.body);
    *retryable = true;
  }
  return a;
}

}  // namespace

bool retryable_status(int st) { return st == 0 || st == 408 || st == 409 || st == 429 || st == 500 || st == 502 || st == 503 || st == 504 || st == 529; }

std::string request_hash(const std::string& backend_id, const Request& r) {
  json j = {{"backend", backend_id}, {"system", r.system}, {"max_tokens", r.max_tokens}, {"temperature", r.temperature},
            {"messages", json::array()}};
  for (auto& m : r.messages) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
  Sha256 h;
  h.update(j.dump());
  return h.hex();
}

json openai_body(const std::string& model, const Request& r) {
  json body = {{"model", model}, {"max_tokens", r.max_tokens}, {"temperature", r.temperature}, {"messages", json::array()}};
  if (!r.system.empty()) body["messages"].push_back({{"role", "system"}, {"content", r.system}});
  for (auto& m : r.messages) body["messages"].push_back({{"role", m.role}, {"content", m.content}});
  return body;
}

json anthropic_body(const std::string& model, const Request& r) {
  json body = {{"model", model}, {"max_tokens", r.max_tokens}, {"temperature", r.temperature}, {"messages", json::array()}};
  if (!r.system.empty()) body["system"] = r.system;
  for (auto& m : r.messages) body["messages"].push_back({{"role", m.role}, {"content", m.content}});
  return body;
}

void read_openai_answer(const json& j, Answer& a) {
  const json& c = j.at("choices").at(0);
  a.text = c.at("message").at("content").is_string() ? c["message"]["content"].get<std::string>() : "";
  a.finish_reason = c.contains("finish_reason") && c["finish_reason"].is_string() ? c["finish_reason"].get<std::string>() : "stop";
  if (j.contains("usage") && j["usage"].is_object()) {
    a.usage.prompt_tokens = j["usage"].value("prompt_tokens", 0);
    a.usage.completion_tokens = j["usage"].value("completion_tokens", 0);
  }
}

void read_anthropic_answer(const json& j, Answer& a) {
  for (auto& c : j.at("content"))
    if (c.value("type", "") == "text") a.text += c.value("text", "");
  a.finish_reason = j.value("stop_reason", "") == "max_tokens" ? "length" : "stop";
  if (j.contains("usage")) {
    a.usage.prompt_tokens = j["usage"].value("input_tokens", 0);
    a.usage.completion_tokens = j["usage"].value("output_tokens", 0);
  }
}

namespace {

class OpenAI : public Backend {
 public:
  OpenAI(Spec s, HttpPost post) : s_(std::move(s)), post_(std::move(post)) {
    key_ = key_from_env(s_, s_.base_url.find("api.openai.com") != std::string::npos);
  }
  std::string id() const override { return "openai:" + s_.model + "@" + s_.base_url; }
  std::string secret() const override { return key_; }
  Answer send(const Request& r, bool* retryable) override {
    std::vector<std::string> headers = {"Content-Type: application/json"};
    if (!key_.empty()) headers.push_back("Authorization: Bearer " + key_);
    return post_json(post_, s_.base_url + "/chat/completions", headers, openai_body(s_.model, r), s_.timeout_s, "chat-completions",
                     retryable, read_openai_answer);
  }

 private:
  Spec s_;
  HttpPost post_;
  std::string key_;
};

class Anthropic : public Backend {
 public:
  Anthropic(Spec s, HttpPost post) : s_(std::move(s)), post_(std::move(post)) {
    key_ = key_from_env(s_, s_.base_url.find("api.anthropic.com") != std::string::npos);
  }
  std::string id() const override { return "anthropic:" + s_.model + "@" + s_.base_url; }
  std::string secret() const override { return key_; }
  Answer send(const Request& r, bool* retryable) override {
    std::vector<std::string> headers = {"Content-Type: application/json", "anthropic-version: 2023-06-01"};
    if (!key_.empty()) headers.push_back("x-api-key: " + key_);
    return post_json(post_, s_.base_url + "/v1/messages", headers, anthropic_body(s_.model, r), s_.timeout_s, "messages", retryable,
                     read_anthropic_answer);
  }

 private:
  Spec s_;
  HttpPost post_;
  std::string key_;
};

// Requests become DIR/requests/<hash>.md (readable) and .json; the answer is whatever appears
// in DIR/answers/<hash>.md (written atomically: write elsewhere, then rename).
class Exchange : public Backend {
 public:
  explicit Exchange(Spec s) : s_(std::move(s)) {
    fs::create_directories(s_.dir + "/requests");
    fs::create_directories(s_.dir + "/answers");
  }
  std::string id() const override { return "exchange:" + fs::absolute(s_.dir).lexically_normal().string(); }
  void set_log(std::function<void(const std::string&)> log) override { log_ = std::move(log); }
  Answer send(const Request& r, bool* retryable) override {
    *retryable = false;
    std::string key = request_hash(id(), r);
    std::string md = "# ksol request " + key + " (" + r.purpose + ")\n\nWrite the answer to answers/" + key +
                     ".md in this folder (write it elsewhere, then move it there).\n\n## system\n\n" + r.system + "\n";
    json j = {{"system", r.system}, {"purpose", r.purpose}, {"max_tokens", r.max_tokens}, {"messages", json::array()}};
    for (auto& m : r.messages) {
      md += "\n## " + m.role + "\n\n" + m.content + "\n";
      j["messages"].push_back({{"role", m.role}, {"content", m.content}});
    }
    write_file_atomic(s_.dir + "/requests/" + key + ".md", md);
    write_file_atomic(s_.dir + "/requests/" + key + ".json", j.dump(1));
    std::string ans = s_.dir + "/answers/" + key + ".md";
    auto t0 = std::chrono::steady_clock::now();
    Answer a;
    a.path = ans;
    // Said before the wait, so that whoever runs ksol knows that it waits, on what, and for how long.
    if (log_ && !fs::exists(ans))
      log_("llm exchange " + r.purpose + ": waiting up to " + std::to_string(static_cast<int>(s_.timeout_s)) + " s for " +
           fs::absolute(ans).lexically_normal().string() + " (the request is " +
           fs::absolute(s_.dir + "/requests/" + key + ".md").lexically_normal().string() + "; --llm-timeout changes the wait)");
    while (!fs::exists(ans)) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > s_.timeout_s) {
        a.error = "no answer in " + ans + " after " + std::to_string(static_cast<int>(s_.timeout_s)) + " s (--llm-timeout)";
        return a;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    a.text = read_file(ans);
    a.finish_reason = "stop";
    a.ok = true;
    return a;
  }

 private:
  Spec s_;
  std::function<void(const std::string&)> log_;
};

}  // namespace

HttpResponse curl_post(const std::string& url, const std::vector<std::string>& headers, const std::string& body, double timeout_s) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  HttpResponse r;
  CURL* c = curl_easy_init();
  if (!c) {
    r.error = "curl_easy_init failed";
    return r;
  }
  curl_slist* hl = nullptr;
  for (auto& h : headers) hl = curl_slist_append(hl, h.c_str());
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.retry_after_s);
  CURLcode e = curl_easy_perform(c);
  if (e != CURLE_OK) {
    r.error = std::string("request to ") + url + " failed: " + curl_easy_strerror(e);
  } else {
    long st = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    r.status = static_cast<int>(st);
  }
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  return r;
}

std::unique_ptr<Backend> make_backend(const Spec& s, HttpPost post) {
  if (s.kind == "openai") return std::make_unique<OpenAI>(s, std::move(post));
  if (s.kind == "anthropic") return std::make_unique<Anthropic>(s, std::move(post));
  if (s.kind == "exchange") return std::make_unique<Exchange>(s);
  if (s.kind == "batch") return std::make_unique<BatchBackend>(s);
  throw std::invalid_argument("unknown LLM backend '" + s.kind + "'");
}

Client::Client(std::unique_ptr<Backend> b, Spec spec, Budget budget, std::string cache_dir, std::function<void(const std::string&)> log)
    : backend_(std::move(b)), spec_(std::move(spec)), budget_(budget), cache_dir_(std::move(cache_dir)), log_(std::move(log)) {
  if (log_) backend_->set_log(log_);
}

void Client::set_recorder(Recorder r) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  recorder_ = std::move(r);
}

namespace {
std::string text_hash(const std::string& s) {
  Sha256 h;
  h.update(s);
  return h.hex();
}
std::string request_json(const Request& r) {
  json j = {{"system", r.system}, {"max_tokens", r.max_tokens}, {"temperature", r.temperature}, {"messages", json::array()}};
  for (auto& m : r.messages) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
  return j.dump();
}
}  // namespace

std::string Client::key(const Request& r) const { return request_hash(backend_->id(), r); }

std::string redact_credentials(std::string s, const std::string& secret) {
  if (secret.size() >= 4)
    for (size_t at; (at = s.find(secret)) != std::string::npos;) s.replace(at, secret.size(), "[redacted]");
  // Credentials that are not ours (a proxy's own token, another user's key in an echoed request)
  // are recognised by what names them: an Authorization or API-key header or field, or a bearer
  // token. Eight characters or more, so that prose ("a bearer token") is left alone.
  static const std::regex named(
      R"(((?:authorization|proxy-authorization|x-api-key|api[-_]?key)["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token)\s+)?|bearer\s+)([A-Za-z0-9._~+/=-]{8,}))",
      std::regex::ECMAScript | std::regex::icase);
  return std::regex_replace(s, named, "$1[redacted]");
}

std::string Client::redact(std::string s) const { return redact_credentials(std::move(s), backend_->secret()); }

bool Client::exhausted(std::string* why) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto say = [&](const std::string& w) {
    if (why) *why = w;
    return true;
  };
  int64_t tokens = total_.prompt_tokens + total_.completion_tokens;
  if (budget_.tokens > 0 && tokens >= budget_.tokens) return say("token budget spent (" + std::to_string(tokens) + " of " + std::to_string(budget_.tokens) + ")");
  if (budget_.dollars > 0 && total_.dollars >= budget_.dollars) return say("money budget spent ($" + std::to_string(total_.dollars) + ")");
  if (budget_.requests > 0 && total_.requests >= budget_.requests) return say("request budget spent (" + std::to_string(total_.requests) + ")");
  if (budget_.seconds > 0 && seconds_ >= budget_.seconds) return say("LLM time budget spent (" + std::to_string(static_cast<int>(seconds_)) + " s)");
  return false;
}

Answer Client::ask(const Request& r) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  Answer a;
  std::string why;
  if (exhausted(&why)) {
    a.error = "budget: " + why;
    return a;
  }
  std::string k = key(r);
  std::string cache = cache_dir_.empty() || !backend_->cacheable() ? "" : cache_dir_ + "/" + k.substr(0, 2) + "/" + k + ".json";
  if (!cache.empty() && fs::exists(cache)) {
    try {
      json j = json::parse(read_file(cache));
      a.ok = true;
      a.cached = true;
      a.text = j.at("text").get<std::string>();
      a.finish_reason = j.value("finish_reason", "stop");
      a.path = cache;
      if (log_) log_("llm " + redact(backend_->id()) + " " + r.purpose + ": cached answer " + k.substr(0, 12));
      record(r, k, a);
      return a;
    } catch (const std::exception&) {  // a damaged cache entry is ignored and replaced
    }
  }
  if (spec_.min_interval_s > 0 && last_.time_since_epoch().count() != 0) {
    auto next = last_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(spec_.min_interval_s));
    std::this_thread::sleep_until(next);
  }
  double wait = spec_.backoff_s;
  const auto t_start = std::chrono::steady_clock::now();
  Usage used;
  for (int attempt = 0;; ++attempt) {
    bool retryable = false;
    auto ta = std::chrono::steady_clock::now();
    last_ = ta;
    try {
      a = backend_->send(r, &retryable);
    } catch (const std::exception& e) {
      a = Answer{};
      a.error = e.what();
      retryable = false;
    }
    a.attempts = std::max(a.attempts, attempt + 1);  // a batch answer counts the batches it took
    // A deferred request counts against the request budget: it is written for a batch and will
    // be paid for when answered. A batch answer to a request asked before in the run is `cached`.
    if (!a.cached) ++total_.requests;
    total_.prompt_tokens += a.usage.prompt_tokens;
    total_.completion_tokens += a.usage.completion_tokens;
    double cost = (a.usage.prompt_tokens * spec_.price_in + a.usage.completion_tokens * spec_.price_out) / 1e6;
    a.usage.dollars = cost;
    total_.dollars += cost;
    used.prompt_tokens += a.usage.prompt_tokens;
    used.completion_tokens += a.usage.completion_tokens;
    used.dollars += cost;
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - ta).count();
    if (a.ok || !retryable || attempt >= spec_.retries || exhausted()) break;
    // The server's Retry-After wins over our own backoff when it asks for longer.
    double pause = std::min(std::max(wait, a.retry_after_s), 120.0);
    if (log_) log_("llm " + redact(backend_->id()) + " " + r.purpose + ": attempt " + std::to_string(attempt + 1) + " failed (" + redact(a.error) +
                   "); retrying in " + std::to_string(pause).substr(0, 4) + " s");
    std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    seconds_ += pause;
    wait = std::min(wait * 2, 60.0);
  }
  // What the server sent back may echo the key (some proxies and error pages repeat the request's
  // headers); it is removed before the answer goes anywhere: the agent, the store, the cache.
  a.error = redact(a.error);
  a.text = redact(a.text);
  // The answer's usage is that of every attempt it took (a retried request is paid for each time).
  used.requests = a.attempts;
  a.usage = used;
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (a.ok && !cache.empty()) {
    a.path = cache;
    // Owner-only, like ssh's and the cloud CLIs' credential files: a cached answer is the text of
    // a paid request and may still hold what redaction cannot recognise.
    create_private_dirs(cache_dir_);
    create_private_dirs(fs::path(cache).parent_path().string());
    write_file_private(cache, json{{"backend", redact(backend_->id())}, {"text", a.text}, {"finish_reason", a.finish_reason}}.dump(1));
  }
  // A deferred request is said by the agent that asked it (where it goes and when it is read).
  if (log_ && !a.deferred)
    log_("llm " + redact(backend_->id()) + " " + r.purpose + ": " + (a.ok ? "answer" : "error: " + a.error) + ", " +
         std::to_string(a.usage.prompt_tokens) + "+" + std::to_string(a.usage.completion_tokens) + " tokens, attempts " +
         std::to_string(a.attempts) + (a.finish_reason == "length" ? ", truncated" : ""));
  record(r, k, a);
  return a;
}

void Client::record(const Request& r, const std::string& key, Answer& a) {
  if (!recorder_) return;
  RequestRecord rec;
  rec.task = r.task;
  rec.purpose = r.purpose;
  rec.model = redact(backend_->id());
  rec.prompt_hash = key;
  rec.prompt = redact(request_json(r));
  rec.answer = a.text;
  rec.answer_hash = a.text.empty() ? "" : text_hash(a.text);
  rec.path = a.path;
  rec.finish_reason = a.finish_reason;
  rec.error = a.error;
  rec.ok = a.ok;
  rec.cached = a.cached;
  rec.prompt_tokens = a.usage.prompt_tokens;
  rec.completion_tokens = a.usage.completion_tokens;
  rec.attempts = a.attempts;
  rec.seconds = a.seconds;
  if (spec_.price_in > 0 || spec_.price_out > 0) rec.dollars = a.usage.dollars;
  try {
    a.record_id = recorder_(rec);
  } catch (const std::exception& e) {  // the store's trouble must not stop the search
    if (log_) log_(std::string("llm: the request was not recorded: ") + e.what());
  }
}

std::vector<std::string> code_block_languages(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = text.find("```", pos)) != std::string::npos) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) break;
    size_t end = text.find("```", eol + 1);
    if (end == std::string::npos) break;
    out.push_back(trim(text.substr(pos + 3, eol - pos - 3)));
    pos = end + 3;
  }
  return out;
}

std::string extract_code_block(const std::string& text, const std::vector<std::string>& langs) {
  size_t pos = 0;
  while ((pos = text.find("```", pos)) != std::string::npos) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) return "";
    std::string lang = trim(text.substr(pos + 3, eol - pos - 3));
    size_t end = text.find("```", eol + 1);
    if (end == std::string::npos) return "";  // cut off: truncated
    if (std::find(langs.begin(), langs.end(), lang) != langs.end()) return text.substr(eol + 1, end - eol - 1);
    pos = end + 3;
  }
  return "";
}

}  // namespace ksol::agents::llm
