#include "agents/llm_batch.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::agents::llm {

json batch_request_line(const std::string& format, const std::string& model, const std::string& custom_id, const Request& r) {
  if (format == "anthropic") return {{"custom_id", custom_id}, {"params", anthropic_body(model, r)}};
  return {{"custom_id", custom_id}, {"method", "POST"}, {"url", "/v1/chat/completions"}, {"body", openai_body(model, r)}};
}

namespace {

std::string text_of(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// "HTTP 400 (invalid_request_error): the message" from an OpenAI error body, "overloaded_error:
// the message" from an Anthropic error.
std::string error_text(int status, const json& e) {
  std::string type = text_of(e, "type"), code = text_of(e, "code"), msg = text_of(e, "message");
  std::string kind = !type.empty() && type != "error" ? type : code;
  std::string s = status ? "HTTP " + std::to_string(status) + (kind.empty() ? "" : " (" + kind + ")") : kind;
  return s + (s.empty() ? "" : ": ") + (msg.empty() ? e.dump() : msg);
}

}  // namespace

BatchResult read_batch_result(const json& line) {
  if (!line.is_object() || !line.contains("custom_id") || !line["custom_id"].is_string())
    throw BatchError("not a batch result: no \"custom_id\"");
  BatchResult r;
  r.custom_id = line["custom_id"].get<std::string>();
  if (line.contains("response") || (line.contains("error") && !line.contains("result"))) {
    // OpenAI: the response with its status, or a request the batch never ran.
    const json& resp = line.value("response", json());
    if (resp.is_object()) {
      int status = resp.value("status_code", 0);
      const json& body = resp.value("body", json());
      if (status == 200) {
        try {
          read_openai_answer(body, r.answer);
        } catch (const std::exception& e) {
          throw BatchError(std::string("a 200 response whose body is no chat completion (") + e.what() + ")");
        }
        r.kind = "answered";
        r.answer.ok = true;
        return r;
      }
      r.kind = "errored";
      r.error = error_text(status, body.is_object() && body.contains("error") ? body["error"] : body);
      r.retryable = retryable_status(status);
      return r;
    }
    const json& e = line.value("error", json());
    if (!e.is_object()) throw BatchError("an OpenAI batch line with neither a response nor an error");
    std::string code = text_of(e, "code");
    if (code == "batch_expired") {
      r.kind = "expired";
      r.error = "the batch's completion window closed before the provider answered it (" + text_of(e, "message") + ")";
      r.retryable = true;
    } else if (code == "batch_cancelled" || code == "batch_canceled") {
      r.kind = "canceled";
      r.error = "the batch was cancelled before the provider answered it";
    } else {
      r.kind = "errored";
      r.error = error_text(0, e);
    }
    return r;
  }
  if (line.contains("result") && line["result"].is_object()) {
    // Anthropic: succeeded, errored, canceled or expired.
    const json& res = line["result"];
    std::string type = text_of(res, "type");
    if (type == "succeeded") {
      try {
        read_anthropic_answer(res.at("message"), r.answer);
      } catch (const std::exception& e) {
        throw BatchError(std::string("a succeeded result whose message is no Messages answer (") + e.what() + ")");
      }
      r.kind = "answered";
      r.answer.ok = true;
    } else if (type == "errored") {
      // The error response as the Messages API gives it ({"type": "error", "error": {...}}), or
      // the inner error alone.
      json e = res.value("error", json::object());
      if (e.is_object() && e.contains("error") && e["error"].is_object()) e = e["error"];
      r.kind = "errored";
      r.error = error_text(0, e);
      const std::string t = text_of(e, "type");
      r.retryable = t == "api_error" || t == "overloaded_error" || t == "rate_limit_error" || t == "timeout_error";
    } else if (type == "expired") {
      r.kind = "expired";
      r.error = "the batch reached its 24 hours before the provider answered it";
      r.retryable = true;
    } else if (type == "canceled") {
      r.kind = "canceled";
      r.error = "the batch was canceled before the provider answered it";
    } else {
      throw BatchError("an Anthropic result of unknown type '" + type + "'");
    }
    return r;
  }
  if (line.contains("body") || line.contains("params"))
    throw BatchError("a request line, not a result: the results file is what the provider returns, not the requests file");
  throw BatchError("not a batch result: neither OpenAI's \"response\"/\"error\" nor Anthropic's \"result\"");
}

json BatchNotice::to_json() const {
  return {{"batch", batch},   {"requests", requests}, {"written", written}, {"requests_file", requests_file},
          {"results_file", results_file}, {"resume", resume}};
}

std::string BatchBackend::path(const std::string& name) const { return fs::absolute(fs::path(s_.dir) / name).lexically_normal().string(); }

BatchBackend::BatchBackend(Spec s) : s_(std::move(s)) {
  if (!fs::is_directory(s_.dir)) return;
  const std::string state = path("batch.json");
  const std::string here = "batch:" + s_.format + ":" + s_.model;
  if (fs::exists(state)) {
    try {
      json j = json::parse(read_file(state));
      const std::string there = "batch:" + j.at("format").get<std::string>() + ":" + j.at("model").get<std::string>();
      if (there != here)
        throw BatchError(s_.dir + " holds the batches of " + there + ", not of " + here +
                         ": a batch folder goes on with the format and model that wrote it; give another folder");
      for (const json& b : j.at("batches")) {
        Batch x;
        x.number = b.at("number").get<int>();
        if (x.number != static_cast<int>(batches_.size()) + 1) throw BatchError(state + ": batch " + std::to_string(x.number) + " out of order");
        x.run = b.value("run", int64_t{0});
        x.resume = b.value("resume", "");
        x.written_at = b.value("written_at", "");
        for (const json& q : b.at("requests")) {
          Item it{q.at("custom_id").get<std::string>(), q.value("task", ""), q.value("purpose", "")};
          x.ids.insert(it.custom_id);
          x.requests.push_back(std::move(it));
        }
        batches_.push_back(std::move(x));
      }
    } catch (const BatchError&) {
      throw;
    } catch (const std::exception& e) {
      throw BatchError(state + ": not a ksol batch state (" + e.what() + ")");
    }
  }
  // Every results file: results-N.jsonl and results-N.<anything>.jsonl, for a batch written.
  static const std::regex name(R"(results-([0-9]+)(\..*)?\.jsonl)");
  std::vector<std::pair<int, std::string>> files;
  for (const auto& e : fs::directory_iterator(s_.dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (!std::regex_match(f, m, name)) continue;
    const int n = m[1].length() > 6 ? 0 : std::stoi(m[1].str());
    if (n < 1 || n > static_cast<int>(batches_.size()))
      throw BatchError(path(f) + " answers batch " + std::to_string(n) + ", which this folder never wrote (" +
                       (batches_.empty() ? std::string("it has no batch yet")
                                         : "its last is batch " + std::to_string(batches_.size()) + ", " +
                                               requests_name(static_cast<int>(batches_.size()))) +
                       ")");
    files.push_back({n, f});
  }
  std::sort(files.begin(), files.end());
  for (const auto& [n, f] : files) {
    Batch& b = batches_[static_cast<size_t>(n - 1)];
    b.has_results = true;
    const std::string file = path(f);
    std::ifstream in(file);
    int lineno = 0;
    for (std::string line; std::getline(in, line);) {
      ++lineno;
      if (trim(line).empty()) continue;
      const std::string at = file + ":" + std::to_string(lineno);
      BatchResult r;
      try {
        r = read_batch_result(json::parse(line));
      } catch (const json::exception& e) {
        throw BatchError(at + ": not JSON (" + std::string(e.what()) + ")");
      } catch (const BatchError& e) {
        throw BatchError(at + ": " + e.what());
      }
      if (!b.ids.count(r.custom_id)) {
        // The file answers another batch: refused whole, before any of its answers is used.
        std::string other;
        for (const Batch& o : batches_)
          if (o.ids.count(r.custom_id)) other = "it is a request of batch " + std::to_string(o.number) + " (" + requests_name(o.number) + ")";
        throw BatchError(at + ": custom_id '" + r.custom_id + "' is not one of batch " + std::to_string(n) + "'s " +
                         std::to_string(b.requests.size()) + " requests (" + requests_name(n) + "); " +
                         (other.empty() ? "nor of any batch in this folder" : other) + ": " + f +
                         " holds the results of another batch; put batch " + std::to_string(n) + "'s results there");
      }
      // OpenAI's output and error files may both be read: an answer wins over an error line.
      const std::string id = r.custom_id;
      auto it = b.results.find(id);
      if (it == b.results.end() || it->second.first.kind != "answered") b.results[id] = {std::move(r), f + ":" + std::to_string(lineno)};
    }
  }
}

Answer BatchBackend::send(const Request& r, bool* retryable) {
  *retryable = false;  // a batch request is sent again only in a later batch, by send itself
  const std::string cid = request_hash(id(), r);
  asked_.insert(cid);
  std::vector<const Batch*> in;  // the batches it went into, the last one last
  for (const Batch& b : batches_)
    if (b.ids.count(cid)) in.push_back(&b);
  if (in.empty()) return defer(cid, r, "");
  const Batch& b = *in.back();
  const std::string n = std::to_string(b.number);
  Answer a;
  a.attempts = static_cast<int>(in.size());
  if (!b.has_results) {
    awaited_ = b.number;
    a.deferred = true;
    a.path = path(requests_name(b.number));
    a.error = "waits for batch " + n + "'s results in " + path(results_name(b.number));
    return a;
  }
  auto it = b.results.find(cid);
  if (it == b.results.end()) {
    a.error = "missing from batch " + n + "'s results: no line has custom_id " + cid + " (" + r.purpose +
              "); the provider did not answer it (OpenAI writes failed requests to the batch's error file: save it beside "
              "the output as results-" + n + ".errors.jsonl)";
    return a;
  }
  const auto& [res, where] = it->second;
  a.path = path(where.substr(0, where.rfind(':')));
  if (res.kind == "answered") {
    a.text = res.answer.text;
    a.finish_reason = res.answer.finish_reason;
    a.ok = true;
    // Asked again in the same run (the search's look-ahead asks a parent twice): answered as the
    // cache answers a live run, without tokens, so that a round counts each answer once.
    a.cached = !answered_.insert(cid).second;
    if (!a.cached) a.usage = res.answer.usage;
    return a;
  }
  const std::string what = res.kind + " in batch " + n + " (" + where + "): " + res.error;
  if (res.retryable && static_cast<int>(in.size()) <= s_.retries) return defer(cid, r, what + "; ");
  a.error = what + (res.retryable ? " (it went into " + std::to_string(in.size()) + " batch(es); --llm-retries allows more)" : "");
  return a;
}

Answer BatchBackend::defer(const std::string& cid, const Request& r, const std::string& why) {
  Answer a;
  if (new_ids_.insert(cid).second) new_.push_back({Item{cid, r.task, r.purpose}, batch_request_line(s_.format, s_.model, cid, r)});
  else a.cached = true;  // already in this run's batch: no second request
  const int n = static_cast<int>(batches_.size()) + 1;
  a.deferred = true;
  a.attempts = 1;
  a.path = path(requests_name(n));
  a.error = why + "goes into batch " + std::to_string(n) + " (" + a.path + ") when the run ends; its answer is read from " +
            path(results_name(n));
  return a;
}

int BatchBackend::unused() const {
  std::set<std::string> ids;
  for (const Batch& b : batches_)
    if (b.has_results)
      for (const Item& it : b.requests)
        if (!asked_.count(it.custom_id)) ids.insert(it.custom_id);
  return static_cast<int>(ids.size());
}

std::optional<BatchNotice> BatchBackend::waiting() const {
  for (auto b = batches_.rbegin(); b != batches_.rend(); ++b)
    if (!b->has_results) return notice(*b, false);
  return std::nullopt;
}

namespace {

// What to do with batch N, step by step, for the provider whose format it is.
std::string next_steps(const Spec& s, int n, size_t count, const std::string& requests, const std::string& results,
                       const std::string& resume, bool written) {
  const std::string key = "$" + (s.key_env.empty() ? std::string(s.format == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY") : s.key_env);
  const std::string rq = shell_quote(requests), rs = shell_quote(results);
  std::string o = "batch " + std::to_string(n) + ": " + std::to_string(count) + " request(s) " +
                  (written ? "written to " : "written earlier to ") + requests + " (" +
                  (s.format == "openai" ? "OpenAI Batch API, /v1/chat/completions" : "Anthropic Message Batches") + ", model " + s.model +
                  "); " + (written ? "the run goes on once their answers are in." : "its results are not in yet.") + "\nNext:\n";
  if (s.format == "openai") {
    const std::string auth = "-H \"Authorization: Bearer " + key + "\"";
    o += "  1. upload the file and create the batch:\n"
         "       curl " + s.base_url + "/files " + auth + " -F purpose=batch -F file=@" + rq + "\n"
         "       curl " + s.base_url + "/batches " + auth + " -H \"Content-Type: application/json\" -d '{\"input_file_id\": \"FILE_ID\", "
         "\"endpoint\": \"/v1/chat/completions\", \"completion_window\": \"24h\"}'\n"
         "  2. once the batch is completed, save its output file as " + results +
         " (and its error file, if it has one, beside it as results-" + std::to_string(n) + ".errors.jsonl):\n"
         "       curl " + s.base_url + "/files/OUTPUT_FILE_ID/content " + auth + " -o " + rs + "\n";
  } else {
    const std::string auth = "-H \"x-api-key: " + key + "\" -H \"anthropic-version: 2023-06-01\"";
    o += "  1. create the batch (the API takes the requests as one JSON array):\n"
         "       { printf '{\"requests\": ['; paste -sd, " + rq + "; printf ']}'; } | curl " + s.base_url + "/v1/messages/batches " + auth +
         " -H \"content-type: application/json\" --data-binary @-\n"
         "  2. once its processing_status is \"ended\", save its results as " + results + ":\n"
         "       curl " + s.base_url + "/v1/messages/batches/BATCH_ID/results " + auth + " -o " + rs + "\n";
  }
  o += "  3. go on:\n       " + resume + "\n";
  o += "Any other answerer may write " + results + " itself, one line per request in the provider's result format "
       "(src/agents/README.md, batch mode; scripts/batch_answer.py answers from a file or a command).";
  return o;
}

}  // namespace

BatchNotice BatchBackend::notice(const Batch& b, bool written) const {
  BatchNotice n;
  n.batch = b.number;
  n.requests = static_cast<int>(b.requests.size());
  n.written = written;
  n.requests_file = path(requests_name(b.number));
  n.results_file = path(results_name(b.number));
  n.resume = b.resume;
  n.next = next_steps(s_, b.number, b.requests.size(), n.requests_file, n.results_file, b.resume, written);
  return n;
}

void BatchBackend::save_state() const {
  json j = {{"format", s_.format}, {"model", s_.model}, {"batches", json::array()}};
  for (const Batch& b : batches_) {
    json q = json::array();
    for (const Item& it : b.requests) q.push_back({{"custom_id", it.custom_id}, {"task", it.task}, {"purpose", it.purpose}});
    j["batches"].push_back({{"number", b.number},
                            {"requests_file", requests_name(b.number)},
                            {"results_file", results_name(b.number)},
                            {"run", b.run},
                            {"written_at", b.written_at},
                            {"resume", b.resume},
                            {"requests", q}});
  }
  write_file_atomic(path("batch.json"), j.dump(1) + "\n");
}

std::optional<BatchNotice> BatchBackend::close(int64_t run, const std::string& resume) {
  if (new_.empty()) {
    if (!awaited_) return std::nullopt;
    return notice(batches_[static_cast<size_t>(awaited_ - 1)], false);
  }
  fs::create_directories(s_.dir);
  Batch b;
  b.number = static_cast<int>(batches_.size()) + 1;
  b.run = run;
  b.resume = resume;
  b.written_at = now_iso8601();
  std::string lines;
  for (const auto& [it, line] : new_) {
    lines += line.dump() + "\n";
    b.ids.insert(it.custom_id);
    b.requests.push_back(it);
  }
  // The requests first, then the state that names them: a run stopped in between leaves a file
  // no state points to, which the next run overwrites.
  write_file_atomic(path(requests_name(b.number)), lines);
  batches_.push_back(std::move(b));
  save_state();
  new_.clear();
  new_ids_.clear();
  BatchNotice n = notice(batches_.back(), true);
  write_file_atomic(path("next.txt"), n.next + "\n");
  return n;
}

BatchBackend* batch_backend(Client& c) { return dynamic_cast<BatchBackend*>(&c.backend()); }

}  // namespace ksol::agents::llm
