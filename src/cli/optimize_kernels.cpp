// ksol optimize with an LLM agent (--answer dsl|cuda|either, --from FILE): the LLM's kernel loop
// (agents/kernel_loop.h) over each task, from its seed program or the given kernel, evaluated
// like `ksol eval --candidate`: a CUDA kernel goes through gate 1's source scan, nvcc and every
// gate in the worker; a DSL program through the search's evaluator.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "agents/kernel_loop.h"
#include "agents/knowledge.h"
#include "agents/llm_agent.h"
#include "cli/commands.h"
#include "cli/optimize_args.h"
#include "cli/optimize_batch.h"
#include "cli/usage.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "coord/session.h"
#include "core/hash.h"
#include "core/util.h"
#include "mpi/cluster.h"
#include "report/optimize_report.h"
#include "search/optimize.h"
#include "store/store.h"
#include "task/task.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {
namespace {

// CUDA kernels as `ksol eval --candidate FILE.cu` evaluates them (the file kept in the report
// folder, the candidate row carrying parent, method and agent); DSL programs through the search's
// evaluator.
class SessionKernelEvaluator : public agents::KernelEvaluator {
 public:
  // `resume`: the run whose evaluations are reused; `profile` false: no Nsight Compute (batch mode).
  SessionKernelEvaluator(Session& s, const std::string& agent, std::string dir, double timeout, int64_t resume, bool profile)
      : s_(s), se_(s, agent, resume, timeout), agent_(agent), dir_(std::move(dir)), timeout_(timeout), resume_(resume), profile_(profile) {}

  search::Outcome evaluate(const Task& t, const agents::Kernel& k, const std::string& label, int64_t parent,
                           const std::string& method) override {
    if (k.language == "dsl") return se_.evaluate(t, *k.program, label, parent, method);
    CompileJob j = job(t, k, label);
    int64_t id = register_candidate(t, j, k, parent, method);
    EvalOptions eo = options(search::visible_sizes(t), se_.search_seed(t));
    search::Outcome o = search::outcome_of(t, s_.evaluate(t, j, label, origin(k), eo));
    o.candidate_id = id;
    o.kernel = t.name + "_" + label + "_cuda";
    return o;
  }
  std::map<std::string, search::Outcome> baselines(const Task& t) override { return se_.baselines(t); }
  void set_baseline_stop_factor(double k) { se_.baseline_stop_factor = k; }
  std::optional<search::ProfileResult> profile(const Task& t, const agents::Kernel& k, const std::string& size, std::string* why) override {
    if (!profile_) {
      if (why) *why = "batch mode: the roofline classifies (a profile's figures differ between runs, and a resumed round must ask the requests the last one wrote)";
      return std::nullopt;
    }
    if (k.language == "dsl") return se_.profile(t, *k.program, size, why);
    // Nsight Compute selects a kernel by name, which only a generated kernel's is known.
    if (why) *why = "a CUDA kernel's launches have no name ksol knows; the roofline classifies it";
    return std::nullopt;
  }
  search::Outcome grade_hidden(const Task& t, const agents::Kernel& k, const std::string& label) override {
    if (k.language == "dsl") return se_.grade_hidden(t, *k.program, label);
    search::Outcome o;
    o.label = label;
    EvalOptions eo = options(search::hidden_sizes(t), se_.grade_seed(t));
    if (eo.sizes.empty()) {
      o.error = "the task has no hidden sizes";
      return o;
    }
    o = search::outcome_of(t, s_.evaluate(t, job(t, k, label), label, origin(k), eo));
    o.kernel = t.name + "_" + label + "_cuda";
    return o;
  }
  std::map<std::string, search::Outcome> baselines_hidden(const Task& t) override { return se_.baselines_hidden(t); }

 private:
  // The source as a file, so that the job is exactly the one `ksol eval --candidate FILE` builds.
  CompileJob job(const Task& t, const agents::Kernel& k, const std::string& label) {
    std::string path = k.origin.rfind("llm", 0) == 0 ? dir_ + "/" + t.name + "/answers/" + label + ".cu" : k.origin;
    if (path != k.origin) {
      fs::create_directories(fs::path(path).parent_path());
      write_file_atomic(path, k.source);
    }
    CompileJob j = candidate_job(t, path);
    j.language = "cuda";
    return j;
  }
  std::string origin(const agents::Kernel& k) const {
    return k.origin.rfind("llm", 0) == 0 ? "agent:" + agent_ : "file:" + fs::absolute(k.origin).string();
  }
  EvalOptions options(const std::vector<const SizeSet*>& sizes, uint64_t seed) const {
    EvalOptions eo;
    for (auto* z : sizes) eo.sizes.push_back(z->name);
    eo.seed = seed;
    eo.timeout_s = timeout_;
    eo.resume_run = resume_;
    return eo;
  }
  int64_t register_candidate(const Task& t, const CompileJob& j, const agents::Kernel& k, int64_t parent, const std::string& method) {
    store::Store* st = s_.store();
    if (!st) return 0;
    store::CandidateRow c;
    c.task_id = st->upsert_task(t.name, t.spec_hash, t.spec_text);
    c.source_hash = candidate_source_hash(j);
    c.source = j.source_text;
    c.language = "cuda";
    c.origin = origin(k);
    if (parent > 0) c.parent_id = parent;
    c.method = method;
    c.agent = agent_;
    return st->upsert_candidate(c);
  }

  Session& s_;
  search::SessionEvaluator se_;
  std::string agent_, dir_;
  double timeout_;
  int64_t resume_;
  bool profile_;
};

std::string f2(double v, int prec = 2) { return v > 0 ? fixed(v, prec) : "-"; }

}  // namespace

int run_kernel_optimize(const OptimizeArgs& a, const std::string& store, const std::string& worker, const std::string& assume_gpu,
                        bool json_out, const std::string& cmdline) {
  agents::AnswerLanguage answer = agents::parse_answer_language(a.answer);
  if (!agents::llm::is_llm_agent(a.agent))
    throw UsageError(std::string(a.from.empty() ? "--answer " + a.answer : "--from") +
                     " needs an LLM agent (--agent openai:MODEL, anthropic:MODEL, exchange:DIR or batch:FORMAT:MODEL:DIR): the " + a.agent +
                     " agent writes DSL schedules only");
  if (!a.from.empty() && a.tasks.size() != 1)
    throw UsageError("--from starts one task from the given kernel: name that task (--task T or one task argument)");
  if (!a.gpus.empty() || mpi::wanted(a.mpi))
    throw UsageError("the LLM's kernel loop runs on one GPU: --gpus and --mpi are for the schedule search (--agent expert|random, or an LLM "
                     "agent with --answer schedule)");
  struct Item {
    Task task;
    agents::Kernel start;
    std::string family;  // the seed program's DSL family: which method cards apply
  };
  std::vector<Item> items;
  std::vector<std::string> names = a.tasks;
  if (names.empty())
    for (const std::string& dir : builtin_task_dirs())
      if (fs::exists(fs::path(dir) / "program.ksol")) names.push_back(dir);
  for (const std::string& n : names) {
    Item it{load_task(task_argument("task", n)), {}, ""};
    const std::string seed = (fs::path(it.task.dir) / "program.ksol").string();
    std::optional<dsl::Program> seed_program;
    if (fs::exists(seed)) seed_program = dsl::parse_program(read_file(seed), seed);
    if (seed_program) it.family = seed_program->family;
    if (!a.from.empty()) {
      it.start = agents::kernel_from_file(a.from);
    } else if (seed_program) {
      it.start = {"dsl", read_file(seed), seed_program, seed};
    } else {
      throw UsageError("task " + it.task.name + " has no seed program (" + seed + "): give the kernel to start from with --from FILE.cu");
    }
    items.push_back(std::move(it));
  }

  Session::Options so;
  so.store_path = a.store.empty() ? store : a.store;
  if (!worker.empty()) so.worker_argv = {worker};
  so.assume_gpu = assume_gpu;
  Session s(so);
  if (!s.has_gpu()) {
    // As the search does: gate 1 and compilation need no GPU, so the starting kernels go that far.
    print_no_gpu_notice("optimize", s.gpu_reason(),
                        "nothing can be timed; checking and compiling the " + std::to_string(items.size()) +
                            " starting kernel(s) instead (exit status 77 when they all compile, 1 otherwise)");
    int bad = 0;
    for (const Item& it : items) {
      CompileJob j = it.start.language == "dsl" ? codegen::compile_job(it.task, *it.start.program, it.start.origin) : candidate_job(it.task, it.start.origin);
      CompileResult r = compile(j);
      std::cerr << it.task.name << ": " << it.start.origin << " (" << it.start.language << ") "
                << (r.ok ? "compiles" : "does not compile (" + r.stage + ")") << "\n";
      if (!r.ok) ++bad, std::cerr << r.message << "\n";
    }
    return bad ? exit_status::error : exit_status::no_gpu;
  }
  agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  std::unique_ptr<agents::llm::Client> client = make_llm_client(a);
  s.begin_run(cmdline, {{"resume_of", a.resume}, {"optimize", {{"agent", a.agent}, {"answer", a.answer}, {"from", a.from}, {"resume_of", a.resume}}}});
  const std::string dir = a.report_dir.empty() ? "runs/run-" + std::to_string(s.run_id()) : a.report_dir;
  // Every request becomes a row of the store, through a connection of its own, as in the search.
  std::unique_ptr<store::Store> llm_store;
  std::mutex mu;
  if (!so.store_path.empty()) {
    llm_store = std::make_unique<store::Store>(store::Store::open(so.store_path));
    client->set_recorder([&, run = s.run_id()](const agents::llm::RequestRecord& q) -> int64_t {
      store::LlmRequestRow row = agents::request_row(q);
      row.run_id = run;
      row.outcome = q.ok ? "pending" : "no answer";
      std::lock_guard<std::mutex> g(mu);
      return llm_store->record_llm_request(row);
    });
  }
  SessionKernelEvaluator ev(s, a.agent, dir, a.timeout, a.resume, !a.no_profile && !is_batch_agent(a));
  ev.set_baseline_stop_factor(a.baseline_stop_factor);
  json all = json::array();
  std::vector<agents::KernelLoopResult> results;
  // The run-wide budget (--budget-total-seconds): each task gets an even share of what is left
  // when it starts, capped by --budget-seconds where given; what a task does not use goes to the
  // tasks after it.
  const auto run_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    std::cerr << "[" << i + 1 << "/" << items.size() << "] optimizing " << it.task.name << " from " << it.start.origin << " ("
              << it.start.language << ") with " << a.agent << ", " << a.answer << " answers\n";
    agents::KernelLoopOptions o;
    o.answer = answer;
    o.branches = std::max(1, std::min(a.candidates, 1000));
    o.plateau = a.plateau;
    o.budget_seconds = a.seconds;
    if (a.total_seconds > 0) {
      double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
      double share = std::max(0.0, a.total_seconds - spent) / static_cast<double>(items.size() - i);
      o.budget_seconds = a.seconds_given && a.seconds > 0 ? std::min(a.seconds, share) : share;
      o.budget_seconds = std::max(o.budget_seconds, 1e-3);
      std::cerr << it.task.name << ": " << f2(o.budget_seconds, 0) << " s of the run's " << f2(a.total_seconds, 0) << " s budget ("
                << f2(std::max(0.0, a.total_seconds - spent), 0) << " s left for " << items.size() - i << " task(s))\n";
    }
    o.max_tokens = a.llm_max_tokens;
    o.family = it.family;
    if (answer != agents::AnswerLanguage::cuda) o.dsl_card = agents::default_dsl_card();
    if (answer != agents::AnswerLanguage::dsl) o.cuda_card = agents::default_cuda_card();
    o.progress = [&](const std::string& l) { std::cerr << it.task.name << ": " << l << "\n"; };
    o.outcome = [&](int64_t id, const std::string& out) {
      std::lock_guard<std::mutex> g(mu);
      if (llm_store) llm_store->set_llm_request_outcome(id, out);
    };
    agents::KernelLoopResult r = agents::run_kernel_loop(it.task, it.start, *client, k, ev, o);
    const search::OptimizeResult& res = r.result;
    std::cerr << it.task.name << ": done (" << (res.use_baseline ? "baseline " + res.best_baseline : "c" + std::to_string(res.best)) << ", "
              << f2(res.speedup_vs_baseline) << "x vs best baseline, " << f2(res.pct_sol_after * 100, 1) << "% SOL; "
              << res.trajectory.size() << " kernels evaluated, " << r.tried.size() << " answers)\n";
    json j = r.to_json();
    j["start"] = {{"origin", it.start.origin}, {"language", it.start.language}};
    all.push_back(std::move(j));
    results.push_back(std::move(r));
  }
  s.finish_run("finished");
  json doc = {{"run", s.run_id()}, {"gpu", s.device()}, {"agent", a.agent}, {"answer", a.answer}, {"results", all}};
  const agents::llm::Usage& u = client->total();
  doc["llm"] = {{"backend", client->id()}, {"priced", a.price_in > 0 || a.price_out > 0}, {"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens}, {"requests", u.requests}, {"dollars", u.dollars}};
  if (std::string why; client->exhausted(&why)) doc["llm"]["stopped"] = why;
  std::optional<agents::llm::BatchNotice> batch = batch_after_run(*client, a, s.run_id());
  if (batch) doc["llm"]["batch"] = batch->to_json();
  if (!a.json_out.empty()) write_file_atomic(a.json_out, doc.dump(2));
  fs::create_directories(dir);
  write_file_atomic(dir + "/results.json", doc.dump(2));
  write_file_atomic(dir + "/report.md", report::optimize_markdown(doc));
  write_file_atomic(dir + "/report.html", report::optimize_html(doc));
  std::vector<std::vector<std::string>> rows = {{"task", "start", "kernels", "stop", "result", "language", "vs best baseline", "%SOL before", "%SOL after"}};
  for (size_t i = 0; i < results.size(); ++i) {
    const search::OptimizeResult& r = results[i].result;
    const agents::Kernel* b = results[i].best_kernel();
    if (b && !r.use_baseline) {
      fs::create_directories(dir + "/" + r.task);
      write_file_atomic(dir + "/" + r.task + (b->language == "dsl" ? "/best.ksol" : "/best.cu"), b->source);
    }
    rows.push_back({r.task, items[i].start.language, std::to_string(r.trajectory.size()), r.stop_reason,
                    r.use_baseline ? "baseline:" + r.best_baseline : "c" + std::to_string(r.best), b && !r.use_baseline ? b->language : "-",
                    f2(r.speedup_vs_baseline) + "x", f2(r.pct_sol_before * 100, 1) + "%", f2(r.pct_sol_after * 100, 1) + "%"});
  }
  if (store::Store* st = s.store(); st && s.run_id()) st->save_run_report(s.run_id(), fs::absolute(dir).lexically_normal().string(), doc);
  std::cerr << "report: " << dir << "/report.html, report.md, results.json\n";
  if (json_out) std::cout << doc.dump(2) << "\n";
  else print_columns(std::cout, rows), std::cout << "run " << s.run_id() << "; JSON with --json\n";
  if (batch) {
    std::cerr << "ksol optimize: " << batch->next << "\n";
    return exit_status::waiting;
  }
  return exit_status::ok;
}

}  // namespace ksol::cli
