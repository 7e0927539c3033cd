// The ksol Python package's tests (tests/python, for python/ksol): with the Python that has
// PyTorch, else with plain python3, where the tests that need PyTorch skip and say so. Its no-GPU
// cases run the ksol built here.
#include <gtest/gtest.h>

#include "core/util.h"

TEST(PythonPackage, UnitTests) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) py = "python3";
  std::string root = ksol::source_root();
  ksol::ProcessResult r =
      ksol::run_process({"env", "PYTHONPATH=" + root + "/python", std::string("KSOL_TEST_BIN_DIR=") + KSOL_BUILD_DIR, py, "-W",
                         "error::ResourceWarning", "-m", "unittest", "discover", "-s", root + "/tests/python", "-t", root + "/tests/python"},
                        600);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
