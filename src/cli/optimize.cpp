// ksol optimize: the search loop (src/search) over each task's seed DSL program (program.ksol),
// with the expert or random agent, or an LLM as its coder (--answer schedule); an LLM agent
// otherwise runs the kernel loop (src/cli/optimize_kernels.cpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "agents/expert.h"
#include "cli/commands.h"
#include "agents/knowledge.h"
#include "agents/llm.h"
#include "agents/llm_agent.h"
#include "codegen/codegen.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "coord/session.h"
#include "cli/optimize_args.h"
#include "cli/optimize_batch.h"
#include "cli/optimize_module.h"
#include "cli/optimize_triton.h"
#include "core/hash.h"
#include "core/stop.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "mpi/cluster.h"
#include "report/optimize_report.h"
#include "search/optimize.h"
#include "search/space.h"
#include "store/store.h"
#include "task/task.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {

namespace {

std::string f2(double v, int prec = 2) {
  if (!(v > 0) || !std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

struct Seed {
  Task task;
  dsl::Program program;
  std::string path;
};

Seed load_seed(const std::string& name) {
  Seed s{load_task(task_argument("task", name)), {}, ""};
  s.path = (fs::path(s.task.dir) / "program.ksol").string();
  if (!fs::exists(s.path))
    throw UsageError("task " + s.task.name + " has no seed program (" + s.path +
                     "): write the algorithm in the DSL with a default schedule there");
  s.program = dsl::parse_program(read_file(s.path), s.path);
  codegen::Support ok = codegen::can_implement(s.program, search::binding_of(s.task));
  if (!ok.ok) throw std::runtime_error(s.path + ": unsupported for task " + s.task.name + ": " + ok.reason);
  return s;
}

// A field of a result read from a report (0 or "" when it is missing or of another type).
double num_of(const json& j, const char* k) { return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }
std::string str_of(const json& j, const char* k) { return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; }
bool returns_baseline(const json& r) { return !(r.is_object() && r.contains("use_baseline") && r["use_baseline"].is_boolean()) || r["use_baseline"].get<bool>(); }

// A task's result in the report: the returned candidate (c<index>) or the baseline.
std::string result_text(const json& r) {
  if (returns_baseline(r)) return "baseline:" + (str_of(r, "best_baseline").empty() ? std::string("-") : str_of(r, "best_baseline"));
  return "c" + std::to_string(static_cast<int64_t>(r.contains("best") ? num_of(r["best"], "index") : -1));
}

// The DSL source of the kernel a task's result returns; "" when it returns a baseline.
std::string returned_program(const json& r) {
  if (returns_baseline(r) || !r.contains("best")) return "";
  return str_of(r["best"], "program");
}

// What identifies a task's seed program across runs: the digest of its canonical text.
std::string seed_digest(const Seed& s) { return sha256_hex(dsl::print_source(s.program)); }

// The search's options from the command line (one task's; the run-wide budget is added per task).
search::OptimizeOptions search_options(const OptimizeArgs& a) {
  search::OptimizeOptions o;
  o.max_candidates = a.candidates;
  o.budget_seconds = a.seconds;
  o.target_sol = a.target_sol;
  o.seed = a.seed;
  o.plateau = a.plateau;
  o.agent = a.agent;
  o.prune = a.prune;
  o.profile = !a.no_profile && !is_batch_agent(a);  // batch mode: see batch_before_run
  o.dispatch_schedules = static_cast<size_t>(a.schedules_per_kernel);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  o.batch = a.batch > 0 ? static_cast<size_t>(a.batch) : std::clamp<size_t>(cores, 8, 32);
  return o;
}

std::string clock_text(double s) {
  if (!(s >= 0)) s = 0;
  int m = static_cast<int>(s) / 60, x = static_cast<int>(s) % 60;
  char b[32];
  std::snprintf(b, sizeof b, "%d:%02d", m, x);
  return b;
}

// A money budget needs prices: without them every request costs $0 and the budget never binds.
void check_llm_flags(const OptimizeArgs& a) {
  if (a.budget_dollars > 0 && a.price_in <= 0 && a.price_out <= 0)
    throw UsageError("--budget-dollars needs the model's prices: give --price-in and --price-out (dollars per million prompt and "
                     "completion tokens); without them every request counts as $0 and the budget would never stop the run");
}

json spend_json(const agents::LlmSpend& s) {
  return {{"prompt_tokens", s.usage.prompt_tokens}, {"completion_tokens", s.usage.completion_tokens},
          {"requests", s.usage.requests}, {"dollars", s.usage.dollars}};
}

}  // namespace

std::unique_ptr<agents::llm::Client> make_llm_client(const OptimizeArgs& a) {
  if (!agents::llm::is_llm_agent(a.agent)) return nullptr;
  agents::llm::Spec sp = agents::llm::parse_spec(a.agent);
  if (!a.llm_base_url.empty()) {
    sp.base_url = a.llm_base_url;
    // A hosted provider's key is never sent to another endpoint unless asked for by name.
    if (a.llm_key_env.empty()) sp.key_env = "";
  }
  if (!a.llm_key_env.empty()) sp.key_env = a.llm_key_env == "none" ? "" : a.llm_key_env;
  if (a.llm_timeout > 0) sp.timeout_s = a.llm_timeout;
  if (a.llm_retries >= 0) sp.retries = a.llm_retries;
  sp.min_interval_s = a.llm_min_interval;
  sp.price_in = a.price_in;
  sp.price_out = a.price_out;
  agents::llm::Budget bud{a.budget_tokens, a.budget_dollars, a.budget_requests, a.budget_llm_seconds};
  return std::make_unique<agents::llm::Client>(agents::llm::make_backend(sp), sp, bud, a.no_llm_cache ? "" : cache_dir() + "/llm",
                                               [](const std::string& l) { std::cerr << l << "\n"; });
}

namespace {

int run_optimize(const OptimizeArgs& a, const std::string& store, const std::string& worker, const std::string& assume_gpu,
                 bool json_out, const std::string& cmdline) {
  check_llm_flags(a);
  // A PyTorch module (KernelBench format) instead of built-in tasks.
  auto is_py = [](const std::string& t) { return fs::path(t).extension() == ".py"; };
  if (std::any_of(a.tasks.begin(), a.tasks.end(), is_py)) {
    if (a.tasks.size() != 1) throw UsageError("ksol optimize FILE.py takes one module file and no task names");
    if (mpi::wanted(a.mpi)) throw UsageError("ksol optimize FILE.py runs on one host: --mpi is for built-in tasks");
    if (a.agent != "expert" && a.agent != "random")
      throw UsageError("--agent " + a.agent + ": a module is searched by the expert or random agent");
    if (!a.from.empty() || a.answer != "dsl") throw UsageError("--from and --answer apply to a built-in or authored task, not to a module file");
    ModuleOptimizeArgs m;
    m.file = a.tasks[0];
    m.search = search_options(a);
    m.timeout = std::max(a.timeout, 600.0);
    m.report_dir = a.report_dir;
    m.json_path = a.json_out;
    m.emulate = a.emulate;
    m.fresh_baselines = a.fresh_baselines;
    m.precision = a.precision;
    m.path = a.path;
    m.plan = a.plan;
    if (!a.triton_fn.empty() && a.path_given)
      throw UsageError("--path chooses a module file's paths: a Triton task's reference takes the fx path");
    if (!a.triton_fn.empty())
      return run_optimize_triton({m, a.triton_fn, a.triton_configs, a.triton_verify, a.store.empty() ? store : a.store, cmdline}, json_out);
    return run_optimize_module(m, json_out);
  }
  if (std::optional<int> waiting = batch_before_run(a, a.store.empty() ? store : a.store)) return *waiting;
  // An LLM agent works through the kernel loop's roles (planner, coder, reviewer, repairer,
  // optimizer) from the seed program or --from; --answer schedule keeps it the coder of the
  // schedule search instead, the decision table planning.
  if (a.answer == "schedule") {
    if (!agents::llm::is_llm_agent(a.agent))
      throw UsageError("--answer schedule makes an LLM agent the schedule search's coder: the " + a.agent + " agent searches schedules already");
    if (!a.from.empty()) throw UsageError("--from starts the kernel loop: the schedule search (--answer schedule) starts from the task's seed program");
  } else if (!a.from.empty() || a.answer != "dsl" || agents::llm::is_llm_agent(a.agent)) {
    return run_kernel_optimize(a, store, worker, assume_gpu, json_out, cmdline);
  }
  if (a.emulate) throw UsageError("--emulate runs a module file's candidates on the CPU: give one FILE.py");
  if (!a.triton_fn.empty()) throw UsageError("--triton-fn names the kernel of a Triton task file: give one FILE.py");
  if (a.precision_given)
    throw UsageError("--precision applies to a PyTorch module file (FILE.py): a built-in task's precision is its task.toml's");
  if (a.path_given) throw UsageError("--path applies to a PyTorch module file (FILE.py): a built-in task has one path");
  if (a.plan != "auto") throw UsageError("--plan applies to a PyTorch module file (FILE.py): a built-in task is one program");
  std::vector<Seed> seeds;
  std::vector<std::string> names = a.tasks;
  if (names.empty())
    for (const std::string& dir : builtin_task_dirs())
      if (fs::exists(fs::path(dir) / "program.ksol")) names.push_back(dir);
  for (auto& n : names) seeds.push_back(load_seed(n));

  Session::Options so;
  so.store_path = a.store.empty() ? store : a.store;
  if (!worker.empty()) so.worker_argv = {worker};
  so.assume_gpu = assume_gpu;
  std::vector<int> gpu_ids = parse_gpus(a.gpus);
  // Over MPI, ranks above 0 only relay their workers' calls; rank 0 runs the searches on them all.
  std::unique_ptr<mpi::Cluster> cluster = mpi::wanted(a.mpi) ? mpi::Cluster::join() : nullptr;
  if (cluster && cluster->rank() > 0) return cluster->relay(so.worker_argv, gpu_ids);
  std::vector<std::string> shared;
  for (const Seed& sd : seeds) shared.push_back(sd.task.dir);
  std::vector<std::unique_ptr<Session>> sessions = cluster ? cluster->open_sessions(so, gpu_ids, shared) : open_sessions(so, gpu_ids);
  Session& s = *sessions[0];
  if (!s.has_gpu()) {
    // Said first: gate 1 and compilation need no GPU, so the seeds are taken that far, then it stops.
    print_no_gpu_notice("optimize", s.gpu_reason(),
                        "nothing can be timed; parsing, checking and compiling the " + std::to_string(seeds.size()) +
                            " seed program(s) instead (exit status 77 when they all compile, 1 otherwise)");
    std::vector<CompileJob> jobs;
    for (auto& sd : seeds) jobs.push_back(codegen::compile_job(sd.task, sd.program, sd.path));
    std::vector<CompileResult> built = compile_all(jobs);
    int bad = 0;
    json rows = json::array();
    for (size_t i = 0; i < seeds.size(); ++i) {
      const CompileResult& r = built[i];
      std::cerr << seeds[i].task.name << ": seed " << codegen::kernel_name(seeds[i].program) << " "
                << (r.ok ? "compiles" : "does not compile (" + r.stage + ")") << " (" << f2(r.seconds, 1) << " s)\n";
      if (!r.ok) ++bad, std::cerr << r.message << "\n";
      rows.push_back({{"task", seeds[i].task.name}, {"seed_program", seeds[i].path}, {"kernel", codegen::kernel_name(seeds[i].program)},
                      {"compiled", r.ok}, {"compile_stage", r.stage}, {"compile_seconds", r.seconds}});
    }
    std::cerr << "ksol optimize: " << seeds.size() - static_cast<size_t>(bad) << " of " << seeds.size()
              << " seed programs parsed, checked and compiled; nothing was timed (evaluation needs a GPU).\n";
    if (json_out) std::cout << json{{"gpu", false}, {"reason", s.gpu_reason()}, {"seeds", rows}}.dump(2) << "\n";
    return bad ? exit_status::error : exit_status::no_gpu;
  }
  // The tasks' schedule spaces are walked in the background while the GPU measures baselines, and
  // what every task builds before its search (its references, baselines and seed) is built in
  // the background from the start, task by task, so that each task finds it in the compile cache:
  // the seeds that take most of a minute to build (CUTLASS kernels) first, then the rest in task
  // order. Two cores are left to the worker and the search's own builds.
  for (auto& sd : seeds) search::legal_space(sd.program, search::binding_of(sd.task));
  std::vector<CompileJob> prebuild;
  for (auto& sd : seeds)
    if (codegen::compile_needs(sd.program).arch == "sm_90a") prebuild.push_back(codegen::compile_job(sd.task, sd.program, sd.path));
  for (auto& sd : seeds) {
    try {
      prebuild.push_back(reference_job(sd.task, false));
      if (!sd.task.ref_gpu.empty()) prebuild.push_back(reference_job(sd.task, true));
      for (const BaselineSpec& b : sd.task.baselines) prebuild.push_back(baseline_job(sd.task, b));
      if (codegen::compile_needs(sd.program).arch != "sm_90a") prebuild.push_back(codegen::compile_job(sd.task, sd.program, sd.path));
    } catch (const std::exception&) {
      // a source that cannot be read is reported by the task's own evaluation
    }
  }
  const int prebuild_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 2;
  std::thread seed_builds([prebuild, n = static_cast<size_t>(std::max(1, prebuild_threads))] {
    // In rounds of one job per thread, so that a stopped run waits for one round at most.
    for (size_t i = 0; i < prebuild.size() && !stop_requested(); i += n)
      compile_all(std::vector<CompileJob>(prebuild.begin() + static_cast<std::ptrdiff_t>(i),
                                          prebuild.begin() + static_cast<std::ptrdiff_t>(std::min(prebuild.size(), i + n))),
                  static_cast<int>(n));
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join_seed_builds{seed_builds};
  for (size_t i = 1; i < sessions.size(); ++i)
    if (!sessions[i]->has_gpu())
      throw std::runtime_error("--gpus: the worker on " + sessions[i]->name() + " has no usable GPU (" + sessions[i]->gpu_reason() + ")");

  agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  std::unique_ptr<agents::llm::Client> client = make_llm_client(a);
  s.begin_run(cmdline, {{"resume_of", a.resume}, {"optimize", {{"agent", a.agent}, {"seed", a.seed}, {"candidates", a.candidates}, {"resume_of", a.resume}}},
                        {"gpus", sessions.size()}});
  // Every LLM request becomes a row of the store, through a connection of its own: requests
  // come from every task's search thread, and a Store is one thread's.
  std::unique_ptr<store::Store> llm_store;
  std::mutex llm_store_mu;
  auto set_outcome = [&](int64_t id, const std::string& o) {
    std::lock_guard<std::mutex> g(llm_store_mu);
    if (llm_store) llm_store->set_llm_request_outcome(id, o);
  };
  if (client && !so.store_path.empty()) {
    llm_store = std::make_unique<store::Store>(store::Store::open(so.store_path));
    client->set_recorder([&, run = s.run_id()](const agents::llm::RequestRecord& q) -> int64_t {
      store::LlmRequestRow row = agents::request_row(q);
      row.run_id = run;
      row.outcome = q.ok ? "pending" : "no answer";
      std::lock_guard<std::mutex> g(llm_store_mu);
      return llm_store->record_llm_request(row);
    });
  }
  for (auto& other : sessions) other->join_run(s.run_id());
  // Tasks are spread over the GPUs, one search per GPU at a time; with several, each progress
  // line names its task.
  bool several = sessions.size() > 1;
  std::mutex out_mu;
  auto say = [&](const std::string& task, const std::string& line) {
    std::lock_guard<std::mutex> g(out_mu);
    std::cerr << (several ? "[" + task + "] " : "") << line << "\n";
  };
  // The run-wide budget is the run's wall time: each task, once its seed is timed, takes a share
  // of what is left after the fixed work (baselines, seed, hidden grade) of the tasks still to
  // come, by its headroom (search::RunBudget); what it does not use goes to the tasks after it.
  // --resume RUN of a run a signal interrupted: the tasks RUN finished (its report holds them; not
  // the one cut short) are reported as they ended there, not searched again, and the run-wide
  // budget counts the time RUN (and any run it resumed) had spent. A run that ended otherwise (a
  // batch agent's round, a finished run) has its evaluations reused, every task searched again.
  std::vector<json> carried(seeds.size());
  double spent_before = 0;
  if (a.resume > 0)
    if (store::Store* st = s.store())
      if (std::optional<store::RunReport> rep = st->run_report(a.resume); rep && rep->results.contains("interrupted") && rep->results.contains("results") &&
                                                                             rep->results["results"].is_array()) {
        double sum = 0, cut = 0;
        for (const json& r : rep->results["results"]) {
          if (!r.is_object()) continue;
          // A task still at work when the signal came ended cut short, whatever else its result says.
          if (str_of(r, "stop_reason") == "interrupted" || (r.contains("interrupted") && r["interrupted"].is_boolean() && r["interrupted"].get<bool>())) {
            cut += num_of(r, "seconds");
            continue;
          }
          // A task is carried only from the same seed program (one edited since is searched again).
          for (size_t i = 0; i < seeds.size(); ++i)
            if (seeds[i].task.name == str_of(r, "task") && str_of(r, "seed_sha256") == seed_digest(seeds[i]) && carried[i].is_null()) {
              carried[i] = r;
              if (!carried[i].contains("resumed_from")) carried[i]["resumed_from"] = a.resume;
              sum += num_of(r, "seconds");
            }
        }
        // The cut-short task's evaluations, reused, count against its own share again (as the
        // resumed search's resumed_seconds): its time in RUN is not counted twice.
        const double used = rep->results.contains("budget_used_seconds") ? num_of(rep->results, "budget_used_seconds") : sum + cut;
        spent_before = std::max(0.0, used - cut);
      }
  const auto run_start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return spent_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count(); };
  const double deadline = a.total_seconds;
  std::vector<search::RunBudget::Shape> shapes;
  for (const Seed& sd : seeds) shapes.push_back(search::RunBudget::shape_of(sd.task));
  struct Shared {
    std::mutex mu;
    int done = 0;
  } pool;
  search::RunBudget budget(deadline, static_cast<int>(sessions.size()), shapes);
  std::vector<json> all_items(seeds.size());
  install_stop_handlers();
  std::vector<char> started(seeds.size(), 0);
  // The tasks taken from the resumed run are done before any is searched: their results stand in
  // this run's report even if it is stopped too, and the budget knows them from the start.
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (carried[i].is_null()) continue;
    const json& c = carried[i];
    const json fw = c.contains("fixed_work") && c["fixed_work"].is_object() ? c["fixed_work"] : json::object();
    const json h = c.contains("hidden") && c["hidden"].is_object() ? c["hidden"] : json::object();
    budget.finish(i, search::FixedWork{num_of(fw, "worker_seconds"), static_cast<int>(num_of(fw, "evaluations"))},
                  !str_of(h, "status").empty() && str_of(h, "status") != "not_graded");
    ++pool.done;
    started[i] = 1;
    all_items[i] = c;
    say(seeds[i].task.name, seeds[i].task.name + ": done in run " + std::to_string(static_cast<int64_t>(num_of(c, "resumed_from"))) + " (" +
                                result_text(c) + ", " + f2(num_of(c, "speedup_vs_best_baseline")) + "x vs best baseline): not searched again; " +
                                std::to_string(pool.done) + "/" + std::to_string(seeds.size()) + " tasks");
  }
  run_parallel(seeds.size(), sessions.size(), [&](size_t i, size_t w) {
    const Seed& sd = seeds[i];
    if (!carried[i].is_null()) return;
    if (stop_requested()) return;  // interrupted: the tasks not begun are left to --resume
    started[i] = 1;
    agents::LlmAgent* llm_agent = nullptr;
    std::unique_ptr<agents::Agent> agent;
    if (client) {
      auto la = std::make_unique<agents::LlmAgent>(*client, sd.task, k, agents::default_dsl_card(), a.llm_max_tokens);
      la->set_progress([&, name = sd.task.name](const std::string& l) { say(name, sd.task.name + ": " + l); });
      la->set_outcome(set_outcome);
      llm_agent = la.get();
      agent = std::move(la);
    } else {
      agent = agents::make_agent(a.agent, k, a.seed);
    }
    search::SessionEvaluator ev(*sessions[w], a.agent, a.resume, a.timeout);
    ev.baseline_stop_factor = a.baseline_stop_factor;
    search::OptimizeOptions o = search_options(a);
    o.progress = [&, name = sd.task.name](const std::string& l) { say(name, l); };
    if (deadline > 0)
      o.seconds_after_seed = [&, i](double pct, const search::FixedWork& so_far) {
        std::lock_guard<std::mutex> g(pool.mu);
        double share = budget.share(i, pct, so_far, elapsed());
        if (a.seconds_given && a.seconds > 0) share = std::min(share, a.seconds);
        return std::max(share, 1e-3);
      };
    {
      std::lock_guard<std::mutex> g(pool.mu);
      std::string eta = deadline > 0 ? "; run " + clock_text(elapsed()) + " of its " + clock_text(deadline) + " budget" : "; run " + clock_text(elapsed());
      say(sd.task.name, "[" + std::to_string(i + 1) + "/" + std::to_string(seeds.size()) + "] optimizing " + sd.task.name + " from " + sd.path +
                            " with the " + a.agent + " agent" + (several ? " on " + sessions[w]->name() : "") + eta);
    }
    search::OptimizeResult r = search::optimize(sd.task, sd.program, ev, *agent, o);
    const bool cut_short = stop_requested();  // a signal came while it ran: --resume searches it again
    {
      std::lock_guard<std::mutex> g(pool.mu);
      budget.finish(i, r.fixed, r.graded);
      ++pool.done;
      double left_est = budget.fixed_left(budget.seconds_per_evaluation()) / static_cast<double>(sessions.size());
      std::string eta = deadline > 0 ? ", about " + clock_text(std::max(0.0, deadline - elapsed())) + " left" : ", about " + clock_text(left_est) + " of baselines and seeds left";
      say(sd.task.name, sd.task.name + ": done (" + (r.use_baseline ? (r.best_baseline.empty() ? std::string("no baseline passed") : "baseline " + r.best_baseline) : "c" + std::to_string(r.best)) + ", " +
                            f2(r.speedup_vs_baseline) + "x vs best baseline, " + f2(r.pct_sol_after * 100, 1) + "% SOL; " +
                            std::to_string(r.trajectory.size()) + " tried in " + f2(r.search_seconds, 1) + " s); " + std::to_string(pool.done) + "/" +
                            std::to_string(seeds.size()) + " tasks in " + clock_text(elapsed()) + eta);
      if (a.verbose) {
        const auto& b = r.breakdown;
        say(sd.task.name, "  seconds: baselines " + f2(b.baselines, 1) + ", seed " + f2(b.seed, 1) + ", build " + f2(b.build, 1) + ", screen " +
                              f2(b.screen, 1) + ", verify " + f2(b.verify, 1) + ", profile " + f2(b.profile, 1) + ", propose " + f2(b.propose, 1) +
                              ", hidden grade " + f2(b.grade, 1) + "; " + std::to_string(r.screened) + " screened out, " + std::to_string(r.verified) +
                              " verified, " + f2(r.search_seconds > 0 ? 60.0 * r.trajectory.size() / r.search_seconds : 0, 1) + " tried per minute");
        for (auto& l : r.log) say(sd.task.name, "  " + l);
      }
    }
    json j = r.to_json();
    j["seed_program"] = sd.path;
    j["seed_sha256"] = seed_digest(sd);
    j["interrupted"] = cut_short;
    if (llm_agent) {
      llm_agent->review(r);
      // What the LLM cost this task, and what the requests behind its best kernel cost.
      j["llm"] = spend_json(llm_agent->spend());
      if (const search::Attempt* b = r.best_attempt(); b && !r.use_baseline)
        if (const agents::LlmSpend* sp = llm_agent->spend_of(b->program)) j["llm"]["best_kernel"] = spend_json(*sp);
      // Each program the model wrote, in the trajectory: what the requests behind it cost.
      for (size_t t = 0; t < r.trajectory.size() && t < j["trajectory"].size(); ++t)
        if (const agents::LlmSpend* sp = llm_agent->spend_of(r.trajectory[t].program); sp && r.trajectory[t].method.rfind("llm", 0) == 0)
          j["trajectory"][t]["llm"] = spend_json(*sp);
    }
    if (several) j["gpu"] = sessions[w]->device_index();
    if (cluster) j["worker"] = sessions[w]->name();
    all_items[i] = std::move(j);
  });
  json all = json::array();
  std::vector<std::string> not_started;
  for (size_t i = 0; i < all_items.size(); ++i)
    if (started[i]) all.push_back(all_items[i]);
    else not_started.push_back(seeds[i].task.name);
  const bool interrupted = stop_requested();
  s.finish_run(interrupted ? "interrupted" : "finished");
  json doc = {{"run", s.run_id()}, {"gpu", s.device()}, {"agent", a.agent}, {"results", all}, {"budget_used_seconds", elapsed()}};
  if (a.resume > 0) doc["resume_of"] = a.resume;
  if (client) {
    const agents::llm::Usage& u = client->total();
    doc["llm"] = {{"backend", client->id()}, {"priced", a.price_in > 0 || a.price_out > 0}, {"prompt_tokens", u.prompt_tokens},
                  {"completion_tokens", u.completion_tokens}, {"requests", u.requests}, {"dollars", u.dollars}};
    std::string why;
    if (client->exhausted(&why)) doc["llm"]["stopped"] = why;
  }
  // Batch mode: the requests the searches deferred become the next batch.
  std::optional<agents::llm::BatchNotice> batch = client ? batch_after_run(*client, a, s.run_id()) : std::nullopt;
  if (batch) doc["llm"]["batch"] = batch->to_json();
  if (interrupted) doc["interrupted"] = {{"signal", stop_signal()}, {"not_started", not_started}};
  if (!a.json_out.empty()) write_file_atomic(a.json_out, doc.dump(2));
  // The report: Markdown, a self-contained HTML page, the JSON, and each task's best kernel as
  // DSL and as the CUDA generated from it.
  std::string dir = a.report_dir.empty() ? "runs/run-" + std::to_string(s.run_id()) : a.report_dir;
  fs::create_directories(dir);
  write_file_atomic(dir + "/results.json", doc.dump(2));
  write_file_atomic(dir + "/report.md", report::optimize_markdown(doc));
  write_file_atomic(dir + "/report.html", report::optimize_html(doc));
  for (size_t i = 0; i < seeds.size(); ++i)
    if (std::string text = returned_program(all_items[i]); started[i] && !text.empty()) {
      const std::string& name = seeds[i].task.name;
      fs::create_directories(dir + "/" + name);
      write_file_atomic(dir + "/" + name + "/best.ksol", text);
      try {
        write_file_atomic(dir + "/" + name + "/best.cu",
                          codegen::compile_job(seeds[i].task, dsl::parse_program(text, dir + "/" + name + "/best.ksol"), "best").source_text);
      } catch (const std::exception& e) {
        // The report and the store's record come first: a program that no longer generates (a
        // carried one, from an older ksol) loses its best.cu alone.
        std::cerr << "ksol optimize: " << name << "/best.cu not written: " << e.what() << "\n";
      }
    }
  // The store keeps what the report states, so that `ksol show` and `ksol export` answer from it
  // alone, and where the report is, for its files.
  if (store::Store* st = s.store(); st && s.run_id()) st->save_run_report(s.run_id(), fs::absolute(dir).lexically_normal().string(), doc);
  std::cerr << "report: " << dir << "/report.html, report.md, results.json\n";
  if (json_out) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"task", "tried", "stop", "result", "kernel", "vs best baseline", "vs naive", "%SOL before", "%SOL after", "hidden sizes"}};
    bool one_call = false;
    for (size_t i = 0; i < seeds.size(); ++i) {
      if (!started[i]) continue;
      const json& r = all_items[i];
      const json h = r.contains("hidden") && r["hidden"].is_object() ? r["hidden"] : json::object();
      const double hs = num_of(h, "speedup_vs_best_baseline");
      const std::string hst = str_of(h, "status");
      std::string hidden = hs > 0 ? f2(hs) + "x vs best baseline" : !hst.empty() && hst != "not_graded" && hst != "ok" ? "FAILED: baseline returned" : "-";
      std::string stop = str_of(r, "stop_reason");
      if (r.contains("resumed_from")) stop += " (run " + std::to_string(static_cast<int64_t>(num_of(r, "resumed_from"))) + ")";
      const bool from_one_call = r.contains("speedup_vs_naive_from_one_call") && r["speedup_vs_naive_from_one_call"].is_boolean() &&
                                 r["speedup_vs_naive_from_one_call"].get<bool>();
      one_call = one_call || from_one_call;
      rows.push_back({str_of(r, "task"), std::to_string(static_cast<int64_t>(num_of(r, "candidates"))), stop, result_text(r),
                      returned_program(r).empty() ? "-" : str_of(r["best"], "kernel"), f2(num_of(r, "speedup_vs_best_baseline")) + "x",
                      report::naive_speedup_text(num_of(r, "speedup_vs_naive"), from_one_call), f2(num_of(r, "pct_sol_before"), 1) + "%",
                      f2(num_of(r, "pct_sol_after"), 1) + "%", hidden});
    }
    print_columns(std::cout, rows);
    if (one_call) std::cout << report::kNaiveFromOneCallNote << "\n";
    if (const report::Geomeans gm = report::geomeans(all); gm.n_best)
      std::cout << "geomean over " << gm.n_best << " task(s): " << fixed(gm.best, 3) << "x over the best baseline"
                << (gm.n_naive ? ", " + fixed(gm.naive, 3) + "x over the naive one (" + std::to_string(gm.n_naive) + " task(s))" : std::string())
                << "; a task that returns a baseline counts 1.00x\n";
    for (size_t i = 0; i < seeds.size(); ++i)
      if (std::string text = returned_program(all_items[i]); started[i] && !text.empty())
        std::cout << "\n# " << seeds[i].task.name << ": best program (" << str_of(all_items[i]["best"], "kernel") << ")\n" << text;
    std::cout << "run " << s.run_id() << "; JSON with --json" << (a.json_out.empty() ? "" : ", written to " + a.json_out) << "\n";
  }
  if (batch) std::cerr << "ksol optimize: " << batch->next << "\n";
  if (interrupted) {
    std::cerr << "ksol optimize: interrupted (signal " << stop_signal() << "): the evaluations in flight finished, "
              << not_started.size() << " task(s) not started" << (not_started.empty() ? "" : " (" + join(not_started, ", ") + ")")
              << "; resume with --resume " << s.run_id() << "\n";
    return 128 + (stop_signal() > 0 ? stop_signal() : 2);
  }
  return batch ? exit_status::waiting : exit_status::ok;
}

}  // namespace

// Registers `ksol optimize`. The global options are read when the command runs; it ends the
// parse with its exit status (CLI::Success / CLI::RuntimeError), so CLI11_PARSE returns it.
void add_optimize_command(CLI::App& app, const std::string& store, const std::string& worker, const std::string& assume_gpu,
                          const bool& json_out, int argc, char** argv) {
  auto a = std::make_shared<OptimizeArgs>();
  auto* cmd = app.add_subcommand("optimize", "improve each task's kernel from its seed program (program.ksol): the expert or random agent "
                                             "searches DSL schedules, an LLM agent works through the kernel loop's roles");
  cmd->add_option("tasks", a->tasks,
                  "task names or folders (default: every built-in task with a seed program), or one PyTorch module file "
                  "(KernelBench format, .py) whose forward is lowered to one DSL program, or cut into DSL pieces around the ops "
                  "kept as PyTorch calls, and searched on its own tensors; and, with --path best (the default), whose "
                  "torch.compile kernels are searched one by one too, the better of the two answers returned");
  cmd->add_option("--agent", a->agent,
                  "expert (decision table + method cards), random, or an LLM (the kernel loop's planner, coder, reviewer, repairer and "
                  "optimizer requests; --answer): openai:MODEL, anthropic:MODEL, exchange:DIR, or "
                  "batch:openai:MODEL:DIR / batch:anthropic:MODEL:DIR (batch mode: the requests a run needs are written to "
                  "DIR/requests-N.jsonl for the provider's batch API and the run ends with exit status 75, saying how to submit "
                  "them; once the results are in DIR/results-N.jsonl the printed command, the same one with --resume RUN, goes on)")
      ->check([](const std::string& v) -> std::string {
        if (v == "expert" || v == "random") return "";
        try {
          agents::llm::parse_spec(v);
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      })
      ->capture_default_str();
  cmd->add_option("--llm-base-url", a->llm_base_url, "chat endpoint base (default https://api.openai.com/v1 or https://api.anthropic.com; e.g. http://127.0.0.1:8080/v1 for llama.cpp)");
  cmd->add_option("--llm-key-env", a->llm_key_env, "environment variable with the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY for the hosted endpoints; with --llm-base-url, none unless named here; 'none' sends no key)");
  cmd->add_option("--llm-timeout", a->llm_timeout, "seconds per LLM request (default 120); with exchange:DIR, how long to wait for each answer file (default 600)")->check(positive_number());
  cmd->add_option("--llm-retries", a->llm_retries, "retries after a rate limit, a server error or a dropped connection (default 3; exchange 0); batch mode: more batches for a request that expired or met a server error (default 1)")->check(non_negative_integer());
  cmd->add_option("--llm-max-tokens", a->llm_max_tokens, "longest answer to ask for")->capture_default_str()->check(positive_integer());
  cmd->add_option("--llm-min-interval", a->llm_min_interval, "seconds between LLM requests (a rate limit)")->check(non_negative_number());
  cmd->add_option("--price-in", a->price_in, "dollars per million prompt tokens (for --budget-dollars, the store's per-request cost and the report's dollars; batch mode: the provider's batch prices)")->check(non_negative_number());
  cmd->add_option("--price-out", a->price_out, "dollars per million completion tokens")->check(non_negative_number());
  cmd->add_option("--budget-tokens", a->budget_tokens, "stop asking the LLM after this many tokens (0: no limit)")->check(non_negative_integer());
  cmd->add_option("--budget-dollars", a->budget_dollars, "stop asking the LLM after this many dollars (0: no limit); needs --price-in and --price-out")->check(non_negative_number());
  cmd->add_option("--budget-requests", a->budget_requests, "stop asking the LLM after this many requests (0: no limit)")->check(non_negative_integer());
  cmd->add_option("--budget-llm-seconds", a->budget_llm_seconds, "stop asking the LLM after this much waiting (0: no limit)")->check(non_negative_number());
  CLI::Option* answer_opt = cmd->add_option("--answer", a->answer, "what an LLM agent answers in, through the kernel loop (planner, coder, reviewer, repairer and optimizer requests, from each task's seed program or --from): dsl (DSL programs), cuda or either (CUDA answers pass every gate a user's CUDA candidate does); or schedule (no kernel loop: the schedule search, the decision table planning and the model writing each DSL program)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dsl", "cuda", "either", "schedule"}));
  cmd->add_option("--from", a->from, "start from this kernel instead of the task's seed program: a CUDA source exporting ksol_run (include/ksol/abi.h) or a .ksol program; one task, an LLM agent; the model improves it through the kernel loop (--answer cuda unless given)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--task", a->tasks, "a task name or folder (the same as giving it as an argument)");
  cmd->add_flag("--no-llm-cache", a->no_llm_cache, "do not reuse cached answers (they are cached by request hash under the cache folder)");
  cmd->add_option("--budget-candidates", a->candidates, "programs to try per task (built, screened or evaluated), the seed included")->capture_default_str()->check(positive_integer());
  CLI::Option* seconds_opt = cmd->add_option("--budget-seconds", a->seconds, "wall-time budget per task for its search, compiles and the seed included, the baselines not (0: none; with --budget-total-seconds, a cap on each share)")->capture_default_str()->check(non_negative_number());
  cmd->add_option("--budget-total-seconds", a->total_seconds, "the whole run's wall time (0: none): each task, once its seed is timed, gets a share of what is left after the other tasks' baselines, seeds and grades, in proportion to its SOL headroom, and returns what it does not use (an LLM's kernel loop: an even share of what is left when each task starts)")
      ->capture_default_str()
      ->check(non_negative_number());
  cmd->add_option("--target-sol", a->target_sol, "stop a task at this fraction of SOL")->capture_default_str()->check(fraction());
  cmd->add_option("--plateau", a->plateau, "stop after this many generations without a new best")->capture_default_str()->check(positive_integer());
  cmd->add_option("--batch", a->batch, "proposals built on every core and screened together per generation (default: the cores, 8 to 32)")->check(positive_integer());
  cmd->add_flag("--verbose", a->verbose, "after each task: where its seconds went (baselines, seed, build, screen, verify, profile, grade) and the search's log");
  cmd->add_option("--seed", a->seed, "seed of the search and the agents")->capture_default_str()->check(unsigned_integer());
  cmd->add_option("--resume", a->resume, "run whose evaluations are reused, not repeated; of an interrupted run, the tasks it finished are reported as they ended and the run-wide budget counts its time (batch mode: the run that wrote the last batch)")->check(positive_integer());
  cmd->add_option("--json-out", a->json_out, "also write the results as JSON to this file");
  cmd->add_option("--report", a->report_dir, "folder for the report (report.md, report.html, results.json, each task's best.ksol and best.cu; a module file's stitched pieces as piece-<i>.ksol/.cu); default runs/run-<id> (a module file: runs/module-<name>)");
  cmd->add_option("--timeout", a->timeout, "seconds per worker call")->capture_default_str()->check(positive_number());
  cmd->add_option("--prune", a->prune, "a module file's search (one candidate at a time): a child slower than this many times the best at a size is rejected after a timing pass, before its correctness gate (0: every child gets every gate)")->capture_default_str()->check(non_negative_number());
  cmd->add_option("--baseline-stop-factor", a->baseline_stop_factor,
                  "a baseline whose first call at a size takes more than this many times the fastest baseline's verified median there "
                  "is stopped after it (a second call when the first may carry one-time setup): far_slower, shown as such, never the "
                  "comparator, not verified or timed in full; the baselines run vendor libraries first, naive kernels last (0: every "
                  "baseline verified and timed in full)")
      ->capture_default_str()
      ->check(non_negative_number());
  cmd->add_flag("--fresh-baselines", a->fresh_baselines, "with a module file: time eager and torch.compile again instead of reusing an earlier run's times (kept in ksol's cache per problem file, precision mode, GPU, PyTorch version and worker code)");
  cmd->add_flag("--emulate", a->emulate, "with a module file: run its candidates on the CPU through ksol's CUDA emulator and the Python worker on the CPU, to test the whole flow without a GPU (the times are the emulator's and the report says so; never a result)");
  CLI::Option* precision_opt =
      cmd->add_option("--precision", a->precision, std::string("with a module file: ") + kModulePrecisionHelp)->capture_default_str()->check(module_precision_check());
  CLI::Option* path_opt =
      cmd->add_option("--path", a->path, "with a module file: best (the default: both paths, the faster verified answer relative to "
                                         "torch.compile), fx (the forward lowered into DSL pieces and stitched) or inductor "
                                         "(torch.compile's Triton kernels searched one by one and kept where the whole model gets faster)")
          ->capture_default_str()
          ->check(CLI::IsMember({"best", "fx", "inductor"}));
  cmd->add_option("--plan", a->plan, "with a module file, the fx path's plan: auto (the default: the module's own plan and, where "
                                     "the forward has a convolution or GEMM, the vendor-call plan beside it, the faster returned; "
                                     "each gets half the search budget), own (convolutions and GEMMs as ksol's kernels, fused with "
                                     "their epilogues) or vendor (every convolution and GEMM left to cuDNN/cuBLAS through PyTorch, "
                                     "the ops around them ksol's pieces)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "own", "vendor"}));
  CLI::Option* triton_opt = cmd->add_option("--triton-fn", a->triton_fn, "FILE.py is a standalone Triton task (docs/TRITON.md) and this its @triton.jit kernel: verified and timed like a user's kernel, its configs (num_warps, num_stages, block sizes) screened and the fastest verified, its reference() searched as a module for DSL candidates");
  cmd->add_option("--triton-configs", a->triton_configs, "with --triton-fn: most configs screened (one case against the reference and a short timing each)")->capture_default_str()->check(positive_integer())->needs(triton_opt);
  cmd->add_option("--triton-verify", a->triton_verify, "with --triton-fn: the fastest screened configs verified through every gate")->capture_default_str()->check(non_negative_integer())->needs(triton_opt);
  cmd->add_flag("--no-profile", a->no_profile, "do not run Nsight Compute on parents (by default a generation's first parent is profiled once where ncu works, while a minute of the task's budget remains; the roofline classifies otherwise)");
  cmd->add_option("--schedules-per-kernel", a->schedules_per_kernel, "at most this many schedules in one kernel with schedules by problem size, which the search builds where different schedules win at different sizes (1: one schedule for every size)")->capture_default_str()->check(positive_integer());
  cmd->add_option("--gpus", a->gpus, "optimize several tasks at once, one worker per GPU: a count (2) or device indices (0,1); default one worker on device 0")->check(gpus_check());
  cmd->add_flag("--mpi", a->mpi, "run as the ranks of an MPI job (mpirun, srun; also when such a launcher started several ranks): tasks spread over every rank's workers (--gpus), rank 0 writes the store and the report");
  // --store is the global option; `optimize --store PATH` reaches it through fallthrough.
  cmd->callback([a, seconds_opt, precision_opt, path_opt, answer_opt, &store, &worker, &assume_gpu, &json_out, argc, argv]() {
    a->seconds_given = seconds_opt->count() > 0;
    a->path_given = path_opt->count() > 0;
    a->precision_given = precision_opt->count() > 0;
    if (!a->from.empty() && answer_opt->count() == 0) a->answer = "cuda";
    std::vector<std::string> parts;
    for (int i = 0; i < argc; ++i) parts.push_back(shell_quote(argv[i]));
    a->words = parts;
    finish_command("optimize", [&] { return run_optimize(*a, store, worker, assume_gpu, json_out, join(parts, " ")); });
  });
}

}  // namespace ksol::cli
