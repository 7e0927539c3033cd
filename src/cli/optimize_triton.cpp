// ksol optimize FILE.py --triton-fn NAME (docs/TRITON.md). The pipeline, one step per line below:
//
//   prepare     python/ksol_torch/triton_task.py reads the file (its errors at file:line:col), lists
//               the legal configs and writes the task as a KernelBench problem plus a ModelNew per
//               config, so that the Python worker verifies and times a config like any candidate
//   reference   where the file has reference(): the module path (run_optimize_module) on that
//               problem: DSL candidates searched, eager and torch.compile of the reference timed
//   configs     the kernel as given verified (the baseline), its configs screened on the GPU, the
//               fastest screened verified through every gate (search/triton_configs.h)
//   side by side  every contender that passed (the kernel as given, the verified configs, the DSL
//               search's answer, eager and torch.compile of the reference) checked and timed in
//               one process, in rounds over all of them: no two are compared by times of two
//               processes
//   answer      the fastest of those timings when it is a candidate faster than every baseline,
//               else the fastest baseline; report, store, rerun line, summary line
#include "cli/optimize_triton.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "coord/worker_client.h"
#include "core/stop.h"
#include "core/util.h"
#include "report/optimize_report.h"
#include "search/triton_configs.h"
#include "sol/peaks.h"
#include "store/store.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {
namespace {

// What run_optimize_module prints to stdout while it runs inside this command: its JSON document.
class CoutCapture {
 public:
  CoutCapture() : old_(std::cout.rdbuf(buf_.rdbuf())) {}
  ~CoutCapture() { std::cout.rdbuf(old_); }
  CoutCapture(const CoutCapture&) = delete;
  CoutCapture& operator=(const CoutCapture&) = delete;
  std::string str() const { return buf_.str(); }

 private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

// The folder with the problem and config files while the run lasts, removed after it.
class WorkDir {
 public:
  WorkDir() : path_((fs::temp_directory_path() / ("ksol-triton-" + std::to_string(::getpid()))).string()) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Screening by `python3 -m ksol_torch.triton_task screen` (a process of its own: a config that kills
// the CUDA context or hangs takes only that process, whose log says which config it was running),
// run by search::run_screen until it answers; verification by the Python worker.
class PythonTritonEvaluator : public search::TritonEvaluator {
 public:
  PythonTritonEvaluator(WorkerClient& w, std::vector<std::string> python, std::string task_json, const json& task, std::string device,
                        std::string precision, double timeout, std::optional<sol::DevicePeaks> peaks)
      : w_(w), python_(std::move(python)), task_json_(std::move(task_json)), dir_(task.value("dir", "")),
        problem_(task.value("problem", "")), device_(std::move(device)), precision_(std::move(precision)), timeout_(timeout),
        peaks_(std::move(peaks)) {}

  search::TritonScreen screen(int max_configs, int top, double seconds) override {
    const std::string log = dir_ + "/screen.jsonl", out = dir_ + "/screen.json";
    std::vector<std::string> argv = python_;
    argv.insert(argv.end(), {"-m", "ksol_torch.triton_task", "screen", task_json_, "--log", log, "--out", out, "--configs",
                             std::to_string(max_configs), "--top", std::to_string(top), "--device", device_, "--precision", precision_});
    const double deadline = seconds > 0 ? unix_now() + seconds : 0;
    if (deadline > 0) argv.insert(argv.end(), {"--deadline", std::to_string(deadline)});
    // Each process starts configs for one --timeout at most (its batch; budget permitting) and is
    // killed one --timeout after that: a config it started has had a whole --timeout when the kill
    // comes, so the config running then is the one that took too long, and it alone is blamed.
    auto run_once = [&, argv]() {
      const double start = unix_now();
      const double batch = deadline > 0 ? std::max(0.0, std::min(timeout_, deadline - start)) : timeout_;
      std::vector<std::string> a = argv;
      a.insert(a.end(), {"--batch-deadline", std::to_string(start + batch)});
      std::error_code ec;
      fs::remove(out, ec);  // an earlier run's answer is not this run's
      search::ScreenRun r;
      r.limit_seconds = batch + timeout_;
      ProcessResult pr = run_process(a, r.limit_seconds);
      r.exit_code = pr.exit_code;
      r.timed_out = pr.timed_out;
      r.output = pr.output;
      try {
        r.out = json::parse(read_file(out));
      } catch (const std::exception&) {
        r.out = json();
      }
      return r;
    };
    search::ScreenDriverOptions o;
    o.per_config_seconds = timeout_;
    o.max_runs = max_configs + 2;
    o.progress = [](const std::string& l) { std::cerr << l << "\n"; };
    return search::run_screen(run_once, log, o);
  }

  search::VerifiedConfig verify(const search::TritonConfig& c) override {
    search::VerifiedConfig v;
    v.config = c;
    json req = {{"op", "eval"}, {"problem", problem_}, {"candidate", c.candidate}, {"device", device_}, {"seeds", {1, 2, 3}},
                {"baselines", false}, {"kernelbench", false}, {"precision", precision_}};
    WorkerReply r = w_.call(req, timeout_);
    v.worker_seconds = r.seconds;
    if (!r.ok) {
      v.eval.status = Status::failed;
      v.eval.failed_gate = Gate::worker;
      v.eval.error_class = "worker_error";
      v.eval.message = "worker: " + r.message;
    } else {
      const json& res = r.body["result"];
      v.eval = from_worker_result(res);
      if (res.contains("precision")) policy_ = res["precision"];
      // SOL from the reference's FLOPs and compulsory bytes at the GPU's datasheet peaks (no
      // reference: the worker traced nothing, and SOL is unknown).
      double tb = peaks_ && peaks_->hbm_bytes_per_s > 0 ? res.value("bytes", 0.0) / peaks_->hbm_bytes_per_s : 0;
      double tf = peaks_ && peaks_->fp32_flops > 0 ? res.value("flops", 0.0) / peaks_->fp32_flops : 0;
      v.eval.sol_us = std::max(tb, tf) * 1e6;
      v.eval.bound = tf > tb ? "compute" : "memory";
      if (v.eval.sol_us > 0 && v.eval.median_us > 0) {
        v.eval.pct_sol = v.eval.sol_us / v.eval.median_us;
        v.eval.headroom = v.eval.median_us / v.eval.sol_us;
      }
    }
    v.eval.size = "inputs";
    return v;
  }

  // The precision policy the worker verified under ({} until a verification ran).
  const json& precision() const { return policy_; }

 private:
  WorkerClient& w_;
  std::vector<std::string> python_;
  std::string task_json_, dir_, problem_, device_, precision_;
  double timeout_;
  std::optional<sol::DevicePeaks> peaks_;
  json policy_ = json::object();
};

// The contenders of the answer timed side by side by `python3 -m ksol_torch.triton_task compare`:
// one process, each contender checked on one case first, then timed in rounds over all of them.
// `stem` names its files (STEM.contenders.json, STEM.json). Progress says each one's time, or
// why it was left out.
search::SideBySide side_by_side(const std::vector<std::string>& python, const std::string& task_json, const std::string& stem,
                                const json& request, const std::string& device, const std::string& precision, double timeout) {
  const int rounds = 3;
  std::vector<std::string> names;
  for (const json& c : request) names.push_back(c.value("name", ""));
  if (names.empty()) {
    search::SideBySide none;
    none.error = "nothing passed ksol's gates to be timed";
    return none;
  }
  write_file_atomic(stem + ".contenders.json", request.dump(1));
  std::vector<std::string> argv = python;
  argv.insert(argv.end(), {"-m", "ksol_torch.triton_task", "compare", task_json, "--contenders", stem + ".contenders.json", "--out",
                           stem + ".json", "--device", device, "--precision", precision, "--rounds", std::to_string(rounds)});
  std::cerr << "triton: side by side in one process (" << rounds << " rounds, each contender checked first): " << join(names, ", ") << "\n";
  // Each contender's check and rounds, torch.compile's compiles (max-autotune's among them):
  // twice the per-call limit.
  ProcessResult pr = run_process(argv, 2 * timeout);
  json out;
  try {
    out = json::parse(read_file(stem + ".json"));
  } catch (const std::exception&) {
    out = {{"ok", false},
           {"error", "the side-by-side timing " + (pr.timed_out ? std::string("timed out") : "exited with status " + std::to_string(pr.exit_code)) +
                         ": " + pr.output.substr(pr.output.size() > 1500 ? pr.output.size() - 1500 : 0)}};
  }
  search::SideBySide s = search::side_by_side_of(out);
  if (!s.ok) std::cerr << "triton: side by side: " << s.error << "\n";
  for (const search::Contender& c : s.timed) std::cerr << "triton: side by side: " << c.name << " " << sig(c.us, 4) << " us\n";
  for (const auto& [name, why] : s.left_out) std::cerr << "triton: side by side: " << name << " left out: " << why << "\n";
  return s;
}

// "BLOCK_SIZE 1024 (powers of two 16..8192 ...), num_warps 4 (...)": the knobs, for the summary.
std::string knobs_text(const json& task) {
  std::vector<std::string> v;
  for (const json& k : task.value("knobs", json::array())) {
    const json& d = k["default"];
    v.push_back(k.value("name", "?") + " " + (d.is_number() ? std::to_string(d.get<int64_t>()) : std::string("as launch passes it")) +
                " (" + k.value("why", "") + ")");
  }
  return join(v, ", ");
}

std::string shapes_text(const json& task) {
  std::vector<std::string> v;
  for (const json& in : task.value("inputs", json::array())) {
    std::vector<std::string> d;
    for (const json& e : in.value("shape", json::array())) d.push_back(std::to_string(e.get<int64_t>()));
    v.push_back("[" + join(d, ", ") + "] " + in.value("dtype", ""));
  }
  return join(v, ", ");
}

// "4096x8192": the size's name in the report, the first input's shape.
std::string size_name(const json& task) {
  for (const json& in : task.value("inputs", json::array())) {
    if (!in["shape"].is_array()) continue;
    std::vector<std::string> d;
    for (const json& e : in["shape"]) d.push_back(std::to_string(e.get<int64_t>()));
    return join(d, "x");
  }
  return "inputs";
}

// The module path's results item for the reference ({} when it did not run or wrote none).
json dsl_item_of(const json& dsl_doc) {
  if (!dsl_doc.is_object() || !dsl_doc.contains("results") || !dsl_doc["results"].is_array() || dsl_doc["results"].empty()) return json::object();
  return dsl_doc["results"][0];
}

// The Triton part of report.md: the task, its knobs and configs, and how to re-run the answer.
std::string triton_markdown(const json& item) {
  std::ostringstream o;
  const json& t = item["triton"];
  o << "\n## Triton: " << item.value("task", "") << "\n\n";
  o << "File: `" << t.value("file", "") << "`, kernel `" << item.value("task", "") << "` (line " << t.value("line", 0) << "); inputs "
    << t.value("inputs_text", "") << ". "
    << (t.value("reference", false) ? "Every config is verified against reference() in float64."
                                     : "No reference(): every config is verified against the kernel as given, run in float64 (what the "
                                       "kernel gets wrong at every config goes unseen).")
    << "\n\n| knob | default | values tried | why |\n| --- | --- | --- | --- |\n";
  for (const json& k : t.value("knobs", json::array())) {
    std::vector<std::string> vals;
    for (const json& x : k.value("values", json::array())) vals.push_back(x.is_number() ? std::to_string(x.get<int64_t>()) : "as given");
    const json& d = k["default"];
    o << "| " << k.value("name", "") << " | " << (d.is_number() ? std::to_string(d.get<int64_t>()) : std::string("as launch passes it")) << " | "
      << join(vals, ", ") << " | " << k.value("why", "") << " |\n";
  }
  o << "\n" << t.value("space", 0) << " legal configs; " << t.value("screened", 0) << " screened (stopped: "
    << t.value("screen_stop", std::string("-")) << "); the kernel as given and " << t.value("verified", 1) - 1
    << " of the fastest screened put through every gate.\n";
  if (!t.value("screen_error", std::string()).empty()) o << "\nThe screening failed: " << t.value("screen_error", std::string()) << "\n";
  const json& d = item.value("dsl", json::object());
  o << "\nDSL candidates of the reference: " << d.value("summary", std::string("-")) << "\n";
  const json& side = item.value("side_by_side", json::object());
  if (side.value("ok", false)) {
    o << "\nThe contenders side by side, in one process (" << side.value("rounds", 0)
      << " rounds over all of them, each checked against the reference first): the answer and its speedups are these times.\n\n"
         "| contender | us |\n| --- | --- |\n";
    const json times = side.value("times_us", json::object()), left_out = side.value("left_out", json::object());
    for (auto& [name, us] : times.items()) o << "| " << name << " | " << sig(us.get<double>(), 4) << " |\n";
    for (auto& [name, why] : left_out.items()) o << "| " << name << " | left out: " << why.get<std::string>() << " |\n";
  } else if (side.is_object() && side.contains("error")) {
    o << "\nThe side-by-side timing did not run: " << side.value("error", std::string()) << "\n";
  }
  if (item.value("speedup_vs_kernel", 0.0) > 0 && item.value("returned", "") != "triton")
    o << "\n**" << sig(item.value("speedup_vs_kernel", 0.0), 4) << "x over the kernel as given** (" << item.value("returned", "") << ").\n";
  if (!item.value("rerun", std::string()).empty()) {
    const json& best = item.value("best", json::object());
    const std::string lang = best.value("language", "");
    const std::string what = lang == "triton" ? "Verify and time the returned config"
                             : lang == "dsl" && best.value("stitched", false) ? "Check the returned stitched module"
                             : lang == "dsl" ? "Verify and time the returned DSL kernel"
                                             : "Verify and time the kernel as given, beside eager and torch.compile,";
    o << "\n" << what << " again: `" << item.value("rerun", "") << "`\n";
  }
  return o.str();
}

}  // namespace

int run_optimize_triton(const TritonOptimizeArgs& a, bool json_out) {
  const ModuleOptimizeArgs& m0 = a.module;
  if (!fs::exists(m0.file)) throw UsageError(m0.file + ": no such file");
  std::string why, py = find_torch_python(&why);
  if (py.empty()) {
    std::cerr << "error: " << why << "\n";
    return exit_status::error;
  }
  std::string pypath = ksol_python_path();
  const std::string file = fs::absolute(m0.file).string();
  const std::string stem = fs::path(m0.file).stem().string();
  WorkDir work;

  // prepare: parse, configs, the worker's files. A bad file is an error whatever the machine.
  const std::string task_json = work.path() + "/task.json";
  ProcessResult pr = run_process({"env", "PYTHONPATH=" + pypath, py, "-m", "ksol_torch.triton_task", "prepare", file, "--fn", a.fn, "--dir",
                                  work.path(), "--out", task_json},
                                 600);
  json task;
  try {
    task = json::parse(read_file(task_json));
  } catch (const std::exception&) {
    std::cerr << "error: the Triton front end failed on " << m0.file << ":\n" << pr.output << "\n";
    return exit_status::error;
  }
  if (!task.value("ok", false)) {
    std::cerr << task.value("error", std::string("the Triton front end failed")) << "\n";
    return exit_status::error;
  }
  const bool has_reference = task.value("reference", false);
  // The worker next, so that a missing GPU is the first thing said of a good file; the configs and
  // the reference's lowering follow either way.
  std::vector<std::string> python = {"env", "PYTHONPATH=" + pypath};
  if (m0.emulate) python.push_back("TRITON_INTERPRET=1");  // Triton's interpreter: kernels on the CPU
  python.push_back(py);
  std::vector<std::string> worker_argv = python;
  worker_argv.insert(worker_argv.end(), {"-m", "ksol_torch", "worker"});
  WorkerClient w(worker_argv);
  WorkerReply hello = w.call({{"op", "hello"}}, 120);
  if (!hello.ok) {
    std::cerr << "error: the Python worker did not start: " << hello.message << "\n";
    return exit_status::error;
  }
  const bool no_gpu = !hello.body.value("gpu", false) && !m0.emulate;
  const std::string no_gpu_reason = hello.body.value("reason", std::string("no GPU"));
  if (no_gpu)
    print_no_gpu_notice("optimize", no_gpu_reason,
                        "nothing can be timed; listing the configs of " + a.fn + (has_reference ? " and lowering its reference" : "") +
                            " instead (exit status 77 when that works, 1 otherwise)");
  // The worker is not needed again before the configs: the module path runs its own meanwhile.
  w.stop();
  std::cerr << "triton: " << a.fn << " (" << m0.file << ":" << task.value("line", 0) << "): inputs " << shapes_text(task) << "; "
            << (has_reference ? "reference() in float64 verifies every config"
                              : "no reference(): every config is checked against the kernel as given, run in float64")
            << "\ntriton: knobs " << knobs_text(task) << "; " << task.value("space", 0) << " legal configs, at most " << a.configs
            << " screened, the " << a.verify << " fastest verified\n";

  // The store records the run from here, where something will be evaluated (the module path's own
  // evaluations are not rows of it: it records none); its report is saved at the end.
  std::optional<store::Store> st;
  int64_t run = 0;
  if (!no_gpu && !a.store_path.empty()) {
    st.emplace(store::Store::open(a.store_path));
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string gpu = hello.body.contains("device") && hello.body["device"].is_object() ? hello.body["device"].value("name", "") : "";
    run = st->begin_run(a.cmdline, {{"ksol_version", KSOL_VERSION}, {"host", host},
                                    {"gpu", {{"name", m0.emulate ? std::string("none: Triton's interpreter and the CUDA emulator") : gpu}}},
                                    {"triton", {{"file", file}, {"fn", a.fn}, {"configs", a.configs}, {"verify", a.verify}}}});
  }

  // reference: its DSL candidates and its eager and torch.compile baselines, by the module path.
  json dsl_doc = json::object();
  std::string dsl_why;
  const std::string dir = m0.report_dir.empty() ? "runs/triton-" + stem + "-" + a.fn : m0.report_dir;
  if (has_reference) {
    ModuleOptimizeArgs m = m0;
    m.file = task.value("problem", "");
    m.report_dir = dir + "/dsl";
    m.json_path.clear();
    // The DSL candidates are the fx path's; the Inductor path's kernels are torch.compile's, which
    // is a baseline here already.
    m.path = "fx";
    if (m.search.budget_seconds > 0) m.search.budget_seconds /= 2;  // the other half is the configs'
    std::cerr << "dsl: reference() through the module path (DSL candidates; eager and torch.compile as baselines)\n";
    int rc = exit_status::error;
    std::string printed;
    try {
      CoutCapture capture;
      rc = run_optimize_module(m, true);
      printed = capture.str();
    } catch (const std::exception& e) {
      dsl_why = std::string("the module path failed: ") + e.what();
    }
    try {
      dsl_doc = json::parse(printed);
    } catch (const std::exception&) {
      if (dsl_why.empty()) dsl_why = "the module path printed no results (exit status " + std::to_string(rc) + ")";
    }
    if (no_gpu && rc != exit_status::no_gpu) {
      std::cerr << "error: the module path failed on reference() (exit status " << rc << (dsl_why.empty() ? "" : "; " + dsl_why) << ")\n";
      return exit_status::error;
    }
    if (stop_requested()) {
      if (st) st->finish_run(run, "interrupted");
      return 128 + (stop_signal() > 0 ? stop_signal() : 2);
    }
  } else {
    dsl_why = "no reference(): no DSL candidates, and no eager or torch.compile baseline";
  }
  if (no_gpu) {
    std::cerr << "ksol optimize: evaluation needs a GPU (" << no_gpu_reason << "); " << a.fn << " was parsed, its "
              << task.value("space", 0) << " configs listed" << (has_reference ? " and its reference lowered" : "")
              << "; nothing was timed.\n";
    if (json_out) {
      json j = {{"gpu", false}, {"reason", no_gpu_reason}, {"file", file}, {"fn", a.fn}, {"triton", task}};
      if (has_reference) j["reference"] = dsl_doc;
      std::cout << j.dump(2) << "\n";
    }
    return exit_status::no_gpu;
  }

  // configs: the kernel as given, the screening, the fastest verified.
  if (m0.emulate)
    std::cerr << "ksol optimize --emulate: configs run by Triton's interpreter on the CPU and the worker on the CPU; their times are "
                 "the interpreter's: a test of the flow, never a result\n";
  std::string gpu_name = hello.body.contains("device") && hello.body["device"].is_object() ? hello.body["device"].value("name", "") : "";
  PythonTritonEvaluator ev(w, python, task_json, task, m0.emulate ? "cpu" : "cuda", m0.precision, m0.timeout,
                           m0.emulate ? std::nullopt : sol::datasheet_peaks(gpu_name));
  install_stop_handlers();
  search::TritonSearchOptions o;
  o.max_configs = a.configs;
  o.verify = a.verify;
  o.budget_seconds = m0.search.budget_seconds > 0 ? (has_reference ? m0.search.budget_seconds / 2 : m0.search.budget_seconds) : 0;
  o.progress = [](const std::string& l) { std::cerr << l << "\n"; };
  o.stop = [] { return stop_requested(); };
  search::TritonConfig as_given{task.value("default_label", a.fn), task.value("default", json::object()), task.value("default_text", ""),
                                task.value("default_candidate", "")};
  search::TritonSearchResult r = search::search_triton_configs(as_given, ev, o);

  // side by side: every contender of the answer (the kernel as given, the verified configs, the
  // DSL search's answer, eager and torch.compile of the reference) checked and timed in one
  // process; the answer and its speedups come from those timings alone.
  const json dsl = dsl_item_of(dsl_doc);
  const bool dsl_returned = dsl_why.empty() && !dsl.value("use_baseline", true);
  const json dsl_best = dsl_returned && dsl.contains("best") && dsl["best"].is_object() ? dsl["best"] : json::object();
  const std::string dsl_name = dsl.value("stop_reason", "") == "stitched" ? "stitched" : dsl_best.value("kernel", std::string("dsl"));
  std::vector<std::string> reference_baselines;
  const json module_baselines = dsl.value("baseline_us", json::object());
  for (auto& [name, us] : module_baselines.items())
    if (us.is_number() && us.get<double>() > 0) reference_baselines.push_back(name);
  search::SideBySide side;
  if (stop_requested()) {
    side.error = "not run: the run was stopped (a signal)";
  } else {
    json request = search::side_by_side_request(r, has_reference, reference_baselines,
                                                dsl_returned ? fs::absolute(dir + "/dsl").string() : "", dsl_name);
    side = side_by_side(python, task_json, work.path() + "/side_by_side", request, m0.emulate ? "cpu" : "cuda", m0.precision, m0.timeout);
  }
  const std::vector<search::Contender> cs = search::answer_contenders(r, side);
  double kernel_us = 0;
  json baseline_us = json::object();
  for (const search::Contender& c : cs) {
    if (c.name == "triton") kernel_us = c.us;
    if (c.baseline) baseline_us[c.name] = c.us;
  }
  search::TritonAnswer ans = search::choose_triton_answer(cs, kernel_us);
  if (!side.ok && !ans.returned.empty())
    ans.reason = (ans.reason.empty() ? "" : ans.reason + "; ") + "the side-by-side timing did not run (" + side.error +
                 "): chosen among the kernel as given and its fastest verified config as the Python worker timed them; the DSL "
                 "search's answer and the reference's baselines were timed in another process and are not compared";
  if (m0.emulate && !ans.returned.empty()) {
    // An emulated time is the interpreter's or the emulator's: the kernel as given is returned.
    ans.use_baseline = true;
    ans.returned = "triton";
    ans.language = "triton";
    ans.returned_us = kernel_us;
    ans.best_baseline = "triton";
    ans.best_baseline_us = kernel_us;
    ans.speedup_vs_best_baseline = 1;
    ans.speedup_vs_kernel = kernel_us > 0 ? 1.0 : 0.0;
    ans.reason = "--emulate: the times are the interpreter's and the emulator's, never a result";
  }

  // The results document, in the optimize report's form, with the Triton task beside it.
  const std::string size = size_name(task);
  const search::VerifiedConfig* returned_cfg = nullptr;
  for (const search::VerifiedConfig& v : r.verified)
    if (v.ok() && !ans.use_baseline && ans.language == "triton" && v.config.label == ans.returned) returned_cfg = &v;
  // SOL from the reference's costs (the worker's, the same for every config): %SOL of the side-by-side times.
  double sol_us = r.baseline.eval.sol_us;
  for (const search::VerifiedConfig& v : r.verified) sol_us = std::max(sol_us, v.eval.sol_us);
  auto pct_sol = [&](double us) { return sol_us > 0 && us > 0 ? 100 * sol_us / us : 0.0; };
  json size_row = {{"size", size}, {"best_baseline_us", ans.best_baseline_us},
                   {"best_baseline_pct_sol", ans.best_baseline == "triton" ? pct_sol(ans.best_baseline_us) : 0.0}};
  if (!ans.use_baseline) {
    size_row["returned_us"] = ans.returned_us;
    size_row["returned_pct_sol"] = pct_sol(ans.returned_us);
    size_row["speedup"] = ans.speedup_vs_best_baseline;
  }
  // Screened, passing, never verified: timed beside the fastest only.
  std::set<std::string> verified_labels = {as_given.label};
  for (const auto& v : r.verified) verified_labels.insert(v.config.label);
  int screened_out = 0;
  for (const auto& s : r.screen.screened) screened_out += s.ok && !verified_labels.count(s.config.label);
  const std::string rerun = search::triton_rerun(ans, dir, a.fn, side.dsl, "PYTHONPATH=" + pypath + " " + py);
  json side_json = {{"ok", side.ok}, {"rounds", side.rounds}, {"times_us", json::object()}, {"left_out", json::object()}};
  if (!side.ok) side_json["error"] = side.error;
  for (const search::Contender& c : side.timed) side_json["times_us"][c.name] = c.us;
  for (const auto& [name, why] : side.left_out) side_json["left_out"][name] = why;
  json item = {{"task", a.fn}, {"kind", "triton"}, {"stop_reason", r.stop_reason},
               {"candidates", static_cast<int>(r.screen.screened.size()) + dsl.value("candidates", 0)},
               {"screened", screened_out}, {"verified", 1 + static_cast<int>(r.verified.size())},
               {"use_baseline", ans.use_baseline}, {"best_baseline", ans.best_baseline}, {"returned", ans.returned},
               {"reason", ans.reason}, {"speedup_vs_best_baseline", ans.speedup_vs_best_baseline},
               {"speedup_vs_kernel", ans.speedup_vs_kernel}, {"baseline_us", baseline_us},
               {"pct_sol_before", pct_sol(kernel_us)}, {"pct_sol_after", pct_sol(ans.returned_us)},
               {"seconds", r.seconds}, {"sizes", json::array({size_row})}, {"trajectory", r.trajectory()},
               {"side_by_side", side_json}, {"rerun", rerun}};
  // The trajectory's accepted config is the returned one, and each contender's side-by-side time
  // stands beside its verification's.
  for (json& e : item["trajectory"]) {
    const std::string method = e.value("method", ""), k = method == "as given" ? "triton" : e.value("kernel", "");
    if (method == "screen, verified") e["accepted"] = returned_cfg && k == returned_cfg->config.label;
    if (method != "screen" && side_json["times_us"].contains(k)) e["side_by_side_us"] = side_json["times_us"][k];
  }
  if (!ans.use_baseline) {
    if (ans.language == "triton" && returned_cfg) {
      item["best"] = {{"kernel", returned_cfg->config.label}, {"language", "triton"}, {"config", returned_cfg->config.config},
                      {"schedule", returned_cfg->config.text}, {"score_us", ans.returned_us},
                      {"verified_us", returned_cfg->eval.median_us}, {"program", read_file(returned_cfg->config.candidate)}};
    } else if (ans.language == "dsl") {
      item["best"] = dsl_best.empty() ? json{{"kernel", ans.returned}} : dsl_best;
      item["best"]["language"] = "dsl";
      if (item["best"].contains("score_us")) item["best"]["search_us"] = item["best"]["score_us"];
      item["best"]["score_us"] = ans.returned_us;
      if (side.dsl.value("answer", "") == "stitched") item["best"]["stitched"] = true;
    }
  }
  std::string dsl_summary = dsl_why;
  if (dsl_summary.empty()) {
    dsl_summary = std::to_string(dsl.value("candidates", 0)) + " tried (" + dsl.value("stop_reason", std::string("?")) + ")";
    if (!dsl_best.empty()) dsl_summary += ", the fastest verified " + dsl_best.value("kernel", "") + " at " + sig(dsl_best.value("score_us", 0.0), 4) + " us";
    else if (!dsl.value("reason", std::string()).empty()) dsl_summary += ": " + dsl.value("reason", std::string());
    dsl_summary += "; its report: " + dir + "/dsl/report.md";
  }
  item["dsl"] = {{"ran", dsl_why.empty()}, {"summary", dsl_summary}, {"report", dsl_why.empty() ? dir + "/dsl" : ""}};
  json triton = {{"file", file}, {"line", task.value("line", 0)}, {"inputs", task["inputs"]}, {"inputs_text", shapes_text(task)},
                 {"reference", has_reference}, {"knobs", task["knobs"]}, {"space", task.value("space", 0)},
                 {"default", task["default"]}, {"screened", r.screen.screened.size()}, {"verified", 1 + r.verified.size()},
                 {"screen_stop", r.screen.stop}, {"max_configs", a.configs}, {"verify", a.verify}};
  if (!r.screen.error.empty()) triton["screen_error"] = r.screen.error;
  item["triton"] = triton;
  json doc = {{"run", 0}, {"gpu", {{"name", m0.emulate ? std::string("none: Triton's interpreter and the CUDA emulator") : gpu_name}}},
              {"agent", m0.search.agent}, {"problem", file}, {"triton", true},
              {"precision", ev.precision().empty() ? json{{"mode", m0.precision}} : ev.precision()}, {"results", json::array({item})}};
  if (m0.emulate) doc["emulated"] = true;

  // The store keeps the run and its report (`ksol runs`, `ksol show`); the report goes to DIR.
  doc["run"] = run;
  fs::create_directories(dir);
  for (const char* old : {"best.py", "as_given.py", "problem.py"}) fs::remove(dir + "/" + old);
  fs::remove_all(dir + "/" + a.fn);
  fs::copy_file(task.value("problem", ""), dir + "/problem.py", fs::copy_options::overwrite_existing);
  fs::copy_file(as_given.candidate, dir + "/as_given.py", fs::copy_options::overwrite_existing);
  if (item.contains("best") && ans.language == "triton") write_file_atomic(dir + "/best.py", item["best"]["program"].get<std::string>());
  if (item.contains("best") && ans.language == "dsl") {
    // The returned program and its CUDA, and the library the side-by-side timing ran (the one the
    // module path verified), which the rerun line names.
    fs::create_directories(dir + "/" + a.fn);
    for (const char* f : {"best.ksol", "best.cu"})
      if (fs::exists(dir + "/dsl/" + f)) fs::copy_file(dir + "/dsl/" + f, dir + "/" + a.fn + "/" + f, fs::copy_options::overwrite_existing);
    if (std::string lib = side.dsl.value("library", std::string()); !lib.empty() && fs::exists(lib))
      fs::copy_file(lib, dir + "/" + a.fn + "/best.so", fs::copy_options::overwrite_existing);
    // ksol.load finds the problem beside results.json once the run's own copy is gone.
    fs::copy_file(task.value("problem", ""), dir + "/dsl/" + fs::path(task.value("problem", "")).filename().string(),
                  fs::copy_options::overwrite_existing);
  }
  write_file_atomic(dir + "/results.json", doc.dump(2));
  write_file_atomic(dir + "/report.md", report::optimize_markdown(doc) + triton_markdown(item));
  std::string html = report::optimize_html(doc);
  if (size_t end = html.rfind("</body>"); end != std::string::npos)
    html.insert(end, "<h2>Triton</h2>\n<pre>" + report::html_escape(triton_markdown(item)) + "</pre>\n");
  write_file_atomic(dir + "/report.html", html);
  if (!m0.json_path.empty()) write_file_atomic(m0.json_path, doc.dump(2));
  if (st) {
    st->save_run_report(run, fs::absolute(dir).lexically_normal().string(), doc);
    st->finish_run(run, stop_requested() ? "interrupted" : "finished");
  }
  std::cerr << "report: " << dir << "/report.html, report.md, results.json\n";
  if (!ans.returned.empty()) std::cerr << "rerun: " << rerun << "\n";
  if (json_out) {
    std::cout << doc.dump(2) << "\n";
  } else if (ans.returned.empty()) {
    std::cout << a.fn << ": nothing verified (" << ans.reason << "); report " << dir << "/report.html\n";
  } else {
    std::cout << a.fn << ": " << (ans.returned == "triton" ? "the kernel as given (" + as_given.label + ")" : ans.returned) << " returned, "
              << fixed(ans.returned_us, 2) << " us"
              << (ans.speedup_vs_kernel > 0 && ans.returned != "triton" ? ", " + fixed(ans.speedup_vs_kernel, 3) + "x over the kernel as given"
                                                                          : std::string())
              << (ans.use_baseline ? "" : ", " + fixed(ans.speedup_vs_best_baseline, 3) + "x over " + ans.best_baseline)
              << "; precision " << doc["precision"].value("mode", std::string("?")) << "; report " << dir << "/report.html\n";
  }
  if (stop_requested()) return 128 + (stop_signal() > 0 ? stop_signal() : 2);
  return ans.returned.empty() ? exit_status::error : exit_status::ok;
}

}  // namespace ksol::cli
