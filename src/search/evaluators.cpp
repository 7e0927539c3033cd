// The search's evaluators: over a Session (compile, screen and every gate on a GPU worker) and
// the scripted one for tests (a cost model over the schedule knobs).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>

#include "agents/profile.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "coord/session.h"
#include "core/hash.h"
#include "core/stop.h"
#include "core/util.h"
#include "search/optimize.h"

namespace ksol::search {
namespace {

using Clock = std::chrono::steady_clock;

double size_weight(const Task& t, const std::string& name) {
  const SizeSet* s = t.find_size(name);
  return s ? s->weight : 1.0;
}

}  // namespace

// --- the Session evaluator -------------------------------------------------------------------

Outcome outcome_of(const Task& t, const CandidateOutcome& co) {
  Outcome o;
  o.label = co.label;
  if (!co.compiled.ok) {
    o.status = Status::failed;
    o.error = co.compiled.stage + " gate: " + co.compiled.message.substr(0, 2000);
    return o;
  }
  bool ok = !co.sizes.empty();
  for (const SizeEvaluation& s : co.sizes) {
    SizeResult r;
    static_cast<SizeEvaluation&>(r) = s;
    // A size an earlier run verified counts as it did there.
    if (s.status == Status::skipped && s.median_us > 0) r.status = Status::ok;
    r.weight = size_weight(t, s.size);
    o.worker_seconds += s.harness_seconds();
    if (s.raw.is_object() && s.raw.contains("resumed_harness_seconds") && s.raw["resumed_harness_seconds"].is_object())
      o.resumed_seconds += s.raw["resumed_harness_seconds"].value("total", 0.0);
    if (s.failed_gate == Gate::screen) o.screened = true;
    if (!r.ok()) {
      ok = false;
      if (o.error.empty())
        o.error = s.size + ": " + to_string(s.status) + (s.failed_gate == Gate::none ? "" : std::string(" at ") + to_string(s.failed_gate)) +
                  ": " + s.message;
    }
    o.sizes.push_back(std::move(r));
  }
  o.status = ok ? Status::ok : Status::failed;
  return o;
}

namespace {

// The evaluation options for some of a task's sizes (the visible ones for the search, the hidden
// ones for the grade).
EvalOptions options_for(const std::vector<const SizeSet*>& sizes, int64_t resume, double timeout) {
  EvalOptions eo;
  for (auto* s : sizes) eo.sizes.push_back(s->name);
  eo.resume_run = resume;
  eo.timeout_s = timeout;
  return eo;
}

EvalOptions visible_options(const Task& t, int64_t resume, double timeout) { return options_for(visible_sizes(t), resume, timeout); }

}  // namespace

Outcome SessionEvaluator::evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t parent,
                                   const std::string& method) {
  if (auto u = unsupported(t, p, label)) return *u;
  Outcome o;
  o.label = label;
  o.kernel = codegen::kernel_name(p);
  CompileJob j = codegen::compile_job(t, p, t.name + "/" + label + ".ksol");
  std::string origin = "agent:" + agent_;
  o.candidate_id = register_candidate(t, j, parent, method);
  EvalOptions eo = visible_options(t, resume_, timeout_s_);
  eo.seed = search_seed(t);
  eo.prune_above_us = prune_above_us;
  auto pre = built_.find(candidate_source_hash(j));
  CandidateOutcome co = s_.evaluate(t, j, label, origin, eo, pre != built_.end() ? &pre->second : nullptr);
  Outcome r = outcome_of(t, co);
  r.candidate_id = o.candidate_id;
  r.kernel = o.kernel;
  return r;
}

int64_t SessionEvaluator::register_candidate(const Task& t, const CompileJob& j, int64_t parent, const std::string& method) {
  store::Store* st = s_.store();
  if (!st) return 0;
  // The same row Session::evaluate upserts, written first so that it keeps parent and method.
  store::CandidateRow c;
  c.task_id = st->upsert_task(t.name, t.spec_hash, t.spec_text);
  c.source_hash = candidate_source_hash(j);
  c.source = j.original;
  c.language = "dsl";
  c.origin = "agent:" + agent_;
  if (parent > 0) c.parent_id = parent;
  c.method = method;
  c.agent = agent_;
  return st->upsert_candidate(c);
}

std::vector<CompiledItem> compile_batch(const Task& t, const std::vector<BuildItem>& items, std::vector<Built>& built) {
  built.assign(items.size(), Built{});
  std::vector<CompiledItem> out;
  std::vector<CompileJob> jobs;
  for (size_t k = 0; k < items.size(); ++k) {
    const BuildItem& it = items[k];
    if (auto u = unsupported(t, *it.program, it.label)) {
      built[k].ok = false;
      built[k].error = "unsupported: " + u->error;
      continue;
    }
    out.push_back({k, codegen::compile_job(t, *it.program, t.name + "/" + it.label + ".ksol"), {}});
    jobs.push_back(out.back().job);
  }
  std::vector<CompileResult> rs = compile_all(jobs);
  for (size_t m = 0; m < rs.size(); ++m) {
    Built& b = built[out[m].index];
    b.ok = rs[m].ok;
    b.seconds = rs[m].cache_hit ? 0 : rs[m].seconds;
    b.cost_seconds = rs[m].cost_seconds;
    if (!rs[m].ok) b.error = rs[m].stage + ": " + rs[m].message.substr(0, 2000);
    out[m].result = std::move(rs[m]);
  }
  return out;
}

std::vector<Built> SessionEvaluator::build(const Task& t, const std::vector<BuildItem>& items) {
  // A prefetch still building would race this build for the same sources: let it finish.
  prefetching_.wait();
  std::vector<Built> out;
  for (CompiledItem& c : compile_batch(t, items, out)) {
    out[c.index].candidate_id = register_candidate(t, c.job, items[c.index].parent_id, items[c.index].method);
    built_[candidate_source_hash(c.job)] = c.result;
  }
  return out;
}

std::vector<ScreenTime> SessionEvaluator::screen(const Task& t, const std::vector<BuildItem>& items, const std::string& size,
                                                 double* worker_seconds) {
  std::vector<ScreenTime> out(items.size());
  std::vector<std::string> libs;
  std::vector<size_t> which;
  for (size_t k = 0; k < items.size(); ++k) {
    CompileJob j = codegen::compile_job(t, *items[k].program, t.name + "/" + items[k].label + ".ksol");
    auto it = built_.find(candidate_source_hash(j));
    CompileResult c = it != built_.end() ? it->second : compile(j);
    if (it == built_.end()) built_[candidate_source_hash(j)] = c;
    if (!c.ok) {
      out[k].message = "does not build: " + c.stage;
      continue;
    }
    libs.push_back(c.so_path);
    which.push_back(k);
  }
  ScreenOptions so;
  so.size = size;
  so.seed = search_seed(t);
  so.timeout_s = std::min(timeout_s_, 60.0 + 10.0 * static_cast<double>(libs.size()));
  ScreenBatch sb = s_.screen(t, libs, so);
  if (worker_seconds) *worker_seconds = sb.worker_seconds;
  take_screen_times(sb, which, out);
  return out;
}

std::vector<std::pair<size_t, std::string>> screen_libraries(const std::vector<BuildItem>& items, std::vector<ScreenTime>& out,
                                                            const std::function<std::string(const BuildItem&, std::string* why)>& library) {
  std::vector<std::pair<size_t, std::string>> libs;
  for (size_t k = 0; k < items.size(); ++k) {
    std::string why, so = library(items[k], &why);
    if (so.empty()) out[k].message = "does not build: " + why;
    else libs.push_back({k, so});
  }
  return libs;
}

void take_screen_times(const ksol::ScreenBatch& sb, const std::vector<size_t>& which, std::vector<ScreenTime>& out) {
  for (size_t m = 0; m < which.size() && m < sb.times.size(); ++m) {
    const ksol::ScreenTime& s = sb.times[m];
    ScreenTime& r = out[which[m]];
    r.status = s.status;
    r.median_us = s.median_us;
    r.ci_low_us = s.ci_low_us;
    r.ci_high_us = s.ci_high_us;
    r.samples = s.samples;
    r.dropped = s.dropped;
    r.message = s.status == "ok" ? "" : s.error_class + (s.message.empty() ? "" : ": " + s.message);
  }
}

void SessionEvaluator::record_screened(const Task& t, int64_t candidate_id, const std::string& size, const ScreenTime& st,
                                       const std::string& why) {
  SizeEvaluation e;
  e.size = size;
  e.status = Status::failed;
  e.failed_gate = Gate::screen;
  e.error_class = st.status == "ok" || st.message.empty() ? "slower_than_best" : "did_not_run";
  e.message = why;
  e.provenance = {{"task", t.name}, {"task_dir", t.dir}, {"spec_hash", t.spec_hash}, {"size", size}, {"master_seed", search_seed(t)},
                  {"timing_seed", timing_seed_of(search_seed(t))}, {"screen", {{"median_us", st.median_us}, {"samples", st.samples}}}};
  s_.record(t, candidate_id, e);
}

uint64_t SessionEvaluator::search_seed(const Task& t) {
  auto it = search_seeds_.find(t.name);
  if (it == search_seeds_.end()) {
    std::random_device rd;
    it = search_seeds_.emplace(t.name, (static_cast<uint64_t>(rd()) << 20) ^ rd()).first;
  }
  return it->second;
}

uint64_t SessionEvaluator::grade_seed(const Task& t) {
  auto it = grade_seeds_.find(t.name);
  if (it == grade_seeds_.end()) {
    std::random_device rd;
    uint64_t g = (static_cast<uint64_t>(rd()) << 20) ^ rd();
    if (g == search_seed(t)) g ^= 1;  // never the search's cases
    it = grade_seeds_.emplace(t.name, g).first;
  }
  return it->second;
}

void SessionEvaluator::prefetch(const Task& t, const std::vector<dsl::Program>& next) { prefetching_.start(t, next); }

void BackgroundBuild::start(const Task& t, const std::vector<dsl::Program>& next) {
  codegen::Binding b = binding_of(t);
  std::vector<CompileJob> jobs;
  for (const dsl::Program& p : next) {
    if (!codegen::can_implement(p, b).ok) continue;
    try {
      jobs.push_back(codegen::compile_job(t, p, t.name + "/prefetch.ksol"));
    } catch (const std::exception&) {
      // the build compiles it again and reports why
    }
  }
  wait();
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([jobs = std::move(jobs), cancel = cancel_] {
    try {
      compile_all(jobs, 0, cancel.get());
    } catch (const std::exception&) {
      // the build reports failures
    }
  });
}

void BackgroundBuild::wait() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundBuild::cancel() {
  if (cancel_) cancel_->store(true);
  wait();
}

BackgroundBuild::~BackgroundBuild() { cancel(); }

std::pair<double, double> SessionEvaluator::device_sm() const {
  // The session's GPU ({"cc": "9.0", "sm_count": 132, ...}), else the evaluator's default.
  std::pair<double, double> d = Evaluator::device_sm();
  const nlohmann::json& g = s_.device();
  if (!g.is_object()) return d;
  if (g.contains("cc") && g["cc"].is_string()) {
    const std::string cc = g["cc"];
    auto dot = cc.find('.');
    try {
      if (dot != std::string::npos) d.first = std::stod(cc.substr(0, dot)) * 10 + std::stod(cc.substr(dot + 1));
    } catch (const std::exception&) {
    }
  }
  if (g.contains("sm_count") && g["sm_count"].is_number()) d.second = g["sm_count"].get<double>();
  return d;
}

SessionEvaluator::~SessionEvaluator() = default;

Outcome SessionEvaluator::grade_hidden(const Task& t, const dsl::Program& p, const std::string& label) {
  Outcome o;
  o.label = label;
  EvalOptions eo = options_for(hidden_sizes(t), resume_, timeout_s_);
  if (eo.sizes.empty()) {
    o.error = "the task has no hidden sizes";
    return o;
  }
  eo.seed = grade_seed(t);
  // The same source as in the search, so the same candidate row: its hidden sizes join it.
  CompileJob j = codegen::compile_job(t, p, t.name + "/" + label + ".ksol");
  Outcome r = outcome_of(t, s_.evaluate(t, j, label, "agent:" + agent_, eo));
  r.kernel = codegen::kernel_name(p);
  return r;
}

std::map<std::string, Outcome> SessionEvaluator::baselines_hidden(const Task& t) {
  EvalOptions eo = options_for(hidden_sizes(t), resume_, timeout_s_);
  if (eo.sizes.empty()) return {};
  eo.seed = grade_seed(t);
  return baselines_with(t, eo);
}

std::map<std::string, Outcome> SessionEvaluator::baselines(const Task& t) {
  EvalOptions eo = visible_options(t, resume_, timeout_s_);
  eo.seed = search_seed(t);
  return baselines_with(t, eo);
}

std::map<std::string, Outcome> SessionEvaluator::baselines_with(const Task& t, EvalOptions eo) {
  std::map<std::string, Outcome> out;
  for (const BaselineSpec* b : baseline_order(t)) {
    eo.far_slower = far_slower_limits(out, baseline_stop_factor);
    out[b->name] = outcome_of(t, s_.evaluate(t, baseline_job(t, *b), "baseline:" + b->name, "baseline:" + b->name, eo));
  }
  return out;
}

std::optional<ProfileResult> SessionEvaluator::profile(const Task& t, const dsl::Program& p, const std::string& size, std::string* why) {
  static std::string ncu_why;
  static const bool have_ncu = agents::profile::ncu_available(&ncu_why);
  if (!have_ncu) {
    if (why) *why = ncu_why;
    return std::nullopt;
  }
  // The program compiled as for its evaluation (a cache hit), run once by a one-shot worker:
  // no correctness gate, a few timed calls, under ncu with only its kernel selected.
  CompileJob j = codegen::compile_job(t, p, t.name + "/profile.ksol");
  CompileResult c = compile(j);
  const SizeSet* sz = t.find_size(size);
  if (!c.ok || !sz) {
    if (why) *why = !c.ok ? "the program does not compile" : "no size " + size;
    return std::nullopt;
  }
  Session::References refs = s_.compile_references(t);
  nlohmann::json req = {{"op", "eval"}, {"id", 1}, {"task_dir", t.dir}, {"size", size}, {"candidate_so", c.so_path},
                        {"reference_cpu_so", refs.cpu.so_path}, {"reference_gpu_so", refs.gpu.ok ? refs.gpu.so_path : ""},
                        {"seeds", {1, 2, 3}}, {"timing_seed", 7}, {"check", false}, {"time", true},
                        {"timing", {{"min_samples", 3}, {"max_samples", 3}, {"warmup_calls", 1}, {"warmup_seconds", 0.0}}},
                        {"defences_off", {"verify-timed"}}, {"size_dims", sz->dims}, {"size_options", sz->options}};
  std::string dir = cache_dir() + "/profile";
  std::filesystem::create_directories(dir);
  // One file per call: searches on several GPUs profile at the same time.
  static std::atomic<int> serial{0};
  std::string file = dir + "/request-" + std::to_string(::getpid()) + "-" + std::to_string(serial++) + ".json";
  write_file_atomic(file, req.dump() + "\n");
  std::vector<std::string> worker = s_.worker_argv();
  worker.push_back("--once");
  worker.push_back(file);
  // The generated kernels carry the program's kernel name, except the gemm family's: its SIMT
  // kernel is ksol_gemm_simt and its CUTLASS one a cutlass::device_kernel instantiation. Only the
  // selected kernels are profiled, so every row of the CSV is the candidate's.
  const std::string regex = p.family == "gemm" ? "ksol_gemm_simt|device_kernel" : codegen::kernel_name(p);
  ProcessResult pr = run_process(agents::profile::ncu_command(regex, worker), 600);
  std::filesystem::remove(file);
  std::map<std::string, double> metrics;
  try {
    metrics = agents::profile::parse_ncu_csv(pr.output);
  } catch (const std::exception& e) {
    if (why) *why = std::string("ncu gave no metrics (") + e.what() + "); exit code " + std::to_string(pr.exit_code);
    return std::nullopt;
  }
  // The thresholds learn from every kernel profiled on this machine (the cache folder).
  std::string hist_path = cache_dir() + "/profiles.jsonl";
  static std::mutex hist_mu;  // searches on several GPUs share the file
  std::lock_guard<std::mutex> lock(hist_mu);
  std::vector<std::map<std::string, double>> history;
  {
    std::ifstream in(hist_path);
    for (std::string line; std::getline(in, line);)
      try {
        history.push_back(nlohmann::json::parse(line).get<std::map<std::string, double>>());
      } catch (const std::exception&) {
      }
  }
  ProfileResult r = classify_profile(metrics, history);
  std::ofstream(hist_path, std::ios::app) << nlohmann::json(metrics).dump() << "\n";
  return r;
}

std::optional<ProfileResult> ScriptedEvaluator::profile(const Task&, const dsl::Program& p, const std::string&, std::string* why) {
  std::optional<std::map<std::string, double>> m = profiler ? profiler(agents::full_schedule(p)) : std::nullopt;
  if (!m) {
    if (why) *why = profiler ? "the scripted profiler has no profile for this schedule" : "no scripted profiler";
    return std::nullopt;
  }
  ++profiles;
  return classify_profile(*m, profile_history);
}

// --- the scripted evaluator ------------------------------------------------------------------

double ScriptedEvaluator::time_of(const codegen::Schedule& s, const std::string& size) const {
  double f = base_us;
  auto sm = size_model.find(size);
  for (auto& [key, knob] : sm != size_model.end() ? sm->second : model) {
    std::string v;
    for (auto& kv : s)
      if (kv.first == key) v = kv.second;
    if (v == knob.preferred) continue;
    bool num = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
               knob.preferred.find_first_not_of("0123456789") == std::string::npos;
    if (num) f *= 1 + knob.weight * std::fabs(std::log2(std::stod(v) / std::stod(knob.preferred)));
    else f *= 1 + knob.weight * 2;
  }
  return f;
}

namespace {
// The schedule a program runs at a size (a program with schedules by size: the one its guards pick).
codegen::Schedule schedule_at(const dsl::Program& p, const SizeSet* sz) {
  if (p.guarded.empty() || !sz) return agents::full_schedule(p);
  std::map<std::string, int64_t> dims;
  for (auto& [k, v] : sz->dims) dims[k] = static_cast<int64_t>(std::llround(v));
  return agents::full_schedule(dsl::variant_at(p, dims));
}

double scale_of(const SizeSet& s) {
  double n = 1;
  for (auto& [k, v] : s.dims) n *= v;
  return n > 0 ? n / 1e6 : 1;
}
}  // namespace

Outcome ScriptedEvaluator::evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t parent,
                                    const std::string& method) {
  ++evaluations;
  calls.push_back({parent, method});
  return run_on(t, p, label, visible_sizes(t), false);
}

Outcome ScriptedEvaluator::grade_hidden(const Task& t, const dsl::Program& p, const std::string& label) {
  std::vector<const SizeSet*> sizes = hidden_sizes(t);
  if (sizes.empty()) {
    Outcome o;
    o.label = label;
    o.error = "the task has no hidden sizes";
    return o;
  }
  return run_on(t, p, label, sizes, true);
}

std::map<std::string, Outcome> ScriptedEvaluator::baselines_hidden(const Task& t) {
  std::vector<const SizeSet*> sizes = hidden_sizes(t);
  return sizes.empty() ? std::map<std::string, Outcome>{} : baselines_on(sizes);
}

Outcome ScriptedEvaluator::run_on(const Task& t, const dsl::Program& p, const std::string& label,
                                  const std::vector<const SizeSet*>& sizes, bool hidden) {
  if (auto u = unsupported(t, p, label)) {
    u->candidate_id = evaluations;
    return *u;
  }
  Outcome o;
  o.label = label;
  o.candidate_id = evaluations;
  o.kernel = codegen::kernel_name(p);
  bool failed = false;
  for (auto* sz : sizes) {
    codegen::Schedule s = schedule_at(p, sz);
    failed = failed || (fail && fail(s)) || (hidden && fail_hidden && fail_hidden(s)) || (fail_run && fail_run(s));
  }
  for (auto* sz : sizes) {
    const double tm = time_of(schedule_at(p, sz), sz->name);
    SizeResult r;
    r.size = sz->name;
    r.weight = sz->weight;
    double sc = scale_of(*sz);
    if (auto it = prune_above_us.find(sz->name); it != prune_above_us.end() && tm * sc > it->second) {
      // As the worker's screen does: timed, not verified, and nothing after it evaluated.
      r.status = Status::failed;
      r.failed_gate = Gate::screen;
      r.error_class = "slower_than_best";
      r.message = "screened out: " + std::to_string(tm * sc) + " us is above " + std::to_string(it->second) + " us";
      o.sizes.push_back(r);
      o.status = Status::failed;
      o.screened = true;
      o.error = "screen: " + r.message;
      ++screened;
      return o;
    }
    r.status = failed ? Status::failed : Status::ok;
    r.median_us = tm * sc;
    r.ci_low_us = r.median_us * (1 - noise_frac);
    r.ci_high_us = r.median_us * (1 + noise_frac);
    r.sol_us = sol_us * sc;
    r.pct_sol = r.sol_us / r.median_us;
    r.headroom = r.median_us / r.sol_us;
    r.bound = "memory";
    if (failed) r.message = "scripted failure";
    o.sizes.push_back(r);
  }
  o.status = failed ? Status::failed : Status::ok;
  if (failed) o.error = "correctness gate: scripted failure";
  return o;
}

std::map<std::string, Outcome> ScriptedEvaluator::baselines(const Task& t) { return baselines_on(visible_sizes(t)); }

std::map<std::string, Outcome> ScriptedEvaluator::baselines_on(const std::vector<const SizeSet*>& sizes) {
  std::map<std::string, Outcome> out;
  std::vector<std::pair<std::string, double>> order;
  for (auto& [name, us] : baseline_us)
    if (name != "naive") order.emplace_back(name, us);
  if (baseline_us.count("naive")) order.emplace_back("naive", baseline_us.at("naive"));
  for (auto& [name, us] : order) {
    Outcome o;
    o.label = "baseline:" + name;
    o.status = Status::ok;
    const std::map<std::string, FarSlowerLimit> limits = far_slower_limits(out, baseline_stop_factor);
    for (auto* sz : sizes) {
      SizeResult r;
      r.size = sz->name;
      r.weight = sz->weight;
      r.status = Status::ok;
      double sc = scale_of(*sz);
      if (auto l = limits.find(sz->name); l != limits.end() && us * sc > l->second.above_us()) {
        // As the worker's probe does: one call's time, nothing verified or timed.
        r.status = Status::far_slower;
        r.probe_us = us * sc;
        r.message = far_slower_message(l->second, r.probe_us);
        r.sol_us = sol_us * sc;
        o.status = Status::failed;
        o.error = sz->name + ": " + r.message;
        o.sizes.push_back(r);
        continue;
      }
      r.median_us = us * sc;
      r.ci_low_us = r.median_us * (1 - noise_frac);
      r.ci_high_us = r.median_us * (1 + noise_frac);
      r.sol_us = sol_us * sc;
      r.pct_sol = r.sol_us / r.median_us;
      r.bound = "memory";
      o.sizes.push_back(r);
    }
    out[name] = o;
  }
  return out;
}

std::vector<Built> ScriptedEvaluator::build(const Task& t, const std::vector<BuildItem>& items) {
  std::vector<Built> out(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    ++builds;
    out[k].candidate_id = 100000 + builds;
    out[k].cost_seconds = build_cost_s;
    if (auto u = unsupported(t, *items[k].program, items[k].label)) {
      out[k].ok = false;
      out[k].error = u->error;
    } else if (fail_compile && fail_compile(agents::full_schedule(*items[k].program))) {
      out[k].ok = false;
      out[k].error = "compile: scripted compile error";
    }
  }
  return out;
}

std::vector<ScreenTime> ScriptedEvaluator::screen(const Task& t, const std::vector<BuildItem>& items, const std::string& size,
                                                  double* worker_seconds) {
  ++screen_calls;
  screen_sizes.push_back(size);
  std::vector<ScreenTime> out(items.size());
  const SizeSet* sz = t.find_size(size);
  double sc = sz ? scale_of(*sz) : 1.0;
  for (size_t k = 0; k < items.size(); ++k) {
    ++screened_programs;
    codegen::Schedule s = schedule_at(*items[k].program, sz);
    if (fail_run && fail_run(s)) {
      out[k].message = "returned_error: scripted";
      continue;
    }
    // A deterministic error per schedule: the same schedule screens the same way every time.
    double noise = 0;
    if (screen_noise_frac > 0) {
      uint64_t h = std::hash<std::string>{}(codegen::schedule_text(s) + size);
      noise = screen_noise_frac * (static_cast<double>(h % 2001) / 1000.0 - 1.0);
    }
    out[k].status = "ok";
    out[k].median_us = time_of(s, size) * sc * (1 + noise);
    out[k].ci_low_us = out[k].ci_high_us = out[k].median_us;
    out[k].samples = 10;
  }
  if (worker_seconds) *worker_seconds = 0;
  return out;
}

}  // namespace ksol::search
