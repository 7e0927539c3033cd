#include "store/store.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <thread>
#include <utility>

// Column lists shared by several SELECTs, as literals so they concatenate into the SQL at
// compile time; the read_* functions below read them in this order.
#define KSOL_RUN_COLUMNS "id, started_at, finished_at, command, meta_json, status"
#define KSOL_CANDIDATE_COLUMNS \
  "id, task_id, source_hash, source, language, origin, parent_id, method, agent, created_at"
#define KSOL_EVALUATION_COLUMNS                                                                \
  "id, run_id, candidate_id, task_id, size_name, status, failed_gate, error_class, message, " \
  "gates_json, median_us, ci_low_us, ci_high_us, sol_us, pct_sol, clock_mhz, throttled, "     \
  "seeds_json, rerun_json, worker_restarts, created_at"

namespace ksol::store {

StoreError::StoreError(const std::string& message, std::string statement, int sqlite_code)
    : std::runtime_error(statement.empty() ? "store: " + message
                                           : "store: " + message + " [statement: " + statement + "]"),
      statement_(std::move(statement)),
      sqlite_code_(sqlite_code) {}

namespace {

// Each migration runs once, in its own transaction, and is never edited after release: a
// schema change is a new entry at the end.
struct Migration {
  int version;
  const char* sql;
  // SQLite cannot change a CHECK constraint in place: the table is made again, copied and
  // renamed, with foreign keys off (else dropping the old table would delete the rows that
  // reference it) and checked before the commit (SQLite's "12 steps" of ALTER TABLE).
  bool rebuilds_table = false;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  spec_hash TEXT NOT NULL,
  spec_toml TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (name, spec_hash)
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  command TEXT NOT NULL,
  meta_json TEXT NOT NULL,
  status TEXT NOT NULL
);
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES tasks(id),
  source_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  language TEXT NOT NULL CHECK (language IN ('cuda', 'dsl', 'c_function')),
  origin TEXT NOT NULL,
  parent_id INTEGER REFERENCES candidates(id),
  method TEXT,
  agent TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (task_id, source_hash),
  UNIQUE (id, task_id)
);
CREATE INDEX candidates_by_parent ON candidates(parent_id);
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  candidate_id INTEGER NOT NULL,
  task_id INTEGER NOT NULL REFERENCES tasks(id),
  size_name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'unsupported', 'suspect', 'no_gpu')),
  failed_gate TEXT,
  error_class TEXT,
  message TEXT,
  gates_json TEXT NOT NULL,
  median_us REAL,
  ci_low_us REAL,
  ci_high_us REAL,
  sol_us REAL,
  pct_sol REAL,
  clock_mhz REAL,
  throttled INTEGER NOT NULL DEFAULT 0 CHECK (throttled IN (0, 1)),
  seeds_json TEXT NOT NULL,
  rerun_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  -- The pair, not candidate_id alone, so an evaluation cannot claim another task's candidate.
  FOREIGN KEY (candidate_id, task_id) REFERENCES candidates(id, task_id)
);
CREATE INDEX evaluations_by_run ON evaluations(run_id, candidate_id, size_name);
CREATE INDEX evaluations_by_task ON evaluations(task_id, candidate_id);
CREATE TABLE samples (
  evaluation_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  us REAL NOT NULL,
  PRIMARY KEY (evaluation_id, idx)
) WITHOUT ROWID;
CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY,
  gpu_uuid TEXT NOT NULL,
  gpu_name TEXT NOT NULL,
  json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX calibrations_by_gpu ON calibrations(gpu_uuid, id);
)sql"},
    // The coordinator restarts a worker after a crash, hang or sticky CUDA error; how many
    // restarts an evaluation needed is part of its story.
    {2, R"sql(
ALTER TABLE evaluations ADD COLUMN worker_restarts INTEGER NOT NULL DEFAULT 0;
)sql"},
    // What `ksol optimize` returned per task (its results document) and where it wrote the
    // report, so that `ksol show` and `ksol export` answer from the store alone.
    {3, R"sql(
CREATE TABLE run_reports (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  report_dir TEXT NOT NULL,
  results_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
)sql"},
    // Every request to an LLM: what it was for, what it cost, and what became of its answer.
    // run_id is NULL for a request made outside a run (a test, a tool).
    {4, R"sql(
CREATE TABLE llm_requests (
  id INTEGER PRIMARY KEY,
  run_id INTEGER REFERENCES runs(id),
  task TEXT NOT NULL,
  purpose TEXT NOT NULL,
  model TEXT NOT NULL,
  prompt_hash TEXT NOT NULL,
  prompt TEXT NOT NULL,
  answer_hash TEXT NOT NULL,
  answer TEXT NOT NULL,
  path TEXT NOT NULL,
  ok INTEGER NOT NULL,
  cached INTEGER NOT NULL,
  finish_reason TEXT NOT NULL,
  error TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  seconds REAL NOT NULL,
  dollars REAL,
  outcome TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX llm_requests_run ON llm_requests(run_id);
)sql"},
    // A baseline stopped after its first calls at a size, far slower than the fastest one there
    // (status far_slower, core/evaluation.h), is recorded as such: the status list grows.
    {5, R"sql(
CREATE TABLE evaluations_new (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  candidate_id INTEGER NOT NULL,
  task_id INTEGER NOT NULL REFERENCES tasks(id),
  size_name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'unsupported', 'suspect', 'no_gpu', 'far_slower')),
  failed_gate TEXT,
  error_class TEXT,
  message TEXT,
  gates_json TEXT NOT NULL,
  median_us REAL,
  ci_low_us REAL,
  ci_high_us REAL,
  sol_us REAL,
  pct_sol REAL,
  clock_mhz REAL,
  throttled INTEGER NOT NULL DEFAULT 0 CHECK (throttled IN (0, 1)),
  seeds_json TEXT NOT NULL,
  rerun_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  worker_restarts INTEGER NOT NULL DEFAULT 0,
  FOREIGN KEY (candidate_id, task_id) REFERENCES candidates(id, task_id)
);
INSERT INTO evaluations_new (id, run_id, candidate_id, task_id, size_name, status, failed_gate, error_class, message, gates_json,
                             median_us, ci_low_us, ci_high_us, sol_us, pct_sol, clock_mhz, throttled, seeds_json, rerun_json,
                             created_at, worker_restarts)
  SELECT id, run_id, candidate_id, task_id, size_name, status, failed_gate, error_class, message, gates_json,
         median_us, ci_low_us, ci_high_us, sol_us, pct_sol, clock_mhz, throttled, seeds_json, rerun_json,
         created_at, worker_restarts FROM evaluations;
DROP TABLE evaluations;
ALTER TABLE evaluations_new RENAME TO evaluations;
CREATE INDEX evaluations_by_run ON evaluations(run_id, candidate_id, size_name);
CREATE INDEX evaluations_by_task ON evaluations(task_id, candidate_id);
)sql",
     true},
};

constexpr int kLatestVersion = kMigrations[std::size(kMigrations) - 1].version;

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  char full[48];
  std::snprintf(full, sizeof full, "%s.%03dZ", date, static_cast<int>(ms));
  return full;
}

[[noreturn]] void fail(sqlite3* db, const std::string& what, const std::string& sql) {
  throw StoreError(what + ": " + sqlite3_errmsg(db), sql, sqlite3_extended_errcode(db));
}

// For statements without values (DDL, pragmas, transaction control) only.
void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw StoreError(message, sql, sqlite3_extended_errcode(db));
  }
}

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db), sql_(sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail(db_, "prepare", sql_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  // Parameters are numbered from 1, as in SQLite.
  void bind_int(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_real(int i, double v) { check(sqlite3_bind_double(stmt_, i, v)); }
  void bind_text(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  void bind_json(int i, const nlohmann::json& v) { bind_text(i, v.dump()); }
  void bind_null(int i) { check(sqlite3_bind_null(stmt_, i)); }
  void bind_int(int i, const std::optional<int64_t>& v) { v ? bind_int(i, *v) : bind_null(i); }
  void bind_real(int i, const std::optional<double>& v) { v ? bind_real(i, *v) : bind_null(i); }
  void bind_text(int i, const std::optional<std::string>& v) { v ? bind_text(i, *v) : bind_null(i); }

  // True while there is a row to read.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, "step", sql_);
  }
  void step_done() {
    if (step()) throw StoreError("statement returned a row where none was expected", sql_);
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  int64_t int_at(int c) const { return sqlite3_column_int64(stmt_, c); }
  double real_at(int c) const { return sqlite3_column_double(stmt_, c); }
  std::string text_at(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, c))) : std::string();
  }
  nlohmann::json json_at(int c) const { return is_null(c) ? nlohmann::json() : nlohmann::json::parse(text_at(c)); }
  std::optional<int64_t> opt_int_at(int c) const { return is_null(c) ? std::nullopt : std::optional(int_at(c)); }
  std::optional<double> opt_real_at(int c) const { return is_null(c) ? std::nullopt : std::optional(real_at(c)); }
  std::optional<std::string> opt_text_at(int c) const {
    return is_null(c) ? std::nullopt : std::optional(text_at(c));
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(db_, "bind", sql_);
  }

  sqlite3* db_;
  const char* sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE takes the write lock up front, so a transaction that reads before it writes
// (upsert, migration) cannot be overtaken by another process between the two.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

int read_version(sqlite3* db) {
  Statement s(db, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
  s.step();
  return static_cast<int>(s.int_at(0));
}

RunRow read_run(const Statement& s) {
  RunRow r;
  r.id = s.int_at(0);
  r.started_at = s.text_at(1);
  r.finished_at = s.opt_text_at(2);
  r.command = s.text_at(3);
  r.meta = s.json_at(4);
  r.status = s.text_at(5);
  return r;
}

CandidateRow read_candidate(const Statement& s) {
  CandidateRow c;
  c.id = s.int_at(0);
  c.task_id = s.int_at(1);
  c.source_hash = s.text_at(2);
  c.source = s.text_at(3);
  c.language = s.text_at(4);
  c.origin = s.text_at(5);
  c.parent_id = s.opt_int_at(6);
  c.method = s.opt_text_at(7);
  c.agent = s.opt_text_at(8);
  c.created_at = s.text_at(9);
  return c;
}

EvaluationRow read_evaluation(const Statement& s) {
  EvaluationRow e;
  e.id = s.int_at(0);
  e.run_id = s.int_at(1);
  e.candidate_id = s.int_at(2);
  e.task_id = s.int_at(3);
  e.size_name = s.text_at(4);
  const std::string status = s.text_at(5), gate = s.opt_text_at(6).value_or("");
  std::optional<Status> st = parse_status(status);
  std::optional<Gate> g = parse_gate(gate);
  if (!st || !g)
    throw StoreError("evaluation " + std::to_string(e.id) + " has status '" + status + "' and failed gate '" + gate +
                     "', which this ksol does not know (a store written by another version?)");
  e.status = *st;
  e.failed_gate = *g;
  e.error_class = s.opt_text_at(7);
  e.message = s.opt_text_at(8);
  e.gates = s.json_at(9);
  e.median_us = s.opt_real_at(10);
  e.ci_low_us = s.opt_real_at(11);
  e.ci_high_us = s.opt_real_at(12);
  e.sol_us = s.opt_real_at(13);
  e.pct_sol = s.opt_real_at(14);
  e.clock_mhz = s.opt_real_at(15);
  e.throttled = s.int_at(16) != 0;
  e.seeds = s.json_at(17);
  e.rerun = s.json_at(18);
  e.worker_restarts = static_cast<int>(s.int_at(19));
  e.created_at = s.text_at(20);
  return e;
}

}  // namespace

Store Store::open(const std::string& path) { return open_at_version(path, kLatestVersion); }

Store Store::open_read_only(const std::string& path) {
  std::error_code ec;
  if (path.empty() || path == ":memory:" || !std::filesystem::is_regular_file(path, ec)) throw StoreError("no store at " + path);
  // A read-only connection to a WAL database creates the -wal and -shm files when they are not
  // there, and cannot remove them afterwards. They are there only while a process has the store
  // open (a live run) or after one crashed; then they are used as they are. Otherwise the file is
  // opened as immutable, which reads it without locks or side files. A writer that starts meanwhile
  // appends to its own -wal and changes the main file only at a checkpoint (after about 1000 pages
  // or when it closes), so a read of a few hundred milliseconds does not meet it in practice.
  const bool live = std::filesystem::exists(path + "-wal", ec);
  std::string uri = "file:";
  for (char c : path) {
    // URI filenames: '?' and '#' end the path, '%' starts an escape.
    if (c == '?' || c == '#' || c == '%') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  uri += live ? "?mode=ro" : "?mode=ro&immutable=1";
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  Store store(db, path);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw StoreError("cannot open " + path + ": " + message, {}, rc);
  }
  sqlite3_extended_result_codes(db, 1);
  exec(db, "PRAGMA busy_timeout = 5000");
  int version = 0;
  try {
    version = read_version(db);
  } catch (const StoreError& e) {
    throw StoreError(path + " is not a ksol store (" + std::string(sqlite3_errmsg(db)) + ")", {}, e.sqlite_code());
  }
  if (version > kLatestVersion)
    throw StoreError(path + " has schema version " + std::to_string(version) + " but this ksol knows only up to " +
                     std::to_string(kLatestVersion) + "; open it with a newer ksol");
  if (version == kLatestVersion) return store;
  // An older schema is migrated in a copy in memory, never in the file: reading changes nothing.
  sqlite3* mem = nullptr;
  if (sqlite3_open(":memory:", &mem) != SQLITE_OK) {
    sqlite3_close(mem);
    throw StoreError("cannot open an in-memory copy of " + path);
  }
  Store copy(mem, path);
  sqlite3_backup* b = sqlite3_backup_init(mem, "main", db, "main");
  if (!b) fail(mem, "copy " + path + " into memory", "");
  sqlite3_backup_step(b, -1);
  if (sqlite3_backup_finish(b) != SQLITE_OK) fail(mem, "copy " + path + " into memory", "");
  exec(mem, "PRAGMA foreign_keys = ON");
  copy.migrate(kLatestVersion);
  return copy;
}

Store Store::open_at_version(const std::string& path, int version) {
  if (version < 1 || version > kLatestVersion)
    throw StoreError("no schema version " + std::to_string(version) + " (this build knows 1.." +
                     std::to_string(kLatestVersion) + ")");
  bool in_memory = path == ":memory:" || path.empty();
  if (!in_memory) {
    auto parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw StoreError("cannot create folder " + parent.string() + ": " + ec.message());
  }

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  // The Store owns the handle from here on, so every throw below closes it.
  Store store(db, path);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw StoreError("cannot open " + path + ": " + message, {}, rc);
  }
  sqlite3_extended_result_codes(db, 1);

  // The busy timeout comes first: switching to WAL needs a lock another process may hold.
  constexpr int kBusyMs = 5000;
  exec(db, ("PRAGMA busy_timeout = " + std::to_string(kBusyMs)).c_str());
  if (!in_memory) {
    // Switching a new file to WAL takes the exclusive lock, and SQLite answers SQLITE_BUSY at once
    // (without the busy handler, which could deadlock) when another process opening the same new
    // file holds a shared lock: several `ksol` processes started together on a fresh store hit it
    // (four `ksol eval --compile-only` at once on a fresh GPU host failed three times in four). So
    // it is retried for up to the busy timeout; any other error, or still busy after it, is thrown.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyMs);
    for (;;) {
      try {
        Statement wal(db, "PRAGMA journal_mode = WAL");
        wal.step();
        // WAL is what lets a crashed run keep every committed row and lets readers see a live
        // run; a filesystem that refuses it (some network mounts) is an error, not a fallback.
        if (wal.text_at(0) != "wal")
          throw StoreError("cannot use WAL journal on " + path + " (got '" + wal.text_at(0) + "')");
        break;
      } catch (const StoreError& e) {
        const bool busy = (e.sqlite_code() & 0xff) == SQLITE_BUSY || (e.sqlite_code() & 0xff) == SQLITE_LOCKED;
        if (!busy || std::chrono::steady_clock::now() >= deadline) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  // With WAL, NORMAL loses nothing on a process crash; only a power cut can drop the last
  // commits. That is the trade the coordinator wants: one fsync per checkpoint, not per row.
  exec(db, "PRAGMA synchronous = NORMAL");
  exec(db, "PRAGMA foreign_keys = ON");

  store.migrate(version);
  return store;
}

void Store::migrate(int target_version) {
  exec(db_, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
  auto refuse_if_newer = [&](int found) {
    if (found > kLatestVersion)
      throw StoreError(path_ + " has schema version " + std::to_string(found) + " but this ksol knows only up to " +
                       std::to_string(kLatestVersion) + "; open it with a newer ksol");
  };
  int seen = read_version(db_);
  refuse_if_newer(seen);
  for (const Migration& m : kMigrations) {
    if (m.version > target_version) break;
    if (m.version <= seen) continue;
    // Outside the transaction (SQLite ignores the pragma inside one), and on again however it ends.
    struct ForeignKeysOff {
      sqlite3* db;
      bool on;
      ~ForeignKeysOff() {
        if (on) sqlite3_exec(db, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr);
      }
    } fk_off{db_, m.rebuilds_table};
    if (m.rebuilds_table) exec(db_, "PRAGMA foreign_keys = OFF");
    Transaction tx(db_);
    // Read again under the write lock: another process may have migrated since.
    seen = read_version(db_);
    refuse_if_newer(seen);
    if (seen >= m.version) {
      tx.commit();
      continue;
    }
    if (seen != m.version - 1)
      throw StoreError(path_ + " has schema version " + std::to_string(seen) + ", cannot apply migration " +
                       std::to_string(m.version));
    exec(db_, m.sql);
    if (m.rebuilds_table) {
      Statement check(db_, "PRAGMA foreign_key_check");
      if (check.step())
        throw StoreError("migration " + std::to_string(m.version) + " would leave a row whose reference is broken (table " + check.text_at(0) +
                         ", row " + check.text_at(1) + ")");
    }
    Statement s(db_, "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)");
    s.bind_int(1, m.version);
    s.bind_text(2, utc_now());
    s.step_done();
    tx.commit();
    seen = m.version;
  }
}

Store::Store(Store&& other) noexcept : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Store::~Store() {
  if (db_) sqlite3_close_v2(db_);
}

int Store::schema_version() const { return read_version(db_); }

int Store::latest_schema_version() { return kLatestVersion; }

int64_t Store::begin_run(const std::string& command, const nlohmann::json& meta) {
  Statement s(db_,
              "INSERT INTO runs (started_at, finished_at, command, meta_json, status) "
              "VALUES (?1, NULL, ?2, ?3, 'running')");
  s.bind_text(1, utc_now());
  s.bind_text(2, command);
  s.bind_json(3, meta);
  s.step_done();
  return sqlite3_last_insert_rowid(db_);
}

void Store::finish_run(int64_t run, const std::string& status) {
  static constexpr const char* kSql = "UPDATE runs SET finished_at = ?1, status = ?2 WHERE id = ?3";
  Statement s(db_, kSql);
  s.bind_text(1, utc_now());
  s.bind_text(2, status);
  s.bind_int(3, run);
  s.step_done();
  if (sqlite3_changes(db_) == 0) throw StoreError("no run " + std::to_string(run), kSql);
}

std::optional<RunRow> Store::find_run(int64_t run) const {
  Statement s(db_, "SELECT " KSOL_RUN_COLUMNS " FROM runs WHERE id = ?1");
  s.bind_int(1, run);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::vector<RunRow> Store::runs() const {
  Statement s(db_, "SELECT " KSOL_RUN_COLUMNS " FROM runs ORDER BY id DESC");
  std::vector<RunRow> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

int64_t Store::upsert_task(const std::string& name, const std::string& spec_hash, const std::string& spec_toml) {
  Transaction tx(db_);
  Statement find(db_, "SELECT id FROM tasks WHERE name = ?1 AND spec_hash = ?2");
  find.bind_text(1, name);
  find.bind_text(2, spec_hash);
  if (find.step()) {
    int64_t id = find.int_at(0);
    tx.commit();
    return id;
  }
  Statement insert(db_, "INSERT INTO tasks (name, spec_hash, spec_toml, created_at) VALUES (?1, ?2, ?3, ?4)");
  insert.bind_text(1, name);
  insert.bind_text(2, spec_hash);
  insert.bind_text(3, spec_toml);
  insert.bind_text(4, utc_now());
  insert.step_done();
  int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::optional<TaskRow> Store::task_by_id(int64_t id) const {
  Statement s(db_, "SELECT id, name, spec_hash, spec_toml, created_at FROM tasks WHERE id = ?1");
  s.bind_int(1, id);
  if (!s.step()) return std::nullopt;
  return TaskRow{s.int_at(0), s.text_at(1), s.text_at(2), s.text_at(3), s.text_at(4)};
}

std::vector<std::string> Store::task_names_for_run(int64_t run) const {
  Statement s(db_,
              "SELECT t.name FROM evaluations e JOIN tasks t ON t.id = e.task_id WHERE e.run_id = ?1 "
              "GROUP BY t.name ORDER BY MIN(e.id)");
  s.bind_int(1, run);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text_at(0));
  return out;
}

std::optional<TaskRow> Store::find_task(const std::string& name) const {
  Statement s(db_,
              "SELECT id, name, spec_hash, spec_toml, created_at FROM tasks WHERE name = ?1 "
              "ORDER BY id DESC LIMIT 1");
  s.bind_text(1, name);
  if (!s.step()) return std::nullopt;
  return TaskRow{s.int_at(0), s.text_at(1), s.text_at(2), s.text_at(3), s.text_at(4)};
}

int64_t Store::upsert_candidate(const CandidateRow& c) {
  Transaction tx(db_);
  static constexpr const char* kFind = "SELECT id, source FROM candidates WHERE task_id = ?1 AND source_hash = ?2";
  Statement find(db_, kFind);
  find.bind_int(1, c.task_id);
  find.bind_text(2, c.source_hash);
  if (find.step()) {
    if (find.text_at(1) != c.source)
      throw StoreError("candidate " + std::to_string(find.int_at(0)) + " of task " + std::to_string(c.task_id) +
                           " has source_hash " + c.source_hash + " but a different source",
                       kFind);
    int64_t id = find.int_at(0);
    tx.commit();
    return id;
  }
  Statement insert(db_,
                   "INSERT INTO candidates (task_id, source_hash, source, language, origin, parent_id, method, "
                   "agent, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  insert.bind_int(1, c.task_id);
  insert.bind_text(2, c.source_hash);
  insert.bind_text(3, c.source);
  insert.bind_text(4, c.language);
  insert.bind_text(5, c.origin);
  insert.bind_int(6, c.parent_id);
  insert.bind_text(7, c.method);
  insert.bind_text(8, c.agent);
  insert.bind_text(9, utc_now());
  insert.step_done();
  int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::optional<CandidateRow> Store::find_candidate(int64_t id) const {
  Statement s(db_, "SELECT " KSOL_CANDIDATE_COLUMNS " FROM candidates WHERE id = ?1");
  s.bind_int(1, id);
  if (!s.step()) return std::nullopt;
  return read_candidate(s);
}

std::vector<CandidateRow> Store::candidates_for_task(int64_t task) const {
  Statement s(db_, "SELECT " KSOL_CANDIDATE_COLUMNS " FROM candidates WHERE task_id = ?1 ORDER BY id");
  s.bind_int(1, task);
  std::vector<CandidateRow> out;
  while (s.step()) out.push_back(read_candidate(s));
  return out;
}

int64_t Store::record_evaluation(const EvaluationRow& e) {
  // One transaction for the row and its samples, committed before returning: a run killed
  // right after this call keeps the measurement whole, and never keeps half of it.
  Transaction tx(db_);
  Statement insert(db_,
                   "INSERT INTO evaluations (run_id, candidate_id, task_id, size_name, status, failed_gate, "
                   "error_class, message, gates_json, median_us, ci_low_us, ci_high_us, sol_us, pct_sol, "
                   "clock_mhz, throttled, seeds_json, rerun_json, worker_restarts, created_at) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
                   "?19, ?20)");
  insert.bind_int(1, e.run_id);
  insert.bind_int(2, e.candidate_id);
  insert.bind_int(3, e.task_id);
  insert.bind_text(4, e.size_name);
  insert.bind_text(5, std::string(to_string(e.status)));
  insert.bind_text(6, e.failed_gate == Gate::none ? std::optional<std::string>() : std::optional<std::string>(to_string(e.failed_gate)));
  insert.bind_text(7, e.error_class);
  insert.bind_text(8, e.message);
  insert.bind_json(9, e.gates);
  insert.bind_real(10, e.median_us);
  insert.bind_real(11, e.ci_low_us);
  insert.bind_real(12, e.ci_high_us);
  insert.bind_real(13, e.sol_us);
  insert.bind_real(14, e.pct_sol);
  insert.bind_real(15, e.clock_mhz);
  insert.bind_int(16, e.throttled ? 1 : 0);
  insert.bind_json(17, e.seeds);
  insert.bind_json(18, e.rerun);
  insert.bind_int(19, e.worker_restarts);
  insert.bind_text(20, utc_now());
  insert.step_done();
  int64_t id = sqlite3_last_insert_rowid(db_);

  // SQLite stores a NaN as NULL, so a NaN sample fails the NOT NULL constraint and the whole
  // evaluation rolls back; a timing that is not a number is a harness bug worth surfacing.
  Statement sample(db_, "INSERT INTO samples (evaluation_id, idx, us) VALUES (?1, ?2, ?3)");
  for (size_t i = 0; i < e.samples.size(); ++i) {
    sample.reset();
    sample.bind_int(1, id);
    sample.bind_int(2, static_cast<int64_t>(i));
    sample.bind_real(3, e.samples[i]);
    sample.step_done();
  }
  tx.commit();
  return id;
}

int64_t Store::record(int64_t run_id, int64_t candidate_id, int64_t task_id, const SizeEvaluation& se) {
  EvaluationRow e;
  e.run_id = run_id;
  e.candidate_id = candidate_id;
  e.task_id = task_id;
  e.size_name = se.size;
  e.status = se.status;
  e.failed_gate = se.failed_gate;
  if (!se.error_class.empty()) e.error_class = se.error_class;
  if (!se.message.empty()) e.message = se.message;
  e.gates = se.gates.is_array() ? se.gates : nlohmann::json::array();
  if (se.median_us > 0) {
    e.median_us = se.median_us;
    e.ci_low_us = se.ci_low_us;
    e.ci_high_us = se.ci_high_us;
    e.pct_sol = se.pct_sol;
  }
  e.sol_us = se.sol_us;
  if (se.clock_mhz > 0) e.clock_mhz = se.clock_mhz;
  e.throttled = se.throttled;
  e.samples = se.samples_us;
  e.seeds = se.seeds;
  e.rerun = se.provenance;
  e.worker_restarts = se.worker_restarts;
  return record_evaluation(e);
}

std::vector<EvaluationRow> Store::query_evaluations(const char* sql, int64_t key) const {
  std::vector<EvaluationRow> out;
  {
    Statement s(db_, sql);
    s.bind_int(1, key);
    while (s.step()) out.push_back(read_evaluation(s));
  }
  Statement sample(db_, "SELECT us FROM samples WHERE evaluation_id = ?1 ORDER BY idx");
  for (EvaluationRow& e : out) {
    sample.reset();
    sample.bind_int(1, e.id);
    while (sample.step()) e.samples.push_back(sample.real_at(0));
  }
  return out;
}

std::optional<EvaluationRow> Store::find_evaluation(int64_t run, int64_t candidate, const std::string& size) const {
  std::optional<EvaluationRow> found;
  {
    Statement s(db_,
                "SELECT " KSOL_EVALUATION_COLUMNS
                " FROM evaluations WHERE run_id = ?1 AND candidate_id = ?2 AND size_name = ?3 "
                "ORDER BY id DESC LIMIT 1");
    s.bind_int(1, run);
    s.bind_int(2, candidate);
    s.bind_text(3, size);
    if (!s.step()) return std::nullopt;
    found = read_evaluation(s);
  }
  found->samples = samples(found->id);
  return found;
}

std::vector<EvaluationRow> Store::evaluations_for_run(int64_t run) const {
  return query_evaluations("SELECT " KSOL_EVALUATION_COLUMNS " FROM evaluations WHERE run_id = ?1 ORDER BY id",
                           run);
}

std::vector<EvaluationRow> Store::evaluations_for_task(int64_t task) const {
  return query_evaluations("SELECT " KSOL_EVALUATION_COLUMNS " FROM evaluations WHERE task_id = ?1 ORDER BY id",
                           task);
}

std::vector<double> Store::samples(int64_t evaluation_id) const {
  Statement s(db_, "SELECT us FROM samples WHERE evaluation_id = ?1 ORDER BY idx");
  s.bind_int(1, evaluation_id);
  std::vector<double> out;
  while (s.step()) out.push_back(s.real_at(0));
  return out;
}

void Store::save_run_report(int64_t run, const std::string& report_dir, const nlohmann::json& results) {
  Statement s(db_,
              "INSERT OR REPLACE INTO run_reports (run_id, report_dir, results_json, created_at) VALUES (?1, ?2, ?3, ?4)");
  s.bind_int(1, run);
  s.bind_text(2, report_dir);
  s.bind_json(3, results);
  s.bind_text(4, utc_now());
  s.step_done();
}

std::optional<RunReport> Store::run_report(int64_t run) const {
  Statement s(db_, "SELECT run_id, report_dir, results_json, created_at FROM run_reports WHERE run_id = ?1");
  s.bind_int(1, run);
  if (!s.step()) return std::nullopt;
  return RunReport{s.int_at(0), s.text_at(1), s.json_at(2), s.text_at(3)};
}

void Store::save_calibration(const std::string& gpu_uuid, const std::string& gpu_name,
                             const nlohmann::json& calibration) {
  Statement s(db_, "INSERT INTO calibrations (gpu_uuid, gpu_name, json, created_at) VALUES (?1, ?2, ?3, ?4)");
  s.bind_text(1, gpu_uuid);
  s.bind_text(2, gpu_name);
  s.bind_json(3, calibration);
  s.bind_text(4, utc_now());
  s.step_done();
}

std::optional<nlohmann::json> Store::latest_calibration(const std::string& gpu_uuid) const {
  Statement s(db_, "SELECT json FROM calibrations WHERE gpu_uuid = ?1 ORDER BY id DESC LIMIT 1");
  s.bind_text(1, gpu_uuid);
  if (!s.step()) return std::nullopt;
  return s.json_at(0);
}

#define KSOL_LLM_REQUEST_COLUMNS                                                                \
  "id, run_id, task, purpose, model, prompt_hash, prompt, answer_hash, answer, path, ok, cached, " \
  "finish_reason, error, prompt_tokens, completion_tokens, attempts, seconds, dollars, outcome, created_at"

int64_t Store::record_llm_request(const LlmRequestRow& r) {
  Statement s(db_,
              "INSERT INTO llm_requests (run_id, task, purpose, model, prompt_hash, prompt, answer_hash, answer, path, ok, "
              "cached, finish_reason, error, prompt_tokens, completion_tokens, attempts, seconds, dollars, outcome, created_at) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)");
  s.bind_int(1, r.run_id);
  s.bind_text(2, r.task);
  s.bind_text(3, r.purpose);
  s.bind_text(4, r.model);
  s.bind_text(5, r.prompt_hash);
  s.bind_text(6, r.prompt);
  s.bind_text(7, r.answer_hash);
  s.bind_text(8, r.answer);
  s.bind_text(9, r.path);
  s.bind_int(10, r.ok ? 1 : 0);
  s.bind_int(11, r.cached ? 1 : 0);
  s.bind_text(12, r.finish_reason);
  s.bind_text(13, r.error);
  s.bind_int(14, r.prompt_tokens);
  s.bind_int(15, r.completion_tokens);
  s.bind_int(16, static_cast<int64_t>(r.attempts));
  s.bind_real(17, r.seconds);
  s.bind_real(18, r.dollars);
  s.bind_text(19, r.outcome);
  s.bind_text(20, utc_now());
  s.step_done();
  return sqlite3_last_insert_rowid(db_);
}

void Store::set_llm_request_outcome(int64_t id, const std::string& outcome) {
  Statement s(db_, "UPDATE llm_requests SET outcome = ?2 WHERE id = ?1");
  s.bind_int(1, id);
  s.bind_text(2, outcome);
  s.step_done();
  if (sqlite3_changes(db_) != 1) throw StoreError("no LLM request " + std::to_string(id));
}

std::vector<LlmRequestRow> Store::llm_requests_for_run(std::optional<int64_t> run) const {
  Statement s(db_, run ? "SELECT " KSOL_LLM_REQUEST_COLUMNS " FROM llm_requests WHERE run_id = ?1 ORDER BY id"
                       : "SELECT " KSOL_LLM_REQUEST_COLUMNS " FROM llm_requests WHERE run_id IS NULL ORDER BY id");
  if (run) s.bind_int(1, *run);
  std::vector<LlmRequestRow> out;
  while (s.step()) {
    LlmRequestRow r;
    r.id = s.int_at(0);
    r.run_id = s.opt_int_at(1);
    r.task = s.text_at(2);
    r.purpose = s.text_at(3);
    r.model = s.text_at(4);
    r.prompt_hash = s.text_at(5);
    r.prompt = s.text_at(6);
    r.answer_hash = s.text_at(7);
    r.answer = s.text_at(8);
    r.path = s.text_at(9);
    r.ok = s.int_at(10) != 0;
    r.cached = s.int_at(11) != 0;
    r.finish_reason = s.text_at(12);
    r.error = s.text_at(13);
    r.prompt_tokens = s.int_at(14);
    r.completion_tokens = s.int_at(15);
    r.attempts = static_cast<int>(s.int_at(16));
    r.seconds = s.real_at(17);
    r.dollars = s.opt_real_at(18);
    r.outcome = s.text_at(19);
    r.created_at = s.text_at(20);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ksol::store
