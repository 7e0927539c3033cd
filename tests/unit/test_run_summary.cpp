// `ksol runs`, `ksol show` and `ksol export` over a store built here with the store's own API: an
// eval run (shown from its evaluations) and an optimize run (shown as its report states it), in
// every output format, through the library and through the built binary, which must leave the
// store exactly as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/util.h"
#include "report/optimize_report.h"
#include "report/run_summary.h"
#include "store/store.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ksol;

namespace {

std::string ksol_bin() { return std::string(KSOL_BUILD_DIR) + "/ksol"; }

store::CandidateRow candidate(int64_t task, const std::string& origin, const std::string& source, const std::string& language = "cuda") {
  store::CandidateRow c;
  c.task_id = task;
  c.source_hash = "hash:" + origin + ":" + source;
  c.source = source;
  c.language = language;
  c.origin = origin;
  return c;
}

store::EvaluationRow evaluation(int64_t run, int64_t task, int64_t cand, const std::string& size, const std::string& status, double us,
                                double pct_sol_fraction) {
  store::EvaluationRow e;
  e.run_id = run;
  e.task_id = task;
  e.candidate_id = cand;
  e.size_name = size;
  e.status = *parse_status(status);
  e.gates = json::object();
  e.seeds = json::array({1});
  e.rerun = {{"task", "t"}};
  if (status == "ok") {
    e.median_us = us;
    e.ci_low_us = us * 0.99;
    e.ci_high_us = us * 1.01;
    e.pct_sol = pct_sol_fraction;
    e.samples = {us, us * 1.01, us * 0.99};
  } else {
    e.failed_gate = Gate::correctness;
    e.error_class = "wrong_result";
    e.message = "max error 3.5, tolerance 1e-3 (element 7, \"x\")\nsecond line";
  }
  return e;
}

// An optimize run's results document, as `ksol optimize` writes it, reduced to what the report reads.
json optimize_doc(int64_t run) {
  json softmax = {{"task", "softmax_f32"}, {"use_baseline", false}, {"best_baseline", "fast"}, {"speedup_vs_best_baseline", 1.3},
                  {"speedup_vs_naive", 2.0}, {"pct_sol_before", 40.0}, {"pct_sol_after", 61.5}, {"stop_reason", "plateau"},
                  {"sizes", json::array({{{"size", "small"}, {"best_baseline_us", 12.0}, {"best_baseline_pct_sol", 40.0}, {"returned_us", 9.0},
                                          {"returned_pct_sol", 55.0}, {"speedup", 12.0 / 9.0}},
                                         {{"size", "large"}, {"best_baseline_us", 100.0}, {"best_baseline_pct_sol", 50.0}, {"returned_us", 80.0},
                                          {"returned_pct_sol", 62.5}, {"speedup", 1.25}}})},
                  {"best", {{"kernel", "softmax_rows_v4"}, {"program", "kernel softmax_rows\n"}, {"candidate_id", 3}}},
                  {"hidden", {{"status", "ok"}, {"speedup_vs_best_baseline", 1.25}}}};
  json relu = {{"task", "relu_f32"}, {"use_baseline", true}, {"best_baseline", "naive"}, {"speedup_vs_best_baseline", 1.0},
               {"pct_sol_after", 80.0}, {"sizes", json::array({{{"size", "small"}, {"best_baseline_us", 5.0}, {"best_baseline_pct_sol", 80.0}}})},
               {"hidden", {{"status", "not_graded"}, {"note", "no hidden sizes"}}}};
  return {{"run", run}, {"gpu", {{"name", "Test GPU"}}}, {"agent", "expert"}, {"results", json::array({softmax, relu})}};
}

// A store with two runs: 1, `ksol eval` of mine.cu beside two baselines; 2, `ksol optimize` of
// two tasks whose report is in `report_dir`.
class RunSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ksol-runsum-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "k.db").string();
    report_dir_ = (dir_ / "runs" / "run-2").string();
    store::Store s = store::Store::open(db_);
    int64_t softmax = s.upsert_task("softmax_f32", "spec1", "name = 'softmax_f32'");
    int64_t relu = s.upsert_task("relu_f32", "spec2", "name = 'relu_f32'");
    int64_t naive = s.upsert_candidate(candidate(softmax, "baseline:naive", "naive source"));
    int64_t fast = s.upsert_candidate(candidate(softmax, "baseline:fast", "fast source"));
    int64_t mine = s.upsert_candidate(candidate(softmax, "file:/home/u/mine.cu", "// mine\nextern \"C\" int ksol_run();\n"));
    int64_t found = s.upsert_candidate(candidate(softmax, "agent:expert", "kernel softmax_rows\n", "dsl"));
    int64_t relu_naive = s.upsert_candidate(candidate(relu, "baseline:naive", "relu naive"));

    int64_t eval = s.begin_run("/opt/ksol/bin/ksol --store k.db eval --task softmax_f32 --candidate /home/u/mine.cu",
                               {{"gpu", {{"name", "Test GPU"}}}});
    s.record_evaluation(evaluation(eval, softmax, mine, "small", "ok", 10.0, 0.5));
    s.record_evaluation(evaluation(eval, softmax, mine, "large", "failed", 0, 0));
    s.record_evaluation(evaluation(eval, softmax, naive, "small", "ok", 20.0, 0.25));
    s.record_evaluation(evaluation(eval, softmax, naive, "large", "ok", 200.0, 0.25));
    s.record_evaluation(evaluation(eval, softmax, fast, "small", "ok", 12.0, 0.4));
    s.record_evaluation(evaluation(eval, softmax, fast, "large", "ok", 100.0, 0.5));
    s.finish_run(eval, "finished");

    int64_t opt = s.begin_run("'/opt/ksol/bin/ksol' optimize softmax_f32 relu_f32", {{"gpu", {{"name", "Test GPU"}}}, {"optimize", json::object()}});
    s.record_evaluation(evaluation(opt, softmax, fast, "small", "ok", 12.0, 0.4));
    s.record_evaluation(evaluation(opt, softmax, found, "small", "ok", 9.0, 0.55));
    s.record_evaluation(evaluation(opt, relu, relu_naive, "small", "ok", 5.0, 0.8));
    s.finish_run(opt, "finished");
    json doc = optimize_doc(opt);
    s.save_run_report(opt, report_dir_, doc);
    write_file_atomic(report_dir_ + "/results.json", doc.dump(2));
    write_file_atomic(report_dir_ + "/report.md", report::optimize_markdown(doc));
    write_file_atomic(report_dir_ + "/report.html", report::optimize_html(doc));
    write_file_atomic(report_dir_ + "/softmax_f32/best.ksol", "kernel softmax_rows\n");
    write_file_atomic(report_dir_ + "/softmax_f32/best.cu", "// the CUDA of softmax_rows\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string db_, report_dir_;
};

TEST_F(RunSummaryTest, AnEvalRunIsShownFromItsEvaluations) {
  store::Store s = store::Store::open_read_only(db_);
  report::RunSummary r = report::summarize_run(s, 1);
  EXPECT_EQ(r.source, "evaluations");
  EXPECT_EQ(r.tasks, std::vector<std::string>{"softmax_f32"});
  EXPECT_EQ(r.gpu, "Test GPU");
  EXPECT_TRUE(r.gains.empty());
  ASSERT_EQ(r.lines.size(), 6u);
  const report::SizeLine& small = r.lines[0];
  EXPECT_EQ((std::vector<std::string>{small.task, small.kernel, small.size, small.status}),
            (std::vector<std::string>{"softmax_f32", "mine.cu", "small", "ok"}));
  EXPECT_DOUBLE_EQ(*small.time_us, 10.0);
  EXPECT_DOUBLE_EQ(*small.best_baseline_us, 12.0);  // the fastest baseline at that size, not the first
  EXPECT_DOUBLE_EQ(*small.speedup, 1.2);
  EXPECT_DOUBLE_EQ(*small.pct_sol, 50.0);  // percent, from the store's fraction
  const report::SizeLine& large = r.lines[1];
  EXPECT_EQ(large.status, "failed");
  EXPECT_FALSE(large.time_us || large.speedup || large.pct_sol);
  EXPECT_DOUBLE_EQ(*large.best_baseline_us, 100.0);
  EXPECT_EQ(r.lines[2].kernel, "baseline:naive");
  EXPECT_DOUBLE_EQ(*r.lines[2].speedup, 0.6);

  const std::string text = report::summary_text(r);
  EXPECT_EQ(text.rfind("run 1 (finished): ksol --store k.db eval --task softmax_f32 --candidate /home/u/mine.cu\n", 0), 0u) << text;
  EXPECT_NE(text.find("softmax_f32  mine.cu         small  ok      10.00 us   12.00 us       1.20x    50.0%\n"), std::string::npos) << text;
  EXPECT_NE(text.find("softmax_f32  mine.cu         large  failed  -          100.00 us      -        -\n"), std::string::npos) << text;
  EXPECT_THROW(report::summarize_run(s, 99), std::invalid_argument);
}

// An optimize run says what its report says: the same kernel, speedups and %SOL.
TEST_F(RunSummaryTest, AnOptimizeRunIsShownAsItsReportStatesIt) {
  store::Store s = store::Store::open_read_only(db_);
  report::RunSummary r = report::summarize_run(s, 2);
  EXPECT_EQ(r.source, "report");
  EXPECT_EQ(r.report_dir, report_dir_);
  ASSERT_EQ(r.gains.size(), 2u);
  EXPECT_EQ(r.gains[0].returned, "softmax_rows_v4");
  EXPECT_EQ(r.gains[1].returned, "baseline naive");
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(r.lines[0].kernel, "softmax_rows_v4");
  EXPECT_DOUBLE_EQ(*r.lines[0].time_us, 9.0);
  EXPECT_DOUBLE_EQ(*r.lines[0].speedup, 12.0 / 9.0);
  EXPECT_DOUBLE_EQ(*r.lines[1].pct_sol, 62.5);
  EXPECT_EQ(r.lines[2].status, "baseline");  // relu_f32 returns its baseline
  EXPECT_FALSE(r.lines[2].speedup);

  const std::string md = report::optimize_markdown(optimize_doc(2));
  EXPECT_NE(md.find("| softmax_f32 | softmax_rows_v4 | 1.30x | 61.5% | small 9.00 us 1.33x 55.0% SOL; large 80.00 us 1.25x 62.5% SOL | "
                    "1.25x vs best baseline |"),
            std::string::npos)
      << md;
  const std::string text = report::summary_text(r);
  EXPECT_NE(text.find("softmax_f32  softmax_rows_v4  1.30x             61.5%  1.25x vs best baseline\n"), std::string::npos) << text;
  EXPECT_NE(text.find("relu_f32     baseline naive   1.00x             80.0%  no hidden sizes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("softmax_f32  softmax_rows_v4  small  ok        9.00 us   12.00 us       1.33x    55.0%\n"), std::string::npos) << text;
  EXPECT_NE(text.find("relu_f32     baseline naive   small  baseline  5.00 us   5.00 us        -        80.0%\n"), std::string::npos) << text;

  report::RunSummary one = report::only_task(r, "relu_f32");
  ASSERT_EQ(one.gains.size(), 1u);
  ASSERT_EQ(one.lines.size(), 1u);
  EXPECT_EQ(one.lines[0].task, "relu_f32");
}

TEST_F(RunSummaryTest, CsvMarkdownAndJson) {
  store::Store s = store::Store::open_read_only(db_);
  report::RunSummary r = report::summarize_run(s, 1);
  EXPECT_EQ(report::summary_csv(r),
            "run,task,kernel,size,status,time_us,best_baseline_us,speedup,pct_sol\n"
            "1,softmax_f32,mine.cu,small,ok,10.0,12.0,1.2,50.0\n"
            "1,softmax_f32,mine.cu,large,failed,,100.0,,\n"
            "1,softmax_f32,baseline:naive,small,ok,20.0,12.0,0.6,25.0\n"
            "1,softmax_f32,baseline:naive,large,ok,200.0,100.0,0.5,25.0\n"
            "1,softmax_f32,baseline:fast,small,ok,12.0,12.0,1.0,40.0\n"
            "1,softmax_f32,baseline:fast,large,ok,100.0,100.0,1.0,50.0\n");
  const std::string md = report::summary_markdown(r);
  EXPECT_NE(md.find("| task | kernel | size | status | time | best baseline | speedup | %SOL |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n"
                    "| softmax_f32 | mine.cu | small | ok | 10.00 us | 12.00 us | 1.20x | 50.0% |\n"),
            std::string::npos)
      << md;
  json j = report::summary_json(report::summarize_run(s, 2));
  EXPECT_EQ(j["run"]["id"], 2);
  EXPECT_EQ(j["source"], "report");
  EXPECT_EQ(j["returned"][0]["sizes"][1]["time_us"], 80.0);
  EXPECT_EQ(j["sizes"][2]["speedup"], nullptr);

  EXPECT_EQ(report::csv_record({"a", "b,c", "say \"hi\"", "two\nlines", ""}), "a,\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\",\n");
  EXPECT_EQ(report::short_command("'/a b/ksol' --json show 1"), "ksol --json show 1");
  EXPECT_EQ(report::short_command("ksol"), "ksol");
  EXPECT_EQ(report::short_command(""), "");
}

// Every file in a folder, relative to it, with its bytes.
std::map<std::string, std::string> files_under(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return out;
}

TEST_F(RunSummaryTest, ExportOfAnOptimizeRunCopiesItsReportAndKernels) {
  store::Store s = store::Store::open_read_only(db_);
  const fs::path out = dir_ / "export";
  std::vector<std::string> notes;
  std::vector<std::string> files = report::export_run(s, 2, out.string(), &notes);
  EXPECT_TRUE(notes.empty()) << notes[0];
  std::map<std::string, std::string> got = files_under(out);
  for (const char* f : {"run.json", "summary.md", "summary.csv", "evaluations.csv", "evaluations.json", "results.json", "report.md", "report.html",
                        "softmax_f32/best.ksol", "softmax_f32/best.cu"})
    EXPECT_TRUE(got.count(f)) << f;
  EXPECT_EQ(got.size(), files.size());
  std::map<std::string, std::string> report = files_under(report_dir_);
  for (const auto& [f, bytes] : report) EXPECT_EQ(got[f], bytes) << f << " is the report folder's own file";
  EXPECT_EQ(json::parse(got["run.json"])["run"]["id"], 2);
  EXPECT_EQ(json::parse(got["run.json"])["tasks"], json::array({"softmax_f32", "relu_f32"}));
  json evs = json::parse(got["evaluations.json"]);
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[1]["origin"], "agent:expert");
  EXPECT_EQ(evs[1]["samples_us"].size(), 3u);
  EXPECT_DOUBLE_EQ(evs[1]["pct_sol"].get<double>(), 55.0);

  // The report folder gone: what the store keeps is written again, and best.cu is said to be missing.
  fs::remove_all(report_dir_);
  const fs::path again = dir_ / "again";
  notes.clear();
  files = report::export_run(s, 2, again.string(), &notes);
  got = files_under(again);
  EXPECT_EQ(got["results.json"], optimize_doc(2).dump(2));
  EXPECT_EQ(got["report.md"], report::optimize_markdown(optimize_doc(2)));
  EXPECT_EQ(got["softmax_f32/best.ksol"], "kernel softmax_rows\n");
  EXPECT_FALSE(got.count("softmax_f32/best.cu"));
  ASSERT_EQ(notes.size(), 5u);
  EXPECT_EQ(notes.back(), "softmax_f32/best.cu: not exported: " + report_dir_ +
                              "/softmax_f32/best.cu is gone (the store keeps the DSL program; 'ksol dsl cuda softmax_f32/best.ksol --task "
                              "softmax_f32' prints its CUDA)");
}

TEST_F(RunSummaryTest, ExportOfAnEvalRunWritesItsCandidatesAndRows) {
  store::Store s = store::Store::open_read_only(db_);
  const fs::path out = dir_ / "export";
  std::vector<std::string> notes;
  report::export_run(s, 1, out.string(), &notes);
  EXPECT_TRUE(notes.empty());
  std::map<std::string, std::string> got = files_under(out);
  EXPECT_EQ(got["softmax_f32/mine.cu"], "// mine\nextern \"C\" int ksol_run();\n");
  EXPECT_FALSE(got.count("softmax_f32/naive.cu"));  // baselines are the task's, not the run's
  EXPECT_EQ(got.size(), 6u);
  const std::string& csv = got["evaluations.csv"];
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "run,evaluation,task,candidate,origin,size,status,failed_gate,error_class,median_us,ci_low_us,ci_high_us,sol_us,pct_sol,clock_mhz,"
            "throttled,worker_restarts,samples,created_at,message");
  // The failed evaluation's message, with a comma, quotes and a line break, is one quoted field.
  EXPECT_NE(csv.find(",\"max error 3.5, tolerance 1e-3 (element 7, \"\"x\"\")\nsecond line\"\n"), std::string::npos) << csv;
  EXPECT_EQ(got["summary.csv"], report::summary_csv(report::summarize_run(s, 1)));
}

// The built binary: runs, show (every format, --task, 'last') and export read the store and leave
// it byte for byte as it was, with no -wal or -shm file.
TEST_F(RunSummaryTest, TheCommandsReadTheStoreAndChangeNothing) {
  std::map<std::string, std::string> before = files_under(dir_);
  auto ksol = [&](std::vector<std::string> args, int want) {
    args.insert(args.begin(), {ksol_bin(), "--store", db_});
    ProcessResult r = run_process(args, 60);
    EXPECT_EQ(r.exit_code, want) << join(args, " ") << ":\n" << r.output;
    return r.output;
  };
  std::string runs = ksol({"runs"}, 0);
  EXPECT_NE(runs.find("2    "), std::string::npos) << runs;
  EXPECT_NE(runs.find("softmax_f32, relu_f32  ksol optimize softmax_f32 relu_f32\n"), std::string::npos) << runs;
  EXPECT_LT(runs.find("\n2 "), runs.find("\n1 ")) << "newest first:\n" << runs;
  json listed = json::parse(ksol({"runs", "--json"}, 0));
  ASSERT_EQ(listed["runs"].size(), 2u);
  EXPECT_EQ(listed["runs"][1]["tasks"], json::array({"softmax_f32"}));

  std::string csv = ksol({"show", "2", "--csv", "--task", "relu_f32"}, 0);
  EXPECT_EQ(csv, "run,task,kernel,size,status,time_us,best_baseline_us,speedup,pct_sol\n2,relu_f32,baseline naive,small,baseline,5.0,5.0,,80.0\n");
  EXPECT_EQ(ksol({"show", "last", "--md"}, 0), report::summary_markdown(report::summarize_run(store::Store::open_read_only(db_), 2)));
  json shown = json::parse(ksol({"show", "1", "--json"}, 0));
  EXPECT_EQ(shown["sizes"].size(), 6u);
  EXPECT_EQ(files_under(dir_), before);

  std::string exported = ksol({"export", "2", (dir_ / "out").string()}, 0);
  EXPECT_NE(exported.find("  softmax_f32/best.cu\n"), std::string::npos) << exported;
  fs::remove_all(dir_ / "out");
  EXPECT_EQ(files_under(dir_), before);
}

}  // namespace
