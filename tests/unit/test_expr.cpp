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
