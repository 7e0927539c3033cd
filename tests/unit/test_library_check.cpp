// Gate 1's binary half (src/compile/library_check.h): the import allowlist, the static-constructor
// rule and the system-call scan, on hand-made libraries and on every honest program ksol ships.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "codegen/job.h"
#include "compile/compiler.h"
#include "compile/library_check.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "task/task.h"

namespace fs = std::filesystem;
using namespace ksol;

TEST(LibraryCheck, AllowlistNamesWhatAKernelNeeds) {
  ImportPolicy none{{}, false};
  for (const char* s : {"__cudaRegisterFatBinary", "__cudaLaunchKernel_ptsz", "cudaMemsetAsync_ptsz", "cudaGetLastError",
                        "cudaFuncSetAttribute", "cuTensorMapEncodeTiled", "expf", "__exp_finite", "sincos", "memcpy",
                        "_Znwm", "_ZdlPvm", "__cxa_guard_acquire", "_ZSt20__throw_length_errorPKc",
                        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm", "_ZSt4cerr",
                        "_ZSt21ios_base_library_initv"})
    EXPECT_TRUE(import_allowed(s, none)) << s;
  for (const char* s : {"dlsym", "dlopen", "getenv", "secure_getenv", "syscall", "write", "open", "fopen", "mprotect",
                        "pthread_create", "clock_gettime", "cudaStreamCreateWithFlags", "cudaLaunchHostFunc",
                        "cudaDeviceSetLimit", "cudaStreamSetAttribute", "cudaCtxResetPersistingL2Cache",
                        "cudaGetDriverEntryPointByVersion", "cuGetProcAddress_v2", "cudaSetDevice", "cudaMallocManaged",
                        "cudaEventElapsedTime", "cudaGraphLaunch", "cudaMemcpyPeerAsync", "_ZNSt6thread6detachEv",
                        "_ZNSt14basic_ofstreamIcSt11char_traitsIcEEC1Ev", "cublasSgemm_v2", "cublasLtMatmul", "cudnnCreate"})
    EXPECT_FALSE(import_allowed(s, none)) << s;
  // A vendor library's functions only where the task links it; never its logging hooks.
  ImportPolicy blas{{"cublas"}, false};
  EXPECT_TRUE(import_allowed("cublasSgemm_v2@libcublas.so.13", blas));
  EXPECT_FALSE(import_allowed("cublasLtMatmul", blas));
  EXPECT_FALSE(import_allowed("cublasLoggerConfigure", blas));
  EXPECT_FALSE(import_allowed("cusparseSpMV", blas));
  // A task's own baseline may import what device-wide CUB brings in.
  ImportPolicy trusted{{}, true};
  EXPECT_TRUE(import_allowed("cudaSetDevice", trusted));
  EXPECT_TRUE(import_allowed("getenv", trusted));
  EXPECT_FALSE(import_allowed("pthread_create", trusted));
}

namespace {
CompileResult build(const std::string& name, const std::string& body) {
  CompileJob j;
  j.source_path = name;
  j.source_text = "#include \"ksol/abi.h\"\n#include <cuda_runtime.h>\n" + body +
                  "__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n"
                  "extern \"C\" int ksol_run(const ksol_call* c) {\n"
                  "  k<<<1, 32, 0, (cudaStream_t)c->stream>>>((float*)c->tensors[0]);\n"
                  "  return cudaGetLastError() == cudaSuccess ? 0 : 1; }\n";
  return compile(j);
}
}  // namespace

// The three kinds of finding, each from a source the scan lets through, with its message.
TEST(LibraryCheck, RefusesConstructorsSyscallsAndLookups) {
  CompileResult plain = build("plain.cu", "#include <iostream>\nstatic int table[4] = {1, 2, 3, 4};\n");
  EXPECT_TRUE(plain.ok) << plain.message;

  CompileResult ctor = build("ctor.cu", "static int touched;\nstruct Hook { Hook() { touched = 1; } };\nstatic Hook hook_;\n"
                                        "__attribute__((noinline)) static void early() { touched = 2; }\n"
                                        "struct Call { Call() { early(); } };\nstatic Call call_;\n"
                                        "extern \"C\" int ksol_touched() { return touched; }\n");
  EXPECT_FALSE(ctor.ok);
  EXPECT_EQ(ctor.stage, "static");
  EXPECT_NE(ctor.message.find("ctor.cu: error: the built library runs code at load time: _GLOBAL__sub_I_"), std::string::npos)
      << ctor.message;

  CompileResult sys = build("sys.cu", "extern \"C\" long ksol_raw(long n) { long r; asm volatile(\"sys\" \"call\" : \"=a\"(r) : \"a\"(n) "
                                      ": \"rcx\", \"r11\", \"memory\"); return r; }\n");
  EXPECT_FALSE(sys.ok);
  EXPECT_NE(sys.message.find("sys.cu: error: the built library makes system calls directly, in: ksol_raw"), std::string::npos)
      << sys.message;

  CompileResult look = build("look.cu", "#include <dlfcn.h>\n#define LOOKUP dl##sym\n"
                                        "extern \"C\" void* ksol_find(const char* n) { return LOOKUP(RTLD_DEFAULT, n); }\n");
  EXPECT_FALSE(look.ok);
  EXPECT_NE(look.message.find("look.cu: error: the built library imports functions outside the allowlist: dlsym "), std::string::npos)
      << look.message;
}

// Every honest program ksol ships passes gate 1 as a candidate: every task's seed program, every
// examples/tuned program (CUTLASS's included), the user example, the e2e candidates, and every
// baseline (as the baseline it is, and as a candidate of its task), except the device-wide CUB
// baselines, which import cudaSetDevice and NVTX's lookups and are admitted as baselines only.
// Every task's references (CPU and GPU) are compiled in the same batch.
TEST(LibraryCheck, EveryHonestProgramPassesGateOne) {
  const std::set<std::string> cub_device_wide = {"scan_f32/cub", "reduction_sum_f32/cub", "simpson_f32/cub",
                                                 "montecarlo_integral_f32/cub", "histogram_i32/cub", "topk_f32/cub"};
  std::vector<CompileJob> jobs;
  std::vector<std::string> labels;
  std::vector<ImportPolicy> as_candidate;  // the policy the same library meets when a candidate submits it
  auto add = [&](CompileJob j, const std::string& label, const Task& t) {
    std::set<std::string> libs;
    for (auto& b : t.baselines) libs.insert(b.libs.begin(), b.libs.end());
    as_candidate.push_back(ImportPolicy{std::vector<std::string>(libs.begin(), libs.end()), false});
    jobs.push_back(std::move(j));
    labels.push_back(label);
  };
  for (const std::string& dir : builtin_task_dirs()) {
    Task t = load_task(dir);
    for (auto& b : t.baselines) add(baseline_job(t, b), t.name + "/" + b.name, t);
    if (fs::exists(dir + "/program.ksol"))
      add(codegen::compile_job(t, dsl::parse_program(read_file(dir + "/program.ksol"), dir + "/program.ksol"), "seed"),
          t.name + "/program.ksol", t);
  }
  for (const auto& e : fs::directory_iterator(fs::path(source_root()) / "examples" / "tuned")) {
    if (e.path().extension() != ".ksol") continue;
    const std::string stem = e.path().stem().string();
    std::string dir;
    try {
      dir = resolve_task_path(stem);
    } catch (const std::exception&) {
      dir = resolve_task_path(stem.substr(0, stem.rfind('_')));
    }
    Task t = load_task(dir);
    add(codegen::compile_job(t, dsl::parse_program(read_file(e.path().string()), e.path().string()), stem), "tuned/" + stem, t);
  }
  {
    Task t = load_task(resolve_task_path("spmv_csr_f32"));
    BaselineSpec b{"user_spmv", source_root() + "/examples/user_spmv.cu", "user", {},
                   "void spmv_csr(int M, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y)"};
    CompileJob j = baseline_job(t, b);
    j.trusted = false;
    add(j, "examples/user_spmv.cu", t);
    Task scan = load_task(resolve_task_path("scan_f32"));
    for (const char* f : {"illegal_address.cu", "spin_forever.cu"})
      add(candidate_job(scan, source_root() + "/tests/e2e/candidates/" + f), std::string("e2e/") + f, scan);
  }
  // The tasks' references compile too (in the same parallel batch); they are ksol's own trusted
  // code, loaded by the worker, never a candidate, so they have no candidate policy to meet.
  const size_t libraries = jobs.size();
  for (const std::string& dir : builtin_task_dirs()) {
    Task t = load_task(dir);
    jobs.push_back(reference_job(t, false));
    labels.push_back(t.name + "/reference");
    if (!t.ref_gpu.empty()) {
      jobs.push_back(reference_job(t, true));
      labels.push_back(t.name + "/reference (GPU)");
    }
  }
  std::vector<CompileResult> res = compile_all(jobs);
  int checked = 0;
  for (size_t i = 0; i < res.size(); ++i) {
    ASSERT_TRUE(res[i].ok) << labels[i] << "\n" << res[i].message;
    if (i >= libraries) continue;
    LibraryFindings f = inspect_library(res[i].so_path, as_candidate[i]);
    if (cub_device_wide.count(labels[i])) {
      EXPECT_FALSE(f.clean()) << labels[i] << " now passes as a candidate: drop it from the exceptions";
      EXPECT_EQ(f.imports, (std::vector<std::string>{"cudaSetDevice", "dlclose", "dlopen", "dlsym", "getenv", "sched_yield"}))
          << labels[i];
      continue;
    }
    EXPECT_TRUE(f.clean()) << labels[i] << " as a candidate\n" << format_library_findings(labels[i], f);
    ++checked;
  }
  EXPECT_GE(checked, 100);
}
