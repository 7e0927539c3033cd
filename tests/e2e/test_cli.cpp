// The ksol binary end to end, as a user runs it (no GPU needed: everything up to the launch).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "coord/session.h"
#include "core/util.h"
#include "store/store.h"

namespace {
std::string ksol_bin() { return std::string(KSOL_BUILD_DIR) + "/ksol"; }
std::string src(const std::string& p) { return std::string(KSOL_SOURCE_DIR) + "/" + p; }
std::string store() { return (std::filesystem::temp_directory_path() / ("ksol-cli-" + std::to_string(::getpid()) + ".db")).string(); }
}  // namespace

TEST(Cli, DslCandidateIsGeneratedCompiledAndStoredAsDsl) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--json", "--store", store(), "eval", "--task", "softmax_f32", "--candidate",
                                             src("tests/golden/codegen/softmax_f32.ksol"), "--sizes", "small", "--compare", "none"},
                                            600);
  size_t brace = r.output.find("{\n");
  ASSERT_NE(brace, std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output.substr(brace));
  EXPECT_TRUE(j["candidate"]["compiled"].get<bool>()) << j["candidate"]["compile_message"];
  std::string status = j["candidate"]["sizes"][0]["status"];
  EXPECT_TRUE(status == "no_gpu" || status == "ok") << status;
}

TEST(Cli, UnsupportedScheduleIsRefusedBeforeCompiling) {
  std::string bad = (std::filesystem::temp_directory_path() / "ksol-bad-schedule.ksol").string();
  ksol::write_file_atomic(bad,
                          "kernel softmax(X: f32[R, C]) -> (Y: f32[R, C]) {\n"
                          "  m[r] = max(X[r, c]) over c\n  e[r, c] = exp(X[r, c] - m[r])\n"
                          "  s[r] = sum(e[r, c]) over c\n  Y[r, c] = e[r, c] / s[r]\n}\n"
                          "schedule {\n  threads = 100\n}\n");
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", store(), "eval", "--task", "softmax_f32", "--candidate", bad}, 120);
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the program's schedule is refused: a failed run, not a usage error
  EXPECT_NE(r.output.find("unsupported for task softmax_f32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("threads"), std::string::npos) << r.output;
}

TEST(Cli, DslPrintShowsTheTypedIrAndErrorsPointAtTheSource) {
  ksol::ProcessResult ok = ksol::run_process({ksol_bin(), "dsl", "print", src("tests/golden/codegen/softmax_f32.ksol")}, 60);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_NE(ok.output.find("family rowwise"), std::string::npos) << ok.output;
  std::string bad = (std::filesystem::temp_directory_path() / "ksol-bad.ksol").string();
  ksol::write_file_atomic(bad, "kernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[j]\n}\n");
  ksol::ProcessResult err = ksol::run_process({ksol_bin(), "dsl", "print", bad}, 60);
  EXPECT_EQ(err.exit_code, 1);
  EXPECT_NE(err.output.find(bad + ":2:"), std::string::npos) << err.output;
}

TEST(Cli, HelpListsEveryCommand) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--help"}, 60);
  for (const char* c : {"eval", "sol", "device", "bench", "tasks", "refcheck", "dsl", "optimize", "import", "eval-module"})
    EXPECT_NE(r.output.find(c), std::string::npos) << c;
}

// `ksol bench --suite ksol` is the built-in suite; another name is refused with the way to name one.
TEST(Cli, BenchNamesItsSuite) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", store(), "bench", "--suite", "other", "--tasks", "relu_f32"}, 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown suite 'other': the built-in suite is 'ksol'"), std::string::npos) << r.output;
  r = ksol::run_process({ksol_bin(), "--store", store(), "bench", "--suite", "ksol", "--tasks", "relu_f32", "--sizes", "small"}, 300);
  EXPECT_NE(r.output.find("relu_f32"), std::string::npos) << r.output;
}

// Without a GPU, optimize goes as far as it can (seed parsed, checked, compiled) and says why it
// stops, with its own exit status; a malformed agent is refused by name.
TEST(Cli, OptimizeWithoutAGpuStopsAfterCompilingTheSeed) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", "", "optimize", "relu_f32"}, 300);
  if (r.output.find("evaluation needs a GPU") == std::string::npos) GTEST_SKIP() << "a GPU is present: " << r.output;
  EXPECT_EQ(r.exit_code, 77) << r.output;
  // The first line says so, before anything is compiled.
  EXPECT_EQ(r.output.rfind("ksol optimize: no GPU (", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("relu_f32: seed elementwise_relu_f32"), std::string::npos) << r.output;
  ksol::ProcessResult bad = ksol::run_process({ksol_bin(), "optimize", "relu_f32", "--agent", "ollama:x"}, 60);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("unknown backend 'ollama'"), std::string::npos) << bad.output;
}

// --gpus: one worker per device, the work spread over them, one run in one store. The scripted
// worker logs the device it was started for with every evaluation.
TEST(Cli, BenchAndOptimizeSpreadTheirWorkOverSeveralGpus) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ksol-gpus-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string log = (dir / "evals.log").string(), db = (dir / "k.db").string(), js = (dir / "bench.json").string();
  ::setenv("SCRIPTED_LOG", log.c_str(), 1);
  std::string worker = src("tests/e2e/scripted_worker.py");
  auto devices_in_log = [&] {
    std::map<std::string, int> n;
    std::istringstream in(ksol::read_file(log));
    for (std::string d, so; in >> d >> so;) ++n[d];
    return n;
  };

  ksol::ProcessResult b = ksol::run_process({ksol_bin(), "--store", db, "--worker", worker, "bench", "--tasks", "relu_f32,copy_f32",
                                             "--sizes", "small,medium", "--no-hidden", "--gpus", "2", "--json-out", js}, 600);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto n = devices_in_log();
  EXPECT_EQ(n.size(), 2u) << b.output;  // both devices evaluated something
  EXPECT_GT(n["0"], 0);
  EXPECT_GT(n["1"], 0);
  EXPECT_EQ(n["0"] + n["1"], 8);        // 4 baselines x 2 sizes, each evaluated once
  EXPECT_NE(b.output.find("(GPU 0)"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("(GPU 1)"), std::string::npos) << b.output;
  nlohmann::json j = nlohmann::json::parse(ksol::read_file(js));
  ASSERT_EQ(j["results"].size(), 4u);    // in task and baseline order, whichever GPU ran them
  EXPECT_EQ(j["results"][0]["task"], "relu_f32");
  EXPECT_EQ(j["results"][3]["task"], "copy_f32");

  ksol::ProcessResult bad = ksol::run_process({ksol_bin(), "--store", "", "bench", "--tasks", "relu_f32", "--gpus", "0,x"}, 60);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--gpus '0,x': expected a count (2) or device indices (0,1)"), std::string::npos) << bad.output;

  fs::remove(log);
  ksol::ProcessResult o = ksol::run_process({ksol_bin(), "--store", db, "--worker", worker, "optimize", "relu_f32", "copy_f32", "--gpus", "0,1",
                                             "--budget-candidates", "2", "--report", (dir / "report").string()}, 900);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  n = devices_in_log();
  EXPECT_GT(n["0"], 0) << o.output;
  EXPECT_GT(n["1"], 0) << o.output;
  EXPECT_NE(o.output.find("] optimizing relu_f32"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("] optimizing copy_f32"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("[relu_f32] ["), std::string::npos) << o.output;
  nlohmann::json rep = nlohmann::json::parse(ksol::read_file((dir / "report" / "results.json").string()));
  ASSERT_EQ(rep["results"].size(), 2u);
  EXPECT_EQ(rep["results"][0]["task"], "relu_f32");
  EXPECT_NE(rep["results"][0]["gpu"], rep["results"][1]["gpu"]);
  ::unsetenv("SCRIPTED_LOG");
  fs::remove_all(dir);
}

// Profiling through Nsight Compute's command line (a stand-in for ncu on the PATH): the one-shot
// worker runs under it with only the candidate's kernel selected, and the class it gives is
// what the search logs for the parent.
TEST(Cli, OptimizeProfilesParentsWithNcuWhereItRuns) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ksol-ncu-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string old_path = ::getenv("PATH") ? ::getenv("PATH") : "";
  ::setenv("PATH", (src("tests/e2e/fake_ncu") + ":" + old_path).c_str(), 1);
  ::setenv("FAKE_NCU_LOG", (dir / "ncu.log").c_str(), 1);
  ::setenv("KSOL_CACHE_DIR", (dir / "cache").c_str(), 1);
  ::setenv("SCRIPTED_US", "100000", 1);  // slower than SOL at every size, so the seed is a parent
  ksol::ProcessResult o = ksol::run_process({ksol_bin(), "--store", (dir / "k.db").string(), "--worker", src("tests/e2e/scripted_worker.py"),
                                             "optimize", "relu_f32", "--budget-candidates", "3", "--prune", "0", "--report", (dir / "rep").string()},
                                            900);
  ::setenv("PATH", old_path.c_str(), 1);
  ::unsetenv("FAKE_NCU_LOG");
  ::unsetenv("KSOL_CACHE_DIR");
  ::unsetenv("SCRIPTED_US");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  nlohmann::json rep = nlohmann::json::parse(ksol::read_file((dir / "rep" / "results.json").string()));
  std::string profile_line;
  for (auto& l : rep["results"][0]["log"])
    if (l.get<std::string>().rfind("profile c0 at ", 0) == 0) profile_line = l;
  EXPECT_NE(profile_line.find(": compute ("), std::string::npos) << rep["results"][0]["log"].dump(1);
  std::string calls = ksol::read_file((dir / "ncu.log").string());
  EXPECT_NE(calls.find("--kernel-name regex:"), std::string::npos) << calls;
  EXPECT_NE(calls.find("--once"), std::string::npos) << calls;
  EXPECT_NE(ksol::read_file((dir / "cache" / "profiles.jsonl").string()).find("achieved_flop_frac"), std::string::npos);
  fs::remove_all(dir);
}

// --shape: a size of the user's, bounded and run like the task's own; malformed ones are refused.
TEST(Cli, EvalAtAShapeOfTheUsers) {
  ksol::ProcessResult ok = ksol::run_process({ksol_bin(), "--store", "", "eval", "--task", "gemm_bf16", "--candidate",
                                              src("tasks/dense/gemm_bf16/program.ksol"), "--shape", "k4096:M=4096,N=4096,K=4096",
                                              "--compare", "none"},
                                             600);
  // 77 where there is no GPU: everything was bounded and compiled, nothing timed.
  EXPECT_EQ(ok.exit_code, ok.output.rfind("ksol eval: no GPU (", 0) == 0 ? 77 : 0) << ok.output;
  EXPECT_NE(ok.output.find("k4096"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("139 us"), std::string::npos) << ok.output;  // 2*4096^3 / 989.5 TFLOP/s
  for (auto [shape, msg] : std::vector<std::pair<std::string, std::string>>{
           {"k:M=4096,N=4096", "dim K is missing"},
           {"k:M=4096,N=4096,K=0", "must be a positive integer"},
           {"large:M=1,N=1,K=1", "already has a size 'large'"},
           {"k:M=1,N=1,K=1,Q=2", "'Q=2' is not DIM=VALUE"}}) {
    ksol::ProcessResult bad = ksol::run_process({ksol_bin(), "--store", "", "eval", "--task", "gemm_bf16", "--candidate",
                                                 src("tasks/dense/gemm_bf16/program.ksol"), "--shape", shape},
                                                60);
    EXPECT_NE(bad.exit_code, 0) << shape;
    EXPECT_NE(bad.output.find(msg), std::string::npos) << shape << ": " << bad.output;
  }
}

// --baselines-first: the baselines are evaluated (and stored) before the candidates, so that a
// comparison on a power-capped GPU can be checked in both orders.
TEST(Cli, BaselinesFirstSwapsTheOrderOfEvaluation) {
  for (bool first : {false, true}) {
    std::vector<std::string> args = {ksol_bin(), "--json", "--store", store(), "eval", "--task", "copy_f32", "--candidate",
                                     src("tasks/dense/copy_f32/program.ksol"), "--sizes", "small", "--compare", "naive"};
    if (first) args.push_back("--baselines-first");
    ksol::ProcessResult r = ksol::run_process(args, 300);
    size_t brace = r.output.find("{\n");
    ASSERT_NE(brace, std::string::npos) << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output.substr(brace));
    ASSERT_EQ(j["baselines"].size(), 1u) << r.output;
    int64_t cand = j["candidate"]["sizes"][0]["evaluation_id"], base = j["baselines"][0]["sizes"][0]["evaluation_id"];
    EXPECT_EQ(first, base < cand) << "candidate " << cand << ", baseline " << base;
  }
}

// --budget-total-seconds: each task's share comes from the run's total once its seed is timed.
TEST(Cli, OptimizeSharesARunWideBudget) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ksol-total-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ::setenv("SCRIPTED_US", "100000", 1);
  ksol::ProcessResult o = ksol::run_process({ksol_bin(), "--store", (dir / "k.db").string(), "--worker", src("tests/e2e/scripted_worker.py"),
                                             "optimize", "relu_f32", "copy_f32", "--budget-total-seconds", "100", "--budget-candidates", "2",
                                             "--no-profile", "--report", (dir / "rep").string()},
                                            900);
  ::unsetenv("SCRIPTED_US");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  nlohmann::json rep = nlohmann::json::parse(ksol::read_file((dir / "rep" / "results.json").string()));
  // The budget is the run's wall time: the first task (no other seen yet) takes half of what is
  // left after the second's fixed costs (baselines, seed, grade: 15 s assumed before any task has
  // finished); the second, last, takes what is left then.
  // What the user gained, printed after the table: the geomean over the tasks.
  EXPECT_NE(o.output.find("geomean over 2 task(s): "), std::string::npos) << o.output;
  const nlohmann::json& r0 = rep["results"][0];
  const nlohmann::json& r1 = rep["results"][1];
  double b0 = r0["budget_seconds"].get<double>(), b1 = r1["budget_seconds"].get<double>();
  EXPECT_LT(b0, 50.0 - 15.0 / 2) << r0.dump();
  EXPECT_GT(b0, 30.0) << r0.dump();
  EXPECT_GT(b1, 100.0 - r0["seconds"].get<double>() - 20.0) << r1.dump();
  EXPECT_LE(r0["seconds"].get<double>() + r1["seconds"].get<double>(), 100.0);

  // The store keeps what the report states: `ksol show` gives the same returned kernels and
  // speedups, and `ksol export` copies the report's own files.
  ksol::ProcessResult shown = ksol::run_process({ksol_bin(), "--store", (dir / "k.db").string(), "--json", "show", "last"}, 60);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  nlohmann::json show = nlohmann::json::parse(shown.output);
  EXPECT_EQ(show["source"], "report");
  EXPECT_EQ(show["report_dir"], (dir / "rep").string());
  ASSERT_EQ(show["returned"].size(), 2u) << show.dump(1);
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& r = rep["results"][i];
    EXPECT_EQ(show["returned"][i]["task"], r["task"]);
    EXPECT_EQ(show["returned"][i]["returned"], r["use_baseline"].get<bool>() ? "baseline " + r["best_baseline"].get<std::string>()
                                                                             : r["best"]["kernel"].get<std::string>());
    EXPECT_EQ(show["returned"][i]["speedup_vs_best_baseline"], r["speedup_vs_best_baseline"]);
  }
  ksol::ProcessResult exported = ksol::run_process({ksol_bin(), "--store", (dir / "k.db").string(), "export", "last", (dir / "out").string()}, 60);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(ksol::read_file((dir / "out" / "results.json").string()), ksol::read_file((dir / "rep" / "results.json").string()));
  fs::remove_all(dir);
}

// --resume RUN of an interrupted run-wide search: the tasks RUN finished are reported as they
// ended there, not searched again; the one a signal cut short is searched; the budget counts what
// RUN spent.
TEST(Cli, OptimizeResumeTakesTheTasksTheRunFinished) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ksol-resume-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string db = (dir / "k.db").string();
  ::setenv("SCRIPTED_US", "100000", 1);
  auto optimize = [&](std::vector<std::string> tasks, const std::string& report, const std::vector<std::string>& more) {
    std::vector<std::string> args = {ksol_bin(), "--store", db, "--worker", src("tests/e2e/scripted_worker.py"), "optimize"};
    args.insert(args.end(), tasks.begin(), tasks.end());
    for (const char* x : {"--budget-total-seconds", "100", "--budget-candidates", "2", "--no-profile", "--report"}) args.push_back(x);
    args.push_back((dir / report).string());
    args.insert(args.end(), more.begin(), more.end());
    return ksol::run_process(args, 900);
  };
  ksol::ProcessResult first = optimize({"relu_f32", "copy_f32", "sigmoid_f32"}, "r1", {});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  nlohmann::json rep1 = nlohmann::json::parse(ksol::read_file((dir / "r1" / "results.json").string()));
  const int64_t run1 = rep1["run"];
  const double used1 = rep1["budget_used_seconds"];
  EXPECT_GT(used1, 0.0);
  {
    // copy_f32 as a signal leaves it: at work when the signal came (its stop reason may be any).
    ksol::store::Store st = ksol::store::Store::open(db);
    std::optional<ksol::store::RunReport> rr = st.run_report(run1);
    ASSERT_TRUE(rr.has_value());
    nlohmann::json doc = rr->results;
    ASSERT_EQ(doc["results"][1]["task"], "copy_f32");
    EXPECT_EQ(doc["results"][0]["interrupted"], false);
    doc["results"][1]["interrupted"] = true;
    // sigmoid_f32 as if its seed program had been edited since: searched again.
    ASSERT_EQ(doc["results"][2]["task"], "sigmoid_f32");
    doc["results"][2]["seed_sha256"] = std::string(64, '0');
    doc["interrupted"] = {{"signal", 15}, {"not_started", nlohmann::json::array()}};
    st.save_run_report(run1, rr->report_dir, doc);
  }
  EXPECT_EQ(rep1["results"][0]["seed_sha256"].get<std::string>().size(), 64u);
  ksol::ProcessResult second = optimize({"relu_f32", "copy_f32", "gelu_f32", "sigmoid_f32"}, "r2", {"--resume", std::to_string(run1)});
  ::unsetenv("SCRIPTED_US");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("relu_f32: done in run " + std::to_string(run1)), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("relu_f32: seed"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("copy_f32: seed"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("gelu_f32: seed"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("sigmoid_f32: seed"), std::string::npos) << second.output;
  nlohmann::json rep2 = nlohmann::json::parse(ksol::read_file((dir / "r2" / "results.json").string()));
  ASSERT_EQ(rep2["results"].size(), 4u) << rep2.dump(1);
  EXPECT_FALSE(rep2["results"][3].contains("resumed_from"));
  const nlohmann::json &relu = rep2["results"][0], &copy = rep2["results"][1], &gelu = rep2["results"][2];
  EXPECT_EQ(relu["resumed_from"], run1);
  EXPECT_EQ(relu["speedup_vs_best_baseline"], rep1["results"][0]["speedup_vs_best_baseline"]);
  EXPECT_EQ(relu["candidates"], rep1["results"][0]["candidates"]);
  EXPECT_EQ(relu["use_baseline"].get<bool>(), !fs::exists(dir / "r2" / "relu_f32" / "best.ksol"));
  EXPECT_FALSE(copy.contains("resumed_from"));
  EXPECT_FALSE(gelu.contains("resumed_from"));
  EXPECT_EQ(rep2["resume_of"], run1);
  // The budget goes on from what the first run spent, less the cut-short task's time (its reused
  // evaluations count against its own share again): the tasks searched now share what is left.
  const double before = used1 - rep1["results"][1]["seconds"].get<double>();
  EXPECT_GE(rep2["budget_used_seconds"].get<double>(), before + copy["seconds"].get<double>() + gelu["seconds"].get<double>() - 0.5);
  EXPECT_LE(gelu["budget_seconds"].get<double>(), 100.0 - before);
  EXPECT_NE(second.output.find("(run " + std::to_string(run1) + ")"), std::string::npos) << second.output;  // the table says where relu's row is from
  // A run that was not interrupted has its evaluations reused, its tasks searched again.
  ::setenv("SCRIPTED_US", "100000", 1);
  ksol::ProcessResult third = optimize({"relu_f32"}, "r3", {"--resume", std::to_string(rep2["run"].get<int64_t>())});
  ::unsetenv("SCRIPTED_US");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("relu_f32: seed"), std::string::npos) << third.output;
  fs::remove_all(dir);
}

// The timing gate's seed comes from the seeds drawn: fixed with fresh-seeds off (so that the
// exploit suite's hardcoded-seeds hack meets the inputs it recorded when undefended), and the
// search screen's timing_seed_of(master) when they are drawn fresh from a master seed.
TEST(Cli, TimingSeedFollowsTheSeedsDrawn) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ksol-tseed-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string db = (dir / "k.db").string();
  auto timing_seed = [&](int64_t run, std::vector<std::string> extra) {
    std::vector<std::string> argv = {ksol_bin(), "--store", db, "--worker", src("tests/e2e/scripted_worker.py"), "eval", "--task", "relu_f32",
                                     "--candidate", src("tasks/tensor/relu_f32/program.ksol"), "--sizes", "small", "--compare", "none"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ksol::ProcessResult r = ksol::run_process(argv, 300);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    ksol::store::Store st = ksol::store::Store::open(db);
    auto rows = st.evaluations_for_run(run);
    return rows.empty() ? uint64_t{0} : rows.back().rerun.value("timing_seed", uint64_t{0});
  };
  EXPECT_EQ(timing_seed(1, {"--defence-off", "fresh-seeds"}), uint64_t{1} ^ 0x5eed);
  EXPECT_EQ(timing_seed(2, {"--seed", "777"}), ksol::timing_seed_of(777));
  fs::remove_all(dir);
}
