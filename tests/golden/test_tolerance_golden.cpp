// The elementwise tolerance comparator against tests/golden/tolerance/cases.json, the cases the
// Python worker's comparator (tests/python/test_tolerance_golden.py) must agree on too.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/inputs.h"

namespace {

double number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  const std::string s = v.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  throw std::runtime_error("not a number: " + s);
}

TEST(ToleranceGolden, TheHarnessComparatorGivesEveryCasesVerdict) {
  std::ifstream in(std::string(KSOL_SOURCE_DIR) + "/tests/golden/tolerance/cases.json");
  ASSERT_TRUE(in) << "tests/golden/tolerance/cases.json is missing";
  nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_GE(doc["cases"].size(), 8u);
  for (const auto& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    ASSERT_EQ(c["out_dtype"], "f32");
    std::vector<double> ref;
    std::vector<float> got;
    for (const auto& v : c["ref"]) ref.push_back(number(v));
    for (const auto& v : c["got"]) got.push_back(static_cast<float>(number(v)));
    ASSERT_EQ(ref.size(), got.size());
    ksol::Tolerance tol;
    tol.c_out = c["c_out"].get<double>();
    tol.u_out = std::ldexp(1.0, -24);
    tol.u_acc = c["u_acc"].get<double>();
    tol.growth = (8.0 + 2.0 * std::sqrt(std::max(1.0, c["accumulation"].get<double>()))) * c["rtol_scale"].get<double>();
    tol.floor_frac = c["floor_frac"].get<double>();
    ksol::CompareResult r = ksol::compare_output(tol, ksol::DType::f32, got.data(), ref.data(), ref.data(), static_cast<int64_t>(ref.size()));
    EXPECT_EQ(r.ok, c["expect"]["ok"].get<bool>()) << r.message;
    EXPECT_EQ(r.bad, c["expect"]["bad"].get<int64_t>()) << r.message;
  }
}

}  // namespace
