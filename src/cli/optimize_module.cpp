// ksol optimize FILE.py: a PyTorch module (KernelBench format) whose whole forward is one DSL
// program (python/ksol_torch/synth.py writes it) is searched like a built-in task, each candidate
// compiled here and verified and timed on the module's own tensors by the Python worker (float64
// end to end, the worker's gates), beside eager PyTorch and torch.compile. When the forward is not
// one DSL program, or nothing beats them, the answer is the better of eager and torch.compile.
#include "cli/optimize_module.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agents/expert.h"
#include "agents/knowledge.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "coord/worker_client.h"
#include "core/hash.h"
#include "core/stop.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "report/optimize_report.h"
#include "search/optimize.h"
#include "search/stitched.h"
#include "sol/peaks.h"
#include "sol/sol.h"
#include "task/lowered.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {
namespace {

// A program built for the host's CUDA emulator (ksol optimize --emulate): the library, or "".
std::string host_library(const Task& t, const dsl::Program& p, std::string* why) {
  codegen::HostBuild hb = codegen::build_for_host(codegen::generate_cuda(p, search::binding_of(t)));
  if (!hb.ok && why) *why = hb.message;
  return hb.ok ? hb.so_path : "";
}

// Candidates through the Python worker on the module's tensors; the baselines are eager and
// torch.compile, timed by the same worker.
class ModuleEvaluator : public search::Evaluator {
 public:
  ModuleEvaluator(WorkerClient& w, std::string problem, std::string device, double timeout, std::optional<sol::DevicePeaks> peaks,
                  std::string precision, bool emulate = false)
      : w_(w), problem_(std::move(problem)), device_(std::move(device)), timeout_(timeout), peaks_(std::move(peaks)),
        precision_(std::move(precision)), emulate_(emulate) {}

  search::Outcome evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t, const std::string&) override {
    if (auto u = search::unsupported(t, p, label)) return *u;
    search::Outcome o;
    o.label = label;
    o.kernel = codegen::kernel_name(p);
    json req = candidate_request(t, p, label, &o.error);
    if (req.empty()) return o;
    WorkerReply r = w_.call(req, timeout_);
    search::SizeResult sr = size_result(t);
    if (!r.ok) {
      sr.status = Status::failed;
      sr.failed_gate = Gate::worker;
      sr.error_class = "worker_error";
      sr.message = "worker: " + r.message;
    } else {
      // The Python worker's record, read as the C++ worker's is (core/evaluation.h).
      const json& res = r.body["result"];
      search::SizeResult base = sr;
      static_cast<SizeEvaluation&>(sr) = from_worker_result(res);
      sr.size = base.size;
      sr.sol_us = base.sol_us;
      sr.bound = base.bound;
      if (sr.median_us > 0 && sr.sol_us > 0) {
        sr.pct_sol = sr.sol_us / sr.median_us;
        sr.headroom = sr.median_us / sr.sol_us;
      }
      search::flag_faster_than_sol(sr, "the module");
    }
    o.worker_seconds = r.seconds;
    o.status = sr.ok() ? Status::ok : Status::failed;
    if (!o.ok()) o.error = "module: " + sr.message;
    o.sizes.push_back(sr);
    return o;
  }

  // Where eager's and torch.compile's times are kept for later runs (one file per key), and what
  // besides the request and the problem file's bytes they depend on (the GPU, PyTorch, the
  // worker's code): a later run with the same key reuses them unless `fresh`. "": never kept.
  void keep_baselines_in(std::string dir, std::string identity, bool fresh) {
    baseline_dir_ = std::move(dir), baseline_identity_ = std::move(identity), fresh_baselines_ = fresh;
  }
  // {"at": when they were timed, "seconds": the worker's time then, "file": the cache file} when
  // the last baselines() reused an earlier run's times; {} when it timed them.
  const json& baselines_reused() const { return reused_; }

  std::map<std::string, search::Outcome> baselines(const Task& t) override {
    std::map<std::string, search::Outcome> out;
    json req = request();
    req["baselines_only"] = true;
    req["count_kernels"] = true;
    const json result = baselines_result(req);
    const json& base = result.value("baselines", json::object());
    baseline_kernels_ = json::object();
    baseline_kernel_us_ = json::object();
    for (auto& [name, b] : base.items()) {
      if (b.is_object() && b.contains("kernels") && b["kernels"].is_number_integer()) baseline_kernels_[name] = b["kernels"];
      if (b.is_object() && b.contains("kernel_us") && b["kernel_us"].is_array()) baseline_kernel_us_[name] = b["kernel_us"];
    }
    // The worker's screening for degenerate outputs (python/ksol_torch/screen.py), run with the
    // baselines: the JSON carries it, and the KernelBench summary reports such problems apart.
    problem_screen_ = result.value("screen", json::object());
    // The precision policy the baselines ran under (the worker's: mode, arithmetic, unit, why);
    // every candidate runs under the same mode.
    if (result.contains("precision")) policy_ = result["precision"];
    for (const char* name : {"eager", "compile", "compile_max_autotune"}) {
      if (std::string(name) == "compile_max_autotune" && !base.contains(name)) continue;  // GEMM and conv problems only
      search::Outcome o;
      o.label = std::string("baseline:") + name;
      search::SizeResult sr = size_result(t);
      if (base.contains(name) && base[name].contains("median_us")) {
        fill_time(sr, base[name]);
        sr.status = Status::ok;
        o.status = Status::ok;
      } else {
        sr.status = Status::failed;
        sr.failed_gate = Gate::worker;
        sr.error_class = "not_timed";
        sr.message = base.contains(name) ? base[name].value("error", std::string("not timed")) : "not timed";
        o.error = sr.message;
      }
      o.sizes.push_back(sr);
      out[name] = o;
    }
    return out;
  }

  // The batch compiled together on every core (then built for the host's emulator under
  // --emulate); the libraries are kept for the screen and the full evaluation.
  std::vector<search::Built> build(const Task& t, const std::vector<search::BuildItem>& items) override {
    prefetching_.wait();
    std::vector<search::Built> out;
    for (const search::CompiledItem& c : search::compile_batch(t, items, out)) {
      std::string why;
      if (c.result.ok && library(t, *items[c.index].program, items[c.index].label, &why).empty()) out[c.index].ok = false, out[c.index].error = why;
    }
    return out;
  }

  bool screens() const override { return true; }
  void prefetch(const Task& t, const std::vector<dsl::Program>& next) override { prefetching_.start(t, next); }
  void cancel_prefetch() override { prefetching_.cancel(); }

  // The items timed on the module's inputs in one screen of the Python worker (timing only).
  std::vector<search::ScreenTime> screen(const Task& t, const std::vector<search::BuildItem>& items, const std::string&,
                                         double* worker_seconds) override {
    std::vector<search::ScreenTime> out(items.size());
    std::vector<json> cands;
    std::vector<size_t> which;
    for (auto& [k, so] : search::screen_libraries(items, out, [&](const search::BuildItem& it, std::string* why) {
           return library(t, *it.program, it.label, why);
         })) {
      cands.push_back({{"so", so}, {"dims", dims_of(t)}, {"expect_shapes", shapes_of(t)}});
      which.push_back(k);
    }
    ScreenBatch sb = screen_batch(cands);
    if (worker_seconds) *worker_seconds = sb.worker_seconds;
    search::take_screen_times(sb, which, out);
    return out;
  }

  // Candidates ({"so", "dims", "expect_shapes"} or {"stitch": pieces}) timed in the Python
  // worker's screen, in groups when one breaks the worker (coord/screen_batch.h).
  ScreenBatch screen_batch(const std::vector<json>& cands) {
    return screen_in_groups(cands.size(), [&](const std::vector<size_t>& group) {
      json req = request();
      req["op"] = "screen";
      json list = json::array();
      for (size_t i : group) list.push_back(cands[i]);
      req["candidates"] = list;
      const ScreenOptions so;
      req["rounds"] = so.rounds;
      req["samples_per_round"] = so.samples_per_round;
      req["warmup_seconds"] = so.warmup_seconds;
      req["max_seconds"] = so.max_seconds;
      req["drop_above"] = so.drop_above;
      // Loading the module, then each candidate's warm-up and a few samples.
      return w_.call(req, std::min(timeout_, 120.0 + 10.0 * static_cast<double>(group.size())));
    });
  }

  // The last baselines() call's screening verdict on the problem ({} when the worker gave none).
  const json& problem_screen() const { return problem_screen_; }
  // The precision policy the baselines ran under ({"mode": ...} until baselines() has run).
  const json& precision() const { return policy_; }

  // The module's speed-of-light time (us) from a worker result's FLOPs and bytes, 0 unknown.
  double sol_us(const json& result) const {
    if (!peaks_) return 0;
    double f = result.value("flops", 0.0), b = result.value("bytes", 0.0);
    double tb = peaks_->hbm_bytes_per_s > 0 ? b / peaks_->hbm_bytes_per_s : 0;
    double tf = flop_peak() > 0 ? f / flop_peak() : 0;
    return std::max(tb, tf) * 1e6;
  }

  // The FLOP rate the module's bound is taken at: the fastest arithmetic its precision policy
  // allows (TF32 or bf16 tensor cores where the mode lets its GEMMs or convolutions use them,
  // else FP32), 0 without peaks.
  double flop_peak() const {
    if (!peaks_) return 0;
    const std::string arithmetic = policy_.value("arithmetic", std::string("fp32"));
    if (arithmetic == "tf32" && peaks_->tf32_flops > 0) return peaks_->tf32_flops;
    if (arithmetic == "bf16" && peaks_->bf16_flops > 0) return peaks_->bf16_flops;
    return peaks_->fp32_flops;
  }

  // The module with its DSL pieces from their libraries and the kept ops as PyTorch calls
  // (python/ksol_torch/stitch.py), through every gate: the worker's result.
  WorkerReply stitched(const json& pieces, bool kernelbench = false) {
    json req = request();
    req["stitch"] = pieces;
    req["baselines"] = false;
    if (kernelbench) req["kernelbench"] = true, req["time"] = false, req["count_kernels"] = true;
    WorkerReply r = w_.call(req, timeout_);
    if (kernelbench) answer_kernels_ = kernels_in(r), answer_kernel_us_ = kernel_us_in(r);
    return r;
  }

  // The kernels one call launches (the worker's torch.profiler count, on a GPU only): eager's
  // and torch.compile's from the baselines, and "ksol" for the program or stitched module of the
  // last KernelBench-protocol request (the answer); {} where none was counted.
  json kernel_counts() const {
    json k = baseline_kernels_;
    if (!answer_kernels_.is_null()) k["ksol"] = answer_kernels_;
    return k;
  }
  void forget_answer_kernels() { answer_kernels_ = json(), answer_kernel_us_ = json(); }
  // Where those calls' device time goes, by kernel name (the worker's torch.profiler rows, the
  // slowest first), under the same names; {} where none was profiled.
  json kernel_times() const {
    json k = baseline_kernel_us_;
    if (!answer_kernel_us_.is_null()) k["ksol"] = answer_kernel_us_;
    return k;
  }

  // KernelBench's own protocol (allclose at 1e-2 against the Model in its own precision, mean of
  // 100 calls, no L2 flush) on a verified program, reported beside ksol's strict gates: the
  // worker's "kernelbench" object, or why it has none.
  json kernelbench_of(const Task& t, const dsl::Program& p) {
    std::string error;
    json req = candidate_request(t, p, "kernelbench", &error);
    if (req.empty()) return {{"correct", false}, {"error", error.substr(0, 300)}};
    req["kernelbench"] = true;
    req["time"] = false;
    req["count_kernels"] = true;
    WorkerReply r = w_.call(req, timeout_);
    answer_kernels_ = kernels_in(r), answer_kernel_us_ = kernel_us_in(r);
    return kernelbench_in(r);
  }

  static json kernels_in(const WorkerReply& r) {
    const json& res = r.ok ? r.body.value("result", json::object()) : json::object();
    return res.contains("kernels") && res["kernels"].is_number_integer() ? res["kernels"] : json();
  }
  static json kernel_us_in(const WorkerReply& r) {
    const json& res = r.ok ? r.body.value("result", json::object()) : json::object();
    return res.contains("kernel_us") && res["kernel_us"].is_array() ? res["kernel_us"] : json();
  }
  static json kernelbench_in(const WorkerReply& r) {
    if (!r.ok) return {{"correct", false}, {"error", "worker: " + r.message.substr(0, 300)}};
    const json& res = r.body.value("result", json::object());
    if (res.contains("kernelbench") && res["kernelbench"].is_object()) return res["kernelbench"];
    return {{"correct", false}, {"error", res.value("message", std::string("the worker ran no KernelBench protocol")).substr(0, 300)}};
  }

 private:
  // An eval request for program p built to the ABI (for the host emulator under --emulate) and
  // bound to the task's dims, no baselines; {} with *error set when it does not build.
  json candidate_request(const Task& t, const dsl::Program& p, const std::string& label, std::string* error) {
    std::string so = library(t, p, label, error);
    if (so.empty()) return json();
    json req = request();
    req["candidate_so"] = so;
    req["baselines"] = false;
    req["dims"] = dims_of(t);
    req["expect_shapes"] = shapes_of(t);
    return req;
  }
  // Program p's library, built to the ABI (for the host emulator under --emulate) once per
  // program: its path, or "" with *why set when it does not build.
  std::string library(const Task& t, const dsl::Program& p, const std::string& label, std::string* why) {
    const std::string key = dsl::print_source(p);
    if (auto it = libs_.find(key); it != libs_.end()) return it->second;
    CompileResult cr = compile(codegen::compile_job(t, p, t.name + "/" + label + ".ksol"));
    if (!cr.ok) {
      *why = cr.stage + " gate: " + cr.message.substr(0, 2000);
      return "";
    }
    std::string so = cr.so_path;
    if (emulate_) {
      std::string host_why;
      so = host_library(t, p, &host_why);
      if (so.empty()) {
        *why = "build for the emulator: " + host_why.substr(0, 2000);
        return "";
      }
    }
    libs_[key] = so;
    return so;
  }
  // The task's dims at its one size, as the library is called with them.
  static json dims_of(const Task& t) {
    std::vector<int64_t> dims;
    for (auto& d : t.dims) dims.push_back(static_cast<int64_t>(std::llround(t.sizes.at(0).dims.at(d))));
    return dims;
  }
  // The task's tensors at its one size, in ABI order: the worker checks the module's against them.
  static json shapes_of(const Task& t) {
    json shapes = json::array();
    for (auto& ts : t.tensors) shapes.push_back({{"name", ts.name}, {"shape", t.shape_of(ts, t.sizes.at(0))}});
    return shapes;
  }
  // The worker's baselines-only result: an earlier run's, where one with the same key is kept and
  // not `fresh`, else timed now (and kept when every baseline was timed or is unavailable in this
  // PyTorch: a failure of the moment is never reused).
  json baselines_result(const json& req) {
    reused_ = json::object();
    std::string key, file;
    if (!baseline_dir_.empty()) {
      key = sha256_hex(read_file(problem_) + "\n" + req.dump() + "\n" + baseline_identity_);
      file = baseline_dir_ + "/" + key.substr(0, 32) + ".json";
      std::error_code ec;
      if (!fresh_baselines_ && fs::is_regular_file(file, ec)) try {
          json kept = json::parse(read_file(file));
          if (kept.value("key", std::string()) == key && kept.contains("result") && kept["result"].is_object()) {
            reused_ = {{"at", kept.value("at", std::string("?"))}, {"seconds", kept.value("seconds", 0.0)}, {"file", file}};
            return kept["result"];
          }
        } catch (const std::exception&) {
          // An unreadable entry is timed again and replaced.
        }
    }
    WorkerReply r = w_.call(req, timeout_);
    if (!r.ok) throw std::runtime_error("the Python worker could not time eager and torch.compile: " + r.message);
    json result = r.body.value("result", json::object());
    bool keep = result.contains("baselines") && result["baselines"].is_object() && !result["baselines"].empty();
    if (keep)
      for (auto& [name, b] : result["baselines"].items())
        keep = keep && b.is_object() && (b.contains("median_us") || b.value("unavailable", false));
    // Nor a run whose trace failed (which baselines run, and the bound, follow from it), or whose
    // screening for degenerate outputs was skipped on an error.
    keep = keep && (result.value("flops", 0.0) > 0 || result.value("bytes", 0.0) > 0);
    keep = keep && !(result.contains("screen") && result["screen"].is_object() &&
                     result["screen"].value("detail", std::string()).rfind("the float64 reference failed", 0) == 0);
    if (!file.empty() && keep) try {
        fs::create_directories(baseline_dir_);
        write_file_atomic(file, json{{"key", key}, {"at", now_iso8601()}, {"seconds", r.seconds}, {"result", result}}.dump(1));
      } catch (const std::exception& e) {
        // A cache that cannot be written costs the next run its baselines, not this run its answer.
        std::cerr << "warning: eager's and torch.compile's times not kept for later runs: " << e.what() << "\n";
      }
    return result;
  }
  json request() const {
    return {{"op", "eval"}, {"problem", problem_}, {"device", device_}, {"seeds", {1, 2, 3}}, {"kernelbench", false}, {"precision", precision_}};
  }
  search::SizeResult size_result(const Task& t) const {
    search::SizeResult sr;
    sr.size = "module";
    sr.weight = 1;
    const SizeSet& s = t.sizes.at(0);
    double tb = peaks_ && peaks_->hbm_bytes_per_s > 0 ? t.bytes_at(s) / peaks_->hbm_bytes_per_s : 0;
    double tf = flop_peak() > 0 ? t.flops_at(s) / flop_peak() : 0;
    sr.sol_us = std::max(tb, tf) * 1e6;
    sr.bound = tf > tb ? "compute" : "memory";
    return sr;
  }
  static void fill_time(search::SizeResult& sr, const json& tm) {
    sr.median_us = tm.value("median_us", 0.0);
    sr.ci_low_us = tm.value("ci_low_us", sr.median_us);
    sr.ci_high_us = tm.value("ci_high_us", sr.median_us);
    if (sr.median_us > 0 && sr.sol_us > 0) {
      sr.pct_sol = sr.sol_us / sr.median_us;
      sr.headroom = sr.median_us / sr.sol_us;
    }
  }

  WorkerClient& w_;
  std::string problem_, device_;
  double timeout_;
  std::optional<sol::DevicePeaks> peaks_;
  std::string precision_;
  bool emulate_ = false;
  std::map<std::string, std::string> libs_;  // by program text: its library
  std::string baseline_dir_, baseline_identity_;
  bool fresh_baselines_ = false;
  json reused_ = json::object();
  json baseline_kernels_ = json::object(), answer_kernels_, baseline_kernel_us_ = json::object(), answer_kernel_us_;
  search::BackgroundBuild prefetching_;  // last: joined before the rest goes
  json problem_screen_ = json::object();
  json policy_ = {{"mode", precision_}};
};

// "default (tf32: TF32 allowed for cuDNN convolutions)": the mode and what its bound allowed.
std::string precision_text(const json& p) {
  if (!p.is_object()) return "?";
  std::string s = p.value("mode", std::string("?"));
  if (p.contains("arithmetic")) s += " (" + p.value("arithmetic", std::string()) + ": " + p.value("why", std::string()) + ")";
  return s;
}

// Says that eager's and torch.compile's times are an earlier run's, and puts it in the JSON
// ("baselines_reused"), where they are.
void note_reused_baselines(const json& reused, json& doc) {
  if (reused.empty()) return;
  std::cerr << "baselines: eager's and torch.compile's times reused from a run at " << reused.value("at", std::string("?")) << " ("
            << reused.value("file", std::string("?")) << "; --fresh-baselines times them again)\n";
  doc["baselines_reused"] = reused;
}

// The kernels one call of each baseline and of ksol's module launches (`kernels`) and where the
// call's device time goes by kernel name (`kernel_us`), into `item`, with one line each for
// torch.compile and ksol naming their slowest kernels. torch.compile's line is printed once a run
// (`compile_noted`); ksol's names the vendor-call plan where `item` is that plan's.
void note_kernels(json& item, const ModuleEvaluator& ev, const std::string& stem, bool& compile_noted) {
  if (json k = ev.kernel_counts(); !k.empty()) item["kernels"] = k;
  const json t = ev.kernel_times();
  if (t.empty()) return;
  item["kernel_us"] = t;
  for (const char* who : {"compile", "ksol"}) {
    if (!t.contains(who) || (std::string(who) == "compile" && compile_noted)) continue;
    if (std::string(who) == "compile") compile_noted = true;
    std::string line;
    for (size_t i = 0; i < t[who].size() && i < 3; ++i) {
      const json& row = t[who][i];
      const std::string name = row.value("name", std::string("?"));
      line += (i ? ", " : "") + name.substr(0, 60) + (name.size() > 60 ? "..." : "") + " " +
              fixed(row.value("us", 0.0), 1) + " us" + (row.value("calls", 1) > 1 ? " (" + std::to_string(row.value("calls", 1)) + " calls)" : "");
    }
    const std::string whose = std::string(who) == "compile"           ? "torch.compile"
                              : item.value("plan", std::string()) == "vendor" ? "the vendor-call plan's module"
                                                                              : "ksol's module";
    std::cerr << stem << ": " << whose << ", one profiled call, slowest kernels: " << line << "\n";
  }
}

// A program kept beside the report: <name>.ksol, and <name>.cu, the CUDA its task generates.
struct KeptProgram {
  std::string name;
  Task task;
  dsl::Program program;
};

// The report folder of a module's run, one-program search and stitched module alike:
// results.json, report.md, report.html and the kept programs. Returns the folder.
std::string write_report(const ModuleOptimizeArgs& a, const std::string& stem, json& doc, const std::vector<KeptProgram>& kept) {
  std::string dir = a.report_dir.empty() ? "runs/module-" + stem : a.report_dir;
  fs::create_directories(dir);
  // An earlier run's kept programs would sit beside a report that no longer names them.
  for (auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string(), ext = e.path().extension().string();
    if ((ext == ".ksol" || ext == ".cu") && (n.rfind("best.", 0) == 0 || n.rfind("piece-", 0) == 0)) fs::remove(e.path());
  }
  fs::remove_all(dir + "/lib");
  // The verified libraries beside the report (lib/<name>.so, named in the JSON's "libraries"), so
  // that the folder alone loads (ksol.load): the compile cache serves the build the run verified.
  // An emulated run ran host builds: nothing of it is a GPU library.
  if (!a.emulate) {
    std::vector<codegen::KeptLibrary> libs;
    for (auto& k : kept) libs.push_back({k.name, &k.task, &k.program});
    codegen::export_libraries(dir, libs, doc);
  }
  write_file_atomic(dir + "/results.json", doc.dump(2));
  write_file_atomic(dir + "/report.md", report::optimize_markdown(doc));
  write_file_atomic(dir + "/report.html", report::optimize_html(doc));
  for (auto& k : kept) {
    write_file_atomic(dir + "/" + k.name + ".ksol", dsl::print_source(k.program));
    write_file_atomic(dir + "/" + k.name + ".cu", codegen::compile_job(k.task, k.program, k.name).source_text);
  }
  return dir;
}

// The Inductor path (python/ksol/inductor_path.py) in a process of its own: torch.compile's
// Triton kernels made tasks, searched by this binary's fx path, and kept in the compiled model
// where the whole model gets faster; with `fx_results`, the choice between the two paths goes
// into both reports (results.json's "path"). Its report is <dir>/inductor/inductor.json, what it
// printed <dir>/inductor/inductor.log. Returns its summary line ({} where it printed none).
json run_inductor_path(const ModuleOptimizeArgs& a, const std::string& py, const std::string& pypath, const std::string& dir,
                       const std::string& fx_results) {
  const double seconds = a.search.budget_seconds > 0 ? a.search.budget_seconds : 60.0;
  std::vector<std::string> argv = {"env", "PYTHONPATH=" + pypath, "KSOL_PYTHON=" + py, py, "-m", "ksol.inductor_path", "optimize",
                                   fs::absolute(a.file).string(), "--report", dir + "/inductor", "--budget-seconds",
                                   std::to_string(seconds), "--agent", a.search.agent, "--precision", a.precision, "--ksol",
                                   self_exe_dir() + "/ksol", "--budget-candidates", std::to_string(a.search.max_candidates)};
  if (!fx_results.empty()) argv.insert(argv.end(), {"--fx-results", fx_results});
  std::cerr << "inductor path: torch.compile's kernels as tasks, " << seconds << " s of search (its log: " << dir
            << "/inductor/inductor.log)\n";
  fs::create_directories(dir + "/inductor");
  // Its compile, its captures and one search per kernel: an hour past its budget is a hang.
  ProcessResult pr = run_process(argv, seconds + 3600);
  write_file_atomic(dir + "/inductor/inductor.log", pr.output);
  json line;
  std::istringstream lines(pr.output);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("[inductor]", 0) == 0) std::cerr << l << "\n";
    if (!l.empty() && l[0] == '{') try {
        line = json::parse(l);
      } catch (const std::exception&) {
      }
  }
  if (line.is_null() || pr.exit_code < 0)
    std::cerr << "inductor path: " << (pr.timed_out ? "timed out" : "failed (exit status " + std::to_string(pr.exit_code) + ")")
              << "; the end of its log:\n"
              << pr.output.substr(pr.output.size() > 3000 ? pr.output.size() - 3000 : 0) << "\n";
  return line.is_null() ? json::object() : line;
}

// After the fx path's report: the Inductor path and the choice between the two (--path best),
// which rewrites results.json; `doc` is read back from it. A results.json that cannot be read
// back is an error: the answer printed and returned would otherwise be the fx path's alone.
// The fx path's worker is stopped first: the GPU memory its PyTorch holds (gigabytes for a
// problem with large tensors) is the Inductor path's process's to use.
void choose_path(const ModuleOptimizeArgs& a, const std::string& py, const std::string& pypath, const std::string& dir, json& doc,
                 Worker& fx_worker) {
  if (a.path != "best") return;
  if (a.emulate || stop_requested()) {
    std::cerr << "inductor path: not run (" << (a.emulate ? "--emulate: Inductor's Triton kernels need a GPU" : "stopped") << ")\n";
    return;
  }
  fx_worker.stop();
  const std::string results = dir + "/results.json";
  run_inductor_path(a, py, pypath, dir, fs::absolute(results).string());
  std::error_code ec;
  if (!fs::is_regular_file(results, ec))
    throw std::runtime_error(results + ": gone after the Inductor path ran (it writes the choice between the paths there)");
  try {
    doc = json::parse(read_file(results));
  } catch (const std::exception& e) {
    throw std::runtime_error(results + ": cannot be read back after the Inductor path wrote the choice between the paths there: " +
                             e.what());
  }
  if (doc.contains("path") && doc["path"].is_object())
    std::cerr << "path: " << doc["path"].value("chosen", std::string("none")) << ": " << doc["path"].value("why", std::string()) << "\n";
}

// One path's answer from results.json's "path" (inductor_choice.Choice.to_json): "inductor+ksol
// 10.00 us, 2.000x over torch.compile", or why it has none.
std::string path_figure(const json& p) {
  if (!p.is_object()) return "not run";
  if (!p.value("ok", false)) return "no answer (" + p.value("reason", std::string("?")) + ")";
  return p.value("answer", std::string("?")) + " " + fixed(p.value("answer_us", 0.0), 2) + " us, " +
         fixed(p.value("speedup_vs_compile", 0.0), 3) + "x over torch.compile";
}

// The path results.json returns after --path best: "fx", "inductor", or "" (no choice made).
std::string chosen_path(const json& doc) {
  return doc.contains("path") && doc["path"].is_object() ? doc["path"].value("chosen", std::string()) : std::string();
}

// The answer line's account of the result: `fx_text`, the fx path's own, where no choice was made
// or the fx path was chosen; the Inductor path's answer where it won. Where a choice was made, it
// says which path won and gives the other's figure beside it.
std::string answer_text(const json& doc, const std::string& fx_text) {
  if (!doc.contains("path") || !doc["path"].is_object()) return fx_text;
  const json& p = doc["path"];
  const json fx = p.value("fx", json()), inductor = p.value("inductor", json());
  std::string chosen = chosen_path(doc);
  if (chosen == "inductor") return "inductor path chosen: " + path_figure(inductor) + " (fx path: " + path_figure(fx) + ")";
  if (chosen == "fx") return fx_text + "; fx path chosen: " + path_figure(fx) + " (inductor path: " + path_figure(inductor) + ")";
  return fx_text + "; no path chosen: " + p.value("why", std::string("?"));
}

}  // namespace

int run_optimize_module(const ModuleOptimizeArgs& a, bool json_out) {
  if (!fs::exists(a.file)) throw UsageError(a.file + ": no such file");
  bool compile_noted = false;  // torch.compile's kernels printed (note_kernels)
  std::string why, py = find_torch_python(&why);
  if (py.empty()) {
    std::cerr << "error: " << why << "\n";
    return exit_status::error;
  }
  std::string pypath = ksol_python_path();
  if (a.path == "inductor") {
    if (a.emulate) throw UsageError("--path inductor needs a GPU: Inductor's Triton kernels cannot run on the CPU emulator");
    std::string dir = a.report_dir.empty() ? "runs/module-" + fs::path(a.file).stem().string() : a.report_dir;
    json line = run_inductor_path(a, py, pypath, dir, "");
    std::string status = line.value("status", std::string("failed")), reason = line.value("reason", std::string());
    if (json_out) std::cout << line.dump(2) << "\n";
    else if (status == "ok")
      std::cout << "result: inductor path: " << line.value("answer", std::string()) << ", " << line.value("answer_us", 0.0)
                << " us against the compiled model's " << line.value("compiled_us", 0.0) << " us (" << reason << "); report " << dir
                << "/inductor/inductor.json\n";
    else
      std::cout << "result: inductor path " << status << ": " << reason << "\n";
    if (status == "ok") return exit_status::ok;
    return line.value("no_gpu", false) ? exit_status::no_gpu : exit_status::error;
  }
  std::string file = fs::absolute(a.file).string();
  // The front end's JSON goes to a file of its own: the problem's code may print anything.
  std::string out_json = (fs::temp_directory_path() / ("ksol-synth-" + std::to_string(::getpid()) + ".json")).string();
  // Convolutions multiply in TF32 where the precision mode lets cuDNN do so on the device the
  // candidates run on (the baselines' arithmetic and the bound's); IEEE float32 otherwise.
  const std::vector<std::string> products = {"--precision", a.precision, "--device", a.emulate ? "cpu" : "cuda"};
  std::vector<std::string> synth_cmd = {"env", "PYTHONPATH=" + pypath, py, "-m", "ksol_torch", "synth", file, "--out", out_json};
  synth_cmd.insert(synth_cmd.end(), products.begin(), products.end());
  // The front end (tracing, lowering) runs while the worker starts: both import PyTorch, and the
  // worker also sets up the GPU. What the front end prints is kept for its failure message only,
  // so the worker's answer is still the first thing said: a missing GPU first, then tracing,
  // lowering and compiling either way.
  std::future<ProcessResult> front_end = std::async(std::launch::async, [synth_cmd] { return run_process(synth_cmd, 600); });
  WorkerClient w({"env", "PYTHONPATH=" + pypath, py, "-m", "ksol_torch", "worker"});
  WorkerReply hello = w.call({{"op", "hello"}}, 120);
  if (!hello.ok) {
    std::cerr << "error: the Python worker did not start: " << hello.message << "\n";
    front_end.wait();
    std::error_code ec;
    fs::remove(out_json, ec);
    return exit_status::error;
  }
  const bool no_gpu = !hello.body.value("gpu", false) && !a.emulate;
  if (no_gpu)
    print_no_gpu_notice("optimize", hello.body.value("reason", std::string("no GPU")),
                        "nothing can be timed; tracing, lowering and compiling " + a.file +
                            " instead (exit status 77 when it compiles, 1 otherwise)");
  ProcessResult pr = front_end.get();
  json syn;
  try {
    syn = json::parse(read_file(out_json));
    fs::remove(out_json);
  } catch (const std::exception&) {
    std::cerr << "error: the PyTorch front end failed on " << a.file << ":\n" << pr.output << "\n";
    return exit_status::error;
  }
  if (!syn.value("ok", false)) {
    std::cerr << syn.value("error", std::string("the front end failed")) << "\n";
    return exit_status::error;
  }
  // --plan vendor: the forward is never searched as one program (its convolutions and GEMMs stay
  // PyTorch's calls), so the one-program lowering is not even compiled.
  bool lowered = a.plan != "vendor" && syn.contains("program") && syn["program"].is_string();
  std::optional<Task> task;
  std::optional<dsl::Program> seed;
  if (lowered) {
    // A program the DSL front end or the generators refuse is a fall-back with the reason, not
    // the end of the command.
    std::string why_not;
    try {
      task = lowered_task(syn, a.file);
      seed = dsl::parse_program(syn["program"].get<std::string>(), task->name + ".ksol");
      codegen::Support sup = codegen::can_implement(*seed, search::binding_of(*task));
      if (!sup.ok && syn.contains("program_fallback")) {
        // The seed schedule is refused for this program: the same program at its fallback schedule.
        std::cerr << "the lowered program's schedule is refused (" << sup.reason << "); its fallback schedule instead\n";
        syn["program"] = syn["program_fallback"];
        seed = dsl::parse_program(syn["program"].get<std::string>(), task->name + ".ksol");
        sup = codegen::can_implement(*seed, search::binding_of(*task));
      }
      if (!sup.ok) why_not = "the lowered program has no generator yet: " + sup.reason;
    } catch (const std::exception& e) {
      why_not = std::string("the lowered program is refused: ") + e.what();
    }
    if (!why_not.empty()) {
      std::cerr << syn["program"].get<std::string>();
      syn["reason"] = why_not;
      lowered = false;
    }
  }
  std::cerr << a.file << ": "
            << (a.plan == "vendor" ? std::string("--plan vendor: the forward's convolutions and GEMMs stay PyTorch's calls (cuDNN, "
                                                 "cuBLAS), the ops around them are the pieces")
                : lowered          ? "the forward is one DSL program (" + syn.value("family", std::string("?")) + ")"
                                   : "not one DSL program: " + syn.value("reason", std::string("?")))
            << "\n";
  if (lowered) {
    if (syn.value("conv_products", std::string("fp32")) == "tf32")
      std::cerr << "the convolution's products are TF32: precision " << a.precision
                << " lets cuDNN use TF32 for float32 convolutions, as eager and torch.compile then do (--precision strict "
                   "keeps IEEE float32 everywhere)\n";
    if (syn.value("gemm_products", std::string("fp32")) == "tf32")
      std::cerr << "the GEMM's products are TF32: precision " << a.precision
                << " lets matmul use TF32, as eager and torch.compile then do (--precision strict keeps IEEE float32 everywhere)\n";
    std::cerr << syn["program"].get<std::string>();
    // Gate 1 before any GPU work: the seed's generated CUDA compiles.
    CompileResult cr = compile(codegen::compile_job(*task, *seed, task->name + "/seed.ksol"));
    std::cerr << "seed " << codegen::kernel_name(*seed) << ": " << (cr.ok ? "compiles" : "does not compile (" + cr.stage + ")") << "\n";
    if (!cr.ok) {
      std::cerr << cr.message << "\n";
      return exit_status::error;
    }
  }

  // Not one program: the DSL pieces around the ops kept as PyTorch calls (stitch.py), each
  // through gate 1 here, at the schedule synth writes (no search per piece yet). The vendor-call
  // plan (stitch.py --vendor) keeps every convolution and GEMM as PyTorch's call (cuDNN, cuBLAS)
  // and cuts the ops around them into pieces; its pieces say so ("vendor"), for the worker's split.
  struct PlanPieces {
    json pieces = json::array();
    std::vector<Task> tasks;
    std::vector<dsl::Program> progs;
    std::string why;  // why there are no pieces, where there are none
  };
  auto build_plan = [&](bool vendor) {
    PlanPieces pp;
    json& pieces = pp.pieces;
    std::string plan_json =
        (fs::temp_directory_path() / ("ksol-stitch-" + std::to_string(::getpid()) + (vendor ? "-vendor" : "") + ".json")).string();
    std::vector<std::string> stitch_cmd = {"env", "PYTHONPATH=" + pypath, py, "-m", "ksol_torch", "stitch", file, "--out", plan_json};
    stitch_cmd.insert(stitch_cmd.end(), products.begin(), products.end());
    if (vendor) stitch_cmd.push_back("--vendor");
    ProcessResult sp = run_process(stitch_cmd, 600);
    try {
      json plan = json::parse(read_file(plan_json));
      fs::remove(plan_json);
      if (!plan.value("ok", false)) throw std::runtime_error(plan.value("error", std::string("the stitch front end failed")));
      if (vendor && std::none_of(plan["kept"].begin(), plan["kept"].end(), [](const json& k) {
            return k.value("vendor", false);
          }))
        throw std::runtime_error("the module has no convolution or GEMM to leave to a vendor library");
      for (auto& piece : plan.at("pieces")) {
        std::string tag = "_p" + std::to_string(piece.value("id", 0));
        Task pt = lowered_task(piece, a.file, tag + (vendor ? "v" : ""));
        dsl::Program prog = dsl::parse_program(piece["program"].get<std::string>(), pt.name + ".ksol");
        codegen::Support sup = codegen::can_implement(prog, search::binding_of(pt));
        const std::string label = std::string(vendor ? "vendor-call plan: " : "") + "piece " + tag.substr(2);
        if (!sup.ok && piece.contains("program_fallback")) {
          std::cerr << label << ": its schedule is refused (" << sup.reason << "); its fallback schedule instead\n";
          piece["program"] = piece["program_fallback"];
          prog = dsl::parse_program(piece["program"].get<std::string>(), pt.name + ".ksol");
          sup = codegen::can_implement(prog, search::binding_of(pt));
        }
        // A piece ksol cannot build stays PyTorch's calls, with the reason; the others go on.
        auto keep_piece = [&](const std::string& why) {
          std::cerr << label << ": " << why << "; its ops stay PyTorch calls\n";
          pieces.push_back(search::kept_piece(piece, why));
          if (vendor) pieces.back()["vendor"] = true;
          pp.tasks.push_back(pt);
          pp.progs.push_back(prog);
        };
        if (!sup.ok) {
          keep_piece("no generator yet: " + sup.reason);
          continue;
        }
        CompileResult cr = compile(codegen::compile_job(pt, prog, pt.name + "/seed.ksol"));
        std::cerr << label << " (" << piece.value("family", std::string("?")) << ", nodes "
                  << join(piece["nodes"].get<std::vector<std::string>>(), ", ") << "): " << codegen::kernel_name(prog) << ": "
                  << (cr.ok ? "compiles" : "does not compile (" + cr.stage + ")") << "\n";
        if (!cr.ok) {
          keep_piece("does not compile: " + cr.message.substr(0, 2000));
          continue;
        }
        std::vector<int64_t> dims;
        for (auto& d : pt.dims) dims.push_back(static_cast<int64_t>(std::llround(pt.sizes[0].dims.at(d))));
        std::string so = cr.so_path;
        if (a.emulate) {
          std::string why;
          so = host_library(pt, prog, &why);
          if (so.empty()) {
            keep_piece("does not build for the emulator: " + why.substr(0, 2000));
            continue;
          }
        }
        pieces.push_back({{"nodes", piece["nodes"]}, {"so", so}, {"dims", dims}, {"family", piece.value("family", "")},
                          {"kernel", codegen::kernel_name(prog)}, {"program", piece["program"]}});
        if (vendor) pieces.back()["vendor"] = true;
        pp.tasks.push_back(pt);
        pp.progs.push_back(prog);
      }
      if (!pieces.empty() && search::computed_pieces(pieces) == 0) {
        std::vector<std::string> whys;
        for (size_t i = 0; i < pieces.size(); ++i) whys.push_back("piece " + std::to_string(i) + ": " + pieces[i].value("why", std::string()));
        throw std::runtime_error("no piece builds: " + join(whys, "; "));
      }
      if (vendor && pieces.empty()) throw std::runtime_error("no op around the vendor calls is a piece");
    } catch (const std::exception& e) {
      std::error_code ec;
      fs::remove(plan_json, ec);
      pp = PlanPieces{};
      pp.why = std::string(vendor ? "the vendor-call plan: " : "stitching refused: ") + e.what() +
               (sp.exit_code != 0 ? "\n" + sp.output : "");
    }
    return pp;
  };
  PlanPieces own;
  if (!lowered && (a.plan == "vendor" || (syn.contains("stitch") && syn["stitch"].value("pieces", json::array()).size() > 0))) {
    own = build_plan(a.plan == "vendor");
    if (!own.why.empty()) std::cerr << own.why << "\n";
  }
  json& pieces = own.pieces;
  const std::string stitch_why = own.why;
  // --plan auto: the vendor-call plan beside the module's own (built on a GPU only: it is an
  // alternative to time, and nothing to time without one).
  PlanPieces vend;
  if (a.plan == "auto" && !no_gpu && !stop_requested()) {
    vend = build_plan(true);
    auto nodes_of = [](const json& ps) {
      std::vector<json> v;
      for (const json& p : ps) v.push_back(p["nodes"]);
      return v;
    };
    if (!vend.pieces.empty() && !pieces.empty() && nodes_of(vend.pieces) == nodes_of(pieces))
      vend = PlanPieces{{}, {}, {}, "the vendor-call plan: its pieces are the module's own plan's"};
    if (vend.pieces.empty()) std::cerr << vend.why.substr(0, 300) << "; one plan only\n";
  }

  if (no_gpu) {
    const size_t built = search::computed_pieces(pieces);
    std::cerr << "ksol optimize: evaluation needs a GPU (" << hello.body.value("reason", std::string("no GPU"))
              << "); the module was traced" << (lowered ? ", lowered and its program compiled" : "")
              << (pieces.empty() ? "" : ", cut into " + std::to_string(built) + " DSL piece(s) that compile")
              << (built < pieces.size() ? " and " + std::to_string(pieces.size() - built) + " left as PyTorch calls (they do not build)" : "")
              << ", nothing was timed.\n";
    if (json_out) {
      // A piece that does not build has no kernel: it says why and that it stays PyTorch calls.
      json kernels = json::array();
      for (const json& p : pieces) {
        json k = {{"nodes", p["nodes"]}, {"family", p.value("family", "")}, {"kernel", p.value("kernel", "")}};
        if (p.value("keep", false)) k["keep"] = true, k["why"] = p.value("why", "");
        kernels.push_back(k);
      }
      std::cout << json{{"gpu", false}, {"reason", hello.body.value("reason", std::string("no GPU"))}, {"module", a.file},
                        {"precision", {{"mode", a.precision}}}, {"lowered", lowered},
                        {"family", lowered ? syn.value("family", std::string()) : std::string()}, {"pieces", kernels}}
                       .dump(2)
                << "\n";
    }
    return exit_status::no_gpu;
  }
  std::string gpu_name = hello.body.contains("device") && hello.body["device"].is_object() ? hello.body["device"].value("name", "") : "";
  if (a.emulate)
    std::cerr << "ksol optimize --emulate: candidates run on the CPU through ksol's CUDA emulator and the worker on the CPU; "
                 "their times are the emulator's, not a GPU's: a test of the flow, never a result\n";
  ModuleEvaluator ev(w, file, a.emulate ? "cpu" : "cuda", a.timeout, a.emulate ? std::nullopt : sol::datasheet_peaks(gpu_name), a.precision,
                     a.emulate);
  {
    // What eager's and torch.compile's times depend on besides the request and the problem file:
    // the GPU, the worker's PyTorch, CUDA, cuDNN, Triton, driver and environment (its hello), the
    // interpreter, and the worker's code (every file of the ksol_torch package). Without the
    // code's hash nothing is kept.
    std::string code;
    std::vector<std::string> files;
    std::error_code ec;
    for (auto it = fs::directory_iterator(source_root() + "/python/ksol_torch", ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".py") files.push_back(it->path().string());
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) code += fs::path(f).filename().string() + ":" + sha256_hex(read_file(f)) + "\n";
    ProcessResult which = run_process({py, "-c", "import sys; print(sys.executable)"}, 60);
    if (!code.empty())
      ev.keep_baselines_in(cache_dir() + "/module-baselines",
                           json{{"gpu", a.emulate ? std::string("cpu") : gpu_name}, {"torch", hello.body.value("torch", std::string("?"))},
                                {"versions", hello.body.value("versions", json::object())}, {"python", which.output}, {"code", code}}
                               .dump(),
                           a.fresh_baselines);
  }
  std::cerr << "precision: " << a.precision << " (eager, torch.compile and every candidate run under it)\n";
  install_stop_handlers();
  json doc = {{"run", 0}, {"gpu", {{"name", a.emulate ? std::string("none: the CPU emulator") : gpu_name}}}, {"agent", a.search.agent}, {"problem", file},
              {"precision", {{"mode", a.precision}}}, {"ksol", version_text()}};
  if (a.emulate) doc["emulated"] = true;
  std::string stem = fs::path(a.file).stem().string();
  // The stitched module of a plan's pieces: at their seed schedules first, then each piece
  // searched in turn within `share` of the search budget, the module evaluated whole for every
  // candidate; fills `item` (pieces, piece_search, stitched, kernelbench, kernels) and `kept`.
  // Returns the final module's time, 0 where it failed.
  auto stitched_search = [&](PlanPieces& pp, const std::map<std::string, search::Outcome>& base, double share, json& item,
                             std::vector<KeptProgram>& kept) -> double {
    json& pieces = pp.pieces;
    std::vector<Task>& piece_tasks = pp.tasks;
    std::vector<dsl::Program>& piece_progs = pp.progs;
    ev.forget_answer_kernels();  // another plan's module was profiled before this one
    // The stitched module: its pieces at their seed schedules, the kept ops as PyTorch calls.
    item["stop_reason"] = "stitched";
    item["candidates"] = 1;
    item["pieces"] = pieces;
    auto run = [&](const json& ps) {
      WorkerReply r = ev.stitched(ps);
      return search::StitchedRun{r.ok, r.ok ? r.body.value("result", json::object()) : json::object(), r.message, r.seconds};
    };
    search::StitchedRun seeds_run = run(pieces);
    double module_sol_us = seeds_run.ok ? ev.sol_us(seeds_run.result) : 0.0;
    search::Outcome first = search::stitched_outcome(seeds_run, "seeds", module_sol_us);
    // A module that fails a gate at its seed schedules: each of its pieces kept as PyTorch's
    // calls in turn (while another stays ksol's), the fastest of those that pass going on.
    if (!first.ok() && !stop_requested()) {
      search::KeptRescue kr = search::keep_a_failing_piece(
          pieces, first.error, run, [&](const json& result) { return ev.sol_us(result); }, [] { return stop_requested(); });
      if (!kr.tries.empty()) {
        item["seeds_rescue"] = {{"seeds_error", first.error.substr(0, 2000)}, {"tries", kr.tries}};
        for (const json& t : kr.tries)
          std::cerr << "piece " << t["piece"].get<size_t>() << " as PyTorch calls: "
                    << (t.contains("module_us") ? "the module passes, " + std::to_string(t["module_us"].get<double>()) + " us"
                                                : t.value("error", std::string()).substr(0, 300))
                    << "\n";
      }
      if (kr.ok) {
        pieces = kr.pieces;
        first = kr.outcome;
        module_sol_us = kr.sol_us;
        item["pieces"] = pieces;
      }
    }
    // Each piece searched in turn (the expert or random agent, the same loop and gates), the
    // module evaluated whole for every candidate, the other pieces at their best so far.
    json searched = json::array();
    double cur_us = first.ok() ? first.score_us() : 0.0;
    if (first.ok() && a.search.max_candidates > 1) {
      agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
      for (size_t i = 0; i < pieces.size() && !stop_requested(); ++i) {
        if (pieces[i].value("keep", false)) {  // not built, or failing: PyTorch's calls already
          searched.push_back({{"piece", i}, {"candidates", 0}, {"stop_reason", "kept as PyTorch calls"}, {"kept_as_pytorch", true}});
          continue;
        }
        // PyTorch's own calls of the piece's ops (cuBLAS, cuDNN, its elementwise kernels) are
        // a candidate too: the module timed whole with them in the piece's place. Where that
        // is faster than every schedule the search verifies, the piece stays PyTorch's. Not
        // offered where every other piece is kept already: that module is the forward itself.
        double keep_us = 0;
        json keep_rec;
        const json alt = search::keeping_piece(pieces, i);
        if (!alt.is_null()) {
          search::Outcome ko = search::stitched_outcome(run(alt), "keep", module_sol_us);
          keep_us = ko.ok() ? ko.score_us() : 0.0;
          keep_rec = ko.ok() ? json{{"module_us", keep_us}} : json{{"error", ko.error.substr(0, 500)}};
          std::cerr << "[piece " << i << "] its ops as PyTorch calls: "
                    << (ko.ok() ? "the module " + std::to_string(keep_us) + " us (" + std::to_string(cur_us) + " us with ksol's pieces so far)"
                                : ko.error.substr(0, 300))
                    << "\n";
        }
        // An agent per piece: the pieces' programs share a name, and random search keeps its
        // permutation by program name.
        std::unique_ptr<agents::Agent> agent = agents::make_agent(a.search.agent, k, a.search.seed + i);
        search::PieceEvaluator::Build build;
        if (a.emulate) build = [](const Task& t, const dsl::Program& p, const std::string&, std::string* why) { return host_library(t, p, why); };
        search::PieceEvaluator pe(pieces, i, run, base, build, module_sol_us, [&](const std::vector<json>& stitched) {
          std::vector<json> cands;
          for (const json& ps : stitched) cands.push_back({{"stitch", ps}});
          return ev.screen_batch(cands);
        });
        search::OptimizeOptions o = a.search;
        o.prune = 0;
        o.profile = false;
        o.target_sol = 0;  // the module's SOL is not split over its pieces
        if (o.budget_seconds > 0) o.budget_seconds *= share / static_cast<double>(pieces.size());
        o.progress = [i](const std::string& l) { std::cerr << "[piece " << i << "] " << l << "\n"; };
        search::OptimizeResult r = search::optimize(piece_tasks[i], piece_progs[i], pe, *agent, o);
        json rec = {{"piece", i}, {"candidates", r.trajectory.size()}, {"stop_reason", r.stop_reason}};
        const search::Attempt* b = r.best >= 0 ? &r.trajectory[r.best] : nullptr;
        if (b && b->outcome.ok() && b->index > 0 && b->outcome.score_us() < cur_us && pe.libraries().count(b->outcome.label)) {
          pieces[i] = pe.with_piece(pe.libraries().at(b->outcome.label), b->outcome.kernel)[i];
          pieces[i]["program"] = dsl::print_source(b->program);
          cur_us = b->outcome.score_us();
          rec["best"] = {{"kernel", b->outcome.kernel}, {"schedule", b->schedule}, {"module_us", cur_us}};
          kept.push_back({"piece-" + std::to_string(i), piece_tasks[i], b->program});
        }
        if (!keep_rec.is_null()) rec["pytorch"] = keep_rec;
        if (keep_us > 0 && keep_us < cur_us) {
          pieces[i] = alt[i];
          cur_us = keep_us;
          rec["kept_as_pytorch"] = true;
          std::erase_if(kept, [&](const KeptProgram& kp) { return kp.name == "piece-" + std::to_string(i); });
        }
        searched.push_back(rec);
      }
      item["pieces"] = pieces;
      item["candidates"] = 1 + [&] {
        size_t n = 0;
        for (auto& r : searched) n += r["candidates"].get<size_t>();
        return n;
      }();
    }
    item["piece_search"] = searched;
    // The answer's time: the final pieces evaluated once more, afresh.
    search::Outcome fin = searched.empty() ? first : search::stitched_outcome(run(pieces), "final", module_sol_us);
    const std::string status = fin.ok() ? "ok" : "failed";
    const double us = fin.ok() ? fin.score_us() : 0.0;
    item["stitched"] = {{"status", status}, {"median_us", us}, {"seeds_median_us", first.ok() ? first.score_us() : 0.0},
                        {"message", fin.ok() ? std::string("") : fin.error}};
    item["kernelbench"] = stop_requested() ? json{{"correct", false}, {"error", "not run: the run was stopped (a signal)"}}
                          : fin.ok()       ? ModuleEvaluator::kernelbench_in(ev.stitched(pieces, true))
                                           : json{{"correct", false}, {"error", "no stitched module passed ksol's gates"}};
    note_kernels(item, ev, stem, compile_noted);
    return us;
  };
  // The vendor-call plan's stitched module beside the answer so far (`answer_us`: the module's
  // time as answered, a baseline's or ksol's): where it is faster, its item is the answer (with
  // the module's own plan's summarised in it) and its programs are kept; else it is summarised
  // in `item` ("vendor_plan"). Returns whether it became the answer.
  auto try_vendor_plan = [&](json& item, std::vector<KeptProgram>& kept, const std::map<std::string, search::Outcome>& base,
                             double answer_us, double share) -> bool {
    std::string bname;
    double bus = 0;
    for (auto& [name, o] : base)
      if (o.ok() && (bname.empty() || o.score_us() < bus)) bname = name, bus = o.score_us();
    json v = {{"task", stem}, {"plan", "vendor"}, {"best_baseline", bname}};
    for (auto& [name, o] : base) v["baseline_us"][name] = o.ok() ? o.score_us() : 0.0;
    if (!ev.problem_screen().empty()) v["screen"] = ev.problem_screen();
    std::vector<KeptProgram> vkept;
    const double us = stitched_search(vend, base, share, v, vkept);
    const json& st = v.value("stitched", json::object());
    std::cerr << stem << ": the vendor-call plan (" << vend.pieces.size() << " piece(s) around the vendor calls): "
              << (us > 0 ? std::to_string(us) + " us" : "failed: " + st.value("message", std::string("?")).substr(0, 300))
              << ", the answer so far " << answer_us << " us\n";
    json summary = {{"status", us > 0 ? "ok" : "failed"}, {"median_us", us}, {"pieces", v.value("pieces", json::array())},
                    {"piece_search", v.value("piece_search", json::array())}, {"candidates", v.value("candidates", 0)}};
    for (const char* k : {"kernels", "kernel_us"})
      if (v.contains(k) && v[k].contains("ksol")) summary[k] = v[k]["ksol"];
    if (us > 0 && (answer_us <= 0 || us < answer_us) && bus > 0 && us < bus && !a.emulate) {
      v["use_baseline"] = false;
      v["speedup_vs_best_baseline"] = bus / us;
      v["reason"] = "";
      json own_plan = {{"stop_reason", item.value("stop_reason", std::string())}, {"answer_us", answer_us},
                       {"use_baseline", item.value("use_baseline", true)}};
      if (item.contains("reason")) own_plan["reason"] = item["reason"];
      v["own_plan"] = own_plan;
      item = v;
      kept = std::move(vkept);
      return true;
    }
    summary["reason"] = a.emulate ? "--emulate: the stitched module's time is the CPU emulator's, never a result"
                        : us > 0  ? "not faster than the answer (" + std::to_string(answer_us) + " us) or the best baseline"
                                  : "the stitched module failed: " + st.value("message", std::string("?")).substr(0, 2000);
    item["vendor_plan"] = summary;
    return false;
  };
  if (!lowered) {
    // Nothing to search: the answer is the faster of eager and torch.compile, timed here.
    Task t;
    t.sizes.push_back(SizeSet{"module", {}, {}, 1.0, false});
    auto base = ev.baselines(t);
    note_reused_baselines(ev.baselines_reused(), doc);
    doc["precision"] = ev.precision();
    json item = {{"task", stem}, {"stop_reason", "not_lowered"}, {"use_baseline", true}, {"reason", syn.value("reason", "")},
                 {"candidates", 0}, {"speedup_vs_best_baseline", 1.0}};
    if (!ev.problem_screen().empty()) item["screen"] = ev.problem_screen();
    item["kernelbench"] = {{"correct", false}, {"error", "not lowered: the faster baseline is returned"}};
    if (!stitch_why.empty()) item["reason"] = item["reason"].get<std::string>() + "; " + stitch_why;
    std::string best;
    double best_us = 0;
    for (auto& [name, o] : base)
      if (o.ok() && (best.empty() || o.score_us() < best_us)) best = name, best_us = o.score_us();
    item["best_baseline"] = best;
    for (auto& [name, o] : base) item["baseline_us"][name] = o.ok() ? o.score_us() : 0.0;
    note_kernels(item, ev, stem, compile_noted);
    // The pieces whose search found a faster schedule: kept beside the report whether or not the
    // stitched module beats the baselines, since each was verified inside the whole module.
    std::vector<KeptProgram> kept;
    if (!pieces.empty()) {
      const double us = stitched_search(own, base, vend.pieces.empty() ? 1.0 : 0.5, item, kept);
      const std::string status = us > 0 ? "ok" : "failed";
      std::cerr << stem << ": stitched (" << pieces.size() << " piece(s)): " << status
                << (status == "ok" ? ", " + std::to_string(us) + " us" : ": " + item["stitched"]["message"].get<std::string>()) << "\n";
      if (status == "ok" && us > 0 && !best.empty() && us < best_us && !a.emulate) {
        item["use_baseline"] = false;
        item["speedup_vs_best_baseline"] = best_us / us;
        item["reason"] = "";
        best = "stitched";
        best_us = us;
      } else {
        item["reason"] = a.emulate && status == "ok" ? "--emulate: the stitched module's time is the CPU emulator's, never a result"
                       : status == "ok" ? "the stitched module (" + std::to_string(us) + " us) is not faster than " + item["best_baseline"].get<std::string>()
                                        : "the stitched module failed: " + item["stitched"]["message"].get<std::string>();
      }
    }
    if (!vend.pieces.empty() && !stop_requested() && try_vendor_plan(item, kept, base, best.empty() ? 0.0 : best_us, pieces.empty() ? 1.0 : 0.5)) {
      best = "stitched (the vendor-call plan)";
      best_us = item["stitched"].value("median_us", 0.0);
    }
    doc["results"] = json::array({item});
    std::string dir = write_report(a, stem, doc, kept);
    std::cerr << "report: " << dir << "/report.html, report.md, results.json\n";
    choose_path(a, py, pypath, dir, doc, w);
    std::string fx_text = best.empty() ? std::string("neither baseline ran") : best + ", " + std::to_string(best_us) + " us";
    std::cout << (json_out ? doc.dump(2) : "result: " + answer_text(doc, fx_text) + "; precision " + precision_text(doc["precision"]))
              << "\n";
    if (!a.json_path.empty()) write_file_atomic(a.json_path, doc.dump(2));
    return best.empty() && chosen_path(doc) != "inductor" ? exit_status::error : exit_status::ok;
  }

  agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  std::unique_ptr<agents::Agent> agent = agents::make_agent(a.search.agent, k, a.search.seed);
  search::OptimizeOptions o = a.search;
  o.profile = false;
  o.progress = [](const std::string& l) { std::cerr << l << "\n"; };
  if (!vend.pieces.empty() && o.budget_seconds > 0) o.budget_seconds /= 2;  // the other half: the vendor-call plan's
  search::OptimizeResult r = search::optimize(*task, *seed, ev, *agent, o);
  note_reused_baselines(ev.baselines_reused(), doc);
  doc["precision"] = ev.precision();
  if (a.emulate) r.use_baseline = true;  // an emulated kernel's time is the CPU's: never a result
  json item = r.to_json();
  if (r.use_baseline)
    item["reason"] = a.emulate ? "--emulate: an emulated kernel's time is the CPU emulator's, never a result"
                     : r.best < 0 ? "no candidate passed ksol's gates"
                                  : "no verified kernel was faster than " + (r.best_baseline.empty() ? std::string("the baselines") : r.best_baseline);
  item["seed_program"] = syn["program"];
  // KernelBench's protocol beside ksol's, on the best verified program (none verified: not correct).
  if (stop_requested())
    item["kernelbench"] = {{"correct", false}, {"error", "not run: the run was stopped (a signal)"}};
  else if (const search::Attempt* b = r.best_attempt(); b && b->outcome.ok())
    item["kernelbench"] = ev.kernelbench_of(*task, b->program);
  else
    item["kernelbench"] = {{"correct", false}, {"error", "no candidate passed ksol's gates"}};
  for (auto& [name, bo] : r.baselines) item["baseline_us"][name] = bo.ok() ? bo.score_us() : 0.0;
  if (!ev.problem_screen().empty()) item["screen"] = ev.problem_screen();
  note_kernels(item, ev, stem, compile_noted);
  std::vector<KeptProgram> kept;
  if (const search::Attempt* b = r.best_attempt(); b && !r.use_baseline) kept.push_back({"best", *task, b->program});
  bool vendor_answer = false;
  if (!vend.pieces.empty() && !stop_requested()) {
    double answer_us = 0;
    if (const search::Attempt* b = r.best_attempt(); b && !r.use_baseline && b->outcome.ok())
      answer_us = b->outcome.score_us();
    else if (auto it = r.baselines.find(r.best_baseline); it != r.baselines.end() && it->second.ok())
      answer_us = it->second.score_us();
    vendor_answer = try_vendor_plan(item, kept, r.baselines, answer_us, 0.5);
  }
  doc["results"] = json::array({item});
  std::string dir = write_report(a, stem, doc, kept);
  choose_path(a, py, pypath, dir, doc, w);
  if (!a.json_path.empty()) write_file_atomic(a.json_path, doc.dump(2));
  if (json_out) std::cout << doc.dump(2) << "\n";
  else
    std::cout << stem << ": "
              << answer_text(doc, vendor_answer ? "the vendor-call plan's stitched module " +
                                                      std::to_string(item["stitched"].value("median_us", 0.0)) + " us, " +
                                                      std::to_string(item.value("speedup_vs_best_baseline", 0.0)) + "x vs " +
                                                      item.value("best_baseline", std::string())
                                  : r.use_baseline ? "baseline " + r.best_baseline + " returned (nothing faster verified)"
                                                   : "c" + std::to_string(r.best) + " " + std::to_string(r.speedup_vs_baseline) + "x vs " +
                                                         r.best_baseline)
              << "; precision " << precision_text(doc["precision"]) << "; report " << dir << "/report.html\n";
  return stop_requested() ? 128 + (stop_signal() > 0 ? stop_signal() : 2) : exit_status::ok;
}

}  // namespace ksol::cli
