// Every tests/errors/cli/<name>.case runs the built ksol and must exit with its status and print
// exactly its output. Adding a case needs no C++: drop the file in. A case is
//
//   # what it shows (comment lines first)
//   args: eval --task relu_f32 --timeout -1     (split at spaces; {src} is the source tree)
//   exit: 2
//   leaves: ksol.db                             (optional: the files it may leave; default none)
//   first line: ...                             (either the first line of the output exactly,
//   output:                                      or, to the end of the file, the whole output)
//   ...
//
// Each case runs in a fresh empty folder, which afterwards must hold exactly what `leaves` names,
// so that a command that needs no store is seen not to create ksol.db. Cases that need a GPU run
// with --worker {src}/tests/errors/cli/no_gpu_worker.py, a worker that always answers "no GPU".
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/util.h"

namespace fs = std::filesystem;

namespace {

struct CliCase {
  std::vector<std::string> args;
  int exit = -1;
  std::string leaves;
  bool whole_output = false, first_line_only = false;
  std::string output;
};

std::string with_source(std::string s) {
  const std::string key = "{src}";
  for (size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), KSOL_SOURCE_DIR);
  return s;
}

CliCase parse_case(const std::string& text) {
  CliCase c;
  std::istringstream in(text);
  std::string line;
  auto value = [&](const std::string& key) { return ksol::trim(line.substr(key.size())); };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("args:", 0) == 0) {
      std::istringstream words(with_source(value("args:")));
      for (std::string w; words >> w;) c.args.push_back(w);
    } else if (line.rfind("exit:", 0) == 0) {
      c.exit = std::stoi(value("exit:"));
    } else if (line.rfind("leaves:", 0) == 0) {
      c.leaves = value("leaves:");
    } else if (line.rfind("first line:", 0) == 0) {
      c.first_line_only = true;
      c.output = with_source(line.substr(std::string("first line: ").size()));
    } else if (line == "output:") {
      c.whole_output = true;
      std::ostringstream rest;
      rest << in.rdbuf();
      c.output = with_source(rest.str());
      break;
    } else {
      throw std::runtime_error("unknown line: " + line);
    }
  }
  return c;
}

}  // namespace

TEST(CliErrors, EveryCaseExitsWithItsExactOutput) {
  fs::path dir = fs::path(KSOL_SOURCE_DIR) / "tests/errors/cli";
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".case") cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  const fs::path scratch = fs::temp_directory_path() / ("ksol-cli-cases-" + std::to_string(::getpid()));
  for (const fs::path& path : cases) {
    const std::string name = path.stem().string();
    CliCase c;
    ASSERT_NO_THROW(c = parse_case(ksol::read_file(path.string()))) << name;
    ASSERT_NE(c.exit, -1) << name << ": no exit line";
    const fs::path cwd = scratch / name;
    fs::remove_all(cwd);
    fs::create_directories(cwd);
    std::vector<std::string> argv = {std::string(KSOL_BUILD_DIR) + "/ksol"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ksol::ProcessResult r = ksol::run_process(argv, 600, cwd.string());
    EXPECT_EQ(r.exit_code, c.exit) << "case " << name << ":\n" << r.output;
    if (c.whole_output) {
      EXPECT_EQ(r.output, c.output) << "case " << name;
    }
    if (c.first_line_only) {
      EXPECT_EQ(r.output.substr(0, r.output.find('\n')), c.output) << "case " << name;
    }
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(cwd)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(ksol::join(left, " "), c.leaves) << "case " << name << ": files left in the folder it ran in";
  }
  fs::remove_all(scratch);
  EXPECT_GE(cases.size(), 40u);
}
