// The store: every task, run, candidate, evaluation (with its raw timing samples) and GPU
// calibration, in one SQLite file (WAL mode, numbered migrations). See README.md.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/evaluation.h"

struct sqlite3;

namespace ksol::store {

// Any failure of the database: the message carries SQLite's text, and statement() the SQL
// that failed (empty when the failure is not one statement's, such as a too-new schema).
class StoreError : public std::runtime_error {
 public:
  StoreError(const std::string& message, std::string statement = {}, int sqlite_code = 0);
  const std::string& statement() const { return statement_; }
  int sqlite_code() const { return sqlite_code_; }  // extended result code; 0 when not SQLite's

 private:
  std::string statement_;
  int sqlite_code_ = 0;
};

// Timestamps are ISO-8601 UTC with milliseconds: "2024-05-01T12:34:56.789Z".

struct TaskRow {
  int64_t id = 0;
  std::string name;
  std::string spec_hash;
  std::string spec_toml;
  std::string created_at;
};

struct RunRow {
  int64_t id = 0;
  std::string started_at;
  std::optional<std::string> finished_at;  // empty while running or after a crash
  std::string command;
  nlohmann::json meta;   // versions, gpu, host, flags, seeds
  std::string status;    // "running" until finish_run
};

// What `ksol optimize` returned (its results document, the report's source) and where it wrote
// the report; one per run.
struct RunReport {
  int64_t run_id = 0;
  std::string report_dir;  // absolute
  nlohmann::json results;  // results.json: {"run", "gpu", "agent", "results": [one per task]}
  std::string created_at;
};

struct CandidateRow {
  int64_t id = 0;                    // ignored by upsert_candidate
  int64_t task_id = 0;
  std::string source_hash;
  std::string source;
  std::string language;              // "cuda", "dsl" or "c_function"
  std::string origin;                // "baseline:naive", "file:<path>", "agent:<role>", ...
  std::optional<int64_t> parent_id;
  std::optional<std::string> method;
  std::optional<std::string> agent;
  std::string created_at;            // set by the store
};

struct EvaluationRow {
  int64_t id = 0;                    // ignored by record_evaluation
  int64_t run_id = 0;
  int64_t candidate_id = 0;
  int64_t task_id = 0;               // must be the candidate's task
  std::string size_name;
  Status status = Status::failed;    // as the SizeEvaluation it was recorded from
  Gate failed_gate = Gate::none;
  std::optional<std::string> error_class;
  std::optional<std::string> message;
  nlohmann::json gates;              // every gate's result
  std::optional<double> median_us;
  std::optional<double> ci_low_us;
  std::optional<double> ci_high_us;
  std::optional<double> sol_us;
  std::optional<double> pct_sol;    // a fraction of SOL (0.5: half of it)
  std::optional<double> clock_mhz;
  bool throttled = false;
  nlohmann::json seeds;
  nlohmann::json rerun;              // versions, gpu, clocks, flags, seeds, defences
  int worker_restarts = 0;
  std::vector<double> samples;       // raw timings in microseconds, in the order taken
  std::string created_at;            // set by the store
};

// One request to an LLM (src/agents/llm.h): its purpose (coder, repair, ...), the backend and
// model, the request and the answer with their SHA-256 and where the answer's text is kept (the
// answer cache or the exchange folder), tokens, wall time, dollars where prices were given, and
// the outcome of the answer: "pending" until the agent has read it, then "rejected: <class>:
// <reason>", "proposed", and once the search has evaluated the program, "verified" or
// "failed: <gate>: <message>".
struct LlmRequestRow {
  int64_t id = 0;                    // ignored by record_llm_request
  std::optional<int64_t> run_id;
  std::string task;                  // empty when the request served no one task
  std::string purpose, model;
  std::string prompt_hash, prompt;   // prompt: the request as JSON (system, messages, max_tokens)
  std::string answer_hash, answer;
  std::string path;
  bool ok = false, cached = false;
  std::string finish_reason, error;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int attempts = 0;
  double seconds = 0;
  std::optional<double> dollars;     // empty: no prices known
  std::string outcome = "pending";
  std::string created_at;            // set by the store
};

// One connection to one database file. Not for use from two threads at once; open one Store
// per thread or process (WAL lets them read while another writes).
class Store {
 public:
  // Creates the file and its parent folders if needed, and migrates it to the latest schema.
  // Throws StoreError if the file's schema is newer than this build knows.
  static Store open(const std::string& path);
  // Migrates only up to `version` (1..latest); for tests of the migration path.
  static Store open_at_version(const std::string& path, int version);
  // For the commands that only read (runs, show, export): never creates, migrates or writes the
  // file, and leaves no -wal or -shm file behind. A file of an older schema is migrated in a copy
  // in memory. Throws StoreError "no store at PATH" when there is no such file, and for a file that
  // is not a ksol store or has a newer schema.
  static Store open_read_only(const std::string& path);

  Store(Store&& other) noexcept;
  Store& operator=(Store&& other) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store();

  int schema_version() const;
  static int latest_schema_version();
  const std::string& path() const { return path_; }

  // Runs start as "running"; a run that crashed keeps that status and no finished_at.
  int64_t begin_run(const std::string& command, const nlohmann::json& meta);
  void finish_run(int64_t run, const std::string& status);  // throws if the run does not exist
  std::optional<RunRow> find_run(int64_t run) const;
  std::vector<RunRow> runs() const;  // newest first
  // The names of the tasks a run evaluated, in the order it first evaluated them.
  std::vector<std::string> task_names_for_run(int64_t run) const;
  // Replaces the run's report, if it had one.
  void save_run_report(int64_t run, const std::string& report_dir, const nlohmann::json& results);
  std::optional<RunReport> run_report(int64_t run) const;

  // A task is keyed by (name, spec_hash): editing a spec makes a new row, so evaluations keep
  // pointing at the spec they were measured under.
  int64_t upsert_task(const std::string& name, const std::string& spec_hash, const std::string& spec_toml);
  std::optional<TaskRow> find_task(const std::string& name) const;  // the newest spec of that name
  std::optional<TaskRow> task_by_id(int64_t id) const;

  // Returns the existing id when the task already has this source_hash (the first origin,
  // parent and method are kept); throws if the stored source differs, a hash collision or a
  // caller hashing the wrong text.
  int64_t upsert_candidate(const CandidateRow& candidate);
  std::optional<CandidateRow> find_candidate(int64_t id) const;
  std::vector<CandidateRow> candidates_for_task(int64_t task) const;  // oldest first

  // Inserts the evaluation and its samples in one committed transaction.
  int64_t record_evaluation(const EvaluationRow& evaluation);
  // The one path from the harness's record to the store: `e` as a row of run `run_id`, for the
  // candidate and task given (the candidate's own), its samples with it; the row's id.
  int64_t record(int64_t run_id, int64_t candidate_id, int64_t task_id, const SizeEvaluation& e);
  // The newest evaluation of that candidate and size in that run, samples included.
  std::optional<EvaluationRow> find_evaluation(int64_t run, int64_t candidate, const std::string& size) const;
  std::vector<EvaluationRow> evaluations_for_run(int64_t run) const;    // oldest first
  std::vector<EvaluationRow> evaluations_for_task(int64_t task) const;  // oldest first, all runs
  std::vector<double> samples(int64_t evaluation_id) const;

  int64_t record_llm_request(const LlmRequestRow& r);
  void set_llm_request_outcome(int64_t id, const std::string& outcome);  // throws if there is no such row
  // Oldest first; `run` empty: the requests made outside any run.
  std::vector<LlmRequestRow> llm_requests_for_run(std::optional<int64_t> run) const;

  void save_calibration(const std::string& gpu_uuid, const std::string& gpu_name, const nlohmann::json& calibration);
  std::optional<nlohmann::json> latest_calibration(const std::string& gpu_uuid) const;

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  void migrate(int target_version);
  std::vector<EvaluationRow> query_evaluations(const char* sql, int64_t key) const;

  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace ksol::store
