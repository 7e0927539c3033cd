// Gate 1 (the static scan), the compile cache, and the plain-C-function shim, with real nvcc.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/compiler.h"
#include "core/util.h"
#include "task/task.h"

namespace fs = std::filesystem;
using namespace ksol;

TEST(StaticScan, FindsForbiddenConstructsWithPositions) {
  std::string src =
      "#include <thread>\n"
      "// cudaStreamCreate in a comment is fine\n"
      "const char* s = \"cudaStreamCreate in a string is fine\";\n"
      "int f() {\n"
      "  cudaStream_t st; cudaStreamCreateWithFlags(&st, 1);\n"
      "  std::thread t([]{});\n"
      "  auto t0 = std::chrono::steady_clock::now();\n"
      "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(x));\n"
      "  obj.system(1); my::fork(); system(\"ls\");\n"
      "}\n";
  auto f = static_scan(src);
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].construct, "cudaStreamCreateWithFlags");
  EXPECT_EQ(f[0].line, 5);
  EXPECT_EQ(f[0].column, 20);
  EXPECT_EQ(f[1].construct, "std::thread");
  EXPECT_EQ(f[1].line, 6);
  EXPECT_EQ(f[2].construct, "std::chrono");
  EXPECT_EQ(f[3].construct, "system");
  EXPECT_EQ(f[3].line, 9);
  EXPECT_EQ(f[4].construct, "%globaltimer");
  std::string msg = format_findings("cand.cu", src, {f[0]});
  EXPECT_EQ(msg,
            "cand.cu:5:20: error: forbidden construct 'cudaStreamCreateWithFlags': creates its own stream: work must be "
            "queued on the stream the harness passes\n"
            "    cudaStream_t st; cudaStreamCreateWithFlags(&st, 1);\n"
            "                     ^\n");
}

TEST(StaticScan, HonestBaselinesAreClean) {
  for (auto& d : builtin_task_dirs()) {
    Task t = load_task(d);
    for (auto& b : t.baselines) EXPECT_TRUE(static_scan(read_file(b.source)).empty()) << b.source;
  }
}

TEST(CDeclaration, ParsesAndBindsByName) {
  CFunction f = parse_c_declaration("void spmv_csr(int M, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y, cudaStream_t s);");
  EXPECT_EQ(f.name, "spmv_csr");
  ASSERT_EQ(f.params.size(), 7u);
  EXPECT_FALSE(f.params[0].pointer);
  EXPECT_TRUE(f.params[5].pointer);
  EXPECT_TRUE(f.params[6].stream);
  Task t = load_task(resolve_task_path("spmv_csr_f32"));
  std::string shim = generate_c_shim(t, f, "/u/my.cu");
  EXPECT_NE(shim.find("spmv_csr((int)call->dims[0], (const int*)call->tensors[0]"), std::string::npos) << shim;
  EXPECT_NE(shim.find("(cudaStream_t)call->stream"), std::string::npos);
  CFunction bad = parse_c_declaration("void f(int Q, float* y)");
  try {
    generate_c_shim(t, bad, "/u/my.cu");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 'Q' of f matches no tensor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_c_declaration("void f(double alpha)"), std::runtime_error);
  EXPECT_THROW(parse_c_declaration("no parens here"), std::runtime_error);
}

TEST(Compile, StaticGateFailsBeforeTheCompiler) {
  CompileJob j;
  j.source_path = "bad.cu";
  j.source_text = "#include <thread>\nextern \"C\" int ksol_run(const void*) { std::thread t([]{}); t.detach(); return 0; }\n";
  CompileResult r = compile(j);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.stage, "static");
  EXPECT_NE(r.message.find("bad.cu:2:"), std::string::npos) << r.message;
}

// ksol's headers are in the compile cache's key (generated sources include device code from
// include/ksol): the digest changes with a header's text or a new header, and only then.
TEST(Compile, HeaderDigestFollowsTheHeadersTexts) {
  const fs::path dir = fs::temp_directory_path() / ("ksol-headers-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  write("a.h", "int a;\n");
  write("b.hpp", "int b;\n");
  const std::string first = headers_digest(dir.string());
  EXPECT_EQ(headers_digest(dir.string()), first);
  write("b.hpp", "int b2;\n");
  const std::string edited = headers_digest(dir.string());
  EXPECT_NE(edited, first);
  write("c.hpp", "");
  EXPECT_NE(headers_digest(dir.string()), edited);
  write("b.hpp", "int b;\n");
  fs::remove(dir / "c.hpp");
  EXPECT_EQ(headers_digest(dir.string()), first);
  EXPECT_NE(headers_digest((fs::path(source_root()) / "include" / "ksol").string()), headers_digest(dir.string()));
  fs::remove_all(dir);
}

TEST(Compile, NvccBuildsCachesAndReportsErrors) {
  CompileJob j;
  j.source_path = "ok.cu";
  j.source_text =
      "#include \"ksol/abi.h\"\n#include <cuda_runtime.h>\n"
      "__global__ void k(float* y, long n) { long i = blockIdx.x * 256L + threadIdx.x; if (i < n) y[i] = 1.0f; }\n"
      "extern \"C\" int ksol_run(const ksol_call* c) { long n = c->dims[0];\n"
      "  k<<<(n + 255) / 256, 256, 0, (cudaStream_t)c->stream>>>((float*)c->tensors[0], n);\n"
      "  return cudaGetLastError() == cudaSuccess ? 0 : 1; }\n";
  CompileResult a = compile(j);
  ASSERT_TRUE(a.ok) << a.message;
  EXPECT_TRUE(fs::exists(a.so_path));
  CompileResult b = compile(j);
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(a.key, b.key);
  CompileJob j2 = j;
  j2.libs = {"cublas"};  // a flag change is a different binary
  EXPECT_NE(compile(j2).key, a.key);
  CompileJob bad = j;
  bad.source_path = "broken.cu";
  bad.source_text = "extern \"C\" int ksol_run(const void*) { return undefined_thing; }\n";
  CompileResult c = compile(bad);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.stage, "compile");
  EXPECT_NE(c.message.find("broken.cu(1)"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("undefined_thing"), std::string::npos);
}

// The cache entry keeps what its compile cost, for the search's estimate of a generation's build;
// a compile cancelled (before it starts, or while nvcc runs) leaves no entry behind; one source
// compiled by two threads at once runs nvcc once.
TEST(Compile, CacheKeepsTheCostAndCancelledCompilesLeaveNothing) {
  const std::string nonce = std::to_string(::getpid()) + "_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  auto job = [&](const std::string& tag) {
    CompileJob j;
    j.source_path = tag + ".cu";
    j.source_text = "// " + tag + " " + nonce + "\n#include \"ksol/abi.h\"\n#include <cuda_runtime.h>\n"
                    "__global__ void k(float* y) { y[threadIdx.x] = 2.0f; }\n"
                    "extern \"C\" int ksol_run(const ksol_call* c) { k<<<1, 32, 0, (cudaStream_t)c->stream>>>((float*)c->tensors[0]);\n"
                    "  return cudaGetLastError() == cudaSuccess ? 0 : 1; }\n";
    return j;
  };
  CompileResult a = compile(job("cost"));
  ASSERT_TRUE(a.ok) << a.message;
  EXPECT_FALSE(a.cache_hit);
  EXPECT_GT(a.cost_seconds, 0.0);
  CompileResult b = compile(job("cost"));
  EXPECT_TRUE(b.cache_hit);
  EXPECT_NEAR(b.cost_seconds, a.cost_seconds, 1e-3 * a.cost_seconds);
  EXPECT_LT(b.seconds, a.seconds);

  std::atomic<bool> stop{true};
  std::vector<CompileResult> none = compile_all({job("never1"), job("never2")}, 2, &stop);
  for (const CompileResult& r : none) {
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.cancelled);
    EXPECT_NE(r.message.find("cancelled"), std::string::npos) << r.message;
  }
  EXPECT_FALSE(compile(job("never1")).cache_hit);  // nothing was cached for it

  std::atomic<bool> later{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    later = true;
  });
  auto t0 = std::chrono::steady_clock::now();
  CompileResult k = compile(job("killed"), &later);
  setter.join();
  EXPECT_TRUE(k.cancelled) << "nvcc finished in under 0.3 s: " << k.seconds;
  EXPECT_FALSE(k.ok);
  EXPECT_LT(seconds_since(t0), 0.3 + 2.0);
  EXPECT_FALSE(fs::exists(k.so_path));

  // Two threads compiling one new source: nvcc runs once, the other thread takes its entry.
  std::vector<CompileResult> twice = compile_all({job("twice"), job("twice")}, 2);
  ASSERT_TRUE(twice[0].ok && twice[1].ok) << twice[0].message << twice[1].message;
  EXPECT_EQ(twice[0].cache_hit + twice[1].cache_hit, 1);
  EXPECT_EQ(twice[0].so_path, twice[1].so_path);
  EXPECT_NEAR(twice[0].cost_seconds, twice[1].cost_seconds, 1e-3 * twice[0].cost_seconds);
}

// Whether process `pid` still runs (not gone, not a zombie waiting for its reaper) after up to
// `seconds` of waiting for it to end.
bool still_runs_after(const std::string& pid, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::string stat;
    try {
      stat = read_file("/proc/" + pid + "/stat");
    } catch (const std::exception&) {
    }
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') return false;
    if (seconds_since(t0) > seconds) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A process started by run_process ends with the process that started it, even one killed
// outright (SIGKILL: a deadline's timeout), instead of running on as an orphan.
TEST(Process, ChildrenDieWithTheirParent) {
  const fs::path dir = fs::temp_directory_path() / ("ksol-pdeath-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string pid_file = (dir / "child.pid").string();
  pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {  // the stand-in parent: starts a long child and waits for it
    run_process({"sh", "-c", "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file + " && exec sleep 30"}, 60);
    _exit(0);
  }
  std::string child;
  for (int i = 0; i < 500 && child.empty(); ++i) {
    if (fs::exists(pid_file)) child = trim(read_file(pid_file));
    if (child.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(child.empty()) << "the stand-in parent's child never started";
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  const bool alive = still_runs_after(child, 2.0);
  if (alive) kill(std::stoi(child), SIGKILL);
  EXPECT_FALSE(alive) << "pid " << child << " outlived its parent";
  fs::remove_all(dir);
}

TEST(Process, CancelKillsTheProcessGroup) {
  std::atomic<bool> stop{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  ProcessResult r = run_process({"sh", "-c", "sleep 30 & echo $!; wait"}, 60, "", 0, &stop);
  setter.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_LT(r.seconds, 5.0);
  // The shell's background child went with it: gone, or a zombie waiting for its reaper.
  const std::string bg = trim(r.output);
  ASSERT_FALSE(bg.empty());
  const bool alive = still_runs_after(bg, 1.0);
  EXPECT_FALSE(alive) << "pid " << bg << " still runs";

  // A flag already set: nothing is started.
  auto t0 = std::chrono::steady_clock::now();
  ProcessResult none = run_process({"sleep", "2"}, 60, "", 0, &stop);
  EXPECT_TRUE(none.cancelled);
  EXPECT_LT(seconds_since(t0), 1.0);
  std::atomic<bool> never{false};
  ProcessResult ok = run_process({"sh", "-c", "echo done"}, 60, "", 0, &never);
  EXPECT_FALSE(ok.cancelled);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.output, "done\n");
}

// A user's plain C function is wrapped by a generated shim and compiles through the same path.
TEST(Compile, PlainCFunctionCandidateCompiles) {
  Task t = load_task(resolve_task_path("spmv_csr_f32"));
  BaselineSpec b{"user_spmv", std::string(KSOL_SOURCE_DIR) + "/examples/user_spmv.cu", "user", {},
                 "void spmv_csr(int M, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y)"};
  CompileJob j = baseline_job(t, b);
  EXPECT_NE(j.source_text.find("spmv_csr((int)call->dims[0]"), std::string::npos) << j.source_text;
  CompileResult r = compile(j);
  EXPECT_TRUE(r.ok) << r.message;
}

// The e2e candidates that crash or hang on a GPU still pass gate 1 and compile.
TEST(Compile, MisbehavingCandidatesCompile) {
  Task t = load_task(resolve_task_path("scan_f32"));
  for (const char* f : {"illegal_address.cu", "spin_forever.cu"}) {
    CompileResult r = compile(candidate_job(t, std::string(KSOL_SOURCE_DIR) + "/tests/e2e/candidates/" + f));
    EXPECT_TRUE(r.ok) << f << "\n" << r.message;
  }
}
