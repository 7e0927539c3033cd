#include "compile/compiler.h"
#include "compile/library_check.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "core/util.h"
#include "ksol/abi.h"

namespace fs = std::filesystem;

namespace ksol {
namespace {
// The niceness of a compiler process (setpriority; 0 is the default, 19 the lowest).
constexpr int kCompileNiceness = 10;

// Replaces comments (and, when `strings` is set, string and char literals) by spaces, keeping
// every newline so line and column numbers survive.
std::string blank(const std::string& s, bool strings) {
  std::string o = s;
  size_t i = 0, n = s.size();
  while (i < n) {
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') o[i++] = ' ';
    } else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
      o[i] = o[i + 1] = ' ';
      i += 2;
      while (i < n && !(s[i] == '*' && i + 1 < n && s[i + 1] == '/')) {
        if (s[i] != '\n') o[i] = ' ';
        ++i;
      }
      if (i < n) o[i] = o[i + 1] = ' ', i += 2;
    } else if (s[i] == '"' || s[i] == '\'') {
      char q = s[i++];
      while (i < n && s[i] != q && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n) {
          if (strings) o[i] = ' ';
          ++i;
        }
        if (strings) o[i] = ' ';
        ++i;
      }
      ++i;
    } else {
      ++i;
    }
  }
  return o;
}

struct Rule {
  const char* ident;
  const char* qualifier;  // required preceding "qualifier::", or nullptr
  bool call;              // must be followed by '('
  const char* reason;
};

const Rule kRules[] = {
    {"cudaStreamCreate", nullptr, false, "creates its own stream: work must be queued on the stream the harness passes"},
    {"cudaStreamCreateWithFlags", nullptr, false, "creates its own stream: work must be queued on the stream the harness passes"},
    {"cudaStreamCreateWithPriority", nullptr, false, "creates its own stream: work must be queued on the stream the harness passes"},
    {"cuStreamCreate", nullptr, false, "creates its own stream: work must be queued on the stream the harness passes"},
    {"cudaStreamLegacy", nullptr, false, "queues work on the legacy stream instead of the stream the harness passes"},
    {"cudaLaunchHostFunc", nullptr, false, "host callbacks run outside the timed region"},
    {"cudaStreamAddCallback", nullptr, false, "host callbacks run outside the timed region"},
    {"thread", "std", false, "host threads can do work after the call returns"},
    {"jthread", "std", false, "host threads can do work after the call returns"},
    {"async", "std", false, "host threads can do work after the call returns"},
    {"pthread_create", nullptr, false, "host threads can do work after the call returns"},
    {"fork", nullptr, true, "candidates may not start processes"},
    {"system", nullptr, true, "candidates may not start processes"},
    {"popen", nullptr, true, "candidates may not start processes"},
    {"chrono", "std", false, "timers let a candidate detect the timing phase"},
    {"clock_gettime", nullptr, false, "timers let a candidate detect the timing phase"},
    {"gettimeofday", nullptr, false, "timers let a candidate detect the timing phase"},
    {"cudaEventElapsedTime", nullptr, false, "timers let a candidate detect the timing phase"},
    {"getenv", nullptr, false, "reading the environment lets a candidate detect the harness"},
    {"dlopen", nullptr, false, "dynamic symbol lookup can patch the harness"},
    {"dlsym", nullptr, false, "dynamic symbol lookup can patch the harness"},
    {"cudaGetDriverEntryPoint", nullptr, false, "looking up driver functions by name bypasses gate 1"},
    {"cudaGetDriverEntryPointByVersion", nullptr, false, "looking up driver functions by name bypasses gate 1"},
    {"cuGetProcAddress", nullptr, false, "looking up driver functions by name bypasses gate 1"},
    {"cuGetProcAddress_v2", nullptr, false, "looking up driver functions by name bypasses gate 1"},
    {"cudaDeviceReset", nullptr, false, "candidates may not reset or switch the device"},
    {"cudaSetDevice", nullptr, false, "candidates may not reset or switch the device"},
    {"cudaMallocManaged", nullptr, false, "managed memory is not allowed (it can hang the GPU when oversubscribed)"},
    {"signal", nullptr, true, "candidates may not install signal handlers"},
    {"sigaction", nullptr, false, "candidates may not install signal handlers"},
    {"constructor", nullptr, false, "code that runs at load time escapes the harness"},
};

std::string nvcc_path() {
  const char* e = std::getenv("KSOL_NVCC");
  return e && *e ? e : "nvcc";
}

std::string lib_flag(const std::string& l) { return "-l" + l; }

}  // namespace

std::vector<StaticFinding> static_scan(const std::string& source) {
  std::vector<StaticFinding> out;
  std::string code = blank(source, true);
  std::string nocomment = blank(source, false);
  auto position = [&](size_t at, StaticFinding& f) {
    f.line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at; ++i)
      if (source[i] == '\n') ++f.line, line_start = i + 1;
    f.column = static_cast<int>(at - line_start) + 1;
  };
  size_t i = 0, n = code.size();
  while (i < n) {
    if (!(std::isalpha(static_cast<unsigned char>(code[i])) || code[i] == '_')) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < n && (std::isalnum(static_cast<unsigned char>(code[i])) || code[i] == '_')) ++i;
    std::string id = code.substr(start, i - start);
    for (const Rule& r : kRules) {
      if (id != r.ident) continue;
      if (r.qualifier) {
        std::string q = std::string(r.qualifier) + "::";
        if (start < q.size() || code.compare(start - q.size(), q.size(), q) != 0) continue;
      } else if (start >= 2 && code.compare(start - 2, 2, "::") == 0 && code.compare(start >= 5 ? start - 5 : 0, 5, "std::") != 0) {
        continue;  // a member of some other namespace, not the global function
      }
      if (r.call) {
        size_t j = i;
        while (j < n && std::isspace(static_cast<unsigned char>(code[j]))) ++j;
        if (j >= n || code[j] != '(') continue;
        if (start > 0 && (code[start - 1] == '.' || (start > 1 && code.compare(start - 2, 2, "->") == 0))) continue;
      }
      StaticFinding f;
      position(start, f);
      f.construct = r.qualifier ? std::string(r.qualifier) + "::" + id : id;
      f.reason = r.reason;
      out.push_back(f);
    }
  }
  // `using namespace std` would let `thread` or `async` through unqualified.
  for (size_t at = code.find("using"); at != std::string::npos; at = code.find("using", at + 1)) {
    size_t j = at + 5;
    auto skip = [&] { while (j < n && std::isspace(static_cast<unsigned char>(code[j]))) ++j; };
    skip();
    if (code.compare(j, 9, "namespace") != 0) continue;
    j += 9;
    skip();
    if (code.compare(j, 3, "std") != 0 || (j + 3 < n && (std::isalnum(static_cast<unsigned char>(code[j + 3])) || code[j + 3] == '_'))) continue;
    StaticFinding f;
    position(at, f);
    f.construct = "using namespace std";
    f.reason = "unqualified standard names (thread, async, chrono) would hide from this scan; qualify them";
    out.push_back(f);
  }
  // Inline PTX lives in string literals: look for the global timer there.
  for (size_t at = nocomment.find("globaltimer"); at != std::string::npos; at = nocomment.find("globaltimer", at + 1)) {
    StaticFinding f;
    position(at, f);
    f.construct = "%globaltimer";
    f.reason = "timers let a candidate detect the timing phase";
    out.push_back(f);
  }
  return out;
}

std::string format_findings(const std::string& file, const std::string& source, const std::vector<StaticFinding>& fs_) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::ostringstream o;
  for (auto& f : fs_) {
    o << file << ":" << f.line << ":" << f.column << ": error: forbidden construct '" << f.construct << "': " << f.reason << "\n";
    if (f.line >= 1 && f.line <= static_cast<int>(lines.size()))
      o << "  " << lines[f.line - 1] << "\n  " << std::string(f.column - 1, ' ') << "^\n";
  }
  return o.str();
}

std::string toolchain_version() {
  static std::once_flag once;
  static std::string v;
  std::call_once(once, [] {
    ProcessResult r = run_process({nvcc_path(), "--version"}, 60);
    std::istringstream in(r.output);
    for (std::string l; std::getline(in, l);)
      if (l.find("release") != std::string::npos || l.find("Build") != std::string::npos) v += trim(l) + ";";
    if (v.empty()) v = "nvcc-unavailable";
    ProcessResult g = run_process({"g++", "--version"}, 60);
    v += trim(g.output.substr(0, g.output.find('\n')));
  });
  return v;
}

static std::vector<std::string> compile_argv(const CompileJob& job, const std::string& src, const std::string& out) {
  std::string inc = source_root() + "/include";
  if (job.kind == SourceKind::reference_cpu)
    return {"g++", "-std=c++20", "-O2", "-shared", "-fPIC", "-I" + inc, "-o", out, src};
  // An arch-specific target (sm_90a: WGMMA, TMA) runs on that architecture alone, so it is built
  // as machine code only: `-arch=sm_90a` would also compile a portable compute_90 PTX, a second
  // device front-end pass that was a fifth of a CUTLASS GEMM's build time for nothing.
  std::string target = !job.arch.empty() && job.arch.back() == 'a' && job.arch.rfind("sm_", 0) == 0
                           ? "-gencode=arch=compute_" + job.arch.substr(3) + ",code=" + job.arch
                           : "-arch=" + job.arch;
  // -O is the host code's level alone: device code is optimized in full whatever it says (a CUTLASS
  // GEMM's cubin is byte for byte the same at -O1 and -O3). Host code here is launch wrappers, and
  // -O1 builds a CUTLASS candidate's in 6 s less of its 54 s.
  std::vector<std::string> a = {nvcc_path(), "-std=c++17", "-O1", "-lineinfo", "-shared", "-Xcompiler", "-fPIC",
                                "-cudart", "shared", "--default-stream", "per-thread", target,
                                "-I" + inc, "-I" + source_root() + "/third_party/cutlass/include", "-o", out, src};
  a.insert(a.end() - 3, job.extra_flags.begin(), job.extra_flags.end());  // before "-o out src"
  for (auto& l : job.libs) a.push_back(lib_flag(l));
  return a;
}

std::string headers_digest(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  Sha256 h;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    h.update(f.filename().string() + "\n" + std::to_string(text.size()) + "\n" + text);
  }
  return h.hex();
}

// ksol's own headers (include/ksol, on every compile's include path) go into the cache key:
// generated sources include device code from them (cutlass_row_bias.hpp), so an edited header is
// never served an old build. Read once per process.
static const std::string& ksol_headers_digest() {
  static const std::string digest = headers_digest(source_root() + "/include/ksol");
  return digest;
}

namespace {
struct InFlight {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
};
std::mutex inflight_mu;
std::map<std::string, std::shared_ptr<InFlight>> inflight;  // by cache key: the compiles running in this process

void mark_cancelled(CompileResult& r) {
  r.ok = false;
  r.stage = "compile";
  r.message = "cancelled: its build was no longer needed";
  r.cancelled = true;
}
}  // namespace

// The CUTLASS headers' version (third_party/cutlass/VERSION, written by setup.sh) goes into the key
// too: new headers are never served a build made against old ones. Read once per process.
static const std::string& cutlass_version() {
  static const std::string v = [] {
    try {
      return "cutlass " + read_file(source_root() + "/third_party/cutlass/VERSION");
    } catch (const std::exception&) {
      return std::string("cutlass: no version file");
    }
  }();
  return v;
}

CompileResult compile(const CompileJob& job, const std::atomic<bool>* cancel) {
  auto t0 = std::chrono::steady_clock::now();
  CompileResult r;
  if (job.kind == SourceKind::candidate && job.static_gate) {
    auto findings = static_scan(job.source_text);
    if (!findings.empty()) {
      r.stage = "static";
      r.message = format_findings(job.source_path, job.source_text, findings);
      r.seconds = seconds_since(t0);
      return r;
    }
  }
  std::string ext = job.kind == SourceKind::reference_cpu ? ".cpp" : ".cu";
  // Every input that can change the binary is in the key: the cache can never serve a stale build.
  Sha256 h;
  h.update("ksol-abi-" + std::to_string(KSOL_ABI_VERSION) + "\n");
  h.update(job.source_text);
  for (auto& a : compile_argv(job, "SRC", "OUT")) h.update(a + "\n");
  h.update(toolchain_version());
  h.update(ksol_headers_digest());
  h.update(cutlass_version());
  r.key = h.hex();
  std::string dir = cache_dir() + "/compile/" + r.key.substr(0, 2) + "/" + r.key;
  r.so_path = dir + "/lib.so";
  // Gate 1's binary half (library_check.h): a candidate's imports against the allowlist, its
  // static constructors, its machine code; a task's baseline with the imports CUB needs.
  auto import_gate = [&]() {
    if (job.kind != SourceKind::candidate || !job.static_gate) return true;
    LibraryFindings found = inspect_library(r.so_path, ImportPolicy{job.libs, job.trusted});
    if (found.clean()) return true;
    r.ok = false;
    r.stage = "static";
    r.message = format_library_findings(job.source_path, found);
    return false;
  };
  auto cached = [&]() {
    if (!fs::exists(r.so_path)) return false;
    r.ok = true;
    r.cache_hit = true;
    try {
      r.cost_seconds = std::stod(read_file(dir + "/seconds"));
    } catch (const std::exception&) {
      // an entry made before the cost was recorded, or a damaged one: the cost is unknown
    }
    import_gate();
    r.seconds = seconds_since(t0);
    return true;
  };
  // The same source being compiled by another thread (the search's build of a seed the run's
  // background build has begun, a generation its prefetch is building): wait for that compile and
  // take its entry, rather than run a second nvcc on it. One that failed or was cancelled is
  // compiled again here, so that the message is this job's.
  std::shared_ptr<InFlight> mine;
  while (!mine) {
    if (cached()) return r;
    std::shared_ptr<InFlight> theirs;
    {
      std::lock_guard<std::mutex> g(inflight_mu);
      auto it = inflight.find(r.key);
      if (it == inflight.end()) inflight[r.key] = mine = std::make_shared<InFlight>();
      else theirs = it->second;
    }
    if (!theirs) break;
    std::unique_lock<std::mutex> l(theirs->m);
    while (!theirs->done) {
      if (cancel && cancel->load()) {
        mark_cancelled(r);
        r.seconds = seconds_since(t0);
        return r;
      }
      theirs->cv.wait_for(l, std::chrono::milliseconds(50));
    }
  }
  // Whatever way this compile ends, the threads waiting for it are told.
  struct Announce {
    std::shared_ptr<InFlight> f;
    std::string key;
    ~Announce() {
      {
        std::lock_guard<std::mutex> g(inflight_mu);
        inflight.erase(key);
      }
      std::lock_guard<std::mutex> l(f->m);
      f->done = true;
      f->cv.notify_all();
    }
  } announce{mine, r.key};
  if (cached()) return r;  // finished by another thread between the look and the claim
  fs::create_directories(dir);
  std::string tmp = dir + "/tmp." + std::to_string(::getpid()) + "." + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  fs::create_directories(tmp);
  std::string src = tmp + "/source" + ext;
  write_file_atomic(src, job.source_text);
  // At a lower priority: compiles run beside the worker's timed calls, whose round trips the
  // launcher's bracket rule compares with an uncontended calibration.
  ProcessResult p = run_process(compile_argv(job, src, tmp + "/lib.so"), 600, "", kCompileNiceness, cancel);
  if (p.cancelled) {
    mark_cancelled(r);
    fs::remove_all(tmp);
    r.seconds = seconds_since(t0);
    return r;
  }
  write_file_atomic(dir + "/build.log", p.output);
  if (p.exit_code != 0) {
    r.stage = "compile";
    r.message = p.timed_out ? "compiler timed out after 600 s" : p.output;
    // Point messages at the user's file, not the temporary copy.
    for (size_t at; (at = r.message.find(src)) != std::string::npos;) r.message.replace(at, src.size(), job.source_path);
    fs::remove_all(tmp);
    r.seconds = seconds_since(t0);
    return r;
  }
  write_file_atomic(dir + "/seconds", std::to_string(p.seconds));
  fs::rename(tmp + "/lib.so", r.so_path);
  write_file_atomic(dir + "/source" + ext, job.source_text);
  fs::remove_all(tmp);
  r.ok = true;
  r.cost_seconds = p.seconds;
  import_gate();
  r.seconds = seconds_since(t0);
  return r;
}

std::vector<CompileResult> compile_all(const std::vector<CompileJob>& jobs, int threads, const std::atomic<bool>* cancel) {
  std::vector<CompileResult> out(jobs.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(threads, static_cast<int>(jobs.size())); ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < jobs.size();) {
        if (cancel && cancel->load()) {
          mark_cancelled(out[i]);
          continue;
        }
        try {
          out[i] = compile(jobs[i], cancel);
        } catch (const std::exception& e) {
          out[i].stage = "compile";
          out[i].message = e.what();
        }
      }
    });
  for (auto& th : pool) th.join();
  return out;
}

CFunction parse_c_declaration(const std::string& decl_in) {
  std::string decl = trim(decl_in);
  if (!decl.empty() && decl.back() == ';') decl.pop_back();
  size_t open = decl.find('('), close = decl.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    throw std::runtime_error("column 1: expected a declaration like 'void f(int n, const float* x, float* y)'");
  auto split_name = [](const std::string& s, size_t col) -> std::pair<std::string, std::string> {
    std::string t = trim(s);
    size_t e = t.size();
    size_t b = e;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(t[b - 1])) || t[b - 1] == '_')) --b;
    if (b == e || b == 0) throw std::runtime_error("column " + std::to_string(col + 1) + ": expected a type and a name in '" + t + "'");
    return {trim(t.substr(0, b)), t.substr(b)};
  };
  CFunction f;
  auto [ret, name] = split_name(decl.substr(0, open), 0);
  for (const char* q : {"extern \"C\"", "extern", "static", "inline", "__host__"})
    if (ret.rfind(q, 0) == 0) ret = trim(ret.substr(std::string(q).size()));
  f.return_type = ret;
  f.name = name;
  std::string params = decl.substr(open + 1, close - open - 1);
  if (trim(params).empty() || trim(params) == "void") return f;
  size_t start = 0;
  while (start <= params.size()) {
    size_t comma = params.find(',', start);
    if (comma == std::string::npos) comma = params.size();
    auto [type, pname] = split_name(params.substr(start, comma - start), open + 1 + start);
    CParam p{type, pname, type.find('*') != std::string::npos, type.find("cudaStream_t") != std::string::npos};
    static const std::set<std::string> ints = {"int", "long", "long long", "int64_t", "int32_t", "size_t", "unsigned", "unsigned int", "const int", "const int64_t", "const size_t", "const long"};
    if (!p.pointer && !p.stream && !ints.count(type))
      throw std::runtime_error("column " + std::to_string(open + 2 + start) + ": parameter '" + pname + "' has type '" + type +
                               "'; only pointers, integers and cudaStream_t can be bound");
    f.params.push_back(p);
    start = comma + 1;
  }
  return f;
}

std::string generate_c_shim(const Task& t, const CFunction& f, const std::string& user_source_path) {
  std::ostringstream o;
  o << "// Generated by ksol: binds the task's tensors and dims to " << f.name << "().\n";
  o << "#include \"" << user_source_path << "\"\n#include \"ksol/abi.h\"\n#include <cuda_runtime.h>\n\n";
  o << "extern \"C\" int ksol_run(const ksol_call* call) {\n";
  std::vector<std::string> args;
  for (auto& p : f.params) {
    if (p.stream) {
      args.push_back("(cudaStream_t)call->stream");
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < t.tensors.size() && !found; ++i)
      if (t.tensors[i].name == p.name) {
        if (!p.pointer) throw std::runtime_error("parameter '" + p.name + "' names a tensor but is not a pointer");
        args.push_back("(" + p.type + ")call->tensors[" + std::to_string(i) + "]");
        found = true;
      }
    for (size_t i = 0; i < t.dims.size() && !found; ++i)
      if (t.dims[i] == p.name) {
        if (p.pointer) throw std::runtime_error("parameter '" + p.name + "' names a dim but is a pointer");
        args.push_back("(" + p.type + ")call->dims[" + std::to_string(i) + "]");
        found = true;
      }
    if (!found)
      throw std::runtime_error("parameter '" + p.name + "' of " + f.name + " matches no tensor (" + [&] {
        std::vector<std::string> n;
        for (auto& x : t.tensors) n.push_back(x.name);
        return join(n, ", ");
      }() + ") and no dim (" + join(t.dims, ", ") + ")");
  }
  o << "  " << f.name << "(" << join(args, ", ") << ");\n";
  o << "  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n}\n";
  return o.str();
}

CompileJob baseline_job(const Task& t, const BaselineSpec& b) {
  CompileJob j;
  j.source_path = b.source;
  // A task's baselines ship with the task; device-wide CUB and other vendor code import
  // functions (getenv, dlsym, cudaSetDevice) that a candidate may not.
  j.trusted = true;
  j.libs = b.libs;
  for (auto& d : b.defines) j.extra_flags.push_back("-D" + d);
  std::string text = read_file(b.source);
  if (!b.function.empty()) {
    CFunction f = parse_c_declaration(b.function);
    // The user's file is included by path; its text goes into the key through the shim's hash.
    j.source_text = "// source sha256 " + sha256_hex(text) + "\n" + generate_c_shim(t, f, b.source);
    auto findings = static_scan(text);
    if (!findings.empty()) j.source_text = text;  // let the static gate report against the user's file
  } else {
    j.source_text = text;
  }
  return j;
}

CompileJob candidate_job(const Task& t, const std::string& path) {
  CompileJob j;
  j.source_path = path;
  j.source_text = read_file(path);
  // Candidates may use the vendor libraries the task's baselines use.
  std::set<std::string> libs;
  for (auto& b : t.baselines) libs.insert(b.libs.begin(), b.libs.end());
  j.libs.assign(libs.begin(), libs.end());
  return j;
}

CompileJob reference_job(const Task& t, bool gpu) {
  CompileJob j;
  j.kind = gpu ? SourceKind::reference_gpu : SourceKind::reference_cpu;
  j.source_path = gpu ? t.ref_gpu : t.ref_cpu;
  j.source_text = read_file(j.source_path);
  j.static_gate = false;
  return j;
}

}  // namespace ksol
