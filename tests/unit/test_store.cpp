// The store against a real SQLite file in a temporary folder: migrations, idempotent upserts,
// evaluation round trips, and what a crashed or still-running run leaves behind.
#include "store/store.h"

#include "coord/session.h"
#include "core/hash.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace ksol::store {
namespace {

namespace fs = std::filesystem;

static_assert(!std::is_copy_constructible_v<Store>);
static_assert(std::is_nothrow_move_constructible_v<Store>);

// A second, raw connection, to look at the file without going through the Store.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("raw open failed");
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(message + " in " + sql);
    }
  }
  // The first column of every row, as text.
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string(sqlite3_errmsg(db_)) + " in " + sql);
    std::vector<std::string> out;
    while (sqlite3_step(s) == SQLITE_ROW) {
      const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      out.push_back(p ? p : "");
    }
    sqlite3_finalize(s);
    return out;
  }
  std::set<std::string> columns_of(const std::string& table) {
    auto names = column("SELECT name FROM pragma_table_info('" + table + "')");
    return {names.begin(), names.end()};
  }

 private:
  sqlite3* db_ = nullptr;
};

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ksol_store_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    // A folder that does not exist yet, so open() must create it.
    path_ = (dir_ / "nested" / "runs" / "ksol.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A task, a candidate and a run, the minimum an evaluation points at.
  struct Fixture {
    int64_t task;
    int64_t candidate;
    int64_t run;
  };
  static Fixture populate(Store& s) {
    Fixture f{};
    f.task = s.upsert_task("gemm_fp32", "spec-hash-1", "name = \"gemm_fp32\"\n");
    f.candidate = s.upsert_candidate(candidate(f.task, "h-naive", "__global__ void k() {}"));
    f.run = s.begin_run("ksol run tasks/gemm", {{"gpu", "H200"}, {"seeds", {1, 2}}});
    return f;
  }
  static CandidateRow candidate(int64_t task, const std::string& hash, const std::string& source) {
    CandidateRow c;
    c.task_id = task;
    c.source_hash = hash;
    c.source = source;
    c.language = "cuda";
    c.origin = "baseline:naive";
    return c;
  }
  static EvaluationRow measured(const Fixture& f, const std::string& size) {
    EvaluationRow e;
    e.run_id = f.run;
    e.candidate_id = f.candidate;
    e.task_id = f.task;
    e.size_name = size;
    e.status = Status::ok;
    e.gates = {{"compile", "pass"}, {"correctness", {{"max_rel_err", 1e-7}}}};
    e.median_us = 123.5;
    e.ci_low_us = 121.0;
    e.ci_high_us = 126.25;
    e.sol_us = 61.75;
    e.pct_sol = 50.0;
    e.clock_mhz = 1980;
    e.throttled = true;
    e.seeds = {7, 8, 9};
    e.rerun = {{"gpu", "NVIDIA H200"}, {"flags", {"-O3", "-arch=sm_90a"}}, {"defences", {"l2_flush"}}};
    e.worker_restarts = 1;
    e.samples = {125.0, 123.5, 122.0, 0.1, 1e6};
    return e;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StoreTest, FreshFileGetsEveryMigration) {
  Store s = Store::open(path_);
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_EQ(s.schema_version(), Store::latest_schema_version());
  EXPECT_EQ(Store::latest_schema_version(), 5);

  RawDb raw(path_);
  auto tables = raw.column("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  std::set<std::string> got(tables.begin(), tables.end());
  for (const char* t : {"tasks", "runs", "candidates", "evaluations", "samples", "calibrations", "run_reports", "llm_requests", "schema_version"})
    EXPECT_TRUE(got.count(t)) << "missing table " << t;
  EXPECT_EQ(raw.column("PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  EXPECT_EQ(raw.column("SELECT version FROM schema_version ORDER BY version"), (std::vector<std::string>{"1", "2", "3", "4", "5"}));
  EXPECT_TRUE(raw.columns_of("evaluations").count("worker_restarts"));
  auto indexes = raw.column("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'evaluations' ORDER BY name");
  EXPECT_EQ(indexes, (std::vector<std::string>{"evaluations_by_run", "evaluations_by_task"}));
}

TEST_F(StoreTest, ReopenIsIdempotent) {
  int64_t task = 0;
  {
    Store s = Store::open(path_);
    task = s.upsert_task("softmax", "h1", "toml");
  }
  Store s = Store::open(path_);
  EXPECT_EQ(s.schema_version(), Store::latest_schema_version());
  RawDb raw(path_);
  EXPECT_EQ(raw.column("SELECT COUNT(*) FROM schema_version"), std::vector<std::string>{"5"});
  ASSERT_TRUE(s.find_task("softmax"));
  EXPECT_EQ(s.find_task("softmax")->id, task);
}

TEST_F(StoreTest, NewerSchemaIsRefused) {
  { Store s = Store::open(path_); }
  {
    RawDb raw(path_);
    raw.exec("INSERT INTO schema_version (version, applied_at) VALUES (" +
             std::to_string(Store::latest_schema_version() + 1) + ", 'later')");
  }
  try {
    Store::open(path_);
    FAIL() << "a schema newer than this build must be refused";
  } catch (const StoreError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("schema version " + std::to_string(Store::latest_schema_version() + 1)), std::string::npos)
        << what;
    EXPECT_NE(what.find("newer ksol"), std::string::npos) << what;
  }
}

TEST_F(StoreTest, VersionOneFileIsMigratedForward) {
  {
    Store s = Store::open_at_version(path_, 1);
    EXPECT_EQ(s.schema_version(), 1);
    Fixture f = populate(s);
    RawDb raw(path_);
    EXPECT_FALSE(raw.columns_of("evaluations").count("worker_restarts"));
    // Written the way a version-1 ksol wrote it.
    raw.exec("PRAGMA foreign_keys = ON");
    raw.exec("INSERT INTO evaluations (run_id, candidate_id, task_id, size_name, status, gates_json, seeds_json, "
             "rerun_json, created_at) VALUES (" +
             std::to_string(f.run) + ", " + std::to_string(f.candidate) + ", " + std::to_string(f.task) +
             ", 'small', 'failed', '{}', '[]', '{}', '2024-01-01T00:00:00.000Z')");
  }
  Store s = Store::open(path_);
  EXPECT_EQ(s.schema_version(), Store::latest_schema_version());
  auto runs = s.runs();
  ASSERT_EQ(runs.size(), 1u);
  auto evals = s.evaluations_for_run(runs[0].id);
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals[0].status, Status::failed);
  EXPECT_EQ(evals[0].worker_restarts, 0);
  EXPECT_FALSE(evals[0].median_us.has_value());
}

TEST_F(StoreTest, OpenAtUnknownVersionIsRefused) {
  EXPECT_THROW(Store::open_at_version(path_, 0), StoreError);
  EXPECT_THROW(Store::open_at_version(path_, Store::latest_schema_version() + 1), StoreError);
}

TEST_F(StoreTest, UpsertTaskIsIdempotentPerSpec) {
  Store s = Store::open(path_);
  int64_t a = s.upsert_task("gemm", "h1", "v1");
  EXPECT_EQ(s.upsert_task("gemm", "h1", "v1"), a);
  int64_t b = s.upsert_task("gemm", "h2", "v2");
  EXPECT_NE(a, b);
  ASSERT_TRUE(s.find_task("gemm"));
  EXPECT_EQ(s.find_task("gemm")->spec_toml, "v2");
  EXPECT_FALSE(s.find_task("nope"));
}

TEST_F(StoreTest, UpsertCandidateReturnsExistingId) {
  Store s = Store::open(path_);
  int64_t task = s.upsert_task("gemm", "h1", "v1");
  int64_t other_task = s.upsert_task("softmax", "h1", "v1");

  CandidateRow first = candidate(task, "abc", "src");
  int64_t id = s.upsert_candidate(first);
  CandidateRow again = first;
  again.origin = "file:kernels/mine.cu";
  again.method = "tiling";
  EXPECT_EQ(s.upsert_candidate(again), id);
  auto stored = s.find_candidate(id);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->origin, "baseline:naive");  // the first origin is kept
  EXPECT_FALSE(stored->method);

  CandidateRow child = candidate(task, "def", "src2");
  child.language = "dsl";
  child.origin = "agent:coder";
  child.parent_id = id;
  child.method = "smem_tiling";
  child.agent = "expert";
  int64_t child_id = s.upsert_candidate(child);
  EXPECT_NE(child_id, id);
  auto read_child = s.find_candidate(child_id);
  ASSERT_TRUE(read_child);
  EXPECT_EQ(read_child->parent_id, std::optional<int64_t>(id));
  EXPECT_EQ(read_child->method, std::optional<std::string>("smem_tiling"));
  EXPECT_EQ(read_child->agent, std::optional<std::string>("expert"));
  EXPECT_EQ(read_child->language, "dsl");

  EXPECT_NE(s.upsert_candidate(candidate(other_task, "abc", "src")), id);  // same hash, other task
  EXPECT_EQ(s.candidates_for_task(task).size(), 2u);

  EXPECT_THROW(s.upsert_candidate(candidate(task, "abc", "different source")), StoreError);
  CandidateRow bad = candidate(task, "xyz", "src3");
  bad.language = "python";
  EXPECT_THROW(s.upsert_candidate(bad), StoreError);
  EXPECT_EQ(s.candidates_for_task(task).size(), 2u);
}

// Version 5 makes the evaluations table again (a CHECK constraint grew): the rows, their samples
// and the references between them survive it, and foreign keys are enforced afterwards.
TEST_F(StoreTest, VersionFourFileKeepsItsEvaluationsAndSamples) {
  int64_t id = 0;
  Fixture f{};
  {
    Store s = Store::open_at_version(path_, 4);
    f = populate(s);
    id = s.record_evaluation(measured(f, "large"));
    RawDb raw(path_);
    raw.exec("PRAGMA foreign_keys = ON");
    EXPECT_THROW(raw.exec("INSERT INTO evaluations (run_id, candidate_id, task_id, size_name, status, gates_json, seeds_json, rerun_json, "
                          "created_at) VALUES (" + std::to_string(f.run) + ", " + std::to_string(f.candidate) + ", " + std::to_string(f.task) +
                          ", 'small', 'far_slower', '[]', '[]', '{}', 'now')"),
                 std::runtime_error);
  }
  Store s = Store::open(path_);
  EXPECT_EQ(s.schema_version(), 5);
  auto back = s.find_evaluation(f.run, f.candidate, "large");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, id);
  EXPECT_EQ(back->samples, measured(f, "large").samples);
  EXPECT_EQ(back->worker_restarts, 1);
  RawDb raw(path_);
  raw.exec("PRAGMA foreign_keys = ON");
  EXPECT_TRUE(raw.column("PRAGMA foreign_key_check").empty());
  // The samples still belong to the evaluations table (deleting a row deletes its samples)...
  raw.exec("DELETE FROM evaluations WHERE id = " + std::to_string(id));
  EXPECT_EQ(raw.column("SELECT COUNT(*) FROM samples"), std::vector<std::string>{"0"});
  // ... and an evaluation must still name a candidate of its task.
  EXPECT_THROW(raw.exec("INSERT INTO evaluations (run_id, candidate_id, task_id, size_name, status, gates_json, seeds_json, rerun_json, "
                        "created_at) VALUES (" + std::to_string(f.run) + ", 999, " + std::to_string(f.task) +
                        ", 'small', 'ok', '[]', '[]', '{}', 'now')"),
               std::runtime_error);
}

// A baseline stopped after its first calls (status far_slower) is stored as such, with the time
// of those calls in its probe record, and read back the same way: a resumed search skips it.
TEST_F(StoreTest, FarSlowerEvaluationRoundTrips) {
  Store s = Store::open(path_);
  Fixture f = populate(s);
  SizeEvaluation e;
  e.size = "large";
  e.status = Status::far_slower;
  e.message = "far slower than cublas (one call: 2200000 us, above 8x its median of 300 us): not verified or timed in full";
  e.gates = nlohmann::json::array({{{"gate", "probe"}, {"ok", false}, {"us", 2200000.0}, {"calls_us", {2210000.0, 2200000.0}}, {"stop_above_us", 2400.0}}});
  e.probe_us = 2200000.0;
  e.sol_us = 40;
  s.record(f.run, f.candidate, f.task, e);
  auto back = s.find_evaluation(f.run, f.candidate, "large");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, Status::far_slower);
  EXPECT_EQ(back->failed_gate, Gate::none);
  EXPECT_EQ(back->message, e.message);
  EXPECT_FALSE(back->median_us);
  EXPECT_DOUBLE_EQ(probe_us_of(back->gates), 2200000.0);
}

TEST_F(StoreTest, AGateThisVersionDoesNotKnowIsAnErrorWhenRead) {
  Store s = Store::open(path_);
  Fixture f = populate(s);
  EvaluationRow in = measured(f, "large");
  in.status = Status::failed;
  in.failed_gate = Gate::correctness;
  int64_t id = s.record_evaluation(in);
  EXPECT_EQ(s.find_evaluation(f.run, f.candidate, "large")->failed_gate, Gate::correctness);
  RawDb(path_).exec("UPDATE evaluations SET failed_gate = 'teleport' WHERE id = " + std::to_string(id));
  try {
    s.find_evaluation(f.run, f.candidate, "large");
    ADD_FAILURE() << "read an unknown gate";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("failed gate 'teleport', which this ksol does not know"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, EvaluationAndSamplesRoundTrip) {
  Store s = Store::open(path_);
  Fixture f = populate(s);
  EvaluationRow in = measured(f, "large");
  int64_t id = s.record_evaluation(in);

  auto out = s.find_evaluation(f.run, f.candidate, "large");
  ASSERT_TRUE(out);
  EXPECT_EQ(out->id, id);
  EXPECT_EQ(out->run_id, f.run);
  EXPECT_EQ(out->candidate_id, f.candidate);
  EXPECT_EQ(out->task_id, f.task);
  EXPECT_EQ(out->size_name, "large");
  EXPECT_EQ(out->status, Status::ok);
  EXPECT_EQ(out->failed_gate, Gate::none);
  EXPECT_FALSE(out->error_class);
  EXPECT_FALSE(out->message);
  EXPECT_EQ(out->gates, in.gates);
  EXPECT_EQ(out->median_us, in.median_us);
  EXPECT_EQ(out->ci_low_us, in.ci_low_us);
  EXPECT_EQ(out->ci_high_us, in.ci_high_us);
  EXPECT_EQ(out->sol_us, in.sol_us);
  EXPECT_EQ(out->pct_sol, in.pct_sol);
  EXPECT_EQ(out->clock_mhz, in.clock_mhz);
  EXPECT_TRUE(out->throttled);
  EXPECT_EQ(out->seeds, in.seeds);
  EXPECT_EQ(out->rerun, in.rerun);
  EXPECT_EQ(out->worker_restarts, 1);
  EXPECT_EQ(out->samples, in.samples);
  EXPECT_EQ(s.samples(id), in.samples);
  ASSERT_EQ(out->created_at.size(), 24u) << out->created_at;  // 2024-05-01T12:34:56.789Z
  EXPECT_EQ(out->created_at[10], 'T');
  EXPECT_EQ(out->created_at.back(), 'Z');

  EvaluationRow failed;
  failed.run_id = f.run;
  failed.candidate_id = f.candidate;
  failed.task_id = f.task;
  failed.size_name = "small";
  failed.status = Status::failed;
  failed.failed_gate = Gate::correctness;
  failed.error_class = "wrong_result";
  failed.message = "max rel err 0.5 at (3, 7)";
  int64_t failed_id = s.record_evaluation(failed);
  auto back = s.find_evaluation(f.run, f.candidate, "small");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->failed_gate, Gate::correctness);
  EXPECT_EQ(back->message, failed.message);
  EXPECT_FALSE(back->median_us);
  EXPECT_FALSE(back->pct_sol);
  EXPECT_FALSE(back->throttled);
  EXPECT_TRUE(back->samples.empty());

  auto all = s.evaluations_for_run(f.run);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, id);
  EXPECT_EQ(all[0].samples, in.samples);
  EXPECT_EQ(all[1].id, failed_id);
  EXPECT_EQ(s.evaluations_for_task(f.task).size(), 2u);
  EXPECT_FALSE(s.find_evaluation(f.run, f.candidate, "medium"));
}

TEST_F(StoreTest, FindEvaluationReturnsTheNewest) {
  Store s = Store::open(path_);
  Fixture f = populate(s);
  EvaluationRow first = measured(f, "small");
  first.median_us = 10;
  s.record_evaluation(first);
  EvaluationRow second = measured(f, "small");
  second.median_us = 20;
  int64_t newest = s.record_evaluation(second);
  auto found = s.find_evaluation(f.run, f.candidate, "small");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, newest);
  EXPECT_EQ(found->median_us, std::optional<double>(20));
}

TEST_F(StoreTest, EvaluationIsAllOrNothing) {
  Store s = Store::open(path_);
  Fixture f = populate(s);

  // A NaN sample fails on the last insert; the evaluation row before it must go too.
  EvaluationRow nan_sample = measured(f, "small");
  nan_sample.samples.push_back(std::nan(""));
  EXPECT_THROW(s.record_evaluation(nan_sample), StoreError);

  // A size skipped on a resume is never a row of its own (the earlier run's row stands).
  EvaluationRow bad_status = measured(f, "small");
  bad_status.status = Status::skipped;
  EXPECT_THROW(s.record_evaluation(bad_status), StoreError);

  int64_t other_task = s.upsert_task("softmax", "h", "t");
  EvaluationRow wrong_task = measured(f, "small");
  wrong_task.task_id = other_task;
  EXPECT_THROW(s.record_evaluation(wrong_task), StoreError);

  EvaluationRow no_run = measured(f, "small");
  no_run.run_id = f.run + 100;
  EXPECT_THROW(s.record_evaluation(no_run), StoreError);

  EXPECT_TRUE(s.evaluations_for_run(f.run).empty());
  RawDb raw(path_);
  EXPECT_EQ(raw.column("SELECT COUNT(*) FROM samples"), std::vector<std::string>{"0"});

  // The connection is still usable after the rollbacks.
  s.record_evaluation(measured(f, "small"));
  EXPECT_EQ(s.evaluations_for_run(f.run).size(), 1u);
}

TEST_F(StoreTest, ErrorsCarryTheStatement) {
  Store s = Store::open(path_);
  try {
    s.finish_run(42, "done");
    FAIL() << "finishing an unknown run must throw";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("no run 42"), std::string::npos) << e.what();
    EXPECT_NE(e.statement().find("UPDATE runs"), std::string::npos) << e.statement();
  }
}

TEST_F(StoreTest, LiveRunIsVisibleToASecondConnection) {
  Store writer = Store::open(path_);
  Fixture f = populate(writer);
  int64_t id = writer.record_evaluation(measured(f, "medium"));

  // No finish_run and no close: a reader (ksol report during a run, or the next run after a
  // crash) must already see the committed evaluation and the run as still running.
  Store reader = Store::open(path_);
  auto run = reader.find_run(f.run);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, "running");
  EXPECT_FALSE(run->finished_at);
  EXPECT_EQ(run->command, "ksol run tasks/gemm");
  EXPECT_EQ(run->meta["gpu"], "H200");
  auto seen = reader.find_evaluation(f.run, f.candidate, "medium");
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->id, id);
  EXPECT_EQ(seen->samples.size(), 5u);

  writer.finish_run(f.run, "finished");
  run = reader.find_run(f.run);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, "finished");
  EXPECT_TRUE(run->finished_at);
}

TEST_F(StoreTest, KilledProcessKeepsWhatItMeasured) {
  pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    // The child must not return into the test runner: any failure ends it with a plain exit
    // code, which the parent reports. It uses malloc and SQLite after fork, which is safe
    // because the test runner has no other threads at this point.
    try {
      Store s = Store::open(path_);
      Fixture f = populate(s);
      s.record_evaluation(measured(f, "large"));
      raise(SIGKILL);  // no finish_run, no destructor, no checkpoint
    } catch (...) {
    }
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  Store s = Store::open(path_);
  auto runs = s.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "running");
  EXPECT_FALSE(runs[0].finished_at);
  auto evals = s.evaluations_for_run(runs[0].id);
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals[0].size_name, "large");
  EXPECT_EQ(evals[0].samples.size(), 5u);
}

// Several processes opening one new store at the same moment (as four `ksol eval --compile-only`
// started together on a fresh GPU host do): switching the new file to WAL meets
// SQLITE_BUSY without the busy handler, which Store::open retries. Eight children per round wait
// on a pipe, so they open together; each exits 0 if its open succeeded.
TEST_F(StoreTest, ProcessesOpeningANewStoreTogetherAllSucceed) {
  for (int round = 0; round < 6; ++round) {
    const std::string path = (dir_ / ("together-" + std::to_string(round) + ".db")).string();
    int gate[2];
    ASSERT_EQ(pipe(gate), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < 8; ++i) {
      pid_t child = fork();
      ASSERT_NE(child, -1);
      if (child == 0) {
        close(gate[1]);
        char c;
        (void)!read(gate[0], &c, 1);  // returns 0 when the parent closes its end
        int code = 0;
        try {
          Store s = Store::open(path);
          s.upsert_task("t" + std::to_string(i), "spec", "{}");
        } catch (const std::exception& e) {
          std::fprintf(stderr, "child %d: %s\n", i, e.what());
          code = 1;
        }
        _exit(code);
      }
      children.push_back(child);
    }
    close(gate[0]);
    close(gate[1]);  // open the gate
    for (pid_t child : children) {
      int status = 0;
      ASSERT_EQ(waitpid(child, &status, 0), child);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round << ": a child's open failed";
    }
  }
}

TEST_F(StoreTest, LatestCalibrationPerGpu) {
  Store s = Store::open(path_);
  EXPECT_FALSE(s.latest_calibration("GPU-1"));
  s.save_calibration("GPU-1", "NVIDIA H200", {{"hbm_gbps", 4000}});
  s.save_calibration("GPU-2", "NVIDIA H100", {{"hbm_gbps", 3000}});
  s.save_calibration("GPU-1", "NVIDIA H200", {{"hbm_gbps", 4100}});
  auto c = s.latest_calibration("GPU-1");
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)["hbm_gbps"], 4100);
  EXPECT_EQ((*s.latest_calibration("GPU-2"))["hbm_gbps"], 3000);
}

TEST_F(StoreTest, RunReportAndTaskNamesRoundTrip) {
  Store s = Store::open(path_);
  Fixture f = populate(s);
  EXPECT_FALSE(s.run_report(f.run));
  EXPECT_TRUE(s.task_names_for_run(f.run).empty());
  int64_t other = s.upsert_task("relu_f32", "h2", "toml");
  int64_t c2 = s.upsert_candidate(candidate(other, "h-relu", "relu"));
  EvaluationRow e = measured(f, "small");
  e.task_id = other;
  e.candidate_id = c2;
  s.record_evaluation(e);
  s.record_evaluation(measured(f, "small"));
  s.record_evaluation(e);
  EXPECT_EQ(s.task_names_for_run(f.run), (std::vector<std::string>{"relu_f32", "gemm_fp32"}));  // first evaluated first
  ASSERT_TRUE(s.task_by_id(other));
  EXPECT_EQ(s.task_by_id(other)->name, "relu_f32");
  EXPECT_FALSE(s.task_by_id(9999));

  s.save_run_report(f.run, "/tmp/r1", {{"run", f.run}, {"results", nlohmann::json::array()}});
  s.save_run_report(f.run, "/tmp/r2", {{"run", f.run}, {"results", {{{"task", "relu_f32"}}}}});  // replaces the first
  std::optional<RunReport> r = s.run_report(f.run);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->report_dir, "/tmp/r2");
  EXPECT_EQ(r->results["results"][0]["task"], "relu_f32");
  EXPECT_FALSE(r->created_at.empty());
}

// Every file in the store's folder, with its bytes: what a read-only open must leave as it was.
std::map<std::string, std::string> folder_bytes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    out[e.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return out;
}

TEST_F(StoreTest, ReadOnlyOpenOfAMissingFileCreatesNothing) {
  try {
    Store::open_read_only(path_);
    FAIL() << "a missing store must be an error";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), "store: no store at " + path_);
  }
  EXPECT_FALSE(fs::exists(fs::path(path_).parent_path()));
  EXPECT_THROW(Store::open_read_only(""), StoreError);
  // A file that is not a ksol store is named as such.
  fs::create_directories(fs::path(path_).parent_path());
  { std::ofstream(path_) << "not a database, not even close, but long enough to be read as a header....................................."; }
  try {
    Store::open_read_only(path_);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path_ + " is not a ksol store"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, ReadOnlyOpenChangesNothingOnDisk) {
  {
    Store s = Store::open(path_);
    Fixture f = populate(s);
    s.record_evaluation(measured(f, "small"));
    s.finish_run(f.run, "finished");
  }
  const fs::path dir = fs::path(path_).parent_path();
  std::map<std::string, std::string> before = folder_bytes(dir);
  ASSERT_EQ(before.size(), 1u) << "a closed store is one file";
  {
    Store r = Store::open_read_only(path_);
    ASSERT_EQ(r.runs().size(), 1u);
    EXPECT_EQ(r.evaluations_for_run(r.runs()[0].id).size(), 1u);
    EXPECT_THROW(r.begin_run("ksol x", nlohmann::json::object()), StoreError);  // it cannot write
    EXPECT_EQ(folder_bytes(dir).size(), 1u) << "no -wal or -shm file while it reads";
  }
  EXPECT_EQ(folder_bytes(dir), before);
}

TEST_F(StoreTest, ReadOnlyOpenSeesALiveRun) {
  Store writer = Store::open(path_);
  Fixture f = populate(writer);
  writer.record_evaluation(measured(f, "medium"));
  {
    Store reader = Store::open_read_only(path_);
    auto run = reader.find_run(f.run);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->status, "running");
    EXPECT_EQ(reader.evaluations_for_run(f.run).size(), 1u);
  }
  writer.record_evaluation(measured(f, "large"));  // the writer goes on after the reader left
  writer.finish_run(f.run, "finished");
  Store reader = Store::open_read_only(path_);
  EXPECT_EQ(reader.evaluations_for_run(f.run).size(), 2u);
  EXPECT_EQ(reader.find_run(f.run)->status, "finished");
}

TEST_F(StoreTest, ReadOnlyOpenOfAnOlderSchemaMigratesACopy) {
  {
    Store s = Store::open_at_version(path_, 1);
    populate(s);
  }
  std::map<std::string, std::string> before = folder_bytes(fs::path(path_).parent_path());
  {
    Store r = Store::open_read_only(path_);
    EXPECT_EQ(r.schema_version(), Store::latest_schema_version());
    ASSERT_EQ(r.runs().size(), 1u);
    EXPECT_FALSE(r.run_report(r.runs()[0].id));
    EXPECT_EQ(r.path(), path_);
  }
  EXPECT_EQ(folder_bytes(fs::path(path_).parent_path()), before);
  RawDb raw(path_);
  EXPECT_EQ(raw.column("SELECT MAX(version) FROM schema_version"), std::vector<std::string>{"1"});
}

TEST_F(StoreTest, ReadOnlyOpenRefusesANewerSchema) {
  { Store s = Store::open(path_); }
  {
    RawDb raw(path_);
    raw.exec("INSERT INTO schema_version (version, applied_at) VALUES (" + std::to_string(Store::latest_schema_version() + 1) + ", 'later')");
  }
  try {
    Store::open_read_only(path_);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("newer ksol"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, MovedStoreKeepsWorking) {
  Store a = Store::open(path_);
  int64_t run = a.begin_run("ksol run", nlohmann::json::object());
  Store b = std::move(a);
  b.finish_run(run, "finished");
  Store c = Store::open((dir_ / "other.db").string());
  c = std::move(b);
  ASSERT_TRUE(c.find_run(run));
  EXPECT_EQ(c.find_run(run)->status, "finished");
  EXPECT_EQ(c.path(), path_);
}

}  // namespace
}  // namespace ksol::store

// A task's two baselines built from one file with different defines are two candidates in the
// store (gemm_bias_gelu_bf16's cublaslt.cu and the same file with -DKSOL_UNFUSED were one row,
// labelled with the first one's origin); a job without defines keeps its old hash.
TEST(CandidateIdentity, DefinesAreAPartOfTheSourceHash) {
  ksol::CompileJob plain;
  plain.source_text = "extern \"C\" int ksol_run(const ksol_call*) { return 0; }\n";
  ksol::CompileJob unfused = plain;
  unfused.extra_flags = {"-DKSOL_UNFUSED"};
  ksol::CompileJob relaxed = plain;
  relaxed.extra_flags = {"--expt-relaxed-constexpr"};
  EXPECT_NE(ksol::candidate_source_hash(plain), ksol::candidate_source_hash(unfused));
  EXPECT_EQ(ksol::candidate_source_hash(plain), ksol::sha256_hex(plain.source_text + "\n" + plain.source_text));
  EXPECT_EQ(ksol::candidate_source_hash(plain), ksol::candidate_source_hash(relaxed));
}
