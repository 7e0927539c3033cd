// Every tests/errors/cli/<name>.case runs the built ksol and must exit with its status and print
// exactly its output. Adding a case needs no C++: drop the file in. A case is
//
//   # what it shows (comment lines first)
//   setup: --worker ... eval ...                (optional: a ksol command run first, in the same
//                                                folder, to make a store for the case to read)
//   args: eval --task relu_f32 --timeout -1     (split at spaces; {src} is the source tree, {cwd}
//                                                the case's folder, here and in the output)
//   exit: 2
//   leaves: data/ksol/ksol.db                   (optional: the files it may leave; default none)
//   first line: ...                             (either the first line of the output exactly,
//   output:                                      or, to the end of the file, the whole output)
//   ...
//
// Each case runs in a fresh empty folder with XDG_DATA_HOME at its data/, so that the default
// store is data/ksol/ksol.db there. Afterwards the folder must hold exactly the files `leaves`
// names (a command that needs no store is seen not to create one), and the files setup made must
// be as setup left them (runs, show and export only read the store). Cases that need a GPU run with
// --worker {src}/tests/errors/cli/no_gpu_worker.py, a worker that always answers "no GPU".
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/util.h"

namespace fs = std::filesystem;

namespace {

struct CliCase {
  std::vector<std::string> setup, args;
  int exit = -1;
  std::string leaves;
  bool whole_output = false, first_line_only = false;
  std::string output;
};

std::string substitute(std::string s, const std::string& key, const std::string& value) {
  for (size_t at = 0; (at = s.find(key, at)) != std::string::npos; at += value.size()) s.replace(at, key.size(), value);
  return s;
}

CliCase parse_case(const std::string& text, const std::string& cwd) {
  auto with_source = [&](const std::string& s) { return substitute(substitute(s, "{src}", KSOL_SOURCE_DIR), "{cwd}", cwd); };
  CliCase c;
  std::istringstream in(text);
  std::string line;
  auto value = [&](const std::string& key) { return ksol::trim(line.substr(key.size())); };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("args:", 0) == 0 || line.rfind("setup:", 0) == 0) {
      const bool setup = line[0] == 's';
      std::istringstream words(with_source(value(setup ? "setup:" : "args:")));
      for (std::string w; words >> w;) (setup ? c.setup : c.args).push_back(w);
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

// Every file under `dir`, relative to it, with its contents.
std::map<std::string, std::string> files_under(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (!e.is_directory()) out[fs::relative(e.path(), dir).string()] = ksol::read_file(e.path().string());
  return out;
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
    const fs::path cwd = scratch / name;
    CliCase c;
    ASSERT_NO_THROW(c = parse_case(ksol::read_file(path.string()), cwd.string())) << name;
    ASSERT_NE(c.exit, -1) << name << ": no exit line";
    fs::remove_all(cwd);
    fs::create_directories(cwd);
    auto ksol_argv = [&](const std::vector<std::string>& args) {
      std::vector<std::string> argv = {"env", "XDG_DATA_HOME=" + (cwd / "data").string(), std::string(KSOL_BUILD_DIR) + "/ksol"};
      argv.insert(argv.end(), args.begin(), args.end());
      return argv;
    };
    std::map<std::string, std::string> made;
    if (!c.setup.empty()) {
      ksol::ProcessResult s = ksol::run_process(ksol_argv(c.setup), 600, cwd.string());
      ASSERT_TRUE(s.exit_code == 0 || s.exit_code == 77) << "case " << name << ": setup failed:\n" << s.output;
      made = files_under(cwd);
    }
    ksol::ProcessResult r = ksol::run_process(ksol_argv(c.args), 600, cwd.string());
    EXPECT_EQ(r.exit_code, c.exit) << "case " << name << ":\n" << r.output;
    if (c.whole_output) {
      EXPECT_EQ(r.output, c.output) << "case " << name;
    }
    if (c.first_line_only) {
      EXPECT_EQ(r.output.substr(0, r.output.find('\n')), c.output) << "case " << name;
    }
    std::map<std::string, std::string> after = files_under(cwd);
    std::vector<std::string> left;
    for (const auto& [file, text] : after) left.push_back(file);
    EXPECT_EQ(ksol::join(left, " "), c.leaves) << "case " << name << ": files left in the folder it ran in";
    for (const auto& [file, text] : made)
      EXPECT_TRUE(after.count(file) && after[file] == text) << "case " << name << ": " << file << " changed";
  }
  fs::remove_all(scratch);
  EXPECT_GE(cases.size(), 40u);
}
