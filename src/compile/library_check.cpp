#include "compile/library_check.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/util.h"

namespace ksol {
namespace {

// Exact names a candidate may import. The CUDA runtime's part is what a kernel's host code needs
// to launch (nvcc's registration and launch stubs, the launch APIs), to manage memory on the
// stream it was given, to query the device and its functions, and to read errors. Left out on
// purpose: streams of its own, host callbacks, graphs, peer copies, managed memory, device
// limits and cache configuration, L2 persistence, device switch and reset, profiler control,
// event timing, and every way to look a function up by name.
const std::set<std::string>& exact_allowed() {
  static const std::set<std::string> s = {
      // nvcc's registration and launch stubs
      "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary", "__cudaRegisterFunction",
      "__cudaRegisterVar", "__cudaRegisterLinkedBinary", "__cudaPushCallConfiguration", "__cudaPopCallConfiguration",
      "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz", "__cudaGetKernel", "__cudaInitModule",
      // launches
      "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz",
      "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz", "cudaFuncSetAttribute", "cudaFuncGetAttributes",
      "cudaFuncSetCacheConfig", "cudaFuncSetSharedMemConfig", "cudaGetFuncBySymbol", "cudaGetKernel",
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
      "cudaOccupancyMaxPotentialClusterSize", "cudaOccupancyMaxActiveClusters", "cudaOccupancyAvailableDynamicSMemPerBlock",
      // memory
      "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaMallocAsync_ptsz", "cudaFreeAsync", "cudaFreeAsync_ptsz",
      "cudaMallocPitch", "cudaMallocHost", "cudaFreeHost", "cudaHostAlloc", "cudaMemGetInfo", "cudaPointerGetAttributes",
      "cudaMemset", "cudaMemset_ptds", "cudaMemsetAsync", "cudaMemsetAsync_ptsz", "cudaMemset2D", "cudaMemset2DAsync",
      "cudaMemset2DAsync_ptsz", "cudaMemcpy", "cudaMemcpy_ptds", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz", "cudaMemcpy2D",
      "cudaMemcpy2D_ptds", "cudaMemcpy2DAsync", "cudaMemcpy2DAsync_ptsz", "cudaMemcpyToSymbol", "cudaMemcpyToSymbol_ptds",
      "cudaMemcpyToSymbolAsync", "cudaMemcpyToSymbolAsync_ptsz", "cudaMemcpyFromSymbol", "cudaMemcpyFromSymbol_ptds",
      "cudaMemcpyFromSymbolAsync", "cudaMemcpyFromSymbolAsync_ptsz", "cudaGetSymbolAddress", "cudaGetSymbolSize",
      // ordering on the stream it was given, and waiting for it
      "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventRecord_ptsz", "cudaEventRecordWithFlags",
      "cudaEventRecordWithFlags_ptsz", "cudaEventSynchronize", "cudaEventQuery", "cudaEventDestroy", "cudaStreamWaitEvent",
      "cudaStreamWaitEvent_ptsz", "cudaStreamSynchronize", "cudaStreamSynchronize_ptsz", "cudaStreamQuery",
      "cudaStreamQuery_ptsz", "cudaDeviceSynchronize", "cudaStreamGetPriority", "cudaStreamGetPriority_ptsz",
      "cudaStreamGetFlags", "cudaStreamGetFlags_ptsz",
      // the device, versions, errors
      "cudaGetDevice", "cudaGetDeviceCount", "cudaDeviceGetAttribute", "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2",
      "cudaDeviceGetLimit", "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaGetLastError", "cudaPeekAtLastError",
      "cudaGetErrorString", "cudaGetErrorName", "cudaFuncGetName",
      // driver calls CUTLASS makes by name (tensor maps for TMA), linked at load time
      "cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cuTensorMapEncodeIm2colWide", "cuTensorMapReplaceAddress",
      "cuGetErrorString", "cuGetErrorName",
      // the C library's pure parts, memory, and its error exits
      "memset", "memcpy", "memmove", "memcmp", "strlen", "strcmp", "strncmp", "strchr", "strrchr", "strstr", "strcpy", "strncpy",
      "snprintf", "sprintf", "vsnprintf", "__snprintf_chk", "__sprintf_chk", "__vsnprintf_chk", "__memcpy_chk", "__memset_chk",
      "__memmove_chk", "strtol", "strtoul", "strtoll", "strtoull", "strtod", "strtof", "atoi", "atol", "atof", "qsort", "bsearch",
      "malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc", "abort", "exit", "__assert_fail",
      "__stack_chk_fail", "__cxa_atexit", "__cxa_finalize", "atexit", "__errno_location", "abs", "labs", "llabs",
      // printing goes to stdout and stderr, which the worker points at its log
      "printf", "puts", "putchar", "fprintf", "fputs", "fputc", "fwrite", "fflush", "vprintf", "vfprintf", "__printf_chk",
      "__fprintf_chk", "stdout", "stderr",
      // locks for a library's static state (no way to start a thread is allowed)
      "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock", "pthread_once", "__tls_get_addr",
      // the C++ runtime: allocation, exceptions, guards, personality
      "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "__gxx_personality_v0",
      "_Unwind_Resume", "_ZSt9terminatev", "_ZSt11_Hash_bytesPKvmm",
      // <iostream> under GCC 13 and later: a reference to the runtime's stream initialisation
      // instead of a static ios_base::Init object; GCC 14's terminate on a noexcept violation.
      "_ZSt21ios_base_library_initv", "__cxa_call_terminate", "_ZSt4cout", "_ZSt4cerr", "_ZSt4clog",
      "_ZNKSt5ctypeIcE13_M_widen_initEv", "_ZNSt6localeC1Ev", "_ZNSt6localeD1Ev",
      // libgcc's integer helpers and the weak hooks every shared library imports
      "__udivti3", "__divti3", "__umodti3", "__modti3", "__popcountdi2", "__clzdi2", "__ctzdi2", "__muldc3", "__mulsc3",
      "__divdc3", "__divsc3", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable", "__gmon_start__"};
  return s;
}

// Prefixes of C++ runtime names whose functions compute, allocate, throw or print to stdout and
// stderr: strings, exceptions, typeinfo and vtables, red-black trees, hash tables, ostream.
// Left out: files (basic_filebuf, basic_ofstream), threads, condition variables, time.
const std::vector<std::string>& cxx_prefixes() {
  static const std::vector<std::string> p = {
      "_ZdlPv", "_ZdaPv", "__cxa_guard_", "__cxa_throw", "__cxa_rethrow", "__cxa_allocate_exception", "__cxa_free_exception",
      "__cxa_begin_catch", "__cxa_end_catch", "__cxa_pure_virtual", "__cxa_deleted_virtual", "__cxa_bad_cast",
      "__cxa_bad_typeid", "__cxa_throw_bad_array_new_length", "__cxa_get_exception_ptr", "__cxa_current_exception_type",
      "_ZTV", "_ZTI", "_ZTS", "_ZTT", "_ZNSt7__cxx1112basic_string", "_ZNKSt7__cxx1112basic_string",
      "_ZNSt7__cxx1119basic_ostringstream", "_ZNKSt7__cxx1119basic_ostringstream", "_ZNSt7__cxx1118basic_stringstream",
      "_ZNKSt7__cxx1118basic_stringstream", "_ZNSt7__cxx1115basic_stringbuf", "_ZNSo", "_ZNKSo", "_ZSt16__ostream_insert",
      "_ZNSt8ios_base4Init", "_ZNSt8ios_baseC", "_ZNSt8ios_baseD", "_ZNSt9basic_ios", "_ZNKSt9basic_ios", "_ZSt18_Rb_tree_",
      "_ZSt29_Rb_tree_insert_and_rebalance", "_ZSt28_Rb_tree_rebalance_for_erase", "_ZNSt8__detail15_Prime_rehash_policy",
      "_ZNKSt8__detail20_Prime_rehash_policy", "_ZNSt9exception", "_ZNKSt9exception", "_ZNSt13runtime_error",
      "_ZNKSt13runtime_error", "_ZNSt11logic_error", "_ZNKSt11logic_error", "_ZNSt12length_error", "_ZNSt12out_of_range",
      "_ZNSt16invalid_argument", "_ZNSt12domain_error", "_ZNSt14overflow_error", "_ZNSt15underflow_error",
      "_ZNSt11range_error", "_ZNSt9bad_alloc", "_ZNKSt9bad_alloc", "_ZNSt8bad_cast", "_ZNKSt8bad_cast",
      "_ZNSt20bad_array_new_length", "_ZNSt15__exception_ptr"};
  return p;
}

// libm: every function of <cmath> in its double, float and long double spellings.
bool libm_function(const std::string& s) {
  static const std::set<std::string> base = {
      "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "exp", "exp2",
      "expm1", "log", "log2", "log10", "log1p", "logb", "ilogb", "pow", "sqrt", "cbrt", "hypot", "erf", "erfc", "tgamma",
      "lgamma", "ceil", "floor", "trunc", "round", "lround", "llround", "rint", "lrint", "llrint", "nearbyint", "fmod",
      "remainder", "remquo", "copysign", "nan", "nextafter", "nexttoward", "fdim", "fmax", "fmin", "fma", "fabs", "frexp",
      "ldexp", "modf", "scalbn", "scalbln", "sincos", "exp10"};
  if (base.count(s)) return true;
  if (s.size() > 1 && (s.back() == 'f' || s.back() == 'l') && base.count(s.substr(0, s.size() - 1))) return true;
  // glibc's finite-math spellings (__exp_finite, __logf_finite, ...)
  const std::string fin = "_finite";
  if (s.rfind("__", 0) == 0 && s.size() > 2 + fin.size() && s.compare(s.size() - fin.size(), fin.size(), fin) == 0)
    return libm_function(s.substr(2, s.size() - 2 - fin.size()));
  return false;
}

// A task's vendor libraries, by the prefix of their functions. A candidate may import a library's
// functions only when its task links that library (its baselines use it): calling cuBLAS in a
// task whose baselines do not is wrapping a vendor kernel the task does not offer. Their logging
// and callback hooks open files or run host code after the call, so they stay out.
struct Vendor {
  const char* prefix;
  const char* lib;
};
const Vendor kVendors[] = {{"cublasLt", "cublasLt"}, {"cublas", "cublas"}, {"cusparse", "cusparse"},
                           {"cudnn", "cudnn"},       {"cufft", "cufft"},   {"curand", "curand"}};

bool vendor_allowed(const std::string& s, const ImportPolicy& policy, bool* is_vendor) {
  for (const Vendor& v : kVendors) {
    if (s.rfind(v.prefix, 0) != 0) continue;
    *is_vendor = true;
    if (s.find("Logger") != std::string::npos || s.find("Callback") != std::string::npos) return false;
    return std::find(policy.libs.begin(), policy.libs.end(), v.lib) != policy.libs.end();
  }
  *is_vendor = false;
  return false;
}

// What device-wide CUB brings into a task's own baselines: NVTX's injection hook (the
// environment, dlopen, dlsym), a yield, and a device switch it undoes.
const std::set<std::string>& trusted_extras() {
  static const std::set<std::string> s = {"getenv", "dlopen", "dlsym", "dlclose", "dlerror", "sched_yield", "cudaSetDevice"};
  return s;
}

std::string strip_version(std::string sym) {
  if (size_t at = sym.find('@'); at != std::string::npos) sym = sym.substr(0, at);
  return sym;
}

}  // namespace

bool import_allowed(const std::string& symbol, const ImportPolicy& policy) {
  const std::string s = strip_version(symbol);
  if (exact_allowed().count(s) || libm_function(s)) return true;
  if (policy.trusted && trusted_extras().count(s)) return true;
  bool vendor = false;
  bool ok = vendor_allowed(s, policy, &vendor);
  if (vendor) return ok;
  for (const std::string& p : cxx_prefixes())
    if (s.rfind(p, 0) == 0) return true;
  // std::__throw_length_error and its kin: they throw, nothing else.
  static const std::regex throw_helper("^_ZSt[0-9]+__throw_[a-z_]+.*");
  return std::regex_match(s, throw_helper);
}

namespace {

// The functions of the library's code sections (from objdump's linear disassembly): where each
// starts, and per function its instructions as "mnemonic operands" text.
struct Disassembly {
  std::multimap<uint64_t, std::string> starts;                  // address -> name
  std::map<std::string, std::vector<std::string>> bodies;       // name -> instructions (first body of that name)
  std::map<std::string, int> name_count;
  std::vector<std::string> syscall_functions;
};

Disassembly disassemble(const std::string& so_path, std::string* error) {
  Disassembly d;
  ProcessResult r = run_process({"objdump", "-d", "--no-show-raw-insn", "-w", so_path}, 120);
  if (r.exit_code != 0) {
    *error = "cannot disassemble the library: " + trim(r.output).substr(0, 300);
    return d;
  }
  static const std::regex header("^([0-9a-f]+) <(.+)>:$");
  std::istringstream in(r.output);
  std::string cur;
  std::vector<std::string>* body = nullptr;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!line.empty() && line[0] != ' ' && std::regex_match(line, m, header)) {
      cur = m[2];
      d.starts.emplace(std::stoull(m[1], nullptr, 16), cur);
      body = d.name_count[cur]++ == 0 ? &d.bodies[cur] : nullptr;
      continue;
    }
    size_t tab = line.find(":\t");
    if (tab == std::string::npos || cur.empty()) continue;
    std::string insn = trim(line.substr(tab + 2));
    // A system call made directly, by any of its instruction spellings: the import allowlist
    // cannot see it.
    if (insn == "syscall" || insn == "sysenter" || insn.rfind("int    $0x80", 0) == 0 || insn == "int $0x80")
      if (d.syscall_functions.empty() || d.syscall_functions.back() != cur) d.syscall_functions.push_back(cur);
    if (body) body->push_back(insn);
  }
  return d;
}

// The addresses the library's static-constructor tables point at (.init_array, filled in by
// relative relocations), or a finding when it has a table ksol does not read (.ctors,
// .preinit_array) or a constructor entry that is not a plain address.
std::vector<uint64_t> constructor_addresses(const std::string& so_path, std::vector<std::string>* findings, std::string* error) {
  ProcessResult s = run_process({"readelf", "-SW", so_path}, 60);
  if (s.exit_code != 0) {
    *error = "cannot read the library's sections: " + trim(s.output).substr(0, 300);
    return {};
  }
  uint64_t lo = 0, hi = 0;
  static const std::regex sec(R"(\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+))");
  std::istringstream in(s.output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, sec)) continue;
    const std::string name = m[1];
    if (name == ".ctors" || name == ".preinit_array") findings->push_back("a " + name + " table");
    if (name == ".init_array") lo = std::stoull(m[3], nullptr, 16), hi = lo + std::stoull(m[5], nullptr, 16);
  }
  std::vector<uint64_t> out;
  if (hi == lo) return out;
  ProcessResult r = run_process({"readelf", "-rW", so_path}, 60);
  if (r.exit_code != 0) {
    *error = "cannot read the library's relocations: " + trim(r.output).substr(0, 300);
    return out;
  }
  std::istringstream rin(r.output);
  size_t slots = 0;
  for (std::string line; std::getline(rin, line);) {
    std::istringstream f(line);
    std::string off, info, type;
    if (!(f >> off >> info >> type)) continue;
    uint64_t at = 0;
    try {
      at = std::stoull(off, nullptr, 16);
    } catch (const std::exception&) {
      continue;
    }
    if (at < lo || at >= hi) continue;
    ++slots;
    std::string addend;
    f >> addend;
    if (type != "R_X86_64_RELATIVE") {
      findings->push_back("a static constructor through a " + type + " relocation");
      continue;
    }
    out.push_back(std::stoull(addend, nullptr, 16));
  }
  if (slots != (hi - lo) / 8) findings->push_back("a static-constructor table with entries not filled in at load time");
  return out;
}

// Whether a `_GLOBAL__sub_I_` function (a translation unit's dynamic initialisation) does only
// what <iostream> and objects with destructors but constant constructors need: initialise
// std::ios_base and register destructors for the library's unloading. Any other call, or an
// indirect one, is code the candidate chose to run at load time.
bool plain_static_init(const std::vector<std::string>& body, const std::string& name) {
  for (const std::string& insn : body) {
    bool call = insn.rfind("call", 0) == 0, jump = insn.rfind("jmp", 0) == 0;
    if (!call && !jump) continue;
    if (insn.find('*') != std::string::npos) return false;  // indirect
    size_t a = insn.find('<'), b = insn.rfind('>');
    if (a == std::string::npos || b == std::string::npos) return false;
    std::string target = insn.substr(a + 1, b - a - 1);
    if (jump && target.rfind(name + "+", 0) == 0) continue;  // a branch inside the function
    if (target == "_ZNSt8ios_base4InitC1Ev@plt" || target == "__cxa_atexit@plt") continue;
    return false;
  }
  return true;
}

}  // namespace

LibraryFindings inspect_library(const std::string& so_path, const ImportPolicy& policy) {
  LibraryFindings f;
  ProcessResult r = run_process({"nm", "-D", "--undefined-only", so_path}, 60);
  if (r.exit_code != 0) {
    f.error = "cannot list the library's imports: " + trim(r.output).substr(0, 300);
    return f;
  }
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string kind, sym;
    if (!(w >> kind >> sym)) continue;
    sym = strip_version(sym);
    if (!import_allowed(sym, policy)) f.imports.push_back(sym);
  }
  Disassembly d = disassemble(so_path, &f.error);
  if (!f.error.empty()) return f;
  f.syscalls = d.syscall_functions;
  for (uint64_t at : constructor_addresses(so_path, &f.constructors, &f.error)) {
    auto [b, e] = d.starts.equal_range(at);
    if (b == e) {
      f.constructors.push_back("code at 0x" + [&] { std::ostringstream o; o << std::hex << at; return o.str(); }() + " (not a function start)");
      continue;
    }
    const std::string& name = b->second;
    // crtbegin's frame_dummy and nvcc's kernel registration, each the only function of its name
    // (a candidate's own function of the same local name would be a second one).
    if ((name == "frame_dummy" || name == "_ZL24__sti____cudaRegisterAllv") && d.name_count[name] == 1) continue;
    if (name.rfind("_GLOBAL__sub_I_", 0) == 0 && d.name_count[name] == 1 && plain_static_init(d.bodies[name], name)) continue;
    f.constructors.push_back(name);
  }
  return f;
}

std::string format_library_findings(const std::string& file, const LibraryFindings& f) {
  std::ostringstream o;
  if (!f.error.empty()) o << file << ": error: " << f.error << "\n";
  if (!f.imports.empty())
    o << file << ": error: the built library imports functions outside the allowlist: " << join(f.imports, ", ")
      << " (a candidate may call the CUDA runtime's launch, memory, event and error functions, libm, the C++ runtime's "
         "pure parts and its task's vendor libraries; docs/HARNESS.md)\n";
  if (!f.constructors.empty())
    o << file << ": error: the built library runs code at load time: " << join(f.constructors, ", ")
      << " (only nvcc's kernel registration and <iostream>'s initialisation may run as static constructors)\n";
  if (!f.syscalls.empty())
    o << file << ": error: the built library makes system calls directly, in: " << join(f.syscalls, ", ") << "\n";
  return o.str();
}

}  // namespace ksol
