// Batch mode (`--agent batch:openai:MODEL:DIR`, `batch:anthropic:MODEL:DIR`): the requests a run
// needs are written as one JSONL file in the wire format of the provider's batch API, OpenAI's
// Batch API (lines for /v1/chat/completions) or Anthropic's Message Batches, and the run ends
// waiting for them. Once the provider's results file is in the folder, the same command with
// `--resume RUN` replays the search (the evaluations from the store, the answers from the results
// files) and goes on until it needs answers it does not have: they become the next batch. The
// replay asks the very requests the last round wrote, matched by custom_id (the request hash).
//
// The folder DIR:
//   batch.json          the state: format and model, and for each batch its number, its
//                       requests (custom_id, task, purpose), the run that wrote it and the
//                       command that goes on from it
//   requests-N.jsonl    batch N's requests, one a line
//   results-N.jsonl     batch N's results, put there by the user or by any offline answerer;
//                       every results-N.*.jsonl is read too (OpenAI's error file as
//                       results-N.errors.jsonl)
//   next.txt            what to do next, as the run printed it
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/llm.h"

namespace ksol::agents::llm {

// A batch folder or results file that cannot be used: a folder written for another format or
// model, a results file that answers another batch, a line that is no result. The message names
// the file and the line.
class BatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One request line in the provider's wire format ("openai" or "anthropic"):
//   openai:    {"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": <chat completions request>}
//   anthropic: {"custom_id", "params": <messages request>}
nlohmann::json batch_request_line(const std::string& format, const std::string& model, const std::string& custom_id, const Request& r);

// One line of a results file, in either provider's form:
//   openai:    {"custom_id", "response": {"status_code", "body"}, "error": null}, or
//              {"custom_id", "response": null, "error": {"code", "message"}} (batch_expired, ...)
//   anthropic: {"custom_id", "result": {"type": "succeeded", "message"}} or type errored (with
//              its error), canceled or expired
struct BatchResult {
  std::string custom_id;
  std::string kind;        // answered | errored | expired | canceled
  Answer answer;           // answered: text, finish reason ("length": truncated), tokens
  std::string error;       // otherwise: what the provider said
  bool retryable = false;  // expired, or a status a live request would have been sent again for
};
// Throws BatchError (the caller adds the file and line) for a line that is neither provider's
// result, a request line among them.
BatchResult read_batch_result(const nlohmann::json& line);

// What a run leaves waiting: the batch it wrote, or an earlier run's whose results are not in.
struct BatchNotice {
  int batch = 0;
  int requests = 0;
  bool written = false;  // by this run
  std::string requests_file, results_file;  // absolute paths
  std::string resume;    // the command that goes on once the results are in
  std::string next;      // what to do next, as printed (and kept in DIR/next.txt)
  nlohmann::json to_json() const;
};

class BatchBackend : public Backend {
 public:
  // Reads the folder's state and every results file in it. Throws BatchError when the folder was
  // written for another format or model, or a results file is not its batch's.
  explicit BatchBackend(Spec s);
  std::string id() const override { return "batch:" + s_.format + ":" + s_.model; }
  bool cacheable() const override { return false; }
  // The answer from the results of the last batch the request went into; otherwise the request
  // is deferred (Answer::deferred) to the batch this run writes. An errored, expired or canceled
  // line, or a request its batch's results lack, is an error answer saying which, except that
  // one that expired or met a server error goes into the next batch while Spec::retries allows.
  // A request asked again in the same run is `cached`: no tokens, no request.
  Answer send(const Request& r, bool* retryable) override;
  // The last batch written whose results are not in the folder yet.
  std::optional<BatchNotice> waiting() const;
  // The run that wrote the last batch (0: none yet).
  int64_t last_run() const { return batches_.empty() ? 0 : batches_.back().run; }
  // Requests of batches with results that this run did not ask again. A resumed round replays the
  // whole search, so there are none unless it stopped sooner (a budget) or took another path (a
  // screen, timed again, ranked its candidates otherwise): their answers are left unused.
  int unused() const;
  // At the end of a run: the requests it deferred become the next batch (its file, the state,
  // next.txt) and the notice says what to do; `resume` is the command that goes on. Without new
  // requests, the notice of the batch still awaited, if one was; else nothing.
  std::optional<BatchNotice> close(int64_t run, const std::string& resume);

 private:
  struct Item {
    std::string custom_id, task, purpose;
  };
  struct Batch {
    int number = 0;
    std::vector<Item> requests;
    std::set<std::string> ids;
    int64_t run = 0;
    std::string resume, written_at;
    bool has_results = false;
    std::map<std::string, std::pair<BatchResult, std::string>> results;  // custom_id -> (result, "file:line")
  };
  std::string path(const std::string& name) const;
  std::string requests_name(int n) const { return "requests-" + std::to_string(n) + ".jsonl"; }
  std::string results_name(int n) const { return "results-" + std::to_string(n) + ".jsonl"; }
  void read_results(Batch& b);
  Answer defer(const std::string& custom_id, const Request& r, const std::string& why);
  BatchNotice notice(const Batch& b, bool written) const;
  void save_state() const;

  Spec s_;
  std::vector<Batch> batches_;  // batch N at N - 1
  std::vector<std::pair<Item, nlohmann::json>> new_;  // deferred this run, in the order asked
  std::set<std::string> new_ids_;
  std::set<std::string> asked_;     // custom_ids asked in this run
  std::set<std::string> answered_;  // ... and answered
  int awaited_ = 0;  // a batch without results that a request of this run waits for
};

// The client's backend when it is a batch; nullptr otherwise.
BatchBackend* batch_backend(Client& c);

}  // namespace ksol::agents::llm
