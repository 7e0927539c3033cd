#include <gtest/gtest.h>

#include <cmath>

#include "core/expr.h"
#include "core/hash.h"
#include "core/stats.h"

using ksol::eval_expr;

TEST(Expr, ArithmeticAndPrecedence) {
  std::map<std::string, double> env = {{"M", 8}, {"N", 3}, {"K", 2}};
  EXPECT_EQ(eval_expr("2*M*N*K", env), 96);
  EXPECT_EQ(eval_expr("M + N * K", env), 14);
  EXPECT_EQ(eval_expr("(M + N) * K", env), 22);
  EXPECT_EQ(eval_expr("-M + 1", env), -7);
  EXPECT_EQ(eval_expr("2^10", env), 1024);
  EXPECT_EQ(eval_expr("4e9", env), 4e9);
  EXPECT_EQ(eval_expr("M/N", env), 8.0 / 3.0);
  EXPECT_EQ(eval_expr("ceil_div(M, N)", env), 3);
  EXPECT_EQ(eval_expr("min(M, N) + max(M, K)", env), 11);
  EXPECT_EQ(eval_expr("sqrt(M*2)", env), 4);
  EXPECT_EQ(eval_expr("log2(M)", env), 3);
}

TEST(Expr, ErrorsCarryColumns) {
  ksol::ExprError err;
  EXPECT_EQ(ksol::Expr::parse("M * (N + ", &err), nullptr);
  EXPECT_EQ(err.column, 9);
  EXPECT_EQ(ksol::Expr::parse("M $ N", &err), nullptr);
  EXPECT_EQ(err.message, "unexpected '$'");
  EXPECT_EQ(err.column, 2);
  EXPECT_EQ(ksol::Expr::parse("foo(M)", &err), nullptr);
  EXPECT_EQ(err.message, "unknown function 'foo'");
  EXPECT_THROW(eval_expr("M + Q", {{"M", 1}}), std::runtime_error);
  try {
    eval_expr("M + Q", {{"M", 1}});
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "in 'M + Q' at column 5: unknown name 'Q'");
  }
}

TEST(Hash, Sha256KnownAnswers) {
  EXPECT_EQ(ksol::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(ksol::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ksol::sha256_hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(Stats, MedianAndConfidenceInterval) {
  EXPECT_EQ(ksol::median({3, 1, 2}), 2);
  EXPECT_EQ(ksol::median({4, 1, 2, 3}), 2.5);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  ksol::MedianCI ci = ksol::median_ci(v);
  EXPECT_EQ(ci.median, 50.5);
  // ranks 50 -/+ 1.96*sqrt(100)/2 = 9.8: 1-based ranks 40 and 61 (0-based 39 and 60)
  EXPECT_EQ(ci.low, 40);
  EXPECT_EQ(ci.high, 61);
  EXPECT_NEAR(ksol::relative_spread({99, 100, 101}), 0.02, 1e-12);
}

// The timing gate's stopping rule on the shape an H200 produced (the bf16 GEMM at 8192^3 under the
// 700 W cap; docs/results/2026-12-02-h200-issue4-s20.txt): a few samples at the settled clock, ~50
// in a faster step after the GPU idled, then the settled clock again. The CI alone stops inside the
// fast step; the drift check keeps sampling until the step is a minority, so the median is the
// settled one. (No rule sees a step still to come: the warm-up after the verified call removes the
// cause of this one.)
TEST(Stats, SamplingStopsOnlyOnceTheSeriesIsSteady) {
  auto noise = [](int i) { return ((i * 7919) % 11 - 5) * 0.8; };  // +-4 us, deterministic
  std::vector<double> stepped;
  for (int i = 0; i < 2000; ++i) stepped.push_back((i < 4 ? 1590 : i < 51 ? 1350 : 1510) + noise(i));
  // The first check comes after the gate's 0.1 s minimum: 67 samples there (1.4 ms and the flush).
  auto first_stop = [](const std::vector<double>& all, bool drift_too) {
    for (size_t n = 67; n <= all.size(); ++n) {
      std::vector<double> v(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
      ksol::SampleStop s = ksol::sampling_settled(v, 0.005);
      if (drift_too ? s.stop : s.rel_ci <= 0.005) return v;
    }
    return all;
  };
  std::vector<double> ci_only = first_stop(stepped, false), settled = first_stop(stepped, true);
  EXPECT_LT(ksol::median(ci_only), 1400);  // what the rule without the drift check reported
  EXPECT_GT(ksol::median(settled), 1490);
  EXPECT_LT(settled.size(), 400u);
  ksol::SampleStop s = ksol::sampling_settled(settled, 0.005);
  EXPECT_TRUE(s.stop);
  EXPECT_LE(s.drift, 2.5 * 0.005);
  // A steady series stops as soon as its CI is narrow: the drift check costs it nothing.
  std::vector<double> steady;
  for (int i = 0; i < 2000; ++i) steady.push_back(1500 + 4 * noise(i));
  EXPECT_EQ(first_stop(steady, true).size(), first_stop(steady, false).size());
  // A last quarter 1.5% off the rest does not stop, however narrow the CI; 1% off does.
  std::vector<double> two(200, 100.0);
  for (size_t i = 150; i < two.size(); ++i) two[i] = 101.5;
  EXPECT_FALSE(ksol::sampling_settled(two, 0.005).stop);
  EXPECT_NEAR(ksol::sampling_settled(two, 0.005).drift, 0.015, 1e-9);
  for (size_t i = 150; i < two.size(); ++i) two[i] = 101.0;
  EXPECT_TRUE(ksol::sampling_settled(two, 0.005).stop);
  // Too few samples to split (the search's 3-sample screen): no drift, the CI decides.
  EXPECT_EQ(ksol::sampling_settled({100, 100, 130}, 0.005).drift, 0);
  EXPECT_EQ(ksol::sampling_settled(std::vector<double>(8, 100.0), 0.005).drift, 0);
}
