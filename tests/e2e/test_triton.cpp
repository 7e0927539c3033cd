// ksol optimize FILE.py --triton-fn NAME end to end (docs/TRITON.md), on the two test kernels in
// tests/triton: without a GPU (parsed, configs listed, the reference lowered and compiled, exit
// 77); under --emulate where the Python that runs the worker has Triton (configs through Triton's
// interpreter and the worker's gates on the CPU; the report and the store); and on a GPU, the
// must-show run (skipped without one). Exact messages of bad files: tests/errors/cli.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "coord/worker_client.h"
#include "core/util.h"
#include "store/store.h"

namespace fs = std::filesystem;

namespace {

std::string bin_dir() {
  if (const char* d = std::getenv("KSOL_TEST_BIN_DIR"); d && *d) return d;
  return KSOL_BUILD_DIR;
}
std::string ksol_bin() { return bin_dir() + "/ksol"; }
std::string src(const std::string& rel) { return ksol::source_root() + "/" + rel; }

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ksol-triton-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The Python worker's answer to hello: whether it sees a GPU ("" when it did not start).
std::string python_gpu(const std::string& py) {
  ksol::WorkerClient w({"env", "PYTHONPATH=" + src("python"), py, "-m", "ksol_torch", "worker"});
  ksol::WorkerReply r = w.call({{"op", "hello"}}, 120);
  if (!r.ok) return "";
  return r.body.value("gpu", false) ? "gpu" : "cpu";
}

// Why the Python cannot run Triton kernels in its interpreter ("" when it can).
std::string no_interpreter(const std::string& py) {
  ksol::ProcessResult r = ksol::run_process(
      {py, "-c", "import numpy, triton; int(numpy.array([1])); print('ok', triton.__version__)"}, 120);
  if (r.exit_code == 0) return "";
  std::string last = ksol::trim(r.output);
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  return py + " cannot run Triton's interpreter (Triton missing, or a NumPy whose int() of a one-element array fails): " + last;
}

// A copy of a test kernel with small shapes: the interpreter runs each program in Python.
std::string small_copy(const fs::path& dir, const std::string& name, const std::string& from, const std::string& to) {
  std::string text = ksol::read_file(src("tests/triton/" + name));
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  std::string path = (dir / name).string();
  ksol::write_file_atomic(path, text);
  return path;
}

}  // namespace

TEST(Triton, WithoutAGpuTheFileIsParsedItsConfigsListedAndItsReferenceLowered) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  if (python_gpu(py) == "gpu") GTEST_SKIP() << "this machine has a GPU: the no-GPU path does not run";
  fs::path dir = scratch("nogpu");
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", "", "optimize",
                                             src("tests/triton/layernorm.py"), "--triton-fn", "layernorm_kernel"},
                                            900, dir.string());
  EXPECT_EQ(r.exit_code, 77) << r.output;
  EXPECT_NE(r.output.find("triton: layernorm_kernel (" + src("tests/triton/layernorm.py") +
                          ":15): inputs [4096, 4096] float32, [4096] float32, [4096] float32; reference() in float64 verifies every config"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("triton: knobs BLOCK_SIZE 512 (powers of two 16..4096 (the largest input extent is 4096)), num_warps 4 "
                          "(powers of two 1..16), num_stages as launch passes it (1..4 (the kernel loops)); 225 legal configs, at most "
                          "48 screened, the 3 fastest verified"),
            std::string::npos)
      << r.output;
  // The reference went through the module path: lowered to one row-wise program that compiles.
  EXPECT_NE(r.output.find("seed rowwise_model_f32_t256_v4_r1_block: compiles"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": compiles"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layernorm_kernel was parsed, its 225 configs listed and its reference lowered; nothing was timed."),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "runs")) << "nothing was evaluated: no report";

  // --json: what was found, for a program to read.
  r = ksol::run_process({ksol_bin(), "--store", "", "--json", "optimize", src("tests/triton/softmax.py"),
                         "--triton-fn", "softmax_kernel"},
                        900, dir.string());
  EXPECT_EQ(r.exit_code, 77) << r.output;
  size_t open = r.output.find("\n{\n");
  ASSERT_NE(open, std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output.substr(open + 1, r.output.rfind("\n}") - open + 1));
  EXPECT_EQ(j["gpu"], false);
  EXPECT_EQ(j["fn"], "softmax_kernel");
  EXPECT_EQ(j["triton"]["space"], 250);
  EXPECT_EQ(j["triton"]["default_label"], "softmax_kernel_block_size1024_w4");
}

TEST(Triton, EmulatedRunVerifiesConfigsThroughTheWorkersGatesAndReportsThem) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  if (std::string no = no_interpreter(py); !no.empty()) GTEST_SKIP() << no << " (KSOL_PYTHON picks another Python)";
  fs::path dir = scratch("emulate");
  std::string file = small_copy(dir, "softmax.py", "ROWS, COLS = 4096, 8192", "ROWS, COLS = 4, 100");
  std::string store = (dir / "ksol.db").string(), json_path = (dir / "out.json").string(), report = (dir / "rep").string();
  ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", store, "optimize", file, "--triton-fn", "softmax_kernel", "--emulate",
                                             "--triton-configs", "5", "--triton-verify", "2", "--budget-candidates", "2", "--report",
                                             report, "--json-out", json_path},
                                            1800);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("never a result"), std::string::npos) << r.output;
  nlohmann::json doc = nlohmann::json::parse(ksol::read_file(json_path));
  EXPECT_TRUE(doc.value("emulated", false));
  const nlohmann::json& item = doc["results"][0];
  EXPECT_EQ(item["task"], "softmax_kernel");
  EXPECT_EQ(item["triton"]["screened"], 5) << item.dump(1);
  EXPECT_EQ(item["triton"]["verified"], 3) << item.dump(1);  // the kernel as given and the 2 fastest screened
  // Every config passed the worker's gates on the interpreter: the kernel as given first.
  const nlohmann::json& t = item["trajectory"];
  ASSERT_GE(t.size(), 3u) << item.dump(1);
  EXPECT_EQ(t[0]["kernel"], "softmax_kernel_block_size1024_w4");
  EXPECT_EQ(t[0]["method"], "as given");
  int verified_ok = 0;
  for (const auto& e : t) verified_ok += e["method"] != "screen" && e["status"] == "ok";
  EXPECT_EQ(verified_ok, 3) << t.dump(1);
  // Emulated: the kernel as given is returned, whatever the interpreter's times say.
  EXPECT_TRUE(item["use_baseline"].get<bool>());
  EXPECT_EQ(item["returned"], "triton");
  EXPECT_EQ(item["reason"], "--emulate: the times are the interpreter's and the emulator's, never a result");
  EXPECT_TRUE(item["dsl"]["ran"].get<bool>()) << item["dsl"].dump(1);
  // The contenders were timed side by side in one process, and the baselines' times are those.
  const nlohmann::json& side = item["side_by_side"];
  EXPECT_TRUE(side.value("ok", false)) << side.dump(1);
  EXPECT_EQ(side.value("rounds", 0), 3) << side.dump(1);
  EXPECT_GT(side["times_us"].value("triton", 0.0), 0.0) << side.dump(1);
  EXPECT_GT(side["times_us"].value("eager", 0.0), 0.0) << side.dump(1);
  EXPECT_EQ(side["times_us"].size() + side["left_out"].size(), 5u) << side.dump(1);  // as given, 2 configs, eager, compile
  for (auto& [name, us] : item["baseline_us"].items()) EXPECT_EQ(us, side["times_us"][name]) << name;
  EXPECT_NE(r.output.find("triton: side by side in one process (3 rounds, each contender checked first): triton, "), std::string::npos)
      << r.output;
  EXPECT_EQ(item["rerun"], "ksol eval-module " + report + "/problem.py --candidate " + report + "/as_given.py");
  EXPECT_NE(r.output.find("rerun: ksol eval-module " + report + "/problem.py --candidate " + report + "/as_given.py"), std::string::npos)
      << r.output;
  for (const char* f : {"report.md", "report.html", "results.json", "problem.py", "as_given.py", "dsl/report.md"})
    EXPECT_TRUE(fs::exists(fs::path(report) / f)) << f;
  std::string md = ksol::read_file(report + "/report.md");
  EXPECT_NE(md.find("## Triton: softmax_kernel"), std::string::npos) << md;
  EXPECT_NE(md.find("| BLOCK_SIZE | 1024 | 1024, 16, 32, 64, 128, 256, 512 | powers of two 16..1024 (the largest input extent is 100) |"),
            std::string::npos)
      << md;
  // The store has the run and its report: `ksol show` answers from it.
  ksol::store::Store s = ksol::store::Store::open(store);
  ASSERT_EQ(s.runs().size(), 1u);
  EXPECT_EQ(s.runs()[0].status, "finished");
  ASSERT_TRUE(s.run_report(s.runs()[0].id).has_value());
  ksol::ProcessResult show = ksol::run_process({ksol_bin(), "--store", store, "show", "last"}, 120);
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("softmax_kernel"), std::string::npos) << show.output;
}

// Both test kernels through the search on a GPU: the kernel as given passes its gates and an
// answer is returned. The kernel as given is always a contender, so the answer is never slower
// than it by construction: this test does not show a speedup (scripts/gpu_triton.sh prints them).
TEST(Gpu, TritonSoftmaxAndLayernormAnswersAreVerified) {
  std::string why, py = ksol::find_torch_python(&why);
  if (py.empty()) GTEST_SKIP() << "needs PyTorch: " << why;
  if (python_gpu(py) != "gpu") GTEST_SKIP() << "needs a GPU: the Python worker sees none";
  if (ksol::run_process({py, "-c", "import triton"}, 120).exit_code != 0) GTEST_SKIP() << "needs Triton for " << py;
  fs::path dir = scratch("gpu");
  for (const auto& [file, fn] : std::vector<std::pair<std::string, std::string>>{{"softmax.py", "softmax_kernel"},
                                                                                  {"layernorm.py", "layernorm_kernel"}}) {
    std::string json_path = (dir / (fn + ".json")).string();
    ksol::ProcessResult r = ksol::run_process({ksol_bin(), "--store", "", "optimize", src("tests/triton/" + file), "--triton-fn", fn,
                                               "--budget-seconds", "120", "--report", (dir / fn).string(), "--json-out", json_path},
                                              1200);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json item = nlohmann::json::parse(ksol::read_file(json_path))["results"][0];
    EXPECT_GT(item["baseline_us"].value("triton", 0.0), 0.0) << "the kernel as given passes its gates: " << item.dump(1);
    EXPECT_GE(item.value("speedup_vs_kernel", 0.0), 1.0) << item.dump(1);
    EXPECT_FALSE(item.value("returned", std::string()).empty()) << item.dump(1);
    EXPECT_TRUE(item["side_by_side"].value("ok", false)) << item["side_by_side"].dump(1);
    // A returned DSL kernel's rerun line names its library, kept beside the report, and its dims.
    if (item.contains("best") && item["best"].value("language", "") == "dsl" && !item["best"].value("stitched", false)) {
      EXPECT_NE(item.value("rerun", std::string()).find("/" + fn + "/best.so --dims "), std::string::npos) << item["rerun"];
      EXPECT_TRUE(fs::exists(dir / fn / fn / "best.so"));
    }
  }
}
