// ksol eval-module: candidates for a PyTorch problem (KernelBench format) through the Python
// evaluation worker (python/ksol_torch/worker.py), which the coordinator drives over the same
// line protocol as ksol-worker. A candidate is a ModelNew file (.py), a library built to ksol's
// ABI (.so), CUDA source exporting ksol_run (.cu), compiled here behind gate 1, or a DSL program
// (.ksol) generated and compiled for the tensors and dims of the task named by --task.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "codegen/codegen.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "coord/worker_client.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "search/optimize.h"
#include "sol/peaks.h"
#include "task/task.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {
namespace {

struct EvalModuleArgs {
  std::string problem;
  std::vector<std::string> candidates;
  std::vector<int64_t> dims;
  std::vector<uint64_t> seeds = {1, 2, 3};
  std::string device;
  std::string json_path;
  std::string task;  // binds a .ksol candidate's parameters and dims
  std::string precision = "default";  // the worker's precision mode, baselines and candidates alike
  bool no_baselines = false;
  double timeout = 600;
};

// A result's precision as a table cell: the mode, and the arithmetic its bound allowed where it
// differs ("default: tf32" for a convolution under PyTorch's defaults on a GPU).
std::string precision_cell(const json& res, const std::string& mode) {
  if (!res.contains("precision") || !res["precision"].is_object()) return mode;
  const json& p = res["precision"];
  std::string m = p.value("mode", mode), arith = p.value("arithmetic", std::string("fp32"));
  return m + ": " + arith;
}

std::string us(const json& j, const char* key = "median_us") {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", j[key].get<double>());
  return b;
}

// Candidates that only run on a GPU: CUDA source and DSL programs (a .so built to the ABI, or a
// ModelNew file, may run on the CPU device).
bool needs_gpu(const std::string& candidate) {
  std::string ext = fs::path(candidate).extension().string();
  return ext == ".cu" || ext == ".ksol";
}

int run_eval_module(const EvalModuleArgs& a, bool json_out) {
  if (!fs::exists(a.problem)) throw UsageError(a.problem + ": no such file");
  for (const std::string& c : a.candidates) {
    std::string ext = fs::path(c).extension().string();
    if (ext != ".py" && ext != ".so" && ext != ".cu" && ext != ".ksol")
      throw UsageError(c + ": a candidate is a ModelNew file (.py), CUDA exporting ksol_run (.cu), a DSL program (.ksol, with --task) or a built library (.so)");
    if (ext == ".ksol" && a.task.empty()) throw UsageError(c + ": a DSL candidate needs --task, whose tensors and dims it is generated for");
  }
  std::string why, py = find_torch_python(&why);
  if (py.empty()) {
    std::cerr << "error: " << why << "\n";
    return exit_status::error;
  }
  std::string pypath = ksol_python_path();
  WorkerClient w({"env", "PYTHONPATH=" + pypath, py, "-m", "ksol_torch", "worker"});
  WorkerReply hello = w.call({{"op", "hello"}}, 120);
  if (!hello.ok) {
    std::cerr << "error: the Python worker did not start: " << hello.message << "\n";
    return exit_status::error;
  }
  bool gpu = hello.body.value("gpu", false);
  const bool gpu_asked = std::any_of(a.candidates.begin(), a.candidates.end(), needs_gpu);
  if (!gpu && gpu_asked)
    print_no_gpu_notice("eval-module", hello.body.value("reason", std::string("no GPU")),
                        "CUDA and DSL candidates are compiled, not run (exit status 77 when nothing else failed)");
  std::string device = a.device.empty() ? (gpu ? "cuda" : "cpu") : a.device;
  std::cerr << "Python worker: PyTorch " << hello.body.value("torch", "?") << ", device " << device
            << (gpu ? "" : " (" + hello.body.value("reason", std::string("no GPU")) + ")") << ", precision " << a.precision << "\n";

  json results = json::array();
  std::vector<std::vector<std::string>> rows = {
      {"candidate", "status", "precision", "median us", "%HBM SOL", "eager us", "compile us", "vs eager", "vs compile", "worst err/tol", "detail"}};
  // HBM SOL: the module's compulsory bytes (from the trace) at the GPU's datasheet bandwidth.
  double hbm = 0;
  if (gpu && hello.body.contains("device") && hello.body["device"].is_object())
    if (auto pk = sol::datasheet_peaks(hello.body["device"].value("name", ""))) hbm = pk->hbm_bytes_per_s;
  int failed = 0;
  for (const std::string& c : a.candidates) {
    json req = {{"op", "eval"}, {"problem", fs::absolute(a.problem).string()}, {"device", device}, {"seeds", a.seeds},
                {"baselines", !a.no_baselines}, {"precision", a.precision}};
    std::string ext = fs::path(c).extension().string();
    if (ext == ".py") {
      req["candidate"] = fs::absolute(c).string();
    } else if (ext == ".so" || ext == ".cu" || ext == ".ksol") {
      std::string so = fs::absolute(c).string();
      if (ext == ".cu" || ext == ".ksol") {
        CompileJob job;
        if (ext == ".ksol") {
          Task t = load_task(task_argument("--task", a.task));
          dsl::Program prog = dsl::parse_program(read_file(c), c);
          codegen::Support sup = codegen::can_implement(prog, search::binding_of(t));
          if (!sup.ok) throw std::runtime_error(c + ": unsupported for task " + t.name + ": " + sup.reason);
          job = codegen::compile_job(t, prog, c);
          // The table the worker will pass must have the task's shapes at these dims.
          if (a.dims.size() != t.dims.size())
            throw UsageError("--dims: task " + t.name + " has " + std::to_string(t.dims.size()) + " dims (" + join(t.dims, ", ") + ")");
          SizeSet sz;
          for (size_t i = 0; i < t.dims.size(); ++i) sz.dims[t.dims[i]] = static_cast<double>(a.dims[i]);
          json shapes = json::array();
          for (auto& ts : t.tensors) shapes.push_back({{"name", ts.name}, {"shape", t.shape_of(ts, sz)}});
          req["expect_shapes"] = shapes;
        } else {
          job.source_path = c;
          job.source_text = read_file(c);
        }
        CompileResult cr = compile(job);
        if (!cr.ok) {
          ++failed;
          rows.push_back({c, "failed", a.precision, "-", "-", "-", "-", "-", "-", "-", cr.stage + ": " + cr.message.substr(0, 200)});
          results.push_back({{"candidate", c}, {"status", "failed"}, {"failed_gate", cr.stage}, {"message", cr.message},
                             {"precision", {{"mode", a.precision}}}});
          continue;
        }
        if (device == "cpu") {
          rows.push_back({c, "compiled", a.precision, "-", "-", "-", "-", "-", "-", "-", "a CUDA candidate needs a GPU: compiled, not run"});
          results.push_back({{"candidate", c}, {"status", "no_gpu"}, {"message", "compiled, not run: no GPU"}, {"precision", {{"mode", a.precision}}}});
          continue;
        }
        so = cr.so_path;
      }
      req["candidate_so"] = so;
      req["dims"] = a.dims;
    }
    std::cerr << "evaluating " << c << " ...\n";
    WorkerReply r = w.call(req, a.timeout);
    json res;
    if (!r.ok) {
      res = {{"status", "failed"}, {"failed_gate", "worker"}, {"error_class", r.failure.empty() ? "worker_error" : r.failure},
             {"message", r.message.empty() ? r.body.value("error", std::string("the worker failed")) : r.message}};
    } else {
      res = r.body["result"];
    }
    res["candidate"] = c;
    if (!res.contains("precision")) res["precision"] = {{"mode", a.precision}};
    std::string status = res.value("status", "failed");
    if (status != "ok") ++failed;
    const json& b = res.contains("baselines") ? res["baselines"] : json::object();
    auto ratio = [&](const char* name) {
      if (!b.contains(name) || !b[name].contains("speedup")) return std::string("-");
      char s[32];
      std::snprintf(s, sizeof s, "%.2fx", b[name]["speedup"].get<double>());
      return std::string(s);
    };
    std::string worst = "-";
    if (res.contains("correctness") && res["correctness"].contains("worst_error_over_tolerance")) {
      char s[32];
      std::snprintf(s, sizeof s, "%.3g", res["correctness"]["worst_error_over_tolerance"].get<double>());
      worst = s;
    }
    std::string detail = status == "ok" ? "" : res.value("failed_gate", "") + "/" + res.value("error_class", "") + ": " + res.value("message", "");
    if (b.contains("compile") && b["compile"].contains("error")) detail += (detail.empty() ? "" : "; ") + std::string("compile: ") + b["compile"]["error"].get<std::string>();
    std::string pct = "-";
    if (hbm > 0 && res.value("bytes", 0.0) > 0 && res.contains("timing") && res["timing"].value("median_us", 0.0) > 0) {
      double sol_us = res["bytes"].get<double>() / hbm * 1e6;
      res["hbm_sol_us"] = sol_us;
      char b2[32];
      std::snprintf(b2, sizeof b2, "%.1f%%", 100.0 * sol_us / res["timing"]["median_us"].get<double>());
      pct = b2;
    }
    results.push_back(res);
    rows.push_back({c, status, precision_cell(res, a.precision), res.contains("timing") ? us(res["timing"]) : "-", pct, b.contains("eager") ? us(b["eager"]) : "-",
                    b.contains("compile") ? us(b["compile"]) : "-", ratio("eager"), ratio("compile"), worst, detail.substr(0, 160)});
  }
  json doc = {{"problem", a.problem}, {"device", device}, {"torch", hello.body.value("torch", "")}, {"precision", a.precision},
              {"results", results}};
  if (!a.json_path.empty()) write_file_atomic(a.json_path, doc.dump(2) + "\n");
  if (json_out) {
    std::cout << doc.dump(2) << "\n";
  } else {
    print_columns(std::cout, rows);
    std::cout << "vs eager / vs compile: the baseline's median over the candidate's, timed by the same timer on the same inputs\n"
              << "precision: the mode (--precision " << a.precision << ") eager, torch.compile and the candidate all ran under, "
              << "and the arithmetic the bound allowed the module's ops (fp32 2^-24, tf32 2^-11, bf16 2^-8)\n";
  }
  if (failed) return exit_status::error;
  return !gpu && gpu_asked ? exit_status::no_gpu : exit_status::ok;
}

}  // namespace

void add_eval_module_command(CLI::App& app, const bool& json_out) {
  auto a = std::make_shared<EvalModuleArgs>();
  auto* cmd = app.add_subcommand("eval-module",
                                 "verify and time candidates for a PyTorch problem (KernelBench format) beside eager and torch.compile (docs/TORCH.md)");
  cmd->add_option("problem", a->problem, "the problem file (Model, get_inputs, get_init_inputs)")->required();
  cmd->add_option("--candidate", a->candidates, "a ModelNew file (.py), CUDA exporting ksol_run (.cu), a DSL program (.ksol, with --task) or a built library (.so); repeat for several")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--task", a->task, "the task a .ksol candidate is generated for (its tensor order must be the module's: inputs, parameters, outputs)");
  cmd->add_option("--dims", a->dims, "dims passed to an ABI candidate's ksol_run, in order (comma-separated)")->delimiter(',')->check(positive_integer());
  cmd->add_option("--seeds", a->seeds, "correctness seeds (at least 3)")->delimiter(',')->capture_default_str()->check(unsigned_integer());
  cmd->add_option("--device", a->device, "cuda or cpu (default: cuda where PyTorch sees a GPU)");
  cmd->add_option("--precision", a->precision, kModulePrecisionHelp)->capture_default_str()->check(module_precision_check());
  cmd->add_flag("--no-baselines", a->no_baselines, "do not time eager and torch.compile");
  cmd->add_option("--json-out", a->json_path, "also write the results as JSON to this file");
  cmd->add_option("--timeout", a->timeout, "seconds per candidate")->capture_default_str()->check(positive_number());
  cmd->callback([a, &json_out]() {
    if (a->seeds.size() < 3) throw CLI::ValidationError("--seeds", "the correctness gate needs at least 3 seeds");
    finish_command("eval-module", [&] { return run_eval_module(*a, json_out); });
  });
}

}  // namespace ksol::cli
