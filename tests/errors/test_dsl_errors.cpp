// Every tests/errors/dsl/<name>.ksol must fail to parse with exactly <name>.expected.
// Adding a case needs no C++: drop the two files in.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/util.h"
#include "dsl/ir.h"

namespace fs = std::filesystem;

TEST(DslErrors, EveryCaseFailsWithItsExactMessage) {
  fs::path dir = fs::path(KSOL_SOURCE_DIR) / "tests/errors/dsl";
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".ksol") cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  for (const fs::path& path : cases) {
    std::string name = path.filename().string();
    fs::path expected_path = fs::path(path).replace_extension(".expected");
    ASSERT_TRUE(fs::exists(expected_path)) << "missing " << expected_path;
    std::string want = ksol::trim(ksol::read_file(expected_path.string()));
    try {
      ksol::dsl::parse_program(ksol::read_file(path.string()), name);
      ADD_FAILURE() << name << " parsed without error";
    } catch (const ksol::dsl::DslError& err) {
      EXPECT_EQ(ksol::trim(err.what()), want) << "case " << name;
      EXPECT_EQ(err.file, name);
    }
  }
  EXPECT_GE(cases.size(), 15u);
}
