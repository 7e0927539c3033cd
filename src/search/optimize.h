// The optimisation loop: from a task's seed DSL program, an agent proposes children of chosen
// parents, an evaluator measures them on the task's visible sizes, and a performance gate keeps
// the best. Short-term memory (the trajectory) stops repeats, failed (parent, method) pairs and
// oscillations. The result is never slower or wrong: the best verified candidate, else the best
// baseline.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/expert.h"
#include "codegen/codegen.h"
#include "compile/compiler.h"
#include "coord/screen_batch.h"
#include "core/evaluation.h"
#include "dsl/ir.h"
#include "search/run_budget.h"
#include "task/task.h"

namespace CLI {
class App;
}
namespace ksol {
class Session;
struct CandidateOutcome;
struct EvalOptions;
}

namespace ksol::cli {
// Registers `ksol optimize TASK... [--agent ...]` (src/cli/optimize.cpp). The references are the
// global options, read when the command runs; the command ends CLI11's parse with its status.
void add_optimize_command(CLI::App& app, const std::string& store, const std::string& worker, const std::string& assume_gpu,
                          const bool& json_out, int argc, char** argv);
}

namespace ksol::search {

// One size of a candidate's outcome: the harness's record, with the size's weight in the score.
struct SizeResult : SizeEvaluation {
  double weight = 1;
};

struct Outcome {
  std::string label;
  Status status = Status::failed;  // ok when every size is ok; unsupported when no generator implements it
  std::string error;              // why not ok
  std::vector<SizeResult> sizes;
  bool screened = false;          // rejected by the search's screen (timed, never verified): not a failure of the program
  int64_t candidate_id = 0;       // the store's id (0 without a store)
  std::string kernel;             // the generated kernel's name
  double worker_seconds = 0;      // the worker's wall time over its sizes (GPU held), 0 when unknown
  double resumed_seconds = 0;     // of those sizes reused from an earlier run: the worker time they cost then
  bool ok() const { return status == Status::ok; }
  // Weighted geometric means over the sizes (0 when not ok or not known).
  double score_us() const;
  double ci_low_us() const;
  double ci_high_us() const;
  double pct_sol() const;
  // The size that weighs most (ties: the largest SOL time): what the agent profiles.
  const SizeResult* representative() const;
};

// Weighted geometric mean of base/cand per size over the sizes both have ok (0 if none).
double speedup(const Outcome& base, const Outcome& cand);

// A session's evaluation of one candidate (coord/session.h) as the search reads it: each size's
// record with its weight, a size reused from a resumed run counted as it was there, the worker's
// time summed, and the first failure said as "size: status at gate: message".
Outcome outcome_of(const Task& t, const CandidateOutcome& co);

// What profiling a kernel gave: Nsight Compute's metrics as features, the class they give under
// the thresholds in force, and the summary for prompts.
struct ProfileResult {
  std::map<std::string, double> metrics;
  std::string bottleneck;  // compute | memory_bandwidth | memory_latency
  std::string why;         // the fractions that decided it
  std::string thresholds;  // fixed | otsu(n=N)
  std::string summary;
};

// A program of a batch, as the loop hands it to the evaluator before it is timed.
struct BuildItem {
  const dsl::Program* program = nullptr;
  std::string label;       // c<index>
  int64_t parent_id = 0;   // the parent's candidate_id (0: none)
  std::string method;      // the card, or mutate, model, random, seed
};
struct Built {
  bool ok = true;
  std::string error;       // the compile gate's message when not ok
  int64_t candidate_id = 0;
  double seconds = 0;      // wall time of its build (0: a cache hit or no compiler)
  // What its build costs without the compile cache (its compile's time, or the one recorded in
  // the cache entry; 0: unknown): the search's estimate of a generation's build.
  double cost_seconds = 0;
};
// One program timed by a screen at one size (timing only: nothing was checked).
struct ScreenTime {
  std::string status = "failed";  // ok | failed (it did not run: returned an error, crashed, ...)
  double median_us = 0, ci_low_us = 0, ci_high_us = 0;
  int samples = 0;
  bool dropped = false;           // far slower than the fastest after its first round
  std::string message;
};

// A batch compiled together on every core (compile_all): `built` gets each item's record (the
// programs no generator implements refused, not compiled); returned, each compiled item's index
// in `items`, its job and its result.
struct CompiledItem {
  size_t index = 0;
  CompileJob job;
  CompileResult result;
};
std::vector<CompiledItem> compile_batch(const Task& t, const std::vector<BuildItem>& items, std::vector<Built>& built);

// The next generation compiled in one background thread on every core while this one's finalists
// are evaluated, for the compile cache (the build then finds them there); failures are left for
// the build to report. An evaluator's build() waits for it first, since both would compile the
// same sources. cancel() (and destruction) kills the compiles still running and starts no more:
// a search that ends leaves no compile behind to delay what comes next.
class BackgroundBuild {
 public:
  BackgroundBuild() = default;
  BackgroundBuild(const BackgroundBuild&) = delete;
  BackgroundBuild& operator=(const BackgroundBuild&) = delete;
  ~BackgroundBuild();
  void start(const Task& t, const std::vector<dsl::Program>& next);
  void wait();
  void cancel();

 private:
  std::thread thread_;
  std::shared_ptr<std::atomic<bool>> cancel_;
};

// A screen's libraries: `library` gives an item's (built now where build() did not), or "" with
// why; an item without one gets "does not build: <why>" in `out`. Returns the items that have one,
// in order: their index in `items` and the library's path.
std::vector<std::pair<size_t, std::string>> screen_libraries(
    const std::vector<BuildItem>& items, std::vector<ScreenTime>& out,
    const std::function<std::string(const BuildItem&, std::string* why)>& library);

// The search's screen times from a coordinator's batch: the batch's m-th library is item
// `which[m]`'s; the other items keep what `out` holds for them.
void take_screen_times(const ksol::ScreenBatch& sb, const std::vector<size_t>& which, std::vector<ScreenTime>& out);

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Builds a batch of programs (compiled together on every core) and registers them; a failure
  // is data. The default builds nothing: evaluate compiles.
  virtual std::vector<Built> build(const Task& t, const std::vector<BuildItem>& items) {
    (void)t;
    return std::vector<Built>(items.size());
  }
  // Whether screen() times programs; without it the loop evaluates every candidate in full.
  virtual bool screens() const { return false; }
  // Times built programs at one size in one call (timing only, interleaved): the loop's cheap
  // first answer, which can only reject. `worker_seconds` receives the call's GPU wall time.
  virtual std::vector<ScreenTime> screen(const Task& t, const std::vector<BuildItem>& items, const std::string& size, double* worker_seconds) {
    (void)t, (void)size, (void)worker_seconds;
    return std::vector<ScreenTime>(items.size());
  }
  // Records that a candidate was screened out (or failed to run in a screen) at a size.
  virtual void record_screened(const Task& t, int64_t candidate_id, const std::string& size, const ScreenTime& st, const std::string& why) {
    (void)t, (void)candidate_id, (void)size, (void)st, (void)why;
  }
  // Profiles a verified program at one size; nullopt with `why` when it cannot (no profiler, no
  // ncu, the run failed): the search then classifies by the roofline.
  virtual std::optional<ProfileResult> profile(const Task& t, const dsl::Program& p, const std::string& size, std::string* why) {
    (void)t, (void)p, (void)size;
    if (why) *why = "this evaluator has no profiler";
    return std::nullopt;
  }
  // Measures a program on the task's visible sizes. `parent` is the parent's candidate_id (0:
  // none); `method` the card (or "seed", "random").
  virtual Outcome evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t parent,
                           const std::string& method) = 0;
  // The task's baselines on the same sizes, by name.
  virtual std::map<std::string, Outcome> baselines(const Task& t) = 0;
  // The grade: the returned program and the baselines on the task's hidden sizes, which the
  // search never saw. An evaluator that cannot grade returns an outcome with no sizes.
  virtual Outcome grade_hidden(const Task& t, const dsl::Program& p, const std::string& label) {
    (void)t, (void)p;
    Outcome o;
    o.label = label;
    o.error = "this evaluator does not grade hidden sizes";
    return o;
  }
  virtual std::map<std::string, Outcome> baselines_hidden(const Task& t) {
    (void)t;
    return {};
  }
  // The GPU the evaluations run on, for the decision table: compute capability x 10 and SM count
  // (the H200's when the evaluator does not know).
  virtual std::pair<double, double> device_sm() const { return {90, 132}; }
  // A hint: these programs may be evaluated next. An evaluator that compiles may start building
  // them in the background (the compile cache then serves the evaluation); nothing is measured.
  virtual void prefetch(const Task& t, const std::vector<dsl::Program>& next) { (void)t, (void)next; }
  // The search has ended: a prefetch still building is no longer wanted.
  virtual void cancel_prefetch() {}
  // Set by the loop before each child's evaluation: per size, the median (us) above which the
  // child is screened out after a timing pass alone (it cannot beat the best there), before its
  // correctness gate; the sizes after a screened-out one are not evaluated. Empty: no screening.
  std::map<std::string, double> prune_above_us;
  // A baseline whose first call(s) at a size take more than this many times the median of the
  // fastest baseline verified there is stopped early (status far_slower: not verified or timed in
  // full, never the comparator); the baselines are evaluated fastest-expected first
  // (baseline_order). 0: every baseline verified and timed in full.
  double baseline_stop_factor = kBaselineStopFactor;
  static constexpr double kBaselineStopFactor = 8;
};

// The order a search evaluates a task's baselines in, so that the fastest expected is verified
// first and sets the others' early stop: vendor libraries, then the user's, then naive kernels
// (in their declared order within a kind).
std::vector<const BaselineSpec*> baseline_order(const Task& t);
// Per size, the early stop of the next baseline (baseline_stop_factor): the fastest baseline
// verified there among `so_far`, times `factor`; none where none is verified or factor <= 0.
std::map<std::string, FarSlowerLimit> far_slower_limits(const std::map<std::string, Outcome>& so_far, double factor);
// The naive baseline's speedup figure: speedup(naive, final) with each size stopped early
// (far_slower) counted at its one call's time; `from_one_call` says whether any was. An
// estimate there (one call, not a median), for the "vs naive" column only, never a comparator.
double speedup_vs_naive(const Outcome& naive, const Outcome& final_out, bool* from_one_call);

// The outcome of a program no generator implements for this task ("unsupported", with the
// generator's reason), or nullopt when one does; an evaluator's first step.
std::optional<Outcome> unsupported(const Task& t, const dsl::Program& p, const std::string& label);
// Marks an ok size result faster than its speed-of-light bound "suspect": the timing or the kernel
// is lying, and it is never rewarded.
void flag_faster_than_sol(SizeResult& sr, const std::string& what);

// The visible sizes of a task (the search never sees the hidden ones), and the hidden ones.
std::vector<const SizeSet*> visible_sizes(const Task& t);
std::vector<const SizeSet*> hidden_sizes(const Task& t);
codegen::Binding binding_of(const Task& t);

// Over a Session: generates CUDA, compiles, runs every gate in the worker, records candidates
// with parent, method and agent in the store.
class SessionEvaluator : public Evaluator {
 public:
  SessionEvaluator(Session& s, std::string agent, int64_t resume_run = 0, double timeout_s = 300)
      : s_(s), agent_(std::move(agent)), resume_(resume_run), timeout_s_(timeout_s) {}
  Outcome evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t parent,
                   const std::string& method) override;
  std::map<std::string, Outcome> baselines(const Task& t) override;
  Outcome grade_hidden(const Task& t, const dsl::Program& p, const std::string& label) override;
  std::map<std::string, Outcome> baselines_hidden(const Task& t) override;
  // Nsight Compute over a one-shot worker (`ksol-worker --once`), the kernel selected by its
  // name; the thresholds from the profiles recorded in the cache folder (profiles.jsonl).
  std::optional<ProfileResult> profile(const Task& t, const dsl::Program& p, const std::string& size, std::string* why) override;
  // The master seed of a task's search: drawn from the OS once per task and this evaluator, so
  // that the baselines and every candidate on the visible sizes are checked on the same cases
  // (the worker then generates them and their references once: see harness.cpp's CaseCache).
  uint64_t search_seed(const Task& t);
  // The master seed of a task's hidden grade: drawn from the OS when the grade begins (after the
  // search, never seen by it), shared by the returned kernel and the baselines so that each
  // hidden size's cases and float64 references are made once.
  uint64_t grade_seed(const Task& t);
  // Compiles the programs on every core in one background thread, for the compile cache (the
  // next build() waits for it); failures are left for the build.
  void prefetch(const Task& t, const std::vector<dsl::Program>& next) override;
  void cancel_prefetch() override { prefetching_.cancel(); }
  // Compiles the batch with compile_all on every core (after any prefetch in flight finishes) and
  // writes each candidate's store row with its parent, method and agent.
  std::vector<Built> build(const Task& t, const std::vector<BuildItem>& items) override;
  bool screens() const override { return true; }
  std::vector<ScreenTime> screen(const Task& t, const std::vector<BuildItem>& items, const std::string& size, double* worker_seconds) override;
  void record_screened(const Task& t, int64_t candidate_id, const std::string& size, const ScreenTime& st, const std::string& why) override;
  ~SessionEvaluator() override;
  std::pair<double, double> device_sm() const override;

 private:
  // The candidate's store row (with its parent, method and agent), 0 without a store.
  int64_t register_candidate(const Task& t, const CompileJob& j, int64_t parent, const std::string& method);
  // The task's baselines at eo's sizes in baseline_order, each with the early stop the ones before
  // it set (far_slower_limits).
  std::map<std::string, Outcome> baselines_with(const Task& t, EvalOptions eo);
  std::map<std::string, uint64_t> search_seeds_, grade_seeds_;
  std::map<std::string, CompileResult> built_;  // by source hash: what build() compiled, for evaluate and screen
  BackgroundBuild prefetching_;
  Session& s_;
  std::string agent_;
  int64_t resume_;
  double timeout_s_;
};

// For tests: a deterministic cost model over the schedule knobs. Each key has a preferred value;
// time = base * prod(1 + weight_k * |log2(value / preferred)|) (choice keys: a factor when not
// the preferred one), per size scaled by its bytes. `fail` marks schedules that fail a gate.
class ScriptedEvaluator : public Evaluator {
 public:
  struct Knob {
    std::string preferred;
    double weight = 0.1;
  };
  std::map<std::string, Knob> model;
  // Per size name, a model that replaces `model` there (a schedule that wins at one size only).
  std::map<std::string, std::map<std::string, Knob>> size_model;
  double base_us = 100;              // at the optimum, size weight 1
  double sol_us = 50;                // the SOL time at the optimum's scale
  double noise_frac = 0.0;           // CI half-width as a fraction of the median
  // Evaluated as SessionEvaluator does (baseline_order): "naive" last, after the others; a
  // baseline above baseline_stop_factor x the fastest so far at a size is far_slower there.
  std::map<std::string, double> baseline_us = {{"naive", 400}, {"vendor", 150}};
  std::function<bool(const codegen::Schedule&)> fail;
  std::function<bool(const codegen::Schedule&)> fail_hidden;  // fails on the hidden sizes only
  // Recorded profiles for tests: metrics for a schedule (nullopt: "cannot profile"), classified
  // as SessionEvaluator does.
  std::function<std::optional<std::map<std::string, double>>(const codegen::Schedule&)> profiler;
  std::vector<std::map<std::string, double>> profile_history;
  int profiles = 0;
  std::function<bool(const codegen::Schedule&)> fail_compile;  // schedules whose build fails
  std::function<bool(const codegen::Schedule&)> fail_run;      // schedules that fail to run (a screen sees it too)
  bool can_screen = true;            // false: like an evaluator without a screen
  double screen_noise_frac = 0.0;    // a screen's time is off by up to this fraction (seeded per schedule)
  int evaluations = 0;
  int screened = 0;                                    // evaluations stopped by prune_above_us
  int screen_calls = 0, screened_programs = 0, builds = 0;
  double build_cost_s = 0;                             // each build's cost_seconds (what a compile of it costs)
  int prefetch_cancels = 0;                            // cancel_prefetch() calls
  std::vector<std::string> screen_sizes;               // the size of every screen call, in order
  std::vector<std::pair<int64_t, std::string>> calls;  // (parent, method) of every evaluate

  double time_of(const codegen::Schedule& s, const std::string& size = "") const;
  Outcome evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t parent,
                   const std::string& method) override;
  std::map<std::string, Outcome> baselines(const Task& t) override;
  Outcome grade_hidden(const Task& t, const dsl::Program& p, const std::string& label) override;
  std::map<std::string, Outcome> baselines_hidden(const Task& t) override;
  std::optional<ProfileResult> profile(const Task& t, const dsl::Program& p, const std::string& size, std::string* why) override;
  std::vector<Built> build(const Task& t, const std::vector<BuildItem>& items) override;
  void cancel_prefetch() override { ++prefetch_cancels; }
  bool screens() const override { return can_screen; }
  std::vector<ScreenTime> screen(const Task& t, const std::vector<BuildItem>& items, const std::string& size, double* worker_seconds) override;

 private:
  Outcome run_on(const Task& t, const dsl::Program& p, const std::string& label, const std::vector<const SizeSet*>& sizes, bool hidden);
  std::map<std::string, Outcome> baselines_on(const std::vector<const SizeSet*>& sizes);
};

// The class of one kernel's metrics under thresholds fitted on `history` (which it then joins).
ProfileResult classify_profile(const std::map<std::string, double>& metrics, std::vector<std::map<std::string, double>>& history);

struct OptimizeOptions {
  int max_candidates = 1000;     // programs tried (built, screened or evaluated), the seed included
  double budget_seconds = 0;     // 0: no time limit; counts the seed and the children, not the baselines
  double target_sol = 0.9;       // stop when the best reaches this %SOL (0..1); 0: never
  int plateau = 4;               // stop after this many generations without a new best
  // A generation: `batch` proposals built together, screened beside the best at every visible
  // size (the representative one first); at most `finalists` of the fastest over all sizes and
  // `specialists` that beat the fastest verified schedule at one size are evaluated in full
  // (every gate, every visible size). Without an evaluator's screen, each proposal is evaluated
  // in full, one at a time.
  size_t batch = 16;
  size_t finalists = 2;
  size_t specialists = 1;
  // At most this many schedules in one kernel with schedules by size (1: one schedule for all sizes).
  size_t dispatch_schedules = 3;
  uint64_t seed = 1;
  std::string agent = "expert";  // expert | random
  double gamma = 1.03;           // the performance gate
  double prune = 2.0;            // without a screen: a child slower than prune x the best at a size is timed only (0: off)
  bool profile = true;           // profile a generation's first parent once (Evaluator::profile) before it proposes
  double profile_min_left = 60;  // ... while at least this many seconds of the task's budget remain (no budget: always)
  // A run-wide budget (ksol optimize --budget-total-seconds, run_budget.h): called once the seed is
  // timed, with its %SOL (0..1) and the task's fixed work so far (its baselines and its seed), it
  // returns this task's wall-time budget in seconds (replacing budget_seconds), so that tasks far
  // from SOL get more of what is left.
  std::function<double(double seed_pct_sol, const FixedWork& so_far)> seconds_after_seed;
  double reference_parent_prob = 0.3;  // choose a reference (non-best) parent this often
  size_t elites = 4, diverse = 2;
  bool prefetch = true;  // the next generation is built in the background while this one's finalists are evaluated
  std::function<void(const std::string&)> progress;  // one line per event (optional)
};

struct Attempt {
  int index = 0;                 // in the trajectory
  int parent = -1;               // trajectory index of the parent (-1: the seed)
  std::string method, why;
  std::string schedule;          // schedule_text of the full schedule
  dsl::Program program;
  Outcome outcome;
  bool accepted = false;         // became the new best
  std::string note;              // gate decision
  int generation = 0;            // 0: the seed
  double screen_ratio = 0;       // its screen time over the best's (weighted over the sizes screened), 0: not screened
  std::string screened_at;       // the sizes it was screened at, comma-separated
  std::map<std::string, int> runs_at;  // schedules by size (method "dispatch"): per visible size, the attempt whose schedule runs there
  std::map<std::string, double> screen_at;  // its screen time over the best's, per size screened
  int screened_beside = -1;      // the best it was screened beside
  double at_seconds = 0;         // when its evaluation finished, from the start of the task
};

struct OptimizeResult {
  std::string task;
  std::string stop_reason;       // target | plateau | candidates | seconds | exhausted | seed_failed | interrupted
  std::vector<Attempt> trajectory;
  int best = -1;                 // trajectory index of the best verified candidate (-1: none)
  bool use_baseline = false;     // nothing verified beat the best baseline: the result is it
  std::string best_baseline;     // name
  Outcome baseline_best;         // per size: the fastest baseline
  std::map<std::string, Outcome> baselines;
  double speedup_vs_baseline = 0, speedup_vs_naive = 0;
  bool naive_from_one_call = false;  // speedup_vs_naive counts a size where naive was stopped early at its one call's time
  double pct_sol_before = 0, pct_sol_after = 0;
  double seconds = 0;
  int screened = 0;              // children rejected by the timing screen (never verified)
  int generations = 0;
  int verified = 0;              // programs evaluated in full (every gate), the seed included
  // Where the task's wall time went, in seconds (GPU parts are the worker's wall time).
  struct Breakdown {
    double baselines = 0, seed = 0, build = 0, screen = 0, verify = 0, profile = 0, propose = 0, grade = 0;
  } breakdown;
  FixedWork fixed;               // the baselines', the seed's and the hidden grade's evaluations (run_budget.h)
  bool graded = false;           // the hidden grade ran
  double search_seconds = 0;     // from the seed's start to the search's end (the throughput's clock)
  double budget_seconds = 0;     // the wall-time budget this task ran under (0: none)
  double worker_seconds = 0;     // the worker's wall time over every evaluation (candidates and baselines)
  double resumed_seconds = 0;    // of the search's budget, what reused evaluations cost when they ran
  // The grade on the hidden sizes (the returned DSL kernel's; empty sizes when not graded, with
  // hidden_note saying why): its outcome, the fastest baseline per hidden size, and the speedup.
  Outcome hidden;
  Outcome hidden_baseline_best;
  double hidden_speedup = 0;
  std::string hidden_note;
  std::vector<std::string> log;  // every choice (explain) and refusal
  const Attempt* best_attempt() const { return best >= 0 ? &trajectory[best] : nullptr; }
  nlohmann::json to_json() const;
};

// The scheduler across tasks: of `remaining` seconds, the share of a task whose headroom weight
// is `w` (1 - its seed's %SOL, at least 0.05), with `left` tasks still to run counting this one,
// the ones not yet seen assumed at `mean_w`, the mean weight seen so far (this one included).
double headroom_share(double remaining, double w, int left, double mean_w);

// Runs the loop. `agent` proposes children; `k` is unused by a random agent.
OptimizeResult optimize(const Task& t, const dsl::Program& seed, Evaluator& ev, agents::Agent& agent,
                        const OptimizeOptions& o);

}  // namespace ksol::search
