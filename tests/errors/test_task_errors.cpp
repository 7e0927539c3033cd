// Every tests/errors/cases/<name>.toml must fail to load with exactly <name>.expected.
// Adding a case needs no C++: drop the two files in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/util.h"
#include "task/task.h"

namespace fs = std::filesystem;

TEST(TaskErrors, EveryCaseFailsWithItsExactMessage) {
  fs::path dir = fs::path(KSOL_SOURCE_DIR) / "tests/errors/cases";
  fs::path old = fs::current_path();
  fs::current_path(dir);
  int cases = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".toml") continue;
    ++cases;
    std::string name = e.path().filename().string();
    std::string expected_path = e.path().stem().string() + ".expected";
    ASSERT_TRUE(fs::exists(expected_path)) << "missing " << expected_path;
    std::string want = ksol::trim(ksol::read_file(expected_path));
    try {
      ksol::load_task(name);
      ADD_FAILURE() << name << " loaded without error";
    } catch (const ksol::TaskError& err) {
      EXPECT_EQ(ksol::trim(err.what()), want) << "case " << name;
    }
  }
  fs::current_path(old);
  EXPECT_GE(cases, 8);
}
