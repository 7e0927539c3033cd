// The config search of a standalone Triton kernel (src/search/triton_configs.h) against a scripted
// evaluator: screening results and worker verdicts are given per config label, so the loop's
// decisions (the kernel as given first, the fastest screened ones verified, the fastest verified
// kept, budgets and signals honoured) and the answer's choice are seen without a GPU; the
// screening process's runs against a scripted process writing a real log (who is blamed for a
// kill, when it runs again); the answer from the side-by-side timings, and its rerun line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "search/triton_configs.h"

using namespace ksol;
using namespace ksol::search;
using nlohmann::json;

namespace {

TritonConfig config(const std::string& label) { return {label, {{"BLOCK_SIZE", 1024}}, "BLOCK_SIZE=1024", "/work/" + label + ".py"}; }

ScreenedConfig screened(const std::string& label, double us, bool ok = true) {
  return {config(label), ok, ok ? us : 0.0, ok ? "" : "correctness/wrong_result: output 0 out of tolerance"};
}

// Verdicts by label: a time (verified) or a failure (negative time: the gate's message).
class Scripted : public TritonEvaluator {
 public:
  TritonScreen screen_result;
  std::map<std::string, double> verdicts;
  std::vector<std::string> calls;
  double* now = nullptr;  // advanced by 10 s per verification where given

  TritonScreen screen(int max_configs, int top, double seconds) override {
    calls.push_back("screen " + std::to_string(max_configs) + " " + std::to_string(top) + " " + std::to_string(static_cast<int>(seconds)));
    return screen_result;
  }
  VerifiedConfig verify(const TritonConfig& c) override {
    calls.push_back("verify " + c.label);
    if (now) *now += 10;
    VerifiedConfig v;
    v.config = c;
    double us = verdicts.count(c.label) ? verdicts[c.label] : -1;
    if (us > 0) {
      v.eval.status = Status::ok;
      v.eval.median_us = us;
    } else {
      v.eval.status = Status::failed;
      v.eval.failed_gate = Gate::correctness;
      v.eval.error_class = "wrong_result";
      v.eval.message = "output 0: 3 of 4096 elements out of tolerance";
    }
    return v;
  }
};

TritonScreen screen_of(std::vector<ScreenedConfig> screened, std::vector<ScreenedConfig> verify) {
  TritonScreen s;
  s.ok = true;
  s.stop = "converged";
  s.screened = std::move(screened);
  s.verify = std::move(verify);
  return s;
}

}  // namespace

TEST(TritonConfigs, TheKernelAsGivenThenTheFastestScreenedVerifiedTheFastestVerifiedKept) {
  Scripted ev;
  ev.screen_result = screen_of({screened("k_b1024_w4", 100), screened("k_b2048_w4", 80), screened("k_b2048_w8", 60),
                                screened("k_b4096_w8", 70), screened("k_b8192_w8", 0, false)},
                               {screened("k_b2048_w8", 60), screened("k_b4096_w8", 70), screened("k_b2048_w4", 80)});
  // The screening's order is not the verification's: the second screened is the fastest verified.
  ev.verdicts = {{"k_b1024_w4", 101}, {"k_b2048_w8", 66}, {"k_b4096_w8", 64}, {"k_b2048_w4", 79}};
  std::vector<std::string> said;
  TritonSearchOptions o;
  o.max_configs = 20;
  o.verify = 3;
  o.progress = [&](const std::string& s) { said.push_back(s); };
  TritonSearchResult r = search_triton_configs(config("k_b1024_w4"), ev, o);
  EXPECT_EQ(ev.calls, (std::vector<std::string>{"verify k_b1024_w4", "screen 20 3 0", "verify k_b2048_w8", "verify k_b4096_w8",
                                                "verify k_b2048_w4"}));
  EXPECT_TRUE(r.baseline.ok());
  ASSERT_NE(r.best_config(), nullptr);
  EXPECT_EQ(r.best_config()->config.label, "k_b4096_w8");
  EXPECT_EQ(r.best_config()->screen_us, 70);
  EXPECT_EQ(r.stop_reason, "verified");
  EXPECT_EQ(said.front(), "triton: k_b1024_w4 (as given): 101 us, verified");
  EXPECT_EQ(said[1], "triton: screened 5 config(s), 4 passed (converged)");

  // The trajectory: the baseline, the screened ones not verified (screened, or failed at the
  // screening), then the verified ones, the fastest accepted.
  json t = r.trajectory();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0]["kernel"], "k_b1024_w4");
  EXPECT_EQ(t[0]["method"], "as given");
  EXPECT_EQ(t[1]["status"], "failed");
  EXPECT_EQ(t[1]["error"], "screen: correctness/wrong_result: output 0 out of tolerance");
  EXPECT_EQ(t[3]["kernel"], "k_b4096_w8");
  EXPECT_EQ(t[3]["accepted"], true);
  EXPECT_EQ(t[3]["score_us"], 64.0);
  EXPECT_EQ(t[3]["screen_us"], 70.0);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i]["index"], static_cast<int>(i));
}

TEST(TritonConfigs, AConfigFailingItsGatesIsNotKeptAndAFailedBaselineDoesNotStopTheSearch) {
  Scripted ev;
  ev.screen_result = screen_of({screened("k_as_given", 0, false), screened("k_b64", 40), screened("k_b128", 50)},
                               {screened("k_b64", 40), screened("k_b128", 50)});
  ev.verdicts = {{"k_b128", 52}};  // the kernel as given and k_b64 fail the worker's gates
  TritonSearchResult r = search_triton_configs(config("k_as_given"), ev, {});
  EXPECT_FALSE(r.baseline.ok());
  ASSERT_NE(r.best_config(), nullptr);
  EXPECT_EQ(r.best_config()->config.label, "k_b128");
  EXPECT_EQ(r.verified[0].eval.error_class, "wrong_result");
  json t = r.trajectory();
  EXPECT_EQ(t[0]["status"], "failed");
  EXPECT_EQ(t[0]["error"], "correctness/wrong_result: output 0: 3 of 4096 elements out of tolerance");
}

TEST(TritonConfigs, TheDefaultIsNeverVerifiedTwiceAndAFailedScreeningLeavesTheBaseline) {
  Scripted ev;
  ev.screen_result = screen_of({screened("k", 10)}, {screened("k", 10)});
  ev.verdicts = {{"k", 10}};
  TritonSearchResult r = search_triton_configs(config("k"), ev, {});
  EXPECT_EQ(ev.calls, (std::vector<std::string>{"verify k", "screen 48 3 0"}));
  EXPECT_EQ(r.best, -1);

  Scripted bad;
  bad.screen_result.ok = false;
  bad.screen_result.error = "the screening process exited with status 1";
  bad.verdicts = {{"k", 10}};
  r = search_triton_configs(config("k"), bad, {});
  EXPECT_EQ(r.stop_reason, "screen_failed");
  EXPECT_TRUE(r.baseline.ok());
  EXPECT_TRUE(r.verified.empty());
}

TEST(TritonConfigs, TheBudgetStopsVerificationAfterTheFirstAndASignalStopsIt) {
  Scripted ev;
  double now = 0;
  ev.now = &now;
  ev.screen_result = screen_of({}, {screened("a", 1), screened("b", 2), screened("c", 3)});
  ev.verdicts = {{"k", 10}, {"a", 5}, {"b", 4}, {"c", 3}};
  TritonSearchOptions o;
  o.budget_seconds = 25;
  o.clock = [&] { return now; };
  TritonSearchResult r = search_triton_configs(config("k"), ev, o);
  // The screening gets three quarters of the budget; after the baseline (10 s) and one
  // verification (10 s) 20 of 25 s are spent: b runs; then 30 >= 25.
  EXPECT_EQ(ev.calls, (std::vector<std::string>{"verify k", "screen 48 3 18", "verify a", "verify b"}));
  EXPECT_EQ(r.stop_reason, "budget");
  EXPECT_EQ(r.best_config()->config.label, "b");

  Scripted sig;
  sig.screen_result = ev.screen_result;
  sig.verdicts = ev.verdicts;
  bool stop = false;
  TritonSearchOptions s;
  s.stop = [&] { return stop; };
  s.progress = [&](const std::string& line) { stop = line.find("screened") != std::string::npos; };
  r = search_triton_configs(config("k"), sig, s);
  EXPECT_EQ(sig.calls, (std::vector<std::string>{"verify k", "screen 48 3 0"}));
  EXPECT_EQ(r.stop_reason, "interrupted");
}

TEST(TritonConfigs, TheAnswerIsTheFastestVerifiedCandidateWhenItBeatsEveryBaseline) {
  std::vector<Contender> cs = {{"triton", true, "triton", 100}, {"eager", true, "pytorch", 90}, {"compile", true, "pytorch", 70},
                               {"k_b4096_w8", false, "triton", 60}, {"model_rowwise_t256", false, "dsl", 65}};
  TritonAnswer a = choose_triton_answer(cs, 100);
  EXPECT_FALSE(a.use_baseline);
  EXPECT_EQ(a.returned, "k_b4096_w8");
  EXPECT_EQ(a.language, "triton");
  EXPECT_EQ(a.best_baseline, "compile");
  EXPECT_DOUBLE_EQ(a.speedup_vs_best_baseline, 70.0 / 60.0);
  EXPECT_DOUBLE_EQ(a.speedup_vs_kernel, 100.0 / 60.0);

  // torch.compile faster than every candidate: it is returned, and still 100/50 over the kernel.
  cs[2].us = 50;
  a = choose_triton_answer(cs, 100);
  EXPECT_TRUE(a.use_baseline);
  EXPECT_EQ(a.returned, "compile");
  EXPECT_DOUBLE_EQ(a.speedup_vs_best_baseline, 1.0);
  EXPECT_DOUBLE_EQ(a.speedup_vs_kernel, 2.0);
  EXPECT_EQ(a.reason, "no verified candidate was faster than compile (the fastest, k_b4096_w8, 60 us against 50 us)");

  // Without a reference only the kernel as given is a baseline; unverified contenders do not count.
  a = choose_triton_answer({{"triton", true, "triton", 0}, {"k_b64", false, "triton", 40}}, 0);
  EXPECT_FALSE(a.use_baseline);
  EXPECT_EQ(a.best_baseline, "");
  EXPECT_DOUBLE_EQ(a.speedup_vs_kernel, 0.0);
  a = choose_triton_answer({{"triton", true, "triton", 0}}, 0);
  EXPECT_EQ(a.returned, "");
  EXPECT_EQ(a.reason, "nothing passed ksol's gates: neither the kernel as given, nor a config, nor a baseline of the reference");
}

namespace {

// A screening log in a file of its own, written as triton_task.Measurements writes it.
class LogFile {
 public:
  LogFile() : path_((std::filesystem::temp_directory_path() / ("ksol-screen-log-" + std::to_string(::getpid()) + ".jsonl")).string()) {
    std::filesystem::remove(path_);
  }
  ~LogFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }
  void start(int block, double t) {
    append({{"event", "start"}, {"config", {{"BLOCK_SIZE", block}}}, {"label", "k_b" + std::to_string(block)}, {"t", t}});
  }
  void result(int block, double us) {
    append({{"event", "result"}, {"config", {{"BLOCK_SIZE", block}}}, {"result", {{"status", "ok"}, {"median_us", us}}}});
  }
  std::vector<json> lines() const {
    std::vector<json> out;
    std::ifstream in(path_);
    for (std::string l; std::getline(in, l);) out.push_back(json::parse(l));
    return out;
  }

 private:
  void append(const json& e) {
    std::ofstream out(path_, std::ios::app);
    out << e.dump() << "\n";
  }
  std::string path_;
};

json answer(const std::string& stop) {
  return {{"ok", true}, {"stop", stop}, {"screened", json::array({{{"label", "k_b1"}, {"config", {{"BLOCK_SIZE", 1}}}, {"status", "ok"},
                                                                   {"median_us", 5.0}}})},
          {"verify", json::array()}};
}

ScreenRun killed(double limit) {
  ScreenRun r;
  r.timed_out = true;
  r.limit_seconds = limit;
  return r;
}

}  // namespace

TEST(TritonScreen, AKillAtTheTimeLimitBlamesOnlyTheConfigRunningThenAndTheScreeningGoesOn) {
  LogFile log;
  std::vector<std::string> said;
  int runs = 0;
  auto run_once = [&]() -> ScreenRun {
    ++runs;
    if (runs == 1) {  // two configs measured, the third still running at the kill
      log.start(1, 1000);
      log.result(1, 5);
      log.start(2, 1010);
      log.result(2, 4);
      log.start(4, 1020);
      return killed(1200);
    }
    log.start(8, 2300);  // the next process replays the log and goes on
    log.result(8, 3);
    ScreenRun r;
    r.exit_code = 0;
    r.out = answer("converged");
    return r;
  };
  ScreenDriverOptions o;
  o.per_config_seconds = 600;
  o.unix_clock = [] { return 1650.0; };
  o.progress = [&](const std::string& s) { said.push_back(s); };
  TritonScreen s = run_screen(run_once, log.path(), o);
  EXPECT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.runs, 2);
  EXPECT_EQ(s.stop, "converged");
  // Only k_b4 got a result from the driver, saying it was killed at the timeout.
  std::vector<json> lines = log.lines();
  int written = 0;
  for (const json& l : lines)
    if (l["event"] == "result" && l["result"]["status"] == "failed") {
      ++written;
      EXPECT_EQ(l["config"], json({{"BLOCK_SIZE", 4}}));
      EXPECT_EQ(l["result"]["error"],
                "killed at the timeout: still running 630 s after it started, past the 600 s a config may take (--timeout); the "
                "screening process was killed at its time limit of 1200 s");
    }
  EXPECT_EQ(written, 1);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "triton: screening: the process was killed at its time limit of 1200 s while running k_b4 (started 630 s before): "
                     "k_b4 counts as failed (killed at the timeout) and the screening goes on in a new process from the log");
}

TEST(TritonScreen, BatchesGoOnAndAnEndThatSettlesNothingIsNotRunAgain) {
  LogFile log;
  std::vector<std::string> said;
  int runs = 0;
  ScreenDriverOptions o;
  o.progress = [&](const std::string& s) { said.push_back(s); };
  // Three processes whose share of the time ran out, one config each, then the answer.
  TritonScreen s = run_screen(
      [&]() -> ScreenRun {
        ++runs;
        log.start(runs, 100.0 * runs);
        log.result(runs, 10 - runs);
        ScreenRun r;
        r.exit_code = 0;
        r.out = answer(runs < 4 ? "batch" : "configs");
        return r;
      },
      log.path(), o);
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.runs, 4);
  ASSERT_EQ(said.size(), 3u);
  EXPECT_EQ(said[2], "triton: screening: 1 config(s) measured by this process, 3 in all; its share of the time is up, another goes on from the log");

  // Killed between configs with nothing new in the log: nobody is blamed, and it is not run again.
  LogFile quiet;
  runs = 0;
  s = run_screen(
      [&]() -> ScreenRun {
        ++runs;
        ScreenRun r = killed(1200);
        r.output = "Traceback: ...";
        return r;
      },
      quiet.path(), o);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(quiet.lines().empty());
  EXPECT_EQ(s.error.substr(0, s.error.find(':')), "the screening process ended (killed at its time limit of 1200 s) with no config running and none measured");

  // A process that dies by a signal under a config: that config failed, with how it ended.
  LogFile crash;
  runs = 0;
  said.clear();
  s = run_screen(
      [&]() -> ScreenRun {
        ++runs;
        ScreenRun r;
        if (runs == 1) {
          crash.start(64, 0);
          return r;  // exit_code -1, not timed out: a signal
        }
        r.exit_code = 0;
        r.out = answer("converged");
        return r;
      },
      crash.path(), o);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(crash.lines().back()["result"]["error"], "the screening process ended while running it (killed by a signal)");
  EXPECT_EQ(said[0], "triton: screening: the process was killed by a signal while running k_b64: k_b64 counts as failed (its process "
                     "ended under it) and the screening goes on in a new process from the log");
}

TEST(TritonSideBySide, TheAnswerComesFromOneProcesssTimingsNotFromTheSearchesOwn) {
  // The searches' own times, each from another process: the config 60 us (the Triton worker),
  // the DSL kernel 50 us and eager 55 us (the module path's worker).
  TritonSearchResult r;
  r.baseline.config = config("k_b1024");
  r.baseline.eval.status = Status::ok;
  r.baseline.eval.median_us = 100;
  VerifiedConfig v;
  v.config = config("k_b2048");
  v.eval.status = Status::ok;
  v.eval.median_us = 60;
  r.verified = {v};
  VerifiedConfig bad = v;
  bad.config = config("k_b4096");
  bad.eval.status = Status::failed;
  r.verified.push_back(bad);
  r.best = 0;
  json req = side_by_side_request(r, true, {"eager", "compile", "compile_max_autotune"}, "/runs/x/dsl", "model_rowwise");
  std::vector<std::string> names;
  for (const json& c : req) names.push_back(c["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"triton", "k_b2048", "model_rowwise", "eager", "compile", "compile_max_autotune"}));
  EXPECT_EQ(req[1]["config"], json({{"BLOCK_SIZE", 1024}}));
  EXPECT_EQ(req[2]["dir"], "/runs/x/dsl");
  // Without a reference: the kernel and its configs only.
  EXPECT_EQ(side_by_side_request(r, false, {}, "", "").size(), 2u);

  // Side by side in one process the config is the fastest.
  json out = {{"ok", true},
              {"rounds", 3},
              {"contenders", json::array({{{"name", "triton"}, {"kind", "triton"}, {"median_us", 90.0}},
                                          {{"name", "k_b2048"}, {"kind", "triton"}, {"median_us", 40.0}},
                                          {{"name", "model_rowwise"}, {"kind", "dsl"}, {"answer", "kernel"}, {"median_us", 45.0}, {"dims", {4, 100}}},
                                          {{"name", "eager"}, {"kind", "pytorch"}, {"median_us", 50.0}},
                                          {{"name", "compile"}, {"kind", "pytorch"}, {"error", "torch.compile failed"}}})}};
  SideBySide s = side_by_side_of(out);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.rounds, 3);
  ASSERT_EQ(s.left_out.size(), 1u);
  EXPECT_EQ(s.left_out[0], (std::pair<std::string, std::string>{"compile", "torch.compile failed"}));
  EXPECT_EQ(s.dsl.value("answer", ""), "kernel");
  std::vector<Contender> cs = answer_contenders(r, s);
  TritonAnswer a = choose_triton_answer(cs, 90);
  EXPECT_EQ(a.returned, "k_b2048");
  EXPECT_EQ(a.best_baseline, "eager");
  EXPECT_DOUBLE_EQ(a.speedup_vs_best_baseline, 50.0 / 40.0);
  EXPECT_DOUBLE_EQ(a.speedup_vs_kernel, 90.0 / 40.0);

  // Where the side-by-side timing did not run, only the Triton worker's own times are compared.
  SideBySide failed = side_by_side_of({{"ok", false}, {"error", "the side-by-side timing exited with status 1"}});
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.error, "the side-by-side timing exited with status 1");
  cs = answer_contenders(r, failed);
  ASSERT_EQ(cs.size(), 2u);
  a = choose_triton_answer(cs, 100);
  EXPECT_EQ(a.returned, "k_b2048");
  EXPECT_EQ(a.best_baseline, "triton");
  EXPECT_DOUBLE_EQ(a.speedup_vs_kernel, 100.0 / 60.0);
}

TEST(TritonSideBySide, EveryAnswerHasARerunLineADslKernelItsLibraryAndDims) {
  TritonAnswer a;
  a.use_baseline = false;
  a.language = "dsl";
  a.returned = "rowwise_model_f32_t256";
  json dsl = {{"answer", "kernel"}, {"dims", {4096, 8192}}, {"library", "/cache/lib.so"}};
  EXPECT_EQ(triton_rerun(a, "runs/t", "softmax_kernel", dsl, "python3"),
            "ksol eval-module runs/t/problem.py --candidate runs/t/softmax_kernel/best.so --dims 4096,8192");
  EXPECT_EQ(triton_rerun(a, "runs/t", "softmax_kernel", {{"answer", "stitched"}}, "PYTHONPATH=/k/python python3"),
            "PYTHONPATH=/k/python python3 -c \"import ksol; print(ksol.load('runs/t/dsl').ksol_verification)\"");
  a.language = "triton";
  EXPECT_EQ(triton_rerun(a, "runs/t", "softmax_kernel", json::object(), "python3"), "ksol eval-module runs/t/problem.py --candidate runs/t/best.py");
  a.use_baseline = true;
  a.language = "pytorch";
  EXPECT_EQ(triton_rerun(a, "runs/t", "softmax_kernel", json::object(), "python3"),
            "ksol eval-module runs/t/problem.py --candidate runs/t/as_given.py");
}
