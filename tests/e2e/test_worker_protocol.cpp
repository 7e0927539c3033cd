// The coordinator against a scripted worker: replies, crashes, hangs, sticky CUDA errors,
// garbage, restarts, and store rows that survive a resumed run.
#include <gtest/gtest.h>

#include <filesystem>

#include "compile/compiler.h"
#include "coord/session.h"
#include "coord/worker_client.h"
#include "core/util.h"
#include "task/task.h"

namespace fs = std::filesystem;
using namespace ksol;

namespace {
std::string scripted() { return std::string(KSOL_SOURCE_DIR) + "/tests/e2e/scripted_worker.py"; }
nlohmann::json eval_req(const std::string& mode) { return {{"op", "eval"}, {"candidate_so", "/x/" + mode + ".so"}}; }
std::string temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ksol-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}
}  // namespace

TEST(WorkerProtocol, RepliesCrashHangFatalGarbageAndRestart) {
  WorkerClient w({scripted()}, temp_dir("proto") + "/worker.log");
  WorkerReply r = w.call({{"op", "hello"}}, 10);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.body["device"]["name"], "NVIDIA H200");

  r = w.call(eval_req("ok"), 10);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.body["result"]["status"], "ok");
  EXPECT_EQ(w.restarts(), 0);

  r = w.call(eval_req("crash"), 10);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "crash");
  EXPECT_NE(r.message.find("exited with code 139"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("scripted crash"), std::string::npos) << "stderr tail carried";
  EXPECT_FALSE(w.running());

  r = w.call(eval_req("ok"), 10);  // a fresh worker
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(w.restarts(), 1);

  r = w.call(eval_req("hang"), 1.0);
  EXPECT_EQ(r.failure, "timeout");
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_FALSE(w.running());

  r = w.call(eval_req("fatal"), 10);
  EXPECT_EQ(r.failure, "fatal");
  EXPECT_NE(r.message.find("cudaErrorIllegalAddress"), std::string::npos);

  r = w.call(eval_req("garbage"), 10);
  EXPECT_EQ(r.failure, "crash");
  EXPECT_NE(r.message.find("not JSON"), std::string::npos);

  r = w.call(eval_req("ok"), 10);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(w.restarts(), 4);
}

TEST(WorkerProtocol, MissingWorkerBinaryIsAFailureNotACrashOfTheCoordinator) {
  WorkerClient w({"/nonexistent/ksol-worker"}, temp_dir("missing") + "/worker.log");
  WorkerReply r = w.call({{"op", "hello"}}, 5);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "crash");
  EXPECT_NE(r.message.find("code 127"), std::string::npos) << r.message;
}

// A session evaluates through the scripted worker: failures are recorded against the candidate,
// every row reaches the store, and a resumed run repeats nothing already measured.
TEST(Session, RecordsEveryOutcomeAndResumes) {
  std::string dir = temp_dir("session");
  setenv("KSOL_CACHE_DIR", (dir + "/cache").c_str(), 1);
  Task t = load_task(resolve_task_path("scan_f32"));
  // The candidate "compiles" only as far as the scripted worker cares: its path names a behaviour.
  auto fake = [&](const std::string& mode) {
    CompileResult c;
    c.ok = true;
    c.so_path = dir + "/" + mode + ".so";
    c.key = mode;
    return c;
  };
  CompileJob job;
  job.source_path = "cand.cu";
  job.source_text = "// candidate";
  Session::Options so;
  so.store_path = dir + "/ksol.db";
  so.worker_argv = {scripted()};
  int64_t run = 0;
  {
    Session s(so);
    ASSERT_TRUE(s.has_gpu());
    run = s.begin_run("test");
    EvalOptions o;
    o.sizes = {"small", "odd"};
    CompileResult ok = fake("ok");
    CandidateOutcome a = s.evaluate(t, job, "cand", "file:cand.cu", o, &ok);
    ASSERT_EQ(a.sizes.size(), 2u);
    EXPECT_EQ(a.sizes[0].status, Status::ok);
    EXPECT_DOUBLE_EQ(a.sizes[0].median_us, 100);
    EXPECT_GT(a.sizes[0].sol_us, 0);
    EXPECT_GT(a.sizes[0].pct_sol, 0);
    CompileJob job2 = job;
    job2.source_text = "// another candidate";
    CompileResult crash = fake("crash");
    CandidateOutcome b = s.evaluate(t, job2, "crasher", "file:crash.cu", o, &crash);
    EXPECT_EQ(b.sizes[0].status, Status::failed);
    EXPECT_EQ(b.sizes[0].error_class, "crash");
    EXPECT_EQ(b.sizes[1].status, Status::failed);  // crashed again after the restart
    // The run is never finished: as if the coordinator were killed here.
  }
  {
    store::Store st = store::Store::open(dir + "/ksol.db");
    auto rows = st.evaluations_for_run(run);
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].samples.size(), 3u);
    EXPECT_EQ(rows[2].error_class.value_or(""), "crash");
    EXPECT_EQ(st.find_run(run)->status, "running");
  }
  int64_t second = 0;
  {
    Session s(so);
    second = s.begin_run("resume", {{"resume_of", run}});
    EvalOptions o;
    o.sizes = {"small", "odd", "medium"};
    o.resume_run = run;
    CompileResult ok = fake("ok");
    CandidateOutcome a = s.evaluate(t, job, "cand", "file:cand.cu", o, &ok);
    std::map<std::string, const SizeEvaluation*> by;
    for (auto& so : a.sizes) by[so.size] = &so;
    EXPECT_EQ(by["small"]->status, Status::skipped);
    EXPECT_EQ(by["odd"]->status, Status::skipped);
    EXPECT_EQ(by["medium"]->status, Status::ok);
    EXPECT_DOUBLE_EQ(by["small"]->median_us, 100);
    // A worker that died under an evaluation says nothing about the candidate: it runs again
    // (and crashes again here), where a failure the worker reported would be reused.
    CompileJob job2 = job;
    job2.source_text = "// another candidate";
    CompileResult crash = fake("crash");
    CandidateOutcome b = s.evaluate(t, job2, "crasher", "file:crash.cu", o, &crash);
    EXPECT_EQ(b.sizes[0].status, Status::failed);
    EXPECT_EQ(b.sizes[0].error_class, "crash");
    EXPECT_EQ(b.sizes[0].message.find("already in run"), std::string::npos) << b.sizes[0].message;
  }
  {
    // Resuming the resumed run: what either run did is skipped, found through resume_of.
    Session s(so);
    s.begin_run("resume again", {{"resume_of", second}});
    EvalOptions o;
    o.sizes = {"small", "medium", "large"};
    o.resume_run = second;
    CompileResult ok = fake("ok");
    CandidateOutcome a = s.evaluate(t, job, "cand", "file:cand.cu", o, &ok);
    std::map<std::string, const SizeEvaluation*> by;
    for (auto& so : a.sizes) by[so.size] = &so;
    EXPECT_EQ(by["small"]->status, Status::skipped);
    EXPECT_EQ(by["small"]->message, "already in run " + std::to_string(run));
    EXPECT_EQ(by["medium"]->status, Status::skipped);
    EXPECT_EQ(by["medium"]->message, "already in run " + std::to_string(second));
    EXPECT_NE(by["large"]->status, Status::skipped);  // evaluated (the scripted 100 us is "suspect" there: faster than SOL)
  }
  {
    // An optimize run keeps resume_of in its command's object: the chain still goes through it.
    Session s(so);
    int64_t opt = s.begin_run("optimize", {{"optimize", {{"resume_of", second}}}});
    Session s2(so);
    s2.begin_run("resume the optimize run", {{"resume_of", opt}});
    EvalOptions o;
    o.sizes = {"small"};
    o.resume_run = opt;
    CompileResult ok = fake("ok");
    CandidateOutcome a = s2.evaluate(t, job, "cand", "file:cand.cu", o, &ok);
    EXPECT_EQ(a.sizes[0].status, Status::skipped);
    EXPECT_EQ(a.sizes[0].message, "already in run " + std::to_string(run));
  }
}

namespace {

// A candidate evaluated by the scripted worker on scan_f32: its folder (also the compile cache's),
// the task, a compile result that passed, its job, and session options with a store there.
struct ScriptedCase {
  std::string dir;
  Task t;
  CompileResult c;
  CompileJob job;
  Session::Options so;
};
ScriptedCase scripted_case(const std::string& name, const std::string& source_path, const std::string& source_text) {
  ScriptedCase k;
  k.dir = temp_dir(name);
  setenv("KSOL_CACHE_DIR", (k.dir + "/cache").c_str(), 1);
  k.t = load_task(resolve_task_path("scan_f32"));
  k.c.ok = true;
  k.c.so_path = k.dir + "/ok.so";
  k.c.key = "ok";
  k.job.source_path = source_path;
  k.job.source_text = source_text;
  k.so.store_path = k.dir + "/ksol.db";
  k.so.worker_argv = {scripted()};
  return k;
}

}  // namespace

// Screening (the search's prune_above_us): the worker is asked to time first; once a size is
// screened out, the sizes after it are not evaluated.
TEST(Session, AScreenedOutSizeEndsTheEvaluation) {
  ScriptedCase k = scripted_case("screen", "cand.cu", "// screened candidate");
  auto& [dir, t, c, job, so] = k;
  Session s(so);
  ASSERT_TRUE(s.has_gpu());
  s.begin_run("screen");
  EvalOptions o;
  o.sizes = {"small", "odd", "medium"};
  o.prune_above_us = {{"small", 150}, {"medium", 50}};  // the scripted candidate takes 100 us; sizes run in task order
  CandidateOutcome a = s.evaluate(t, job, "cand", "file:cand.cu", o, &c);
  ASSERT_EQ(a.sizes.size(), 2u);
  EXPECT_EQ(a.sizes[0].status, Status::ok);
  EXPECT_EQ(a.sizes[1].status, Status::failed);
  EXPECT_EQ(a.sizes[1].failed_gate, Gate::screen);
  EXPECT_EQ(a.sizes[1].error_class, "slower_than_best");
  EXPECT_FALSE(a.all_ok());
}

// A search's baseline with an early stop at a size (EvalOptions::far_slower): the request carries
// the limit, a stopped size is far_slower with the fastest baseline named and its one call's time,
// the other sizes run in full, the store keeps it and a resumed run reuses it as it was. A worker
// that stops an evaluation nobody asked to stop breaks the protocol.
TEST(Session, AFarSlowerBaselineIsRecordedAndResumed) {
  ScriptedCase k = scripted_case("far_slower", "naive.cu", "// a naive baseline");
  auto& [dir, t, c, job, so] = k;
  EvalOptions o;
  o.sizes = {"small", "odd"};
  o.far_slower = {{"small", {"cub", 10, 8}}, {"odd", {"cub", 50, 8}}};  // the scripted baseline takes 100 us: above 80, below 400
  int64_t run = 0;
  {
    Session s(so);
    ASSERT_TRUE(s.has_gpu());
    run = s.begin_run("far_slower");
    CandidateOutcome a = s.evaluate(t, job, "baseline:naive", "baseline:naive", o, &c);
    ASSERT_EQ(a.sizes.size(), 2u);
    EXPECT_EQ(a.sizes[0].status, Status::far_slower);
    EXPECT_EQ(a.sizes[0].failed_gate, Gate::none);
    EXPECT_DOUBLE_EQ(a.sizes[0].probe_us, 100);
    EXPECT_EQ(a.sizes[0].median_us, 0);
    EXPECT_EQ(a.sizes[0].message, "far slower than cub (one call: 100 us, above 8x its median of 10.00 us): not verified or timed in full");
    EXPECT_EQ(a.sizes[0].raw.value("status", ""), "far_slower");
    EXPECT_EQ(a.sizes[1].status, Status::ok);
    EXPECT_FALSE(a.all_ok());
    store::Store* st = s.store();
    auto row = st->find_evaluation(run, st->evaluations_for_run(run)[0].candidate_id, "small");
    ASSERT_TRUE(row);
    EXPECT_EQ(row->status, Status::far_slower);
    EXPECT_DOUBLE_EQ(probe_us_of(row->gates), 100);
  }
  {
    Session s(so);
    s.begin_run("resume", {{"resume_of", run}});
    EvalOptions r = o;
    r.resume_run = run;
    CandidateOutcome a = s.evaluate(t, job, "baseline:naive", "baseline:naive", r, &c);
    ASSERT_EQ(a.sizes.size(), 2u);
    EXPECT_EQ(a.sizes[0].status, Status::far_slower);
    EXPECT_DOUBLE_EQ(a.sizes[0].probe_us, 100);
    EXPECT_NE(a.sizes[0].message.find("far slower than cub"), std::string::npos) << a.sizes[0].message;
    EXPECT_EQ(a.sizes[1].status, Status::skipped);
  }
  {
    Session s(so);
    EvalOptions plain;
    plain.sizes = {"small"};
    CompileResult far = c;
    far.so_path = dir + "/far.so";
    CandidateOutcome a = s.evaluate(t, job, "baseline:naive", "baseline:naive", plain, &far);
    ASSERT_EQ(a.sizes.size(), 1u);
    EXPECT_EQ(a.sizes[0].status, Status::failed);
    EXPECT_EQ(a.sizes[0].failed_gate, Gate::worker);
    EXPECT_EQ(a.sizes[0].error_class, "protocol_violation");
  }
}

TEST(Session, SuspectWhenFasterThanSpeedOfLight) {
  std::string dir = temp_dir("suspect");
  setenv("SCRIPTED_US", "0.001", 1);
  Task t = load_task(resolve_task_path("scan_f32"));
  Session::Options so;
  so.worker_argv = {scripted()};
  Session s(so);
  EvalOptions o;
  o.sizes = {"large"};
  CompileResult c;
  c.ok = true;
  c.so_path = dir + "/ok.so";
  CompileJob job;
  job.source_text = "x";
  CandidateOutcome a = s.evaluate(t, job, "cand", "file:x", o, &c);
  unsetenv("SCRIPTED_US");
  EXPECT_EQ(a.sizes[0].status, Status::suspect);
  EXPECT_NE(a.sizes[0].message.find("faster than speed-of-light"), std::string::npos);
}

// The real worker answers hello (with or without a GPU) and echoes the unpredictable id exactly.
TEST(WorkerProtocol, RealWorkerAnswersHello) {
  WorkerClient w({std::string(KSOL_BUILD_DIR) + "/ksol-worker"}, temp_dir("real") + "/worker.log");
  for (int i = 0; i < 3; ++i) {
    WorkerReply r = w.call({{"op", "hello"}}, 60);
    ASSERT_TRUE(r.ok) << r.failure << ": " << r.message;
    EXPECT_TRUE(r.body.contains("gpu"));
    if (!r.body["gpu"].get<bool>()) {
      EXPECT_FALSE(r.body.value("reason", "").empty());
    }
  }
  EXPECT_EQ(w.restarts(), 0);
  WorkerReply bad = w.call({{"op", "no-such-op"}}, 60);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.failure, "error");
  EXPECT_NE(bad.message.find("unknown op"), std::string::npos);
}
