// The profile stage without a GPU: ncu's CSV (tests/unit/data/ncu, written in the format of
// `ncu --csv --metrics ...` for this test), classification, Otsu thresholds, the prompt summary.
#include <gtest/gtest.h>

#include <random>

#include "agents/profile.h"
#include "core/util.h"

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
  EXPECT_EQ(s.find("bank conflicts"), std::string::npos) << s;  // none: not mentioned
  EXPECT_EQ(s.find("l2"), std::string::npos) << s;
  EXPECT_LT(s.size(), full_listing(f).size());
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
