// ksol bench and ksol optimize over the ranks of an MPI job (mpirun -np 4 on this host, the
// scripted worker on every rank): the store holds the rows a single process writes, also when a
// rank is killed in the middle of the run. Skipped where ksol-mpi was not built or mpirun is not
// OpenMPI's (the tests use its --enable-recovery, which keeps a job alive past a lost rank).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/util.h"

namespace fs = std::filesystem;

namespace {

std::string bin(const std::string& n) { return std::string(KSOL_BUILD_DIR) + "/" + n; }
std::string worker() { return std::string(KSOL_SOURCE_DIR) + "/tests/e2e/scripted_worker.py"; }

std::string why_no_mpi() {
  if (!fs::exists(bin("ksol-mpi"))) return "ksol-mpi was not built (CMake found no MPI; Debian: libopenmpi-dev openmpi-bin)";
  ksol::ProcessResult v = ksol::run_process({"mpirun", "--version"}, 60);
  if (v.exit_code != 0) return "no mpirun on PATH";
  if (v.output.find("Open MPI") == std::string::npos) return "mpirun is not OpenMPI's: " + v.output.substr(0, 80);
  return "";
}

// mpirun for np ranks on this host: more ranks than cores, as root where the CI runs as root, and
// alive past a lost rank.
std::vector<std::string> mpirun(int np, std::vector<std::string> cmd) {
  std::vector<std::string> a = {"mpirun", "--oversubscribe", "--enable-recovery", "-np", std::to_string(np)};
  if (::geteuid() == 0) a.insert(a.begin() + 1, "--allow-run-as-root");
  a.insert(a.end(), cmd.begin(), cmd.end());
  return a;
}

// Every evaluation in the store's runs, as what a run says of a candidate at a size: task, source
// hash, size, status, gate, error class and median (the scripted worker's times are fixed).
std::vector<std::string> rows(const std::string& db) {
  sqlite3* h = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return out;
  const char* q =
      "select t.name || ' ' || c.source_hash || ' ' || e.size_name || ' ' || e.status || ' ' || coalesce(e.failed_gate, '-') || ' ' || "
      "coalesce(e.error_class, '-') || ' ' || coalesce(e.median_us, 0) from evaluations e join tasks t on t.id = e.task_id "
      "join candidates c on c.id = e.candidate_id";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, q, -1, &st, nullptr) == SQLITE_OK)
    while (sqlite3_step(st) == SQLITE_ROW) out.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  sqlite3_close(h);
  std::sort(out.begin(), out.end());
  return out;
}

struct Dir {
  fs::path p;
  explicit Dir(const std::string& name) : p(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~Dir() { fs::remove_all(p); }
  std::string operator/(const std::string& f) const { return (p / f).string(); }
};

const std::vector<std::string> kBench = {"bench", "--tasks", "relu_f32,copy_f32", "--sizes", "small,medium", "--no-hidden"};
std::vector<std::string> optimize_args(const std::string& report) {
  return {"optimize", "relu_f32", "copy_f32", "--budget-candidates", "6", "--report", report};
}
std::vector<std::string> ksol_cmd(const std::string& db, std::vector<std::string> args) {
  std::vector<std::string> a = {bin("ksol"), "--store", db, "--worker", worker()};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}
std::vector<std::string> with_mpi(std::vector<std::string> a) {
  a.push_back("--mpi");
  return a;
}

}  // namespace

TEST(Mpi, BenchAndOptimizeOverFourRanksWriteTheRowsOfOneProcess) {
  if (std::string why = why_no_mpi(); !why.empty()) GTEST_SKIP() << why;
  Dir d("ksol-mpi");
  ::setenv("SCRIPTED_US", "100000", 1);  // slower than SOL at every size: nothing is suspect
  ::setenv("SCRIPTED_LOG", (d / "evals.log").c_str(), 1);
  ksol::ProcessResult one = ksol::run_process(ksol_cmd(d / "one.db", kBench), 600);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ksol::ProcessResult many = ksol::run_process(mpirun(4, with_mpi(ksol_cmd(d / "mpi.db", kBench))), 600);
  ASSERT_EQ(many.exit_code, 0) << many.output;
  EXPECT_EQ(rows(d / "mpi.db").size(), 8u);  // 4 baselines x 2 sizes
  EXPECT_EQ(rows(d / "one.db"), rows(d / "mpi.db")) << many.output;
  EXPECT_NE(many.output.find("(rank "), std::string::npos) << many.output;

  fs::remove(d / "evals.log");
  one = ksol::run_process(ksol_cmd(d / "one-o.db", optimize_args(d / "r1")), 900, d.p.string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  many = ksol::run_process(mpirun(4, with_mpi(ksol_cmd(d / "mpi-o.db", optimize_args(d / "r4")))), 900, d.p.string());
  ASSERT_EQ(many.exit_code, 0) << many.output;
  EXPECT_GT(rows(d / "mpi-o.db").size(), 8u);
  EXPECT_EQ(rows(d / "one-o.db"), rows(d / "mpi-o.db")) << many.output;
  // The two tasks searched on two workers; rank 0 wrote the one report.
  nlohmann::json rep = nlohmann::json::parse(ksol::read_file(d / "r4/results.json"));
  ASSERT_EQ(rep["results"].size(), 2u);
  EXPECT_NE(rep["results"][0]["worker"], rep["results"][1]["worker"]) << rep.dump();
  ::unsetenv("SCRIPTED_US");
  ::unsetenv("SCRIPTED_LOG");
}

// A rank killed with an evaluation in flight: after KSOL_MPI_LOST_AFTER seconds of silence rank 0
// counts it lost and sends the evaluation to another worker; nothing is recorded as a crash and
// the run's rows are the single process's.
TEST(Mpi, ARankKilledMidRunLosesNothing) {
  if (std::string why = why_no_mpi(); !why.empty()) GTEST_SKIP() << why;
  Dir d("ksol-mpi-kill");
  ::setenv("SCRIPTED_US", "100000", 1);
  ::setenv("KSOL_MPI_LOST_AFTER", "2", 1);
  ksol::ProcessResult one = ksol::run_process(ksol_cmd(d / "one.db", kBench), 600);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ::setenv("SCRIPTED_KILL_RANK", "2", 1);
  ::setenv("SCRIPTED_KILL_MARK", (d / "killed-bench").c_str(), 1);
  // Each evaluation takes a moment, as on a GPU, so each of the four workers takes one of the four
  // baselines before any worker is free again: rank 2 gets one.
  ::setenv("SCRIPTED_SLEEP_S", "0.3", 1);
  ksol::ProcessResult many = ksol::run_process(mpirun(4, with_mpi(ksol_cmd(d / "mpi.db", kBench))), 600);
  EXPECT_EQ(many.exit_code, 0) << many.output;
  ASSERT_TRUE(fs::exists(d / "killed-bench")) << "rank 2 evaluated nothing, so it was not killed:\n" << many.output;
  EXPECT_NE(many.output.find("rank 2 lost (nothing from rank 2 on "), std::string::npos) << many.output;
  EXPECT_EQ(rows(d / "one.db"), rows(d / "mpi.db")) << many.output;

  // Optimize on two ranks, two tasks: each rank searches one, and rank 1 dies under its first
  // evaluation; rank 0's worker finishes both searches.
  ::unsetenv("SCRIPTED_KILL_RANK");
  ::unsetenv("SCRIPTED_SLEEP_S");
  one = ksol::run_process(ksol_cmd(d / "one-o.db", optimize_args(d / "r1")), 900, d.p.string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ::setenv("SCRIPTED_KILL_RANK", "1", 1);
  ::setenv("SCRIPTED_KILL_MARK", (d / "killed-optimize").c_str(), 1);
  many = ksol::run_process(mpirun(2, with_mpi(ksol_cmd(d / "mpi-o.db", optimize_args(d / "r2")))), 900, d.p.string());
  EXPECT_EQ(many.exit_code, 0) << many.output;
  ASSERT_TRUE(fs::exists(d / "killed-optimize")) << many.output;
  EXPECT_NE(many.output.find("rank 1 lost"), std::string::npos) << many.output;
  EXPECT_EQ(rows(d / "one-o.db"), rows(d / "mpi-o.db")) << many.output;
  for (const char* v : {"SCRIPTED_US", "KSOL_MPI_LOST_AFTER", "SCRIPTED_KILL_RANK", "SCRIPTED_KILL_MARK"}) ::unsetenv(v);
}
