// The conventions every ksol command follows (src/cli/usage.h), on the built binary: --version,
// the exit-status table in --help, --json on every command that prints, and help for every
// command. Exact messages and exit statuses of errors are the cases in tests/errors/cli.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/util.h"

namespace fs = std::filesystem;

namespace {

std::string ksol_bin() { return std::string(KSOL_BUILD_DIR) + "/ksol"; }
std::string src(const std::string& rel) { return std::string(KSOL_SOURCE_DIR) + "/" + rel; }
std::string no_gpu_worker() { return src("tests/errors/cli/no_gpu_worker.py"); }

// A folder of its own for each test, so that what a command leaves behind is seen.
std::string scratch() {
  fs::path d = fs::temp_directory_path() /
               ("ksol-conv-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// The JSON document in a command's output (stdout and stderr together): from the first line that
// opens an object or an array to the line that closes it (dump(2) puts both at the line's start).
nlohmann::json json_in(const std::string& output) {
  for (size_t p = 0; p < output.size();) {
    if (output.compare(p, 2, "{\n") == 0 || output.compare(p, 2, "[\n") == 0) {
      size_t end = output.find(output[p] == '{' ? "\n}" : "\n]", p);
      if (end != std::string::npos) return nlohmann::json::parse(output.substr(p, end + 2 - p));
    }
    size_t nl = output.find('\n', p);
    if (nl == std::string::npos) break;
    p = nl + 1;
  }
  throw std::runtime_error("no JSON in:\n" + output);
}

}  // namespace

TEST(CliConventions, VersionIsTheProjectVersionAndCommit) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--version"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(r.output, m, std::regex("ksol ([0-9]+\\.[0-9]+\\.[0-9]+)(\\+([0-9a-f]{12}))?\n"))) << r.output;
  EXPECT_EQ(m[1].str(), KSOL_VERSION);
  // Built from a git checkout: the commit is one git knows.
  if (ksol::run_process({"git", "-C", KSOL_SOURCE_DIR, "rev-parse", "HEAD"}, 60).exit_code == 0) {
    ASSERT_TRUE(m[3].matched) << r.output;
    EXPECT_EQ(ksol::run_process({"git", "-C", KSOL_SOURCE_DIR, "cat-file", "-e", m[3].str() + "^{commit}"}, 60).exit_code, 0) << r.output;
  }
}

TEST(CliConventions, HelpEndsWithTheExitStatusTable) {
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--help"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t table = r.output.find("Exit status (every command):\n");
  ASSERT_NE(table, std::string::npos) << r.output;
  for (const char* row : {"\n  0    ok\n", "\n  1    error: the run failed", "\n  2    usage: a bad command, flag or argument",
                          "\n  77   no GPU where GPU work was asked for", "\n  128+N  interrupted by signal N"})
    EXPECT_NE(r.output.find(row, table), std::string::npos) << row;
}

// Every command and subcommand has --help, which exits 0 and runs nothing (no store is opened).
TEST(CliConventions, EveryCommandHasHelp) {
  const std::string dir = scratch();
  for (std::vector<std::string> words : std::vector<std::vector<std::string>>{
           {"eval"}, {"sol"}, {"device"}, {"device", "calibrate"}, {"bench"}, {"tasks"}, {"dsl"}, {"dsl", "print"}, {"dsl", "space"},
           {"dsl", "cuda"}, {"refcheck"}, {"optimize"}, {"import"}, {"import", "kernelbench"}, {"eval-module"}, {"runs"}, {"show"},
           {"export"}}) {
    std::vector<std::string> argv = {ksol_bin()};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.push_back("--help");
    ksol::ProcessResult r = ksol::run_process(argv, 60, dir);
    EXPECT_EQ(r.exit_code, 0) << ksol::join(words, " ") << ": " << r.output;
    EXPECT_NE(r.output.find("Usage:"), std::string::npos) << ksol::join(words, " ") << ": " << r.output;
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// --json is global: before or after the command, every command that prints answers in JSON.
TEST(CliConventions, EveryCommandThatPrintsHonoursJson) {
  const std::string dir = scratch();
  auto run = [&](std::vector<std::string> args, int want_exit) {
    args.insert(args.begin(), ksol_bin());
    ksol::ProcessResult r = ksol::run_process(args, 600, dir);
    EXPECT_EQ(r.exit_code, want_exit) << ksol::join(args, " ") << ":\n" << r.output;
    return json_in(r.output);
  };
  for (bool after : {false, true}) {
    nlohmann::json tasks = after ? run({"tasks", "--json"}, 0) : run({"--json", "tasks"}, 0);
    ASSERT_TRUE(tasks.is_array());
    bool relu = false;
    for (const auto& t : tasks)
      if (t["task"] == "relu_f32") {
        relu = true;
        EXPECT_EQ(t["family"], "tensor");
        EXPECT_NE(std::find(t["baselines"].begin(), t["baselines"].end(), "naive"), t["baselines"].end()) << t.dump();
        EXPECT_FALSE(t["sizes"].empty());
      }
    EXPECT_TRUE(relu) << tasks.dump(1);
  }
  EXPECT_EQ(run({"sol", "--task", "relu_f32", "--json", "--worker", no_gpu_worker()}, 0)["task"], "relu_f32");
  nlohmann::json dev = run({"device", "--json", "--worker", no_gpu_worker()}, 0);
  EXPECT_EQ(dev["gpu"], false);
  EXPECT_EQ(dev["reason"], "scripted: no GPU");
  EXPECT_EQ(run({"device", "calibrate", "--json", "--worker", no_gpu_worker()}, 77)["gpu"], false);
  const std::string prog = src("tasks/tensor/relu_f32/program.ksol");
  nlohmann::json printed = run({"dsl", "print", prog, "--json"}, 0);
  EXPECT_EQ(printed["family"], "elementwise");
  EXPECT_NE(printed["ir"].get<std::string>().find("family elementwise"), std::string::npos);
  EXPECT_GT(run({"dsl", "space", prog, "--json"}, 0)["legal"].get<int>(), 0);
  nlohmann::json cuda = run({"dsl", "cuda", prog, "--task", "relu_f32", "--json"}, 0);
  EXPECT_NE(cuda["cuda"].get<std::string>().find("ksol_run"), std::string::npos);
  EXPECT_FALSE(cuda["kernel"].get<std::string>().empty());
  EXPECT_TRUE(fs::is_empty(dir)) << "the read-only commands above left files in " << dir;

  nlohmann::json compiled = run({"--json", "--store", "", "eval", "--task", "relu_f32", "--candidate", prog, "--compile-only"}, 0);
  ASSERT_EQ(compiled["candidates"].size(), 1u) << compiled.dump(1);
  EXPECT_TRUE(compiled["candidates"][0]["compiled"].get<bool>()) << compiled.dump(1);
  nlohmann::json evaluated = run({"--json", "--store", "", "--worker", no_gpu_worker(), "eval", "--task", "relu_f32", "--candidate", prog,
                                  "--sizes", "small", "--compare", "none"},
                                 77);
  EXPECT_EQ(evaluated["candidate"]["sizes"][0]["status"], "no_gpu") << evaluated.dump(1);
  nlohmann::json optimized = run({"--json", "--store", "", "--worker", no_gpu_worker(), "optimize", "relu_f32"}, 77);
  EXPECT_EQ(optimized["gpu"], false);
  ASSERT_EQ(optimized["seeds"].size(), 1u);
  EXPECT_TRUE(optimized["seeds"][0]["compiled"].get<bool>()) << optimized.dump(1);

  // The commands that read the store, over a run eval recorded.
  const std::string db = dir + "/k.db";
  EXPECT_GT(run({"--json", "--store", db, "--worker", no_gpu_worker(), "eval", "--task", "relu_f32", "--candidate", prog, "--sizes", "small",
                 "--compare", "none"},
                77)["run"]
                .get<int>(),
            0);
  nlohmann::json runs = run({"runs", "--json", "--store", db}, 0);
  ASSERT_EQ(runs["runs"].size(), 1u) << runs.dump(1);
  EXPECT_EQ(runs["runs"][0]["tasks"], nlohmann::json::array({"relu_f32"}));
  nlohmann::json shown = run({"--json", "--store", db, "show", "last"}, 0);
  EXPECT_EQ(shown["source"], "evaluations");
  EXPECT_EQ(shown["sizes"][0]["status"], "no_gpu") << shown.dump(1);
  nlohmann::json exported = run({"--store", db, "export", "1", dir + "/out", "--json"}, 0);
  EXPECT_NE(std::find(exported["files"].begin(), exported["files"].end(), "evaluations.csv"), exported["files"].end()) << exported.dump(1);
  fs::remove_all(dir);
}

// A usage error is found before anything runs: no store, no worker, no compile.
TEST(CliConventions, UsageErrorsRunNothing) {
  const std::string dir = scratch();
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", dir + "/k.db", "--worker", "/nonexistent/worker", "eval", "--task",
                                             "relu_f32", "--candidate", src("tasks/tensor/relu_f32/program.ksol"), "--compare", "cublass"},
                                            60, dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("ksol eval: --compare 'cublass': task relu_f32 has no such baseline (its baselines: ", 0), 0u) << r.output;
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}
