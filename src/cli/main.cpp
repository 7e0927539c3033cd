// ksol: the coordinator and CLI. It never runs candidate code; ksol-worker does.
#include <CLI/CLI.hpp>

#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "compile/compiler.h"
#include "coord/session.h"
#include "core/defences.h"
#include "core/stats.h"
#include "core/util.h"
#include "codegen/codegen.h"
#include "codegen/job.h"
#include "cli/commands.h"
#include "dsl/ir.h"
#include "mpi/cluster.h"
#include "search/optimize.h"
#include "sol/sol.h"
#include "task/inputs.h"
#include "task/task.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace ksol {
namespace {

std::string fmt(double v, int prec = 1) {
  if (v <= 0 || !std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::string fmt_us(double us) {
  if (us <= 0) return "-";
  char b[64];
  if (us >= 1e5) std::snprintf(b, sizeof b, "%.1f ms", us / 1e3);
  else if (us >= 100) std::snprintf(b, sizeof b, "%.0f us", us);
  else std::snprintf(b, sizeof b, "%.2f us", us);
  return b;
}

// A plain text table with columns sized to their contents.
struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  void print(std::ostream& o) const {
    std::vector<size_t> w(head.size());
    for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
    for (auto& r : rows)
      for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
    auto line = [&](const std::vector<std::string>& r) {
      for (size_t i = 0; i < r.size(); ++i) o << (i ? "  " : "") << r[i] << std::string(w[i] - r[i].size(), ' ');
      o << "\n";
    };
    line(head);
    std::vector<std::string> dash;
    for (size_t x : w) dash.push_back(std::string(x, '-'));
    line(dash);
    for (auto& r : rows) line(r);
  }
};

json outcome_json(const Task& t, const CandidateOutcome& c) {
  json sizes = json::array();
  for (auto& s : c.sizes) {
    json j = {{"size", s.size}, {"hidden", s.hidden}, {"status", to_string(s.status)}, {"median_us", s.median_us},
              {"ci_low_us", s.ci_low_us}, {"ci_high_us", s.ci_high_us}, {"sol_us", s.sol_us}, {"pct_sol", s.pct_sol * 100},
              {"headroom", s.headroom}, {"bound", s.bound}, {"evaluation_id", s.evaluation_id}};
    if (s.failed_gate != Gate::none) j["failed_gate"] = to_string(s.failed_gate);
    if (!s.error_class.empty()) j["error_class"] = s.error_class;
    if (!s.message.empty()) j["message"] = s.message;
    if (!s.raw.is_null()) j["result"] = s.raw;
    sizes.push_back(j);
  }
  return {{"task", t.name}, {"candidate", c.label}, {"compiled", c.compiled.ok}, {"compile_seconds", c.compiled.seconds},
          {"cache_hit", c.compiled.cache_hit}, {"compile_stage", c.compiled.stage}, {"compile_message", c.compiled.message},
          {"sizes", sizes}};
}

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!trim(x).empty()) out.push_back(trim(x));
  return out;
}

struct Common {
  std::string store = default_store_path();
  std::string worker;
  std::string assume_gpu = "NVIDIA H200";
  bool json_out = false;
  std::optional<double> warmup;  // seconds of warm-up calls before sampling (TimingConfig::warmup_seconds)
  // The TimingConfig overrides these options ask for (null: the worker's defaults).
  nlohmann::json timing() const {
    nlohmann::json t;
    if (warmup) t["warmup_seconds"] = *warmup;
    return t;
  }
};

// A command that records nothing (sol, device, refcheck) opens no store, so that it creates no
// ksol.db.
Session::Options session_options(const Common& c, bool writes_store) {
  Session::Options o;
  if (writes_store) o.store_path = c.store;
  if (!c.worker.empty()) o.worker_argv = {c.worker};
  o.assume_gpu = c.assume_gpu;
  return o;
}

std::string command_line(int argc, char** argv) {
  std::vector<std::string> a;
  for (int i = 0; i < argc; ++i) a.push_back(shell_quote(argv[i]));
  return join(a, " ");
}

void print_outcome_rows(const Task& t, const CandidateOutcome& c, Table* tab, const std::map<std::string, double>* base) {
  for (auto& s : c.sizes) {
    std::string vs = "-";
    if (base && base->count(s.size) && s.median_us > 0) vs = fmt(base->at(s.size) / s.median_us, 2) + "x";
    // The SM clock fell below its maximum while samples were taken (power or thermal limit):
    // the median is real but belongs to that clock, and repeats may differ by more than the CI.
    // Unsteady: sampling ran out of time before the last quarter's median agreed with the rest's.
    bool timed = s.raw.is_object() && s.raw.contains("timing") && s.raw["timing"].is_object();
    std::vector<std::string> marks;
    if (timed && s.raw["timing"].value("throttled", false)) marks.push_back("throttled");
    if (timed && !s.raw["timing"].value("steady", true)) marks.push_back("unsteady");
    std::string status = to_string(s.status) + (marks.empty() ? "" : " (" + join(marks, ", ") + ")");
    tab->rows.push_back({t.name, c.label, s.size + (s.hidden ? "*" : ""), status, fmt_us(s.median_us),
                         s.median_us > 0 ? "[" + fmt(s.ci_low_us, 2) + ", " + fmt(s.ci_high_us, 2) + "]" : "-",
                         fmt_us(s.sol_us), s.median_us > 0 ? fmt(s.pct_sol * 100, 1) + "%" : "-", s.bound, vs});
  }
}

Table result_table() {
  return Table{{"task", "candidate", "size", "status", "median", "95% CI (us)", "SOL", "%SOL", "bound", "speedup"}, {}};
}

void print_failures(const std::vector<std::pair<std::string, const CandidateOutcome*>>& all) {
  for (auto& [name, c] : all) {
    if (!c->compiled.ok) {
      std::cerr << "\n" << name << " / " << c->label << ": " << c->compiled.stage << " gate failed:\n" << c->compiled.message << "\n";
      continue;
    }
    for (auto& s : c->sizes)
      if (s.status != Status::ok && s.status != Status::skipped && s.status != Status::no_gpu)
        std::cerr << name << " / " << c->label << " / " << s.size << ": " << to_string(s.status) << " at " << to_string(s.failed_gate) << " ["
                  << s.error_class << "]: " << s.message << "\n";
  }
}

// A DSL program becomes CUDA bound to the task's tensor and dim order; a schedule the family
// cannot implement is refused here, before any compiling, with the reason.
CompileJob dsl_job(const Task& t, const std::string& path) {
  CompileJob j = codegen::compile_job(t, dsl::parse_program(read_file(path), path), path);
  j.original = read_file(path);  // what the user wrote, comments included
  return j;
}

// --shape NAME:D=V,D=V,...: a size of the user's for this run (every dim of the task, positive
// integers), evaluated like the task's own visible sizes.
SizeSet parse_shape(const Task& t, const std::string& spec) {
  auto fail = [&](const std::string& m) { throw cli::UsageError("--shape '" + spec + "': " + m); };
  size_t colon = spec.find(':');
  if (colon == std::string::npos || colon == 0) fail("expected NAME:" + join(t.dims, "=V,") + "=V");
  SizeSet sz;
  sz.name = spec.substr(0, colon);
  for (char ch : sz.name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') fail("a size name is letters, digits and '_'");
  if (t.find_size(sz.name)) fail("task " + t.name + " already has a size '" + sz.name + "'");
  for (const std::string& kv : split_csv(spec.substr(colon + 1))) {
    size_t eq = kv.find('=');
    std::string d = kv.substr(0, eq);
    if (eq == std::string::npos || std::find(t.dims.begin(), t.dims.end(), d) == t.dims.end())
      fail("'" + kv + "' is not DIM=VALUE for a dim of " + t.name + " (" + join(t.dims, ", ") + ")");
    std::string v = kv.substr(eq + 1);
    if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) <= 0)
      fail("'" + kv + "': the value must be a positive integer");
    if (sz.dims.count(d)) fail("dim " + d + " given twice");
    sz.dims[d] = static_cast<double>(std::stoll(v));
  }
  for (auto& d : t.dims)
    if (!sz.dims.count(d)) fail("dim " + d + " is missing");
  return sz;
}

// What eval's arguments name in its task, checked before anything runs (usage errors, each with
// the names there are or the nearest one).
void check_eval_arguments(const Task& t, const std::vector<std::string>& defence_off, const std::string& sizes, const std::string& compare) {
  for (const std::string& d : defence_off)
    if (std::find(defence_names().begin(), defence_names().end(), d) == defence_names().end()) {
      std::string near = cli::did_you_mean(d, defence_names());
      throw cli::UsageError("--defence-off '" + d + "': no such defence" + (near.empty() ? " (" + join(defence_names(), ", ") + ")" : near));
    }
  std::vector<std::string> size_names;
  for (const SizeSet& sz : t.sizes) size_names.push_back(sz.name);
  for (const std::string& name : split_csv(sizes))
    if (!t.find_size(name)) {
      std::string near = cli::did_you_mean(name, size_names);
      throw cli::UsageError("--sizes '" + name + "': task " + t.name + " has no such size" +
                            (near.empty() ? " (its sizes: " + join(size_names, ", ") + ")" : near));
    }
  if (compare == "all" || compare == "none") return;
  std::vector<std::string> baselines;
  for (const BaselineSpec& b : t.baselines) baselines.push_back(b.name);
  for (const std::string& name : split_csv(compare))
    if (std::find(baselines.begin(), baselines.end(), name) == baselines.end())
      throw cli::UsageError("--compare '" + name + "': task " + t.name + " has no such baseline (its baselines: " + join(baselines, ", ") +
                            "; or all, none)");
}

int cmd_eval(const Common& c, const std::string& task_name, const std::vector<std::string>& cands, const std::string& sizes,
             const std::vector<std::string>& defence_off, std::optional<uint64_t> seed, bool no_time,
             const std::string& compare, double timeout, const std::string& cmdline, const std::string& function,
             bool compile_only, const std::vector<std::string>& shapes, bool baselines_first) {
  Task t = load_task(cli::task_argument("--task", task_name));
  std::string sizes_with_shapes = sizes;
  for (auto& sh : shapes) {
    t.sizes.push_back(parse_shape(t, sh));
    // Named shapes are evaluated; with --sizes too, both lists are.
    if (!sizes.empty()) sizes_with_shapes += "," + t.sizes.back().name;
  }
  if (sizes.empty() && !shapes.empty())
    for (size_t i = t.sizes.size() - shapes.size(); i < t.sizes.size(); ++i)
      sizes_with_shapes += (sizes_with_shapes.empty() ? "" : ",") + t.sizes[i].name;
  check_eval_arguments(t, defence_off, sizes, compare);
  const std::vector<std::string> wanted = split_csv(compare);
  Session s(session_options(c, true));
  // GPU work was asked for: without a GPU that is said first, then everything up to the launch
  // is still done (gate 1, compiling, the correctness set-up).
  const bool gpu = compile_only || s.has_gpu();
  if (!gpu)
    cli::print_no_gpu_notice("eval", s.gpu_reason(),
                             "nothing can be timed; compiling and checking every candidate up to the launch instead (exit status 77 "
                             "when they all compile, 1 otherwise)");
  s.begin_run(cmdline, {{"defences_off", defence_off}});
  EvalOptions o;
  o.sizes = split_csv(sizes_with_shapes);
  o.defences_off = {defence_off.begin(), defence_off.end()};
  o.seed = seed;
  o.time = !no_time;
  o.timeout_s = timeout;
  o.timing = c.timing();
  if (!defence_off.empty())
    std::cerr << "warning: defences switched off (" << join(defence_off, ", ") << "): these results are not to be trusted\n";

  // Gate 1 and compilation for every candidate first, in parallel; then one worker runs them all.
  std::vector<CompileJob> jobs;
  for (auto& cand : cands) {
    CompileJob job = fs::path(cand).extension() == ".ksol" ? dsl_job(t, cand) : candidate_job(t, cand);
    if (!function.empty()) {
      BaselineSpec b{fs::path(cand).filename().string(), fs::absolute(cand).string(), "user", {}, function, {}};
      for (auto& bl : t.baselines) b.libs.insert(b.libs.end(), bl.libs.begin(), bl.libs.end());
      job = baseline_job(t, b);
      job.trusted = false;  // a candidate, even when it is the user's own function
      job.language = "c_function";
      job.original = read_file(cand);
    }
    if (o.defences_off.count("static")) job.static_gate = false;
    jobs.push_back(job);
  }
  auto tc = std::chrono::steady_clock::now();
  std::vector<CompileResult> compiled = compile_all(jobs);
  double compile_s = seconds_since(tc);
  if (compile_only) {
    int bad = 0;
    json rows = json::array();
    for (size_t i = 0; i < cands.size(); ++i) {
      const CompileResult& r = compiled[i];
      if (c.json_out)
        rows.push_back({{"candidate", cands[i]}, {"compiled", r.ok}, {"cache_hit", r.cache_hit}, {"compile_seconds", r.seconds},
                        {"compile_stage", r.stage}, {"compile_message", r.message}});
      else
        std::cout << cands[i] << ": " << (r.ok ? (r.cache_hit ? "cached" : "compiled") : "failed at " + r.stage) << " (" << fmt(r.seconds, 2) << " s)\n";
      if (!r.ok) ++bad, std::cerr << r.message << "\n";
    }
    Session::References refs = s.compile_references(t);
    if (!refs.cpu.ok) ++bad, std::cerr << refs.cpu.message << "\n";
    s.finish_run("compiled");
    if (c.json_out)
      std::cout << json{{"run", s.run_id()}, {"task", t.name}, {"candidates", rows}, {"reference_compiled", refs.cpu.ok}}.dump(2) << "\n";
    return bad ? cli::exit_status::error : cli::exit_status::ok;
  }
  std::vector<CandidateOutcome> outs;
  double eval_s = 0;
  auto run_candidates = [&] {
    auto te = std::chrono::steady_clock::now();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (cands.size() > 1) std::cerr << "[" << i + 1 << "/" << cands.size() << "] " << cands[i] << "\n";
      outs.push_back(s.evaluate(t, jobs[i], fs::path(cands[i]).filename().string(), "file:" + fs::absolute(cands[i]).string(), o, &compiled[i]));
    }
    eval_s = seconds_since(te);
  };

  // Baselines timed in the same run, for the speedup column.
  std::vector<CandidateOutcome> bases;
  std::map<std::string, double> best_base;
  auto run_baselines = [&] {
    for (auto& b : t.baselines) {
      if (compare == "none") break;
      if (compare != "all" && std::find(wanted.begin(), wanted.end(), b.name) == wanted.end()) continue;
      EvalOptions bo = o;
      bo.defences_off.clear();
      bases.push_back(s.evaluate(t, baseline_job(t, b), "baseline:" + b.name, "baseline:" + b.name, bo));
      for (auto& so : bases.back().sizes)
        if (so.status == Status::ok && so.median_us > 0 && (!best_base.count(so.size) || so.median_us < best_base[so.size]))
          best_base[so.size] = so.median_us;
    }
  };
  // The order is the user's to swap, so a comparison can be checked both ways (the first-timed
  // kernel once won at 8192^3 through the timing gate's stopping rule, since fixed: docs/HARNESS.md).
  if (baselines_first) run_baselines(), run_candidates();
  else run_candidates(), run_baselines();
  const CandidateOutcome& co = outs[0];
  s.finish_run("finished");

  if (c.json_out) {
    json j = {{"run", s.run_id()}, {"gpu", s.device()}, {"peaks", s.peaks()}, {"candidate", outcome_json(t, co)},
              {"compile_seconds", compile_s}, {"evaluate_seconds", eval_s}};
    j["candidates"] = json::array();
    for (auto& x : outs) j["candidates"].push_back(outcome_json(t, x));
    j["baselines"] = json::array();
    for (auto& b : bases) j["baselines"].push_back(outcome_json(t, b));
    std::cout << j.dump(2) << "\n";
  } else {
    Table tab = result_table();
    for (auto& x : outs) print_outcome_rows(t, x, &tab, &best_base);
    for (auto& b : bases) print_outcome_rows(t, b, &tab, nullptr);
    std::cout << "GPU: " << (gpu ? s.device().value("name", "?") : "none (SOL assumes " + s.peaks().name + ")") << "; run " << s.run_id()
              << " in " << c.store << "; * = hidden size; speedup = best baseline / candidate\n";
    tab.print(std::cout);
    std::cout << outs.size() << " candidate(s): compiled in " << fmt(compile_s, 2) << " s, evaluated in " << fmt(eval_s, 2) << " s\n";
    std::vector<std::pair<std::string, const CandidateOutcome*>> all;
    for (auto& x : outs) all.push_back({t.name, &x});
    for (auto& b : bases) all.push_back({t.name, &b});
    print_failures(all);
  }
  for (auto& x : outs)
    if (!x.all_ok() && !(x.compiled.ok && !gpu)) return cli::exit_status::error;
  return gpu ? cli::exit_status::ok : cli::exit_status::no_gpu;
}

int cmd_sol(const Common& c, const std::string& task_name) {
  Task t = load_task(cli::task_argument("--task", task_name));
  Session s(session_options(c, false));
  bool gpu = s.has_gpu();
  Table tab{{"size", "flops", "bytes", "T_flops", "T_bytes", "T_sol", "bound"}, {}};
  json rows = json::array();
  auto unit = sol::parse_math_unit(t.math).value_or(sol::MathUnit::fma);
  auto prec = sol::parse_precision(t.precision).value_or(sol::Precision::fp32);
  for (auto& sz : t.sizes) {
    sol::SolEstimate e = sol::estimate(t.flops_at(sz), t.bytes_at(sz), unit, prec, s.peaks());
    char f[32], b[32];
    std::snprintf(f, sizeof f, "%.3g", t.flops_at(sz));
    std::snprintf(b, sizeof b, "%.3g", t.bytes_at(sz));
    tab.rows.push_back({sz.name + (sz.hidden ? "*" : ""), f, b, fmt_us(e.t_flops_s * 1e6), fmt_us(e.t_bytes_s * 1e6),
                        fmt_us(e.t_sol_s * 1e6), e.bound});
    rows.push_back({{"size", sz.name}, {"hidden", sz.hidden}, {"flops", t.flops_at(sz)}, {"bytes", t.bytes_at(sz)},
                    {"t_flops_us", e.t_flops_s * 1e6}, {"t_bytes_us", e.t_bytes_s * 1e6}, {"t_sol_us", e.t_sol_s * 1e6},
                    {"bound", e.bound}, {"peak_flops", e.peak_flops_per_s}, {"bandwidth", e.bytes_per_s}});
  }
  if (c.json_out) {
    std::cout << json{{"task", t.name}, {"peaks", s.peaks()}, {"sizes", rows}}.dump(2) << "\n";
    return cli::exit_status::ok;
  }
  std::cout << t.name << " (" << t.precision << ", math " << t.math << ") on " << s.peaks().name << (gpu ? "" : " (assumed: no GPU here)")
            << "; peaks from " << s.peaks().source << "\n";
  tab.print(std::cout);
  return cli::exit_status::ok;
}

// `ksol device` answers "no GPU" as a result (exit status 0); `device calibrate` was asked to
// measure one (77 without). The store is opened only to record a calibration that was made.
int cmd_device(const Common& c, bool calibrate) {
  Session s(session_options(c, false));
  if (!s.has_gpu()) {
    if (calibrate) cli::print_no_gpu_notice("device calibrate", s.gpu_reason(), "nothing was measured (exit status 77)");
    if (c.json_out)
      std::cout << json{{"gpu", false}, {"reason", s.gpu_reason()}, {"assumed_peaks", s.peaks()}}.dump(2) << "\n";
    else if (!calibrate)
      std::cout << "no GPU: " << s.gpu_reason() << "\nSOL assumes " << s.peaks().name << ": " << json(s.peaks()).dump() << "\n";
    return calibrate ? cli::exit_status::no_gpu : cli::exit_status::ok;
  }
  if (!calibrate) {
    std::cout << (c.json_out ? json{{"device", s.device()}, {"peaks", s.peaks()}}.dump(2) : s.device().dump(2)) << "\n";
    if (!c.json_out) std::cout << "peaks (" << s.peaks().source << "): " << json(s.peaks()).dump() << "\n";
    return cli::exit_status::ok;
  }
  std::cerr << "calibrating " << s.device().value("name", "?") << " (copy bandwidth, FMA rates, cuBLAS GEMM rates)...\n";
  WorkerReply r = s.worker().call({{"op", "calibrate"}}, 900);
  if (!r.ok) throw std::runtime_error("calibration failed: " + r.message);
  json res = r.body["result"];
  sol::DevicePeaks measured = res["peaks"].get<sol::DevicePeaks>();
  std::string uuid = s.device().value("uuid", "");
  if (auto err = sol::save_calibration(uuid, measured)) std::cerr << "warning: calibration not cached: " << *err << "\n";
  if (!c.store.empty()) store::Store::open(c.store).save_calibration(uuid, s.device().value("name", ""), res);
  if (c.json_out) {
    std::cout << res.dump(2) << "\n";
  } else {
    auto ds = sol::datasheet_peaks(s.device().value("name", ""));
    Table tab{{"measurement", "rate", "datasheet", "median", "config"}, {}};
    for (auto& m : res["measurements"]) {
      std::string name = m.value("name", "");
      double rate = m.value("rate", 0.0);
      bool bw = m.value("unit", "") == "bytes/s";
      std::string ref = "-";
      if (ds) {
        double d = name.rfind("copy", 0) == 0 ? ds->hbm_bytes_per_s : name == "fma_fp32" || name == "gemm_fp32" ? ds->fp32_flops
                 : name == "fma_fp64" ? ds->fp64_flops : name == "gemm_fp64" ? ds->fp64_tensor_flops : name == "gemm_bf16" ? ds->bf16_flops
                 : name == "gemm_fp16" ? ds->fp16_flops : name == "gemm_tf32" ? ds->tf32_flops : 0;
        if (d > 0) ref = fmt(d / (bw ? 1e12 : 1e12), 1) + (bw ? " TB/s" : " TFLOP/s");
      }
      tab.rows.push_back({name, fmt(rate / 1e12, 2) + (bw ? " TB/s" : " TFLOP/s"), ref, fmt_us(m.value("median_s", 0.0) * 1e6), m.value("config", "")});
    }
    std::cout << "calibrated " << res.value("name", "") << " (" << uuid << ")\n";
    tab.print(std::cout);
    if (!res.value("error", "").empty()) std::cerr << "error: " << res.value("error", "") << "\n";
  }
  return res.value("error", "").empty() ? cli::exit_status::ok : cli::exit_status::error;
}

struct BenchArgs {
  std::string suite = "ksol", tasks, sizes, baselines, families, precisions, json_path, matrix, gpus;
  int64_t resume = 0;
  double timeout = 300;
  bool no_hidden = false;
  bool mpi = false;
};

int cmd_bench(const Common& c, const BenchArgs& a, const std::string& cmdline) {
  const std::string& sizes_csv = a.sizes;
  const std::string& baselines_csv = a.baselines;
  const std::string& json_path = a.json_path;
  int64_t resume = a.resume;
  double timeout = a.timeout;
  bool no_hidden = a.no_hidden;
  std::vector<std::string> dirs;
  if (a.tasks.empty()) dirs = builtin_task_dirs();
  else
    for (auto& n : split_csv(a.tasks)) dirs.push_back(cli::task_argument("--tasks", n));
  std::vector<Task> tasks;
  std::vector<std::string> fams = split_csv(a.families), precs = split_csv(a.precisions);
  for (auto& d : dirs) {
    Task t = load_task(d);
    if (!fams.empty() && std::find(fams.begin(), fams.end(), t.family) == fams.end()) continue;
    if (!precs.empty() && std::find(precs.begin(), precs.end(), t.precision) == precs.end()) continue;
    if (!a.matrix.empty()) {
      if (!t.sparse) continue;  // a Matrix Market file only means something to sparse tasks
      t.sizes.push_back(matrix_market_size(t, a.matrix));
    }
    tasks.push_back(std::move(t));
  }
  if (tasks.empty()) throw cli::UsageError("no task matches --tasks, --family, --precision and --matrix");
  std::vector<std::string> want_b = split_csv(baselines_csv);
  for (const std::string& name : want_b) {
    std::vector<std::string> known;
    for (const Task& t : tasks)
      for (const BaselineSpec& b : t.baselines)
        if (std::find(known.begin(), known.end(), b.name) == known.end()) known.push_back(b.name);
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw cli::UsageError("--baselines '" + name + "': no task here has such a baseline (theirs: " + join(known, ", ") + ")");
  }
  std::vector<std::string> want_sizes = split_csv(sizes_csv);
  for (const std::string& name : want_sizes)
    if (std::none_of(tasks.begin(), tasks.end(), [&](const Task& t) { return t.find_size(name) != nullptr; }))
      throw cli::UsageError("--sizes '" + name + "': no task here has such a size");
  if (!a.matrix.empty()) want_sizes = {tasks[0].sizes.back().name};
  std::vector<int> gpu_ids = parse_gpus(a.gpus);
  // Over MPI, ranks above 0 only relay their workers' calls; rank 0 runs the bench on them all.
  std::unique_ptr<mpi::Cluster> cluster = mpi::wanted(a.mpi) ? mpi::Cluster::join() : nullptr;
  if (cluster && cluster->rank() > 0) return cluster->relay(session_options(c, false).worker_argv, gpu_ids);
  std::vector<std::string> shared;
  for (const Task& t : tasks) shared.push_back(t.dir);
  if (!a.matrix.empty()) shared.push_back(std::filesystem::absolute(a.matrix).string());
  std::vector<std::unique_ptr<Session>> sessions =
      cluster ? cluster->open_sessions(session_options(c, true), gpu_ids, shared) : open_sessions(session_options(c, true), gpu_ids);
  Session& s = *sessions[0];
  if (resume && (!s.store() || !s.store()->find_run(resume)))
    throw cli::UsageError("--resume " + std::to_string(resume) + ": no such run in " + (c.store.empty() ? "the store (--store is empty)" : c.store));
  const bool gpu = s.has_gpu();
  if (!gpu)
    cli::print_no_gpu_notice("bench", s.gpu_reason(),
                             "nothing can be timed; parsing every task, compiling every baseline and reference and computing SOL "
                             "(assuming " + s.peaks().name + ") instead (exit status 77 when they all compile, 1 otherwise)");
  for (size_t i = 1; i < sessions.size(); ++i)
    if (gpu && !sessions[i]->has_gpu())
      throw std::runtime_error("--gpus: the worker on " + sessions[i]->name() + " has no usable GPU (" + sessions[i]->gpu_reason() + ")");
  int64_t run = s.begin_run(cmdline, {{"resume_of", resume}, {"gpus", sessions.size()}});
  for (auto& other : sessions) other->join_run(run);

  // Compile everything first, in parallel: it needs no GPU and fails fast.
  std::vector<CompileJob> jobs;
  std::vector<std::pair<size_t, const BaselineSpec*>> which;
  for (size_t i = 0; i < tasks.size(); ++i) {
    for (auto& b : tasks[i].baselines) {
      if (!want_b.empty() && std::find(want_b.begin(), want_b.end(), b.name) == want_b.end()) continue;
      jobs.push_back(baseline_job(tasks[i], b));
      which.push_back({i, &b});
    }
    jobs.push_back(reference_job(tasks[i], false));
    which.push_back({i, nullptr});
    if (!tasks[i].ref_gpu.empty()) {
      jobs.push_back(reference_job(tasks[i], true));
      which.push_back({i, nullptr});
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::cerr << "compiling " << jobs.size() << " sources (baselines and references) on " << std::thread::hardware_concurrency() << " cores...\n";
  std::vector<CompileResult> compiled = compile_all(jobs);
  int hits = 0, failed = 0;
  for (size_t k = 0; k < compiled.size(); ++k) {
    hits += compiled[k].cache_hit;
    if (!compiled[k].ok) {
      ++failed;
      std::cerr << "error: " << jobs[k].source_path << " does not compile:\n" << compiled[k].message << "\n";
    }
  }
  std::cerr << "compiled in " << fmt(seconds_since(t0), 1) << " s (" << hits << " cache hits, " << failed << " failed)\n";

  EvalOptions o;
  o.sizes = want_sizes;
  o.resume_run = resume;
  o.lenient_sizes = true;
  o.timeout_s = timeout;
  o.timing = c.timing();
  if (no_hidden) o.defences_off.insert("hidden-sizes");
  // The baselines' evaluations, spread over the sessions (one per GPU) in order; each line of
  // progress is written when its evaluation ends.
  std::vector<size_t> eval_jobs;
  for (size_t k = 0; k < jobs.size(); ++k)
    if (which[k].second) eval_jobs.push_back(k);
  std::vector<CandidateOutcome> outs(eval_jobs.size());
  std::mutex progress;
  size_t done = 0, total = eval_jobs.size();
  bool several = sessions.size() > 1;
  run_parallel(eval_jobs.size(), sessions.size(), [&](size_t i, size_t w) {
    size_t k = eval_jobs[i];
    const Task& t = tasks[which[k].first];
    const BaselineSpec& b = *which[k].second;
    auto te = std::chrono::steady_clock::now();
    if (!several) std::cerr << "[" << i + 1 << "/" << total << "] " << t.name << " / " << b.name << " ..." << std::flush;
    CandidateOutcome co = sessions[w]->evaluate(t, jobs[k], "baseline:" + b.name, "baseline:" + b.name, o, &compiled[k]);
    int ok = 0;
    for (auto& so : co.sizes) ok += so.status == Status::ok || so.status == Status::skipped;
    std::lock_guard<std::mutex> g(progress);
    ++done;
    if (several) std::cerr << "[" << done << "/" << total << "] " << t.name << " / " << b.name << " (" << sessions[w]->name() << ")";
    if (!gpu)
      std::cerr << (co.compiled.ok ? " compiled; not run (no GPU)\n" : " does not compile\n");
    else
      std::cerr << (several ? ": " : " ") << ok << "/" << co.sizes.size() << " sizes ok, " << fmt(seconds_since(te), 1) << " s\n";
    outs[i] = std::move(co);
  });
  json all = json::array();
  Table tab = result_table();
  std::vector<std::pair<std::string, const CandidateOutcome*>> fails;
  for (size_t i = 0; i < outs.size(); ++i) {
    const Task& t = tasks[which[eval_jobs[i]].first];
    all.push_back(outcome_json(t, outs[i]));
    fails.push_back({t.name, &outs[i]});
  }
  // Speedups: each baseline against the task's naive baseline.
  std::vector<size_t> task_of;
  for (auto& w : which)
    if (w.second) task_of.push_back(w.first);
  for (size_t k = 0; k < outs.size(); ++k) {
    std::map<std::string, double> naive;
    for (size_t m = 0; m < outs.size(); ++m)
      if (task_of[m] == task_of[k] && outs[m].label == "baseline:naive")
        for (auto& so : outs[m].sizes)
          if (so.median_us > 0) naive[so.size] = so.median_us;
    print_outcome_rows(tasks[task_of[k]], outs[k], &tab, &naive);
  }
  s.finish_run("finished");
  double wall = seconds_since(t0);
  if (!json_path.empty()) {
    write_file_atomic(json_path, json{{"run", run}, {"gpu", s.device()}, {"peaks", s.peaks()}, {"wall_seconds", wall}, {"results", all}}.dump(2));
    std::cerr << "wrote " << json_path << "\n";
  }
  if (c.json_out) {
    std::cout << json{{"run", run}, {"gpu", s.device()}, {"peaks", s.peaks()}, {"wall_seconds", wall}, {"results", all}}.dump(2) << "\n";
  } else {
    std::cout << "GPU: " << (gpu ? s.device().value("name", "?") : "none (SOL assumes " + s.peaks().name + ")") << "; run " << run
              << " in " << c.store << "; * = hidden size; speedup = naive / this baseline; wall " << fmt(wall, 1) << " s\n";
    tab.print(std::cout);
    if (!gpu) std::cout << "timing needs a GPU: every size above was parsed, compiled and bounded, not run.\n";
  }
  print_failures(fails);
  for (auto& co : outs)
    if (!co.all_ok() && !(co.compiled.ok && !gpu)) return cli::exit_status::error;
  return gpu ? cli::exit_status::ok : cli::exit_status::no_gpu;
}

// The schedule space of a program: legal schedules (the first `show`), and the refused ones
// grouped by reason, each with an example.
// The tensor and dim order a program's kernel is generated for: the task's, or the program's own.
codegen::Binding dsl_binding(const dsl::Program& p, const std::string& task) {
  codegen::Binding b;
  if (!task.empty()) {
    b = search::binding_of(load_task(cli::task_argument("--task", task)));
  } else {
    // The program's own binding (empty tensor order: a sparse parameter is its row_ptr/col_idx/...
    // pieces), and the dims a task of its formats has beside the program's: NNZ (the stored
    // entries, which coo and nnz_split need) and W (an ell matrix's slots per row).
    b.dim_order = p.dims;
    auto add_dim = [&](const char* d) {
      if (std::find(b.dim_order.begin(), b.dim_order.end(), d) == b.dim_order.end()) b.dim_order.push_back(d);
    };
    for (const auto* list : {&p.inputs, &p.outputs})
      for (const auto& x : *list) {
        if (x.format == "csr" || x.format == "coo") add_dim("NNZ");
        if (x.format == "ell") add_dim("W");
      }
  }
  return b;
}

int cmd_dsl_space(const std::string& file, const std::string& task, int show, bool json_out) {
  dsl::Program p = dsl::parse_program(read_file(file), file);
  const codegen::Binding b = dsl_binding(p, task);
  codegen::Space sp = codegen::schedule_space(p, b);
  // By reason, sorted by the reason's text, each with the first schedule it refuses.
  std::map<std::string, std::pair<size_t, std::string>> by_reason;
  for (const codegen::Space::ReasonCount& r : sp.by_reason())
    by_reason[r.reason] = {r.count, codegen::schedule_text(sp.schedule(r.first))};
  if (json_out) {
    json j = {{"program", p.name}, {"family", p.family}, {"legal", sp.legal.size()}, {"refused", sp.refused()}, {"reasons", json::array()}};
    for (auto& [why, e] : by_reason) j["reasons"].push_back({{"reason", why}, {"count", e.first}, {"example", e.second}});
    j["legal_schedules"] = json::array();
    for (auto& s : sp.legal) j["legal_schedules"].push_back(codegen::schedule_text(s));
    std::cout << j.dump(2) << "\n";
    return cli::exit_status::ok;
  }
  std::cout << p.name << " (" << p.family << "): " << sp.legal.size() << " legal schedules, " << sp.refused() << " refused\n";
  for (int i = 0; i < show && i < static_cast<int>(sp.legal.size()); ++i) std::cout << "  legal: " << codegen::schedule_text(sp.legal[i]) << "\n";
  if (!by_reason.empty()) std::cout << "refused, by reason:\n";
  for (auto& [why, e] : by_reason) std::cout << "  " << e.first << " x " << why << "\n      e.g. " << e.second << "\n";
  return cli::exit_status::ok;
}

// The CUDA source ksol would compile for a program: what eval and optimize hand to nvcc. A schedule
// the target cannot run is refused with its reason (exit status 1), as gate 1 refuses it.
int cmd_dsl_cuda(const std::string& file, const std::string& task, bool json_out) {
  dsl::Program p = dsl::parse_program(read_file(file), file);
  const codegen::Binding b = dsl_binding(p, task);
  const codegen::Support sup = codegen::can_implement(p, b);
  if (!sup.ok) {
    std::cerr << file << ": refused: " << sup.reason << "\n";
    return cli::exit_status::error;
  }
  if (json_out)
    std::cout << json{{"program", p.name}, {"family", p.family}, {"kernel", codegen::kernel_name(p)}, {"cuda", codegen::generate_cuda(p, b)}}.dump(2)
              << "\n";
  else
    std::cout << codegen::generate_cuda(p, b);
  return cli::exit_status::ok;
}

// The typed IR of a program and its family (docs/DSL.md).
int cmd_dsl_print(const std::string& file, bool json_out) {
  dsl::Program p = dsl::parse_program(read_file(file), file);
  if (json_out)
    std::cout << json{{"program", p.name}, {"family", p.family}, {"ir", dsl::print_program(p)}}.dump(2) << "\n";
  else
    std::cout << dsl::print_program(p);
  return cli::exit_status::ok;
}

// The GPU float64 references stand in for the CPU ones at large sizes; here both run on the
// sizes small enough for the CPU, on every seed and distribution, and must agree.
int cmd_refcheck(const Common& c, const std::string& tasks_csv, const std::string& sizes_csv) {
  std::vector<std::string> dirs;
  if (tasks_csv.empty()) dirs = builtin_task_dirs();
  else
    for (auto& n : split_csv(tasks_csv)) dirs.push_back(cli::task_argument("--tasks", n));
  Session s(session_options(c, false));
  if (!s.has_gpu()) {
    cli::print_no_gpu_notice("refcheck", s.gpu_reason(), "nothing was checked (exit status 77)");
    return cli::exit_status::no_gpu;
  }
  std::vector<std::string> want = split_csv(sizes_csv);
  // Every task's references compile together on every core; the checks then run one by one.
  std::vector<Task> tasks;
  for (auto& d : dirs) {
    Task t = load_task(d);
    if (!t.ref_gpu.empty()) tasks.push_back(std::move(t));
  }
  std::cerr << "refcheck: compiling the references of " << tasks.size() << " task(s)" << std::endl;
  s.compile_references(tasks);
  Table tab{{"task", "size", "result", "worst error/tolerance", "detail"}, {}};
  json rows = json::array();
  int bad = 0;
  for (const Task& t : tasks) {
    Session::References refs = s.compile_references(t);
    if (!refs.cpu.ok || !refs.gpu.ok) throw std::runtime_error("the references of " + t.name + " do not compile");
    for (auto& sz : t.sizes) {
      if (want.empty() ? !t.use_cpu_reference(sz) : std::find(want.begin(), want.end(), sz.name) == want.end()) continue;
      EvalOptions o;
      WorkerReply r = s.worker().call({{"op", "refcheck"}, {"task_dir", t.dir}, {"size", sz.name}, {"reference_cpu_so", refs.cpu.so_path},
                                       {"reference_gpu_so", refs.gpu.so_path}, {"seeds", draw_seeds(o, 3)}}, 600);
      if (!r.ok) {
        ++bad;
        tab.rows.push_back({t.name, sz.name, "error", "-", r.message.substr(0, 120)});
        rows.push_back({{"task", t.name}, {"size", sz.name}, {"agree", false}, {"error", r.message}});
        continue;
      }
      const json& res = r.body["result"];
      bool ok = res.value("ok", false);
      bad += !ok;
      std::string detail = ok || res["failures"].empty() ? "" : res["failures"][0].value("message", "").substr(0, 120);
      tab.rows.push_back({t.name, sz.name, ok ? "agree" : "DIFFER", fmt(res.value("worst_error_over_tolerance", 0.0), 4), detail});
      rows.push_back({{"task", t.name}, {"size", sz.name}, {"agree", ok}, {"worst_error_over_tolerance", res.value("worst_error_over_tolerance", 0.0)},
                      {"result", res}});
    }
  }
  if (c.json_out) std::cout << json{{"gpu", s.device()}, {"checks", rows}}.dump(2) << "\n";
  else tab.print(std::cout);
  return bad ? cli::exit_status::error : cli::exit_status::ok;
}

int cmd_tasks(bool json_out) {
  Table tab{{"task", "family", "precision", "sizes", "baselines", "folder"}, {}};
  json rows = json::array();
  for (auto& d : builtin_task_dirs()) {
    Task t = load_task(d);
    std::vector<std::string> sz, bl;
    json sizes = json::array();
    for (auto& s : t.sizes) {
      sz.push_back(s.name + (s.hidden ? "*" : ""));
      sizes.push_back({{"name", s.name}, {"hidden", s.hidden}});
    }
    for (auto& b : t.baselines) bl.push_back(b.name);
    tab.rows.push_back({t.name, t.family, t.precision, join(sz, ","), join(bl, ","), d});
    rows.push_back({{"task", t.name}, {"family", t.family}, {"precision", t.precision}, {"sizes", sizes}, {"baselines", bl}, {"folder", d}});
  }
  if (json_out) std::cout << rows.dump(2) << "\n";
  else tab.print(std::cout);
  return cli::exit_status::ok;
}

}  // namespace
}  // namespace ksol

int main(int argc, char** argv) {
  using namespace ksol;
  CLI::App app{"ksol: makes GPU kernels fast, verified and measured against speed-of-light.\n"
               "Candidate code runs only in ksol-worker; this process plans, compiles, stores and reports."};
  app.require_subcommand(1);
  app.fallthrough();  // global options (--json, --store) may also follow the subcommand
  app.footer(cli::exit_status_footer());
  app.set_version_flag("--version", cli::version_text(), "print 'ksol <version>' and exit");
  Common c;
  app.add_option("--store", c.store,
                 "SQLite store for runs and results (default $XDG_DATA_HOME/ksol/ksol.db, else ~/.local/share/ksol/ksol.db; created only by "
                 "the commands that record: eval, bench, optimize, device calibrate; read by runs, show and export; '' for none)")
      ->capture_default_str();
  app.add_option("--worker", c.worker, "ksol-worker binary (default: next to ksol, or $KSOL_WORKER)");
  app.add_option("--assume-gpu", c.assume_gpu, "GPU whose datasheet peaks SOL uses when no GPU is present")->capture_default_str();
  app.add_flag("--json", c.json_out, "print JSON instead of text (every command; before or after the command)");
  app.add_option("--warmup", c.warmup, "seconds of back-to-back calls before timing starts, so power-limited kernels are timed at the clock they settle to (default 0.25; eval and bench)")
      ->check(cli::number_in(0, 60));

  auto* eval = app.add_subcommand("eval", "verify and time one candidate on a task (all gates, SOL), with the task's baselines");
  std::string task, sizes, compare = "all", function;
  std::vector<std::string> cands;
  std::vector<std::string> defence_off;
  std::optional<uint64_t> seed;
  std::vector<std::string> shapes;
  bool no_time = false, compile_only = false, baselines_first = false;
  double timeout = 300;
  eval->add_option("--task", task, "task name or folder")->required();
  eval->add_option("--candidate", cands, "CUDA source exporting ksol_run (include/ksol/abi.h), or a .ksol DSL program; repeat for several")->required()->check(CLI::ExistingFile);
  eval->add_option("--function", function, "treat the candidate as a plain C function with this declaration");
  eval->add_option("--sizes", sizes, "comma-separated size names (default: all, hidden ones included)");
  eval->add_option("--shape", shapes, "a size of your own, NAME:DIM=V,DIM=V,... (every dim of the task); only the named sizes and these run");
  eval->add_option("--compare", compare, "baselines to time beside it: all, none, or names")->capture_default_str();
  eval->add_option("--seed", seed, "fix the seeds (to re-run an evaluation); default: fresh seeds")->check(cli::unsigned_integer());
  eval->add_option("--defence-off", defence_off, "switch a defence off (exploit-suite use only; results marked untrusted)");
  eval->add_flag("--no-time", no_time, "run the correctness gates only");
  eval->add_flag("--compile-only", compile_only, "stop after gate 1 and compilation (fills the compile cache)");
  eval->add_option("--timeout", timeout, "seconds per worker call before it is killed")->capture_default_str()->check(cli::positive_number());
  eval->add_flag("--baselines-first", baselines_first,
                 "evaluate the baselines before the candidates (default: after), to check that a comparison does not depend on the order");

  auto* sol = app.add_subcommand("sol", "speed-of-light bound of a task at each size");
  sol->add_option("--task", task, "task name or folder")->required();

  auto* dev = app.add_subcommand("device", "show the GPU and its peaks; 'device calibrate' measures them");
  auto* cal = dev->add_subcommand("calibrate", "measure copy bandwidth, FMA and tensor-core rates; cached per GPU");

  auto* bench = app.add_subcommand("bench", "verify and time every baseline of the built-in tasks (resumable)");
  BenchArgs ba;
  bench->add_option("--suite", ba.suite, "the suite to run: ksol (the built-in tasks, the default; others may be named by their tasks folder with $KSOL_TASKS)")
      ->check([](const std::string& v) -> std::string {
        return v == "ksol" ? "" : "unknown suite '" + v + "': the built-in suite is 'ksol' (point $KSOL_TASKS at another tasks folder)";
      });
  bench->add_option("--tasks", ba.tasks, "comma-separated task names or folders (default: all built-in)");
  bench->add_option("--family", ba.families, "only these families (comma-separated: dense, sparse, llm, scientific, tensor)");
  bench->add_option("--precision", ba.precisions, "only these precision policies (comma-separated: fp32, tf32, bf16, fp16, fp64)");
  bench->add_option("--sizes", ba.sizes, "comma-separated size names (default: all; tasks without a named size skip it)");
  bench->add_option("--baselines", ba.baselines, "comma-separated baseline names (default: all)");
  bench->add_option("--matrix", ba.matrix, "a Matrix Market file: run the sparse tasks on its structure (a size named after the file)")
      ->check(CLI::ExistingFile);
  bench->add_option("--resume", ba.resume, "run id to resume: evaluations it already has are not repeated")->check(cli::positive_integer());
  bench->add_option("--json-out", ba.json_path, "also write the results as JSON to this file");
  bench->add_option("--timeout", ba.timeout, "cap in seconds on each evaluation (one candidate at one size); past it the worker is killed and the evaluation recorded as a timeout")
      ->capture_default_str()
      ->check(cli::positive_number());
  bench->add_flag("--no-hidden", ba.no_hidden, "skip hidden sizes");
  bench->add_option("--gpus", ba.gpus, "evaluate on several GPUs at once, one worker each: a count (2) or device indices (0,1); default one worker on device 0")
      ->check(cli::gpus_check());
  bench->add_flag("--mpi", ba.mpi, "run as the ranks of an MPI job (mpirun, srun; also when such a launcher started several ranks): each rank's workers (--gpus) evaluate, rank 0 writes the store");

  auto* tasks = app.add_subcommand("tasks", "list the built-in tasks");
  auto* dsl = app.add_subcommand("dsl", "the ksol DSL: 'dsl print FILE' prints the typed IR (docs/DSL.md)");
  auto* dsl_print = dsl->add_subcommand("print", "parse and type-check a program, print its typed IR and family");
  std::string dsl_file;
  dsl_print->add_option("file", dsl_file, "a .ksol program")->required()->check(CLI::ExistingFile);
  auto* dsl_space = dsl->add_subcommand("space", "enumerate a program's legal schedules and the refused ones, with their reasons");
  std::string space_task;
  int space_show = 10;
  dsl_space->add_option("file", dsl_file, "a .ksol program")->required()->check(CLI::ExistingFile);
  dsl_space->add_option("--task", space_task, "bind to this task's tensor and dim order (default: the program's own order, with a sparse matrix's dims NNZ and W)");
  dsl_space->add_option("--show", space_show, "legal schedules to list")->capture_default_str()->check(cli::non_negative_integer());
  auto* dsl_cuda = dsl->add_subcommand("cuda", "print the CUDA source generated for a program (refused schedules: the reason, exit status 1)");
  std::string cuda_task;
  dsl_cuda->add_option("file", dsl_file, "a .ksol program")->required()->check(CLI::ExistingFile);
  dsl_cuda->add_option("--task", cuda_task, "bind to this task's tensor and dim order (the ABI eval uses; default: the program's own order)");
  dsl->require_subcommand(1);
  auto* refcheck = app.add_subcommand("refcheck", "check that each task's GPU float64 reference agrees with its CPU one (needs a GPU)");
  std::string rc_tasks, rc_sizes;
  refcheck->add_option("--tasks", rc_tasks, "comma-separated task names or folders (default: all built-in)");
  refcheck->add_option("--sizes", rc_sizes, "sizes to check (default: every size the CPU reference handles)");

  cli::add_optimize_command(app, c.store, c.worker, c.assume_gpu, c.json_out, argc, argv);
  cli::add_import_command(app, c.json_out);
  cli::add_eval_module_command(app, c.json_out);
  cli::add_run_commands(app, c.store, c.json_out);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command run from its callback (finish_command) ended the parse
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    return cli::report_parse_error(app, e);
  }
  const std::string cmdline = command_line(argc, argv);
  using cli::run_command;
  if (eval->parsed())
    return run_command("eval", [&] {
      return cmd_eval(c, task, cands, sizes, defence_off, seed, no_time, compare, timeout, cmdline, function, compile_only, shapes, baselines_first);
    });
  if (sol->parsed()) return run_command("sol", [&] { return cmd_sol(c, task); });
  if (cal->parsed()) return run_command("device calibrate", [&] { return cmd_device(c, true); });
  if (dev->parsed()) return run_command("device", [&] { return cmd_device(c, false); });
  if (bench->parsed()) return run_command("bench", [&] { return cmd_bench(c, ba, cmdline); });
  if (tasks->parsed()) return run_command("tasks", [&] { return cmd_tasks(c.json_out); });
  if (refcheck->parsed()) return run_command("refcheck", [&] { return cmd_refcheck(c, rc_tasks, rc_sizes); });
  if (dsl_print->parsed()) return run_command("dsl print", [&] { return cmd_dsl_print(dsl_file, c.json_out); });
  if (dsl_space->parsed()) return run_command("dsl space", [&] { return cmd_dsl_space(dsl_file, space_task, space_show, c.json_out); });
  if (dsl_cuda->parsed()) return run_command("dsl cuda", [&] { return cmd_dsl_cuda(dsl_file, cuda_task, c.json_out); });
  return cli::exit_status::ok;
}
