// The config search of a standalone Triton kernel (src/search/triton_configs.h) against a scripted
// evaluator: screening results and worker verdicts are given per config label, so the loop's
// decisions (the kernel as given first, the fastest screened ones verified, the fastest verified
// kept, budgets and signals honoured) and the answer's choice are seen without a GPU.
#include <gtest/gtest.h>

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
