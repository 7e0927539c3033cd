// The profile stage without a GPU: ncu's CSV (tests/unit/data/ncu, written in the format of
// `ncu --csv --metrics ...` for this test), classification, Otsu thresholds, the prompt summary.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "agents/knowledge.h"
#include "agents/llm_agent.h"
#include "agents/profile.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "search/optimize.h"

using namespace ksol;
using namespace ksol::agents::profile;

TEST(Profile, ParsesNcuCsvPerKernel) {
  std::string csv = read_file(source_root() + "/tests/unit/data/ncu/two_kernels.csv");
  auto f = parse_ncu_csv(csv, "softmax_k");
  EXPECT_NEAR(f.at("achieved_bw_frac"), (0.8152 + 0.8348) / 2, 1e-9);  // two launches averaged
  EXPECT_NEAR(f.at("achieved_flop_frac"), 0.231, 1e-9);
  EXPECT_NEAR(f.at("occupancy"), 0.38, 1e-9);
  EXPECT_NEAR(f.at("bank_conflicts"), 2.0, 1e-9);  // 1,200 conflicts in 1,800 wavefronts: 2 extra per request
  EXPECT_EQ(f.count("stall_long_scoreboard"), 0u);  // no total latency in the CSV: no share
  EXPECT_EQ(f.count("coalesced_frac"), 0u);         // "n/a" is left out, not read as 0
  auto g = parse_ncu_csv(csv, "gemm_k");
  EXPECT_NEAR(g.at("achieved_flop_frac"), 0.91, 1e-9);
  EXPECT_THROW(parse_ncu_csv(csv, "no_such_kernel"), std::runtime_error);
  EXPECT_THROW(parse_ncu_csv("==PROF== nothing profiled\n"), std::runtime_error);
}

TEST(Profile, ClassifiesWithFixedThresholdsAndSaysWhy) {
  Thresholds t;
  std::string why;
  EXPECT_EQ(classify({{"achieved_bw_frac", 0.82}, {"achieved_flop_frac", 0.2}}, t, &why), "memory_bandwidth");
  EXPECT_NE(why.find("thresholds fixed"), std::string::npos) << why;
  EXPECT_EQ(classify({{"achieved_bw_frac", 0.1}, {"achieved_flop_frac", 0.9}}, t), "compute");
  EXPECT_EQ(classify({{"achieved_bw_frac", 0.25}, {"achieved_flop_frac", 0.2}}, t, &why), "memory_latency");
  EXPECT_NE(why.find("neither"), std::string::npos);
}

TEST(Profile, OtsuOnlyFromThirtyKernels) {
  std::mt19937 rng(5);
  std::normal_distribution<double> low(0.2, 0.05), high(0.8, 0.05);
  std::vector<std::map<std::string, double>> hist;
  for (int i = 0; i < 29; ++i) hist.push_back({{"achieved_bw_frac", i % 2 ? low(rng) : high(rng)}, {"achieved_flop_frac", low(rng)}});
  EXPECT_EQ(fit_thresholds(hist).source, "fixed");
  for (int i = 0; i < 31; ++i) hist.push_back({{"achieved_bw_frac", i % 2 ? low(rng) : high(rng)}, {"achieved_flop_frac", i % 3 ? low(rng) : high(rng)}});
  Thresholds t = fit_thresholds(hist);
  EXPECT_EQ(t.source, "otsu(n=60)");
  EXPECT_GT(t.memory, 0.3);  // between the two modes
  EXPECT_LT(t.memory, 0.7);
  // A one-sided history cannot push a threshold to an extreme.
  std::vector<std::map<std::string, double>> flat(40, {{"achieved_bw_frac", 0.99}, {"achieved_flop_frac", 0.01}});
  Thresholds c = fit_thresholds(flat);
  EXPECT_LE(c.memory, 0.9);
  EXPECT_GE(c.compute, 0.3);
  EXPECT_NEAR(otsu({0.1, 0.1, 0.12, 0.9, 0.88, 0.9}), 0.5, 0.4);
}

TEST(Profile, SummaryKeepsOnlyWhatMatters) {
  std::map<std::string, double> f = {{"achieved_bw_frac", 0.4}, {"achieved_flop_frac", 0.1}, {"occupancy", 0.3},
                                     {"l2_hit_rate", 0.5}, {"bank_conflicts", 0.0}, {"stall_long_scoreboard", 0.7}};
  std::string s = summary(f, Thresholds{});
  EXPECT_NE(s.find("memory_latency"), std::string::npos) << s;
  EXPECT_NE(s.find("low occupancy"), std::string::npos) << s;
  EXPECT_NE(s.find("wait on global memory"), std::string::npos) << s;
  EXPECT_EQ(s.find("bank conflicts"), std::string::npos) << s;  // not a latency-bound kernel's metric
  EXPECT_NE(s.find("L2 hit rate: 50%"), std::string::npos) << s;
  EXPECT_LT(s.size(), full_listing(f).size());
}

namespace {
// Every metric the profile stage reads, at values that make each class in turn.
std::map<std::string, double> all_metrics(double bw, double flop) {
  return {{"achieved_bw_frac", bw}, {"achieved_flop_frac", flop}, {"occupancy", 0.3}, {"l2_hit_rate", 0.5},
          {"coalesced_frac", 0.6}, {"bank_conflicts", 3.0}, {"stall_long_scoreboard", 0.7}, {"stall_barrier", 0.4},
          {"duration_ns", 12000}};
}
bool has(const std::string& s, const std::string& w) { return s.find(w) != std::string::npos; }
}  // namespace

// The class picks the metrics: each summary carries its class's and no other.
TEST(ProfileFilter, EachClassPicksItsMetrics) {
  std::string c = summary(all_metrics(0.2, 0.8), Thresholds{});
  EXPECT_TRUE(has(c, "bottleneck: compute")) << c;
  EXPECT_TRUE(has(c, "SM throughput: 80%") && has(c, "low occupancy") && has(c, "warps wait at barriers") && has(c, "bank conflicts: 3 extra")) << c;
  EXPECT_FALSE(has(c, "DRAM throughput:") || has(c, "coalescing") || has(c, "L2 hit") || has(c, "global memory")) << c;

  std::string b = summary(all_metrics(0.8, 0.2), Thresholds{});
  EXPECT_TRUE(has(b, "bottleneck: memory_bandwidth")) << b;
  EXPECT_TRUE(has(b, "DRAM throughput: 80%") && has(b, "poor coalescing: 60%") && has(b, "L2 hit rate: 50%")) << b;
  EXPECT_FALSE(has(b, "occupancy") || has(b, "barriers") || has(b, "bank conflicts") || has(b, "global memory") || has(b, "SM throughput")) << b;

  std::string l = summary(all_metrics(0.3, 0.2), Thresholds{});
  EXPECT_TRUE(has(l, "bottleneck: memory_latency")) << l;
  EXPECT_TRUE(has(l, "DRAM throughput: 30%") && has(l, "low occupancy") && has(l, "wait on global memory") && has(l, "poor coalescing") &&
              has(l, "L2 hit rate"))
      << l;
  EXPECT_FALSE(has(l, "barriers") || has(l, "bank conflicts") || has(l, "SM throughput:")) << l;
  // Unfiltered: every metric in the same form.
  std::string all = summary(all_metrics(0.3, 0.2), Thresholds{}, false);
  EXPECT_TRUE(has(all, "SM throughput: 20%") && has(all, "barriers") && has(all, "bank conflicts")) << all;

  for (const char* cls : {"compute", "memory_bandwidth", "memory_latency"}) EXPECT_FALSE(class_metrics(cls).empty()) << cls;
  EXPECT_TRUE(class_metrics("roofline").empty());
}

// The measurement behind docs/results' filtered-profile figure: the LLM coder's user prompt
// (agents::LlmAgent::user_prompt, softmax_f32's seed program) with the profile filtered by class
// against every metric in the same form (summary(..., false)), for every profile under
// tests/unit/data/profiles that has at least three Nsight Compute metrics, and for one synthetic
// profile of each class with all of them. Sizes in characters; tokens estimated at four
// characters each.
TEST(ProfileFilter, PromptSizeFilteredAgainstUnfiltered) {
  using namespace ksol::agents;
  Task t = load_task(resolve_task_path("softmax_f32"));
  dsl::Program seed = dsl::parse_program(read_file(t.dir + "/program.ksol"), "program.ksol");
  Knowledge k = load_knowledge(default_knowledge_dir());
  struct Scripted : llm::Backend {
    std::string id() const override { return "none"; }
    llm::Answer send(const llm::Request&, bool*) override { return {}; }
  };
  llm::Spec sp;
  llm::Client c(std::make_unique<Scripted>(), sp, {}, "");
  LlmAgent agent(c, t, k, default_dsl_card());
  std::vector<std::pair<std::string, std::map<std::string, double>>> cases;
  for (auto& e : std::filesystem::directory_iterator(source_root() + "/tests/unit/data/profiles")) {
    if (e.path().extension() != ".toml") continue;
    Features f = load_features(e.path().string(), &k);
    std::map<std::string, double> m;
    for (auto& [name, v] : f.num)
      if (ncu_metrics().count(name)) m[name] = v;
    if (m.size() >= 3 && m.count("achieved_bw_frac")) cases.push_back({"file " + e.path().stem().string(), m});
  }
  std::sort(cases.begin(), cases.end());
  cases.push_back({"synthetic compute", all_metrics(0.2, 0.8)});
  cases.push_back({"synthetic memory_bandwidth", all_metrics(0.8, 0.2)});
  cases.push_back({"synthetic memory_latency", all_metrics(0.3, 0.2)});
  ASSERT_GE(cases.size(), 6u);
  size_t sum_sec_full = 0, sum_sec_filt = 0, sum_prompt_full = 0, sum_prompt_filt = 0;
  std::printf("%-44s %-17s %8s %8s %8s %8s\n", "profile", "class", "sect.all", "sect.cls", "prm.all", "prm.cls");
  for (auto& [name, m] : cases) {
    Profile p;
    p.bound = "memory";
    p.pct_sol = m.at("achieved_bw_frac");
    p.metrics = m;
    p.bottleneck = classify(m, Thresholds{});
    p.summary = summary(m, Thresholds{}, false);
    const std::string full = agent.user_prompt(seed, p, "");
    const size_t sec_full = p.summary.size();
    p.summary = summary(m, Thresholds{});
    const std::string filt = agent.user_prompt(seed, p, "");
    const size_t sec_filt = p.summary.size();
    EXPECT_LE(filt.size(), full.size()) << name;
    sum_sec_full += sec_full, sum_sec_filt += sec_filt, sum_prompt_full += full.size(), sum_prompt_filt += filt.size();
    std::printf("%-44s %-17s %8zu %8zu %8zu %8zu\n", name.c_str(), p.bottleneck.c_str(), sec_full, sec_filt, full.size(), filt.size());
  }
  const double sec_cut = 1.0 - static_cast<double>(sum_sec_filt) / static_cast<double>(sum_sec_full);
  const double prompt_cut = 1.0 - static_cast<double>(sum_prompt_filt) / static_cast<double>(sum_prompt_full);
  std::printf("%zu profiles: profile section %zu -> %zu characters (%.1f%% fewer, ~%zu -> ~%zu tokens at 4 characters each); "
              "user prompt %zu -> %zu characters (%.1f%% fewer)\n",
              cases.size(), sum_sec_full, sum_sec_filt, 100 * sec_cut, sum_sec_full / 4, sum_sec_filt / 4, sum_prompt_full, sum_prompt_filt,
              100 * prompt_cut);
  EXPECT_GT(sec_cut, 0.2);
}

TEST(Profile, NcuCommandAndProbe) {
  auto c = ncu_command("softmax", {"ksol-worker"});
  EXPECT_EQ(c[0], "ncu");
  EXPECT_NE(std::find(c.begin(), c.end(), "--csv"), c.end());
  EXPECT_EQ(c.back(), "ksol-worker");
  std::string why;
  EXPECT_FALSE(ncu_available(&why, "/nonexistent/ncu"));
  EXPECT_NE(why.find("roofline"), std::string::npos);
}
