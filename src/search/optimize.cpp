// The optimisation loop and its evaluators (see optimize.h).
#include "search/optimize.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <tuple>

#include "agents/profile.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "coord/session.h"
#include "core/hash.h"
#include "core/stop.h"
#include "core/util.h"
#include "sol/sol.h"

namespace ksol::search {
namespace {

using Clock = std::chrono::steady_clock;

double wgeo(const Outcome& o, double SizeResult::*field) {
  if (!o.ok() || o.sizes.empty()) return 0;
  double sw = 0, sl = 0;
  for (auto& s : o.sizes) {
    double v = s.*field;
    if (v <= 0) return 0;
    sw += s.weight;
    sl += s.weight * std::log(v);
  }
  return sw > 0 ? std::exp(sl / sw) : 0;
}

std::string fmt(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

double size_weight(const Task& t, const std::string& name) {
  const SizeSet* s = t.find_size(name);
  return s ? s->weight : 1.0;
}

}  // namespace

double Outcome::score_us() const { return wgeo(*this, &SizeResult::median_us); }
double Outcome::ci_low_us() const { return wgeo(*this, &SizeResult::ci_low_us); }
double Outcome::ci_high_us() const { return wgeo(*this, &SizeResult::ci_high_us); }
double Outcome::pct_sol() const { return wgeo(*this, &SizeResult::pct_sol); }

const SizeResult* Outcome::representative() const {
  const SizeResult* best = nullptr;
  for (auto& s : sizes)
    if (!best || s.weight > best->weight || (s.weight == best->weight && s.sol_us > best->sol_us)) best = &s;
  return best;
}

double speedup(const Outcome& base, const Outcome& cand) {
  double sw = 0, sl = 0;
  for (auto& c : cand.sizes) {
    if (c.status != "ok" || c.median_us <= 0) continue;
    for (auto& b : base.sizes)
      if (b.size == c.size && b.status == "ok" && b.median_us > 0) {
        sw += c.weight;
        sl += c.weight * std::log(b.median_us / c.median_us);
      }
  }
  return sw > 0 ? std::exp(sl / sw) : 0;
}

std::vector<const SizeSet*> visible_sizes(const Task& t) {
  std::vector<const SizeSet*> v;
  for (auto& s : t.sizes)
    if (!s.hidden) v.push_back(&s);
  return v;
}

std::vector<const SizeSet*> hidden_sizes(const Task& t) {
  std::vector<const SizeSet*> v;
  for (auto& s : t.sizes)
    if (s.hidden) v.push_back(&s);
  return v;
}

codegen::Binding binding_of(const Task& t) { return codegen::binding_for(t); }

std::optional<Outcome> unsupported(const Task& t, const dsl::Program& p, const std::string& label) {
  codegen::Support sup = codegen::can_implement(p, binding_of(t));
  if (sup.ok) return std::nullopt;
  Outcome o;
  o.label = label;
  o.status = "unsupported";
  o.error = sup.reason;
  return o;
}

void flag_faster_than_sol(SizeResult& sr, const std::string& what) {
  if (sr.status != "ok" || !sol::suspect(sr.pct_sol)) return;
  sr.status = "suspect";
  sr.message = "faster than " + what + "'s SOL bound (" + std::to_string(sr.pct_sol * 100) + "% of SOL)";
}

// --- the Session evaluator -------------------------------------------------------------------

namespace {

Outcome convert(const Task& t, const CandidateOutcome& co) {
  Outcome o;
  o.label = co.label;
  if (!co.compiled.ok) {
    o.status = "failed";
    o.error = co.compiled.stage + " gate: " + co.compiled.message.substr(0, 2000);
    return o;
  }
  bool ok = !co.sizes.empty();
  for (auto& s : co.sizes) {
    SizeResult r;
    r.size = s.size;
    r.status = s.status == "skipped" && s.median_us > 0 ? "ok" : s.status;
    r.weight = size_weight(t, s.size);
    r.median_us = s.median_us;
    r.ci_low_us = s.ci_low_us;
    r.ci_high_us = s.ci_high_us;
    r.sol_us = s.sol_us;
    r.pct_sol = s.pct_sol;
    r.headroom = s.headroom;
    r.bound = s.bound;
    r.message = s.message;
    if (s.raw.is_object() && s.raw.contains("harness_seconds") && s.raw["harness_seconds"].is_object())
      o.worker_seconds += s.raw["harness_seconds"].value("total", 0.0);
    if (s.raw.is_object() && s.raw.contains("resumed_harness_seconds") && s.raw["resumed_harness_seconds"].is_object())
      o.resumed_seconds += s.raw["resumed_harness_seconds"].value("total", 0.0);
    if (r.status != "ok") {
      ok = false;
      if (o.error.empty()) o.error = s.size + ": " + s.status + (s.failed_gate.empty() ? "" : " at " + s.failed_gate) + ": " + s.message;
    }
    o.sizes.push_back(r);
  }
  o.status = ok ? "ok" : "failed";
  return o;
}

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
  if (store::Store* st = s_.store()) {
    // The same row Session::evaluate upserts, written first so that it keeps parent and method.
    store::CandidateRow c;
    c.task_id = st->upsert_task(t.name, t.spec_hash, t.spec_text);
    c.source_hash = candidate_source_hash(j);
    c.source = j.original;
    c.language = "dsl";
    c.origin = origin;
    if (parent > 0) c.parent_id = parent;
    c.method = method;
    c.agent = agent_;
    o.candidate_id = st->upsert_candidate(c);
  }
  EvalOptions eo = visible_options(t, resume_, timeout_s_);
  eo.seed = search_seed(t);
  eo.prune_above_us = prune_above_us;
  CandidateOutcome co = s_.evaluate(t, j, label, origin, eo);
  Outcome r = convert(t, co);
  r.candidate_id = o.candidate_id;
  r.kernel = o.kernel;
  return r;
}

uint64_t SessionEvaluator::search_seed(const Task& t) {
  auto it = search_seeds_.find(t.name);
  if (it == search_seeds_.end()) {
    std::random_device rd;
    it = search_seeds_.emplace(t.name, (static_cast<uint64_t>(rd()) << 20) ^ rd()).first;
  }
  return it->second;
}

void SessionEvaluator::prefetch(const Task& t, const std::vector<dsl::Program>& next) {
  codegen::Binding b = binding_of(t);
  for (const dsl::Program& p : next) {
    if (!codegen::can_implement(p, b).ok) continue;
    CompileJob j;
    try {
      j = codegen::compile_job(t, p, t.name + "/prefetch.ksol");
    } catch (const std::exception&) {
      continue;
    }
    // Never wait here (the GPU would idle behind a build nobody may time): finished builds are
    // reaped, and a hint is dropped while every slot is busy.
    for (size_t k = 0; k < prefetching_.size();)
      if (prefetch_done_[k]->load()) {
        prefetching_[k].join();
        prefetching_.erase(prefetching_.begin() + static_cast<long>(k));
        prefetch_done_.erase(prefetch_done_.begin() + static_cast<long>(k));
      } else {
        ++k;
      }
    if (prefetching_.size() >= std::max<size_t>(1, prefetch_threads)) break;
    auto done = std::make_shared<std::atomic<bool>>(false);
    prefetch_done_.push_back(done);
    prefetching_.emplace_back([j = std::move(j), done] {
      try {
        compile(j);
      } catch (const std::exception&) {
        // the evaluation compiles it again and reports why
      }
      done->store(true);
    });
  }
}

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

SessionEvaluator::~SessionEvaluator() {
  // A run being stopped does not wait for builds nobody will time (nvcc finishes on its own).
  for (auto& th : prefetching_)
    if (stop_requested()) th.detach();
    else th.join();
}

Outcome SessionEvaluator::grade_hidden(const Task& t, const dsl::Program& p, const std::string& label) {
  Outcome o;
  o.label = label;
  EvalOptions eo = options_for(hidden_sizes(t), resume_, timeout_s_);
  if (eo.sizes.empty()) {
    o.error = "the task has no hidden sizes";
    return o;
  }
  // The same source as in the search, so the same candidate row: its hidden sizes join it.
  CompileJob j = codegen::compile_job(t, p, t.name + "/" + label + ".ksol");
  Outcome r = convert(t, s_.evaluate(t, j, label, "agent:" + agent_, eo));
  r.kernel = codegen::kernel_name(p);
  return r;
}

std::map<std::string, Outcome> SessionEvaluator::baselines_hidden(const Task& t) {
  std::map<std::string, Outcome> out;
  EvalOptions eo = options_for(hidden_sizes(t), resume_, timeout_s_);
  if (eo.sizes.empty()) return out;
  for (auto& b : t.baselines) out[b.name] = convert(t, s_.evaluate(t, baseline_job(t, b), "baseline:" + b.name, "baseline:" + b.name, eo));
  return out;
}

std::map<std::string, Outcome> SessionEvaluator::baselines(const Task& t) {
  std::map<std::string, Outcome> out;
  for (auto& b : t.baselines) {
    EvalOptions eo = visible_options(t, resume_, timeout_s_);
    eo.seed = search_seed(t);
    CandidateOutcome co = s_.evaluate(t, baseline_job(t, b), "baseline:" + b.name, "baseline:" + b.name, eo);
    out[b.name] = convert(t, co);
  }
  return out;
}

double headroom_share(double remaining, double w, int left, double mean_w) {
  if (remaining <= 0 || left <= 0) return 0;
  w = std::clamp(w, 0.05, 1.0);
  mean_w = std::clamp(mean_w, 0.05, 1.0);
  return remaining * w / (w + (left - 1) * mean_w);
}

ProfileResult classify_profile(const std::map<std::string, double>& metrics, std::vector<std::map<std::string, double>>& history) {
  ProfileResult r;
  r.metrics = metrics;
  agents::profile::Thresholds th = agents::profile::fit_thresholds(history);
  r.bottleneck = agents::profile::classify(metrics, th, &r.why);
  r.thresholds = th.source;
  r.summary = agents::profile::summary(metrics, th);
  history.push_back(metrics);
  return r;
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

double ScriptedEvaluator::time_of(const codegen::Schedule& s) const {
  double f = base_us;
  for (auto& [key, knob] : model) {
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
  codegen::Schedule s = agents::full_schedule(p);
  bool failed = (fail && fail(s)) || (hidden && fail_hidden && fail_hidden(s));
  double tm = time_of(s);
  for (auto* sz : sizes) {
    SizeResult r;
    r.size = sz->name;
    r.weight = sz->weight;
    double sc = scale_of(*sz);
    if (auto it = prune_above_us.find(sz->name); it != prune_above_us.end() && tm * sc > it->second) {
      // As the worker's screen does: timed, not verified, and nothing after it evaluated.
      r.status = "failed";
      r.message = "screened out: " + std::to_string(tm * sc) + " us is above " + std::to_string(it->second) + " us";
      o.sizes.push_back(r);
      o.status = "failed";
      o.error = "screen: " + r.message;
      ++screened;
      return o;
    }
    r.status = failed ? "failed" : "ok";
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
  o.status = failed ? "failed" : "ok";
  if (failed) o.error = "correctness gate: scripted failure";
  return o;
}

std::map<std::string, Outcome> ScriptedEvaluator::baselines(const Task& t) { return baselines_on(visible_sizes(t)); }

std::map<std::string, Outcome> ScriptedEvaluator::baselines_on(const std::vector<const SizeSet*>& sizes) {
  std::map<std::string, Outcome> out;
  for (auto& [name, us] : baseline_us) {
    Outcome o;
    o.label = "baseline:" + name;
    o.status = "ok";
    for (auto* sz : sizes) {
      SizeResult r;
      r.size = sz->name;
      r.weight = sz->weight;
      r.status = "ok";
      double sc = scale_of(*sz);
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

// --- the loop --------------------------------------------------------------------------------

namespace {
// Per size, the fastest baseline that passed there; ok when every size has one.
Outcome fastest_per_size(const std::map<std::string, Outcome>& baselines, const std::vector<const SizeSet*>& sizes) {
  Outcome best;
  best.label = "baseline:best";
  best.status = "failed";
  for (auto* sz : sizes) {
    const SizeResult* fastest = nullptr;
    for (auto& [name, bo] : baselines)
      for (auto& s : bo.sizes)
        if (s.size == sz->name && s.status == "ok" && s.median_us > 0 && (!fastest || s.median_us < fastest->median_us))
          fastest = &s;
    if (fastest) best.sizes.push_back(*fastest);
  }
  if (!best.sizes.empty() && best.sizes.size() == sizes.size()) best.status = "ok";
  return best;
}
}  // namespace

OptimizeResult optimize(const Task& t, const dsl::Program& seed, Evaluator& ev, agents::Agent& agent,
                        const OptimizeOptions& o) {
  OptimizeResult res;
  res.task = t.name;
  auto t0 = Clock::now();
  auto say = [&](const std::string& line) {
    res.log.push_back(line);
  };
  auto progress = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  std::mt19937_64 rng(o.seed);
  codegen::Binding b = binding_of(t);

  // Baselines: the reference the search must beat, per size the fastest.
  res.baselines = ev.baselines(t);
  for (auto& [name, b] : res.baselines) res.worker_seconds += b.worker_seconds;
  double best_base_score = 0;
  res.baseline_best = fastest_per_size(res.baselines, visible_sizes(t));
  for (auto& [name, bo] : res.baselines)
    if (bo.ok() && (best_base_score == 0 || bo.score_us() < best_base_score)) {
      best_base_score = bo.score_us();
      res.best_baseline = name;
    }

  auto sched_of = [](const dsl::Program& p) { return codegen::schedule_text(agents::full_schedule(p)); };
  // The budget counts the search's own evaluations, the seed's included, not the baselines'.
  const auto t_search = Clock::now();
  int evaluated = 0;
  double budget = o.budget_seconds;  // the run-wide scheduler may set it once the seed is timed
  // Evaluations reused from an interrupted run count the worker time they cost then, so that a
  // resumed search stops where the interrupted one would have, not later.
  double resumed_seconds = 0;
  auto run = [&](const dsl::Program& p, int parent, const std::string& method, const std::string& why) -> Attempt& {
    Attempt a;
    a.index = static_cast<int>(res.trajectory.size());
    a.parent = parent;
    a.method = method;
    a.why = why;
    a.program = p;
    a.schedule = sched_of(p);
    std::string label = "c" + std::to_string(a.index);
    int64_t parent_id = parent >= 0 ? res.trajectory[parent].outcome.candidate_id : 0;
    // Screening: a child slower than prune x the best at some size cannot pass the performance
    // gate there; it is rejected after a timing pass alone, without its correctness gate.
    ev.prune_above_us.clear();
    if (o.prune > 0 && parent >= 0 && res.best >= 0)
      for (auto& r : res.trajectory[res.best].outcome.sizes)
        if (r.status == "ok" && r.median_us > 0) ev.prune_above_us[r.size] = r.median_us * o.prune;
    a.outcome = ev.evaluate(t, p, label, parent_id, method);
    res.worker_seconds += a.outcome.worker_seconds;
    resumed_seconds += a.outcome.resumed_seconds;
    ev.prune_above_us.clear();
    if (a.outcome.error.find("screened out") != std::string::npos) ++res.screened;
    a.at_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ++evaluated;
    res.trajectory.push_back(std::move(a));
    return res.trajectory.back();
  };

  Attempt& s0 = run(seed, -1, "seed", "the task's seed program");
  if (!s0.outcome.ok()) {
    s0.note = "seed failed: " + s0.outcome.error;
    say(s0.note);
    res.stop_reason = "seed_failed";
  } else {
    res.best = 0;
    s0.accepted = true;
    s0.note = "seed";
    res.pct_sol_before = s0.outcome.pct_sol();
    if (o.seconds_after_seed) {
      budget = o.seconds_after_seed(res.pct_sol_before);
      say("budget: " + fmt(budget, 1) + " s for this task from the run's total (seed at " + fmt(res.pct_sol_before * 100, 1) + "% of SOL)");
    }
  }
  progress(t.name + ": seed " + (s0.outcome.ok() ? fmt(s0.outcome.score_us()) + " us, " + fmt(s0.outcome.pct_sol() * 100, 1) + "% SOL"
                                                  : "FAILED: " + s0.outcome.error));

  // (parent, method) pairs that failed; a random draw is a move of its own, so its key is the
  // schedule it drew, not the shared name "random".
  std::set<std::pair<int, std::string>> failed_pairs;
  auto move_key = [](const std::string& method, const std::string& schedule) { return method == "random" ? "random " + schedule : method; };
  std::map<int, std::optional<ProfileResult>> profiled;  // by trajectory index
  std::string no_profiler;                                // why not, once it has failed
  std::map<std::string, int> seen;
  seen[s0.schedule] = 0;
  std::set<int> exhausted;
  int since_best = 0;

  while (res.best >= 0) {
    const Attempt& best = res.trajectory[res.best];
    if (stop_requested()) { res.stop_reason = "interrupted"; break; }
    double secs = std::chrono::duration<double>(Clock::now() - t_search).count() + resumed_seconds;
    if (o.target_sol > 0 && best.outcome.pct_sol() >= o.target_sol) { res.stop_reason = "target"; break; }
    if (evaluated >= o.max_candidates) { res.stop_reason = "candidates"; break; }
    if (budget > 0 && secs >= budget) { res.stop_reason = "seconds"; break; }
    if (o.plateau > 0 && since_best >= o.plateau) { res.stop_reason = "plateau"; break; }

    // The population: elites (fastest verified) and diverse members (most knobs unlike the best).
    std::vector<int> ok;
    for (auto& a : res.trajectory)
      if (a.outcome.ok()) ok.push_back(a.index);
    std::stable_sort(ok.begin(), ok.end(), [&](int x, int y) {
      return res.trajectory[x].outcome.score_us() < res.trajectory[y].outcome.score_us();
    });
    std::vector<int> pop(ok.begin(), ok.begin() + std::min(ok.size(), o.elites));
    auto bs = agents::full_schedule(best.program);
    std::vector<std::pair<int, int>> far;
    for (int i : ok) {
      if (std::find(pop.begin(), pop.end(), i) != pop.end()) continue;
      auto s = agents::full_schedule(res.trajectory[i].program);
      int d = 0;
      for (size_t k = 0; k < s.size() && k < bs.size(); ++k) d += s[k] != bs[k];
      far.push_back({-d, i});
    }
    std::stable_sort(far.begin(), far.end());
    for (size_t k = 0; k < far.size() && k < o.diverse; ++k) pop.push_back(far[k].second);
    if (std::find(pop.begin(), pop.end(), res.best) == pop.end()) pop.insert(pop.begin(), res.best);

    // Parent: the best, or (as in GPU Kernel Scientist) now and then a reference version.
    std::vector<int> order;
    std::uniform_real_distribution<double> u(0, 1);
    if (pop.size() > 1 && u(rng) < o.reference_parent_prob) {
      std::vector<int> others;
      for (int i : pop)
        if (i != res.best) others.push_back(i);
      order.push_back(others[std::uniform_int_distribution<size_t>(0, others.size() - 1)(rng)]);
    }
    order.push_back(res.best);
    for (int i : pop) order.push_back(i);

    int parent = -1;
    std::optional<agents::Proposal> pick;
    for (int cand : order) {
      if (exhausted.count(cand)) continue;
      const Attempt& pa = res.trajectory[cand];
      agents::Profile prof;
      prof.precision = t.precision;
      std::tie(prof.sm, prof.sm_count) = ev.device_sm();
      if (const SizeResult* r = pa.outcome.representative()) {
        prof.bound = r->bound;
        prof.pct_sol = r->pct_sol;
        if (const SizeSet* sz = t.find_size(r->size)) prof.dims = sz->dims;
        // Each parent is profiled once, at the size that weighs most; the class then comes from
        // its metrics instead of the roofline. A profiler that cannot run is said once per task.
        if (o.profile && !profiled.count(cand)) {
          std::string why;
          std::optional<ProfileResult> pr = no_profiler.empty() ? ev.profile(t, pa.program, r->size, &why) : std::nullopt;
          if (pr) {
            say("profile c" + std::to_string(cand) + " at " + r->size + ": " + pr->bottleneck + " (" + pr->why + "; thresholds " + pr->thresholds + ")");
            profiled[cand] = *pr;
          } else {
            if (no_profiler.empty()) say("profile: none (" + why + "); the roofline classifies");
            no_profiler = why.empty() ? "unavailable" : why;
            profiled[cand] = std::nullopt;
          }
        }
        if (auto it = profiled.find(cand); it != profiled.end() && it->second) {
          prof.metrics = it->second->metrics;
          prof.bottleneck = it->second->bottleneck;
          prof.source = "Nsight Compute, thresholds " + it->second->thresholds;
          prof.summary = it->second->summary;
        }
      }
      std::set<std::string> exclude;
      for (auto& [pp, m] : failed_pairs)
        if (pp == cand) exclude.insert(m);
      std::vector<std::string> alog;
      std::vector<agents::Proposal> props = agent.propose(pa.program, prof, b, exclude, &alog);
      for (auto& l : alog) say("[parent c" + std::to_string(cand) + "] " + l);
      std::string grand = pa.parent >= 0 ? res.trajectory[pa.parent].schedule : "";
      std::vector<dsl::Program> after_pick;  // the parent's next proposals, to build while the pick runs
      for (auto& p : props) {
        std::string st = codegen::schedule_text(p.schedule);
        if (failed_pairs.count({cand, move_key(p.method, st)})) continue;
        if (!grand.empty() && st == grand) {
          if (!pick)
            say("[parent c" + std::to_string(cand) + "] oscillation skipped: " + p.method + " would return to c" +
                std::to_string(pa.parent) + " {" + st + "}");
          continue;
        }
        if (seen.count(st) || (pick && codegen::schedule_text(pick->schedule) == st)) continue;
        if (!pick) {
          pick = p;
          continue;
        }
        if (after_pick.size() < o.prefetch) after_pick.push_back(p.program);
      }
      if (pick) {
        parent = cand;
        if (!after_pick.empty()) ev.prefetch(t, after_pick);
        break;
      }
      exhausted.insert(cand);
      say("parent c" + std::to_string(cand) + " exhausted: every proposal was tried, failed or refused");
    }
    if (!pick) { res.stop_reason = "exhausted"; break; }

    Attempt& a = run(pick->program, parent, pick->method, pick->why);
    seen[a.schedule] = a.index;
    const Attempt& cur = res.trajectory[res.best];
    if (a.outcome.error.find("screened out") != std::string::npos) {
      // Slower than the best, like an unaccepted child; its move may still pay off from another
      // parent, so the (parent, method) pair is not marked failed. Unverified, it joins no population.
      a.note = "screened out: " + a.outcome.error;
      ++since_best;
    } else if (!a.outcome.ok()) {
      failed_pairs.insert({parent, move_key(a.method, a.schedule)});
      a.note = "failed: " + a.outcome.error;
      ++since_best;
    } else {
      double cs = a.outcome.score_us(), bsc = cur.outcome.score_us();
      double clo = cur.outcome.ci_low_us(), chi = a.outcome.ci_high_us();
      bool faster = cs * o.gamma <= bsc;
      bool ci = clo > 0 && chi > 0;
      bool pass = faster && (!ci || chi < clo / o.gamma);
      if (pass) {
        a.accepted = true;
        a.note = "new best: " + fmt(bsc / cs, 3) + "x over c" + std::to_string(res.best);
        res.best = a.index;
        since_best = 0;
      } else {
        a.note = "kept c" + std::to_string(res.best) + ": " + fmt(bsc / cs, 3) + "x < gamma " + fmt(o.gamma, 2) +
                 (faster && ci ? " with overlapping CIs" : "");
        ++since_best;
      }
    }
    const Attempt& nb = res.trajectory[res.best];
    double secs2 = std::chrono::duration<double>(Clock::now() - t_search).count();
    double sp = speedup(res.baseline_best, nb.outcome);
    progress(t.name + ": [" + std::to_string(evaluated) + "/" + std::to_string(o.max_candidates) + "] c" + std::to_string(a.index) +
             " <- c" + std::to_string(parent) + " " + a.method + " {" + a.schedule + "}: " +
             (a.outcome.ok() ? fmt(a.outcome.score_us()) + " us"
                              : a.outcome.error.find("screened out") != std::string::npos ? "screened out (slower than the best)" : "FAILED") + "; best c" + std::to_string(res.best) + " " +
             fmt(nb.outcome.score_us()) + " us, " + (sp > 0 ? fmt(sp, 2) + "x vs best baseline, " : "") +
             fmt(nb.outcome.pct_sol() * 100, 1) + "% SOL" +
             (budget > 0 ? ", " + fmt(std::max(0.0, budget - secs2), 0) + " s left" : ""));
  }

  // The answer: the best verified candidate unless a baseline is faster.
  if (res.best >= 0 && res.baseline_best.ok()) {
    double sp = speedup(res.baseline_best, res.trajectory[res.best].outcome);
    res.use_baseline = sp < 1.0;
  } else if (res.best < 0) {
    res.use_baseline = true;
  }
  // The grade on the hidden sizes, which the search never saw. A returned kernel that fails
  // there is not returned: the result is the baseline (never less correct than it). Its speed
  // there is reported, not used to choose (that would tune to the hidden sizes).
  if (!res.use_baseline && res.best >= 0) {
    if (stop_requested()) {
      res.hidden_note = "not graded: the run was interrupted";
    } else if (hidden_sizes(t).empty()) {
      res.hidden_note = "the task has no hidden sizes";
    } else {
      const Attempt& ba = res.trajectory[res.best];
      res.hidden = ev.grade_hidden(t, ba.program, "c" + std::to_string(ba.index));
      res.worker_seconds += res.hidden.worker_seconds;
      std::map<std::string, Outcome> hb = stop_requested() ? std::map<std::string, Outcome>{} : ev.baselines_hidden(t);
      for (auto& [name, bo] : hb) res.worker_seconds += bo.worker_seconds;
      res.hidden_baseline_best = fastest_per_size(hb, hidden_sizes(t));
      if (res.hidden.sizes.empty()) {
        res.hidden_note = "not graded: " + res.hidden.error;
      } else if (!res.hidden.ok()) {
        res.hidden_note = "c" + std::to_string(ba.index) + " failed on a hidden size (" + res.hidden.error +
                          "): the result is the baseline";
        say(res.hidden_note);
        res.use_baseline = true;
      } else {
        res.hidden_speedup = res.hidden_baseline_best.ok() ? speedup(res.hidden_baseline_best, res.hidden) : 0;
        res.hidden_note = "graded on " + std::to_string(res.hidden.sizes.size()) + " hidden size(s)";
      }
      progress(t.name + ": hidden sizes: " + res.hidden_note +
               (res.hidden_speedup > 0 ? ", " + fmt(res.hidden_speedup, 2) + "x vs best baseline" : ""));
    }
  }
  const Outcome& final_out = res.use_baseline ? res.baseline_best : res.trajectory[res.best].outcome;
  res.speedup_vs_baseline = res.use_baseline ? (res.baseline_best.ok() ? 1.0 : 0.0) : speedup(res.baseline_best, final_out);
  if (res.baselines.count("naive")) res.speedup_vs_naive = speedup(res.baselines["naive"], final_out);
  res.pct_sol_after = res.use_baseline ? res.baseline_best.pct_sol() : final_out.pct_sol();
  if (res.use_baseline && res.baseline_best.ok() && res.pct_sol_after == 0) {
    // baseline_best mixes baselines per size; its pct_sol still comes from each size.
    res.pct_sol_after = wgeo(res.baseline_best, &SizeResult::pct_sol);
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  res.resumed_seconds = resumed_seconds;
  res.budget_seconds = budget;
  return res;
}

nlohmann::json OptimizeResult::to_json() const {
  using nlohmann::json;
  json traj = json::array();
  for (auto& a : trajectory)
    traj.push_back({{"index", a.index}, {"parent", a.parent}, {"method", a.method}, {"schedule", a.schedule},
                    {"status", a.outcome.status}, {"score_us", a.outcome.score_us()}, {"pct_sol", a.outcome.pct_sol() * 100},
                    {"accepted", a.accepted}, {"note", a.note}, {"candidate_id", a.outcome.candidate_id},
                    {"kernel", a.outcome.kernel}, {"why", a.why}, {"at_seconds", a.at_seconds}, {"error", a.outcome.error}});
  json j = {{"task", task}, {"stop_reason", stop_reason}, {"candidates", trajectory.size()}, {"screened", screened}, {"seconds", seconds}, {"budget_seconds", budget_seconds},
            {"worker_seconds", worker_seconds}, {"resumed_seconds", resumed_seconds},
            {"candidates_per_worker_minute", worker_seconds > 0 ? 60.0 * static_cast<double>(trajectory.size()) / worker_seconds : 0.0},
            {"use_baseline", use_baseline}, {"best_baseline", best_baseline},
            {"speedup_vs_best_baseline", speedup_vs_baseline}, {"speedup_vs_naive", speedup_vs_naive},
            {"pct_sol_before", pct_sol_before * 100}, {"pct_sol_after", pct_sol_after * 100}, {"trajectory", traj},
            {"log", log}};
  json hs = json::array();
  for (auto& r : hidden.sizes) {
    json h = {{"size", r.size}, {"status", r.status}, {"median_us", r.median_us}, {"pct_sol", r.pct_sol * 100}, {"message", r.message}};
    for (auto& b : hidden_baseline_best.sizes)
      if (b.size == r.size && b.median_us > 0) h["best_baseline_us"] = b.median_us;
    hs.push_back(h);
  }
  j["hidden"] = {{"note", hidden_note}, {"status", hidden.sizes.empty() ? "not_graded" : hidden.status},
                 {"speedup_vs_best_baseline", hidden_speedup}, {"sizes", hs}};
  if (const Attempt* b = best_attempt()) {
    j["best"] = {{"index", b->index}, {"kernel", b->outcome.kernel}, {"program", dsl::print_source(b->program)},
                 {"schedule", b->schedule}, {"score_us", b->outcome.score_us()}, {"candidate_id", b->outcome.candidate_id}};
  }
  return j;
}

}  // namespace ksol::search
