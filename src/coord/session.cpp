#include "coord/session.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <cstdio>
#include <random>

#include "core/hash.h"
#include "core/util.h"
#include "sol/sol.h"

namespace ksol {

bool CandidateOutcome::all_ok() const {
  if (!compiled.ok) return false;
  for (auto& s : sizes)
    if (s.status != Status::ok && s.status != Status::skipped) return false;
  return true;
}

// The run a run resumed: "resume_of" at the top of its meta (bench), or in its command's object
// (optimize's runs before it also wrote it at the top).
int64_t resumed_from(const nlohmann::json& meta) {
  if (meta.contains("resume_of") && meta["resume_of"].is_number_integer()) return meta["resume_of"].get<int64_t>();
  if (meta.contains("optimize") && meta["optimize"].is_object() && meta["optimize"].contains("resume_of") &&
      meta["optimize"]["resume_of"].is_number_integer())
    return meta["optimize"]["resume_of"].get<int64_t>();
  return 0;
}

std::vector<uint64_t> draw_seeds(const EvalOptions& o, int n) {
  std::vector<uint64_t> seeds;
  if (o.defences_off.count("fresh-seeds")) {
    for (int i = 1; i <= n; ++i) seeds.push_back(static_cast<uint64_t>(i));
    return seeds;
  }
  std::mt19937_64 rng;
  if (o.seed) rng.seed(*o.seed);
  else rng.seed((static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}());
  for (int i = 0; i < n; ++i) seeds.push_back(rng() >> 12);  // stays exact in a JSON double
  return seeds;
}

uint64_t timing_seed_of(uint64_t master_seed) {
  EvalOptions o;
  o.seed = master_seed;
  return draw_seeds(o, 3)[0] ^ 0x5eed;
}

std::vector<int> parse_gpus(const std::string& spec) {
  std::vector<int> out;
  if (spec.empty()) return out;
  auto number = [&](const std::string& t) {
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 4)
      throw std::runtime_error("--gpus '" + spec + "': expected a count (2) or device indices (0,1)");
    return std::stoi(t);
  };
  if (spec.find(',') == std::string::npos) {
    int n = number(spec);
    if (n < 1) throw std::runtime_error("--gpus '" + spec + "': at least one GPU");
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  size_t a = 0;
  while (a <= spec.size()) {
    size_t b = spec.find(',', a);
    if (b == std::string::npos) b = spec.size();
    int d = number(spec.substr(a, b - a));
    if (std::find(out.begin(), out.end(), d) != out.end()) throw std::runtime_error("--gpus '" + spec + "' names device " + std::to_string(d) + " twice");
    out.push_back(d);
    a = b + 1;
  }
  return out;
}

std::vector<std::unique_ptr<Session>> open_sessions(const Session::Options& base, const std::vector<int>& gpus) {
  std::vector<std::unique_ptr<Session>> out;
  if (gpus.empty()) {
    out.push_back(std::make_unique<Session>(base));
    return out;
  }
  for (int d : gpus) {
    Session::Options o = base;
    if (o.worker_argv.empty()) o.worker_argv = {default_worker_path()};
    o.worker_argv.push_back("--device");
    o.worker_argv.push_back(std::to_string(d));
    o.name = "GPU " + std::to_string(d);
    o.device = d;
    out.push_back(std::make_unique<Session>(o));
  }
  return out;
}

void run_parallel(size_t n, size_t workers, const std::function<void(size_t, size_t)>& f) {
  workers = std::max<size_t>(1, std::min(workers, n));
  if (workers == 1) {
    for (size_t j = 0; j < n; ++j) f(j, 0);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr first;
  std::mutex m;
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t j; !stop && (j = next++) < n;) {
        try {
          f(j, w);
        } catch (...) {
          std::lock_guard<std::mutex> g(m);
          if (!first) first = std::current_exception();
          stop = true;
        }
      }
    });
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

Session::Session(Options o) : opt_(std::move(o)) {
  if (!opt_.store_path.empty()) store_ = std::make_unique<store::Store>(store::Store::open(opt_.store_path));
  if (opt_.worker_argv.empty()) opt_.worker_argv = {default_worker_path()};
  worker_ = std::make_unique<WorkerClient>(opt_.worker_argv);
}

Session::Session(Options o, std::unique_ptr<Worker> worker) : opt_(std::move(o)), worker_(std::move(worker)) {
  if (!opt_.store_path.empty()) store_ = std::make_unique<store::Store>(store::Store::open(opt_.store_path));
  if (opt_.worker_argv.empty()) opt_.worker_argv = {default_worker_path()};
}

Session::~Session() = default;

bool Session::has_gpu() {
  if (probed_) return gpu_;
  probed_ = true;
  WorkerReply r = worker_->call({{"op", "hello"}}, 120);
  if (!r.ok) {
    gpu_reason_ = "the worker did not start: " + r.message;
  } else if (!r.body.value("gpu", false)) {
    gpu_reason_ = r.body.value("reason", "no CUDA device");
  } else {
    gpu_ = true;
    device_ = r.body["device"];
  }
  std::string name = gpu_ ? device_.value("name", "") : opt_.assume_gpu;
  auto ds = sol::datasheet_peaks(name);
  if (ds) peaks_ = *ds;
  else peaks_.name = name;
  if (gpu_) {
    // %SOL uses the higher of the datasheet and the measured peaks, so an honest kernel never
    // beats SOL by much.
    if (auto cal = sol::load_calibration(device_.value("uuid", ""))) peaks_ = ds ? sol::merge_max(*ds, *cal) : *cal;
  }
  return gpu_;
}

int64_t Session::begin_run(const std::string& command, const nlohmann::json& extra) {
  if (!store_) return 0;
  has_gpu();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  nlohmann::json meta = {{"ksol_version", KSOL_VERSION}, {"toolchain", toolchain_version()}, {"host", host},
                         {"gpu", gpu_ ? device_ : nlohmann::json(nullptr)}, {"peaks", peaks_}};
  if (!extra.is_null())
    for (auto& [k, v] : extra.items()) meta[k] = v;
  run_id_ = store_->begin_run(command, meta);
  return run_id_;
}

void Session::finish_run(const std::string& status) {
  if (store_ && run_id_) store_->finish_run(run_id_, status);
}

Session::References Session::compile_references(const Task& t) {
  auto it = refs_.find(t.spec_hash);
  if (it != refs_.end()) return it->second;
  std::vector<CompileJob> jobs = {reference_job(t, false)};
  if (!t.ref_gpu.empty()) jobs.push_back(reference_job(t, true));
  auto res = compile_all(jobs);
  References r;
  r.cpu = res[0];
  if (res.size() > 1) r.gpu = res[1];
  refs_[t.spec_hash] = r;
  return r;
}

void Session::compile_references(const std::vector<Task>& tasks) {
  std::vector<CompileJob> jobs;
  std::vector<std::pair<const Task*, bool>> owner;  // the task, and whether the job is its GPU reference
  for (const Task& t : tasks) {
    if (refs_.count(t.spec_hash)) continue;
    for (bool gpu : {false, true}) {
      if (gpu && t.ref_gpu.empty()) continue;
      jobs.push_back(reference_job(t, gpu));
      owner.emplace_back(&t, gpu);
    }
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) {
    References& r = refs_[owner[i].first->spec_hash];
    (owner[i].second ? r.gpu : r.cpu) = res[i];
  }
}

void Session::fill_sol(const Task& t, const SizeSet& s, SizeEvaluation* out) const {
  auto unit = sol::parse_math_unit(t.math).value_or(sol::MathUnit::fma);
  auto prec = sol::parse_precision(t.precision).value_or(sol::Precision::fp32);
  sol::SolEstimate e = sol::estimate(t.flops_at(s), t.bytes_at(s), unit, prec, peaks_);
  out->sol_us = e.t_sol_s * 1e6;
  out->bound = e.bound;
  if (out->median_us > 0) {
    out->pct_sol = sol::pct_sol(e.t_sol_s, out->median_us * 1e-6);
    out->headroom = sol::headroom(e.t_sol_s, out->median_us * 1e-6);
  }
}

std::string candidate_source_hash(const CompileJob& job) {
  const std::string& src = job.original.empty() ? job.source_text : job.original;
  std::string key = src + "\n" + job.source_text;
  for (const std::string& f : job.extra_flags)
    if (f.rfind("-D", 0) == 0) key += "\n" + f;
  return sha256_hex(key);
}

CandidateOutcome Session::evaluate(const Task& t, const CompileJob& job, const std::string& label, const std::string& origin,
                                   const EvalOptions& o, const CompileResult* precompiled) {
  CandidateOutcome out;
  out.label = label;
  CompileJob j = job;
  if (o.defences_off.count("static")) j.static_gate = false;
  out.compiled = precompiled ? *precompiled : compile(j);

  int64_t task_id = 0, cand_id = 0;
  if (store_) {
    task_id = store_->upsert_task(t.name, t.spec_hash, t.spec_text);
    store::CandidateRow c;
    c.task_id = task_id;
    // The store keeps what the user wrote; generated CUDA is reproducible from it and the version.
    const std::string& src = job.original.empty() ? job.source_text : job.original;
    c.source_hash = candidate_source_hash(job);
    c.source = src;
    c.language = job.language;
    c.origin = origin;
    cand_id = store_->upsert_candidate(c);
  }

  std::vector<const SizeSet*> sizes;
  for (auto& s : t.sizes) {
    if (!o.sizes.empty() && std::find(o.sizes.begin(), o.sizes.end(), s.name) == o.sizes.end()) continue;
    if (s.hidden && o.sizes.empty() && o.defences_off.count("hidden-sizes")) continue;
    sizes.push_back(&s);
  }
  if (!o.lenient_sizes)
    for (auto& want : o.sizes)
      if (!t.find_size(want)) throw std::runtime_error("task " + t.name + " has no size '" + want + "'");

  References refs;
  if (out.compiled.ok) {
    refs = compile_references(t);
    if (!refs.cpu.ok) throw std::runtime_error("the CPU reference of " + t.name + " does not compile:\n" + refs.cpu.message);
    if (!t.ref_gpu.empty() && !refs.gpu.ok)
      throw std::runtime_error("the GPU reference of " + t.name + " does not compile:\n" + refs.gpu.message);
  }

  for (const SizeSet* s : sizes) {
    // Stages: resumed from an earlier run, else compiled, GPU present, the worker's verdict; then
    // SOL, the suspect check and the store.
    SizeEvaluation e;
    if (std::optional<SizeEvaluation> prev = resumed(t, *s, cand_id, o)) {
      out.sizes.push_back(std::move(*prev));
      continue;
    }
    e = run_size(t, *s, out.compiled, refs, o);
    e.size = s->name;
    e.hidden = s->hidden;
    fill_sol(t, *s, &e);
    // Faster than the hardware allows: the timing or the kernel is lying; never a win.
    if (e.ok() && e.median_us > 0 && sol::suspect(e.pct_sol)) {
      e.status = Status::suspect;
      e.message = "measured faster than speed-of-light (" + std::to_string(static_cast<int>(e.pct_sol * 100)) + "% of SOL)";
    }
    e.evaluation_id = record(t, cand_id, e);
    const bool screened = e.failed_gate == Gate::screen;
    out.sizes.push_back(std::move(e));
    if (screened) break;  // rejected: the other sizes would not change that
  }
  return out;
}

std::optional<SizeEvaluation> Session::resumed(const Task& t, const SizeSet& s, int64_t cand_id, const EvalOptions& o) const {
  if (!store_ || !o.resume_run) return std::nullopt;
  // The run resumed, then the run it resumed, and so on: a pass interrupted twice resumes from
  // the last run and still skips what the first one did.
  std::optional<store::EvaluationRow> prev;
  int64_t from = 0;
  for (int64_t r = o.resume_run, hops = 0; r > 0 && !prev && hops < 1000; ++hops) {
    prev = store_->find_evaluation(r, cand_id, s.name);
    from = r;
    auto run = store_->find_run(r);
    r = run ? resumed_from(run->meta) : 0;
  }
  // A worker that died under an evaluation (killed from outside, or its host ran out of memory)
  // says nothing about the candidate: that evaluation runs again.
  if (prev && prev->status != Status::ok && prev->failed_gate == Gate::worker &&
      (prev->error_class.value_or("") == "crash" || prev->error_class.value_or("") == "worker_error"))
    prev.reset();
  if (!prev) return std::nullopt;
  SizeEvaluation e;
  e.size = s.name;
  e.hidden = s.hidden;
  e.status = Status::skipped;
  e.message = "already in run " + std::to_string(from);
  e.median_us = prev->median_us.value_or(0);
  e.ci_low_us = prev->ci_low_us.value_or(0);
  e.ci_high_us = prev->ci_high_us.value_or(0);
  e.evaluation_id = prev->id;
  e.gates = prev->gates;
  e.seeds = prev->seeds.is_array() ? prev->seeds.get<std::vector<uint64_t>>() : std::vector<uint64_t>{};
  fill_sol(t, s, &e);
  e.raw = {{"resumed", true}, {"status", to_string(prev->status)}};
  // The worker time it cost when it ran, so that a resumed search spends its budget as the
  // interrupted one did (optimize counts it against the task's seconds).
  if (prev->rerun.is_object() && prev->rerun.contains("harness_seconds")) e.raw["resumed_harness_seconds"] = prev->rerun["harness_seconds"];
  if (prev->status != Status::ok) {
    e.status = prev->status;
    e.failed_gate = prev->failed_gate;
    e.error_class = prev->error_class.value_or("");
    e.message = prev->message.value_or("");
    e.probe_us = probe_us_of(prev->gates);
  }
  return e;
}

SizeEvaluation Session::run_size(const Task& t, const SizeSet& s, const CompileResult& compiled, const References& refs,
                                 const EvalOptions& o) {
  SizeEvaluation e;
  // One master seed per evaluation, recorded: `ksol eval --seed MASTER` draws the same seeds.
  EvalOptions seeded = o;
  if (!seeded.seed) seeded.seed = (static_cast<uint64_t>(std::random_device{}()) << 20) ^ std::random_device{}();
  e.seeds = draw_seeds(seeded, 3);
  // From the seeds drawn (fixed ones with fresh-seeds off); timing_seed_of gives the same value
  // for the master seed when they are drawn fresh, which is how the search's screen finds them.
  const uint64_t timing_seed = e.seeds[0] ^ 0x5eed;
  e.provenance = {{"task", t.name}, {"task_dir", t.dir}, {"spec_hash", t.spec_hash}, {"size", s.name},
                  {"master_seed", *seeded.seed}, {"seeds", e.seeds}, {"timing_seed", timing_seed}, {"compile_key", compiled.key},
                  {"toolchain", toolchain_version()}, {"ksol_version", KSOL_VERSION},
                  {"defences_off", std::vector<std::string>(o.defences_off.begin(), o.defences_off.end())},
                  {"gpu", device_.is_null() ? nlohmann::json(opt_.assume_gpu) : device_}};
  auto failed = [&](Gate g, std::string cls, std::string msg) {
    e.status = Status::failed;
    e.failed_gate = g;
    e.error_class = std::move(cls);
    e.message = std::move(msg);
    return e;
  };
  if (!compiled.ok)
    return failed(compiled.stage == "static" ? Gate::static_scan : Gate::compile,
                  compiled.stage == "static" ? "forbidden_construct" : "compile_error", compiled.message);
  if (!has_gpu()) {
    e.status = Status::no_gpu;
    e.message = "timing needs a GPU: " + gpu_reason_;
    return e;
  }
  nlohmann::json req = {{"op", "eval"}, {"task_dir", t.dir}, {"size", s.name}, {"candidate_so", compiled.so_path},
                        {"reference_cpu_so", refs.cpu.so_path}, {"reference_gpu_so", refs.gpu.ok ? refs.gpu.so_path : ""},
                        {"seeds", e.seeds}, {"timing_seed", timing_seed}, {"time", o.time},
                        {"defences_off", std::vector<std::string>(o.defences_off.begin(), o.defences_off.end())},
                        {"size_dims", s.dims}, {"size_options", s.options}};
  if (!o.timing.is_null()) req["timing"] = o.timing;
  if (auto pr = o.prune_above_us.find(s.name); pr != o.prune_above_us.end() && pr->second > 0) req["prune_above_us"] = pr->second;
  const FarSlowerLimit* limit = nullptr;
  if (auto fs = o.far_slower.find(s.name); fs != o.far_slower.end() && fs->second.above_us() > 0) {
    limit = &fs->second;
    req["stop_above_us"] = limit->above_us();
  }
  WorkerReply r = worker_->call(req, o.timeout_s);
  if (!r.ok)
    return failed(Gate::worker,
                  r.failure == "timeout" ? "timeout" : r.failure == "fatal" ? "sticky_cuda_error" : r.failure == "crash" ? "crash" : "worker_error",
                  r.message);
  if (!r.body.contains("result") || !r.body["result"].is_object()) {
    worker_->stop();
    return failed(Gate::worker, "protocol_violation", "the worker's reply has no result object");
  }
  nlohmann::json provenance = std::move(e.provenance);
  std::vector<uint64_t> seeds = std::move(e.seeds);
  e = from_worker_result(r.body["result"]);
  if (e.status == Status::far_slower) {
    if (limit) {
      e.message = far_slower_message(*limit, e.probe_us);
    } else {
      e.status = Status::failed;
      e.failed_gate = Gate::worker;
      e.error_class = "protocol_violation";
      e.message = "the worker stopped the evaluation as far slower than the fastest baseline, which the request did not ask for";
      e.probe_us = 0;
    }
  }
  if (e.error_class == "protocol_violation" && e.failed_gate == Gate::worker) worker_->stop();
  e.seeds = std::move(seeds);
  e.provenance = std::move(provenance);
  if (e.clock_mhz > 0) e.provenance["clock_mhz"] = e.clock_mhz;
  if (e.raw.contains("harness_seconds") && e.raw["harness_seconds"].is_object()) e.provenance["harness_seconds"] = e.raw["harness_seconds"];
  return e;
}

int64_t Session::record(const Task& t, int64_t candidate_id, SizeEvaluation& e) {
  if (worker_) e.worker_restarts = worker_->restarts();
  if (!store_ || !run_id_ || !candidate_id) return 0;
  return store_->record(run_id_, candidate_id, store_->upsert_task(t.name, t.spec_hash, t.spec_text), e);
}

ScreenBatch Session::screen(const Task& t, const std::vector<std::string>& so_paths, const ScreenOptions& o) {
  ScreenBatch out;
  out.times.resize(so_paths.size());
  if (so_paths.empty()) return out;
  if (!has_gpu()) {
    for (auto& st : out.times) st.error_class = "no_gpu", st.message = "timing needs a GPU: " + gpu_reason_;
    return out;
  }
  const SizeSet* s = t.find_size(o.size);
  if (!s) throw std::runtime_error("task " + t.name + " has no size '" + o.size + "'");
  References refs = compile_references(t);
  return screen_in_groups(so_paths.size(), [&](const std::vector<size_t>& group) {
    std::vector<std::string> libs;
    for (size_t i : group) libs.push_back(so_paths[i]);
    nlohmann::json req = {{"op", "screen"}, {"task_dir", t.dir}, {"size", s->name}, {"size_dims", s->dims}, {"size_options", s->options},
                          {"candidates", libs}, {"reference_cpu_so", refs.cpu.so_path}, {"reference_gpu_so", refs.gpu.ok ? refs.gpu.so_path : ""},
                          {"timing_seed", timing_seed_of(o.seed)}, {"rounds", o.rounds}, {"samples_per_round", o.samples_per_round},
                          {"warmup_seconds", o.warmup_seconds}, {"max_seconds", o.max_seconds}, {"drop_above", o.drop_above}};
    return worker_->call(req, o.timeout_s);
  });
}

}  // namespace ksol
