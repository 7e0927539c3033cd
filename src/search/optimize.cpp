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
#include "search/cost_model.h"
#include "search/dispatch.h"
#include "search/space.h"
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
    if (c.status != Status::ok || c.median_us <= 0) continue;
    for (auto& b : base.sizes)
      if (b.size == c.size && b.status == Status::ok && b.median_us > 0) {
        sw += c.weight;
        sl += c.weight * std::log(b.median_us / c.median_us);
      }
  }
  return sw > 0 ? std::exp(sl / sw) : 0;
}

std::vector<const BaselineSpec*> baseline_order(const Task& t) {
  std::vector<const BaselineSpec*> v;
  for (const BaselineSpec& b : t.baselines) v.push_back(&b);
  auto rank = [](const BaselineSpec* b) { return b->kind == "vendor" ? 0 : b->kind == "naive" ? 2 : 1; };
  std::stable_sort(v.begin(), v.end(), [&](const BaselineSpec* a, const BaselineSpec* b) { return rank(a) < rank(b); });
  return v;
}

std::map<std::string, FarSlowerLimit> far_slower_limits(const std::map<std::string, Outcome>& so_far, double factor) {
  std::map<std::string, FarSlowerLimit> limits;
  if (!(factor > 0)) return limits;
  for (const auto& [name, o] : so_far)
    for (const SizeResult& s : o.sizes) {
      if (s.status != Status::ok || !(s.median_us > 0)) continue;
      FarSlowerLimit& l = limits[s.size];
      if (l.than_us == 0 || s.median_us < l.than_us) l = {name, s.median_us, factor};
    }
  return limits;
}

double speedup_vs_naive(const Outcome& naive, const Outcome& final_out, bool* from_one_call) {
  Outcome n = naive;
  bool estimated = false;
  for (SizeResult& s : n.sizes)
    if (s.status == Status::far_slower && s.probe_us > 0) {
      s.status = Status::ok;
      s.median_us = s.probe_us;
      estimated = true;
    }
  const double sp = speedup(n, final_out);
  if (from_one_call) *from_one_call = estimated && sp > 0;
  return sp;
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
  o.status = Status::unsupported;
  o.error = sup.reason;
  return o;
}

void flag_faster_than_sol(SizeResult& sr, const std::string& what) {
  if (sr.status != Status::ok || !sol::suspect(sr.pct_sol)) return;
  sr.status = Status::suspect;
  sr.message = "faster than " + what + "'s SOL bound (" + std::to_string(sr.pct_sol * 100) + "% of SOL)";
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

// --- the loop --------------------------------------------------------------------------------

namespace {
// Per size, the fastest baseline that passed there; ok when every size has one.
Outcome fastest_per_size(const std::map<std::string, Outcome>& baselines, const std::vector<const SizeSet*>& sizes) {
  Outcome best;
  best.label = "baseline:best";
  best.status = Status::failed;
  for (auto* sz : sizes) {
    const SizeResult* fastest = nullptr;
    for (auto& [name, bo] : baselines)
      for (auto& s : bo.sizes)
        if (s.size == sz->name && s.status == Status::ok && s.median_us > 0 && (!fastest || s.median_us < fastest->median_us))
          fastest = &s;
    if (fastest) best.sizes.push_back(*fastest);
  }
  if (!best.sizes.empty() && best.sizes.size() == sizes.size()) best.status = Status::ok;
  return best;
}

double since(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// What a search's first generation of `batch` proposals is expected to take, from the seed's
// measurements: the build (one compile like the seed's per core's share of the batch: they run in
// parallel; most of a minute for a CUTLASS kernel), the screens where the evaluator screens (the
// proposals and the best, each called about as often as a screen does at every visible size at the
// seed's time there, plus about 20 ms a library to load it: axpy_f32's first screens on an H100 took
// 2.2 s for 33 libraries at 4 sizes, docs/results/2026-12-06-h100-main-job-and-fragments.txt) and
// the full evaluation of a finalist, about what the seed's took. A search of slow kernels (a SIMT
// GEMM at 20 ms a call) spends most of it screening.
struct FirstGeneration {
  double build = 0, screen = 0, verify = 0;
  double total() const { return build + screen + verify; }
};
FirstGeneration first_generation(size_t batch, bool screens, double seed_build_cost, const Outcome& seed, double seed_eval_seconds) {
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const ScreenOptions so;
  const double calls = so.rounds * so.samples_per_round + 2;  // the samples and a warm-up call or two
  const double n = static_cast<double>(batch);
  FirstGeneration g;
  g.build = seed_build_cost * std::ceil(n / cores);
  for (const SizeResult& s : seed.sizes)
    if (screens && s.status == Status::ok && s.median_us > 0) g.screen += (n + 1) * (calls * s.median_us * 1e-6 + 0.02);
  g.verify = seed_eval_seconds;
  return g;
}

// An outcome's median at one size (0 when it has none there).
double median_at(const Outcome& o, const std::string& size) {
  for (auto& s : o.sizes)
    if (s.size == size && s.status == Status::ok && s.median_us > 0) return s.median_us;
  return 0;
}
const SizeResult* size_result(const Outcome& o, const std::string& size) {
  for (auto& s : o.sizes)
    if (s.size == size) return &s;
  return nullptr;
}

// The legal schedules of the seed's family (search/space.h), walked in a seeded order.
struct SpaceWalk {
  std::shared_ptr<const LegalSpace> space;
  std::vector<size_t> order;  // a seeded permutation of the legal schedules
  size_t next = 0;
  const LegalSpace& get(const dsl::Program& seed, const codegen::Binding& b, std::mt19937_64& rng) {
    if (!space) {
      space = legal_space(seed, b).get();
      order.resize(space->size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
    }
    return *space;
  }
};

// A proposal of a generation before it is built.
struct Pending {
  dsl::Program program;
  std::string schedule;  // schedule_text of the full schedule
  int parent = -1;       // trajectory index
  std::string method, why;
};

}  // namespace

OptimizeResult optimize(const Task& t, const dsl::Program& seed, Evaluator& ev, agents::Agent& agent,
                        const OptimizeOptions& o) {
  OptimizeResult res;
  res.task = t.name;
  auto t0 = Clock::now();
  auto say = [&](const std::string& line) { res.log.push_back(line); };
  auto progress = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  std::mt19937_64 rng(o.seed);
  codegen::Binding b = binding_of(t);

  // Baselines: the reference the search must beat, per size the fastest.
  res.baselines = ev.baselines(t);
  auto add_fixed = [&](const Outcome& o) {
    res.fixed.seconds += o.worker_seconds;
    res.fixed.evaluations += static_cast<int>(o.sizes.size());
  };
  for (auto& [name, bo] : res.baselines) res.worker_seconds += bo.worker_seconds, add_fixed(bo);
  double best_base_score = 0;
  res.baseline_best = fastest_per_size(res.baselines, visible_sizes(t));
  for (auto& [name, bo] : res.baselines)
    if (bo.ok() && (best_base_score == 0 || bo.score_us() < best_base_score)) {
      best_base_score = bo.score_us();
      res.best_baseline = name;
    }
  res.breakdown.baselines = since(t0);

  // A schedule's text; a kernel with schedules by size: each guard with its schedule, then the last.
  auto sched_of = [](const dsl::Program& p) {
    if (p.guarded.empty()) return codegen::schedule_text(agents::full_schedule(p));
    std::string s;
    for (size_t i = 0; i <= p.guarded.size(); ++i)
      s += (i ? "; " : "") + (i < p.guarded.size() ? "when " + dsl::guard_text(p.guarded[i].when) : std::string("otherwise")) + ": " +
           codegen::schedule_text(agents::full_schedule(dsl::variant(p, i)));
    return s;
  };
  // The budget counts the search's own work, the seed's evaluation included, not the baselines'.
  const auto t_search = Clock::now();
  int tried = 0;
  double budget = o.budget_seconds;  // the run-wide scheduler may set it once the seed is timed
  // Evaluations reused from an interrupted run count the worker time they cost then, so that a
  // resumed search stops where the interrupted one would have, not later.
  double resumed_seconds = 0;
  auto new_attempt = [&](const dsl::Program& p, int parent, const std::string& method, const std::string& why, int gen) {
    Attempt a;
    a.index = static_cast<int>(res.trajectory.size());
    a.parent = parent;
    a.method = method;
    a.why = why;
    a.program = p;
    a.schedule = sched_of(p);
    a.generation = gen;
    a.outcome.label = "c" + std::to_string(a.index);
    a.outcome.kernel = codegen::kernel_name(p);
    return a;
  };
  auto parent_id_of = [&](int parent) { return parent >= 0 ? res.trajectory[parent].outcome.candidate_id : 0; };
  // A program evaluated in full (every gate at every visible size). Without a screen, `prune`
  // still stops a child's evaluation after a timing pass at a size where it is far slower.
  auto evaluate_full = [&](Attempt& a) {
    auto tv = Clock::now();
    ev.prune_above_us.clear();
    if (!ev.screens() && o.prune > 0 && a.parent >= 0 && res.best >= 0)
      for (auto& r : res.trajectory[res.best].outcome.sizes)
        if (r.status == Status::ok && r.median_us > 0) ev.prune_above_us[r.size] = r.median_us * o.prune;
    int64_t cid = a.outcome.candidate_id;
    a.outcome = ev.evaluate(t, a.program, a.outcome.label, parent_id_of(a.parent), a.method);
    if (!a.outcome.candidate_id) a.outcome.candidate_id = cid;
    if (a.outcome.kernel.empty()) a.outcome.kernel = codegen::kernel_name(a.program);
    ev.prune_above_us.clear();
    if (a.outcome.screened) ++res.screened;
    else ++res.verified;
    res.worker_seconds += a.outcome.worker_seconds;
    resumed_seconds += a.outcome.resumed_seconds;
    (a.parent < 0 ? res.breakdown.seed : res.breakdown.verify) += since(tv);
    a.at_seconds = since(t0);
  };

  double seed_build_cost = 0;    // what building the seed costs without the compile cache (0: unknown)
  double seed_eval_seconds = 0;  // its full evaluation's wall time
  {
    Attempt s0 = new_attempt(seed, -1, "seed", "the task's seed program", 0);
    BuildItem bi{&s0.program, s0.outcome.label, 0, "seed"};
    auto tb = Clock::now();
    std::vector<Built> bs = ev.build(t, {bi});
    res.breakdown.build += since(tb);
    if (!bs.empty()) s0.outcome.candidate_id = bs[0].candidate_id, seed_build_cost = bs[0].cost_seconds;
    auto te = Clock::now();
    evaluate_full(s0);
    seed_eval_seconds = since(te);
    ++tried;
    res.trajectory.push_back(std::move(s0));
  }
  Attempt& s0 = res.trajectory[0];
  add_fixed(s0.outcome);
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
      budget = o.seconds_after_seed(res.pct_sol_before, res.fixed);
      say("budget: " + fmt(budget, 1) + " s for this task from the run's total (seed at " + fmt(res.pct_sol_before * 100, 1) + "% of SOL)");
    }
  }
  progress(t.name + ": seed " + (s0.outcome.ok() ? fmt(s0.outcome.score_us()) + " us, " + fmt(s0.outcome.pct_sol() * 100, 1) + "% SOL"
                                                  : "FAILED: " + s0.outcome.error));

  // The representative size (the one that weighs most) is screened first; the others follow in
  // order of weight for the candidates that survive it.
  std::vector<std::string> size_order;
  if (const SizeResult* r = s0.outcome.representative()) size_order.push_back(r->size);
  {
    std::vector<const SizeSet*> vs = visible_sizes(t);
    std::stable_sort(vs.begin(), vs.end(), [](const SizeSet* x, const SizeSet* y) { return x->weight > y->weight; });
    for (auto* s : vs)
      if (std::find(size_order.begin(), size_order.end(), s->name) == size_order.end()) size_order.push_back(s->name);
  }
  std::map<std::string, double> weight_of;
  for (auto* s : visible_sizes(t)) weight_of[s->name] = s->weight;

  // (parent, method) pairs that failed; a random draw is a move of its own, so its key is the
  // schedule it drew, not the shared name "random".
  std::set<std::pair<int, std::string>> failed_pairs;
  auto move_key = [](const std::string& method, const std::string& schedule) {
    return method == "random" || method == "model" || method == "mutate" || method == "mutate2" || method == "combine" ? method + " " + schedule : method;
  };
  std::map<int, std::optional<ProfileResult>> profiled;  // by trajectory index
  std::string no_profiler;                                // why not, once it has failed
  std::set<std::string> seen = {s0.schedule};
  CostModel model;
  SpaceWalk walk;
  std::map<int, double> estimate;  // trajectory index -> estimated score (us): verified, or screened relative to the best
  if (s0.outcome.ok()) estimate[0] = s0.outcome.score_us();
  auto rep_median = [&](const Outcome& out) {
    for (auto& s : out.sizes)
      if (!size_order.empty() && s.size == size_order[0] && s.status == Status::ok) return s.median_us;
    return 0.0;
  };
  if (s0.outcome.ok() && rep_median(s0.outcome) > 0) model.observe(agents::full_schedule(s0.program), std::log(rep_median(s0.outcome)));
  const bool expert = agent.name() == "expert";
  const bool random_only = agent.name() == "random";
  int since_best = 0;        // generations without a new best
  double last_gen = 0;       // seconds the last generation took
  std::vector<Pending> ahead;  // the next generation, proposed (and being built) while this one is verified

  // The parent's measurement as the agents see it (the profile of the parent when there is one).
  // Only the first parent of a generation is profiled (the others keep the roofline's class unless
  // profiled before), and only while at least profile_min_left seconds of the task's budget remain:
  // a profile costs several seconds of Nsight Compute replays.
  auto profile_of = [&](int cand, bool first) {
    const Attempt& pa = res.trajectory[cand];
    agents::Profile prof;
    prof.precision = t.precision;
    std::tie(prof.sm, prof.sm_count) = ev.device_sm();
    if (const SizeResult* r = pa.outcome.representative()) {
      prof.bound = r->bound;
      prof.pct_sol = r->pct_sol;
      if (const SizeSet* sz = t.find_size(r->size)) prof.dims = sz->dims;
      // Verified parents are profiled once, at the size that weighs most; the class then comes
      // from its metrics instead of the roofline. A profiler that cannot run is said once.
      const bool time_left = budget <= 0 || budget - (since(t_search) + resumed_seconds) >= o.profile_min_left;
      if (o.profile && first && time_left && pa.outcome.ok() && !profiled.count(cand)) {
        auto tp = Clock::now();
        std::string why;
        std::optional<ProfileResult> pr = no_profiler.empty() ? ev.profile(t, pa.program, r->size, &why) : std::nullopt;
        res.breakdown.profile += since(tp);
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
    return prof;
  };

  // The fastest verified time at a size among the schedules tried alone (0: none).
  auto fastest_verified_at = [&](const std::string& size) {
    double best = 0;
    for (auto& a : res.trajectory)
      if (a.outcome.ok() && a.program.guarded.empty())
        if (double m = median_at(a.outcome, size); m > 0 && (best == 0 || m < best)) best = m;
    return best;
  };
  // The schedule tried alone that runs at a size in attempt i (i itself unless it dispatches).
  auto runs_at = [&](int i, const std::string& size) {
    auto it = res.trajectory[i].runs_at.find(size);
    return it != res.trajectory[i].runs_at.end() ? it->second : i;
  };
  // The attempt that proposes in place of i: a kernel with schedules by size proposes through
  // the one it runs at the representative size.
  auto proposer = [&](int i) { return size_order.empty() ? i : runs_at(i, size_order[0]); };

  // One generation's proposals: the agent's moves from the best and the other elites, then (for
  // the expert) one-knob mutations of the fastest schedules seen, the cost model's best guesses
  // over the untried space, and uniform draws, so that the space is covered, not only walked.
  std::set<std::string> logged;
  auto propose = [&](size_t n, int gen) {
    auto tp = Clock::now();
    const double profiled_before = res.breakdown.profile;  // the parents' profiles are their own line
    auto propose_seconds = [&] { return since(tp) - (res.breakdown.profile - profiled_before); };
    std::vector<Pending> out;
    std::set<std::string> taken;
    auto add = [&](const dsl::Program& p, int parent, const std::string& method, const std::string& why) {
      if (out.size() >= n) return false;
      std::string st = sched_of(p);
      if (seen.count(st) || taken.count(st)) return false;
      if (failed_pairs.count({parent, move_key(method, st)})) return false;
      if (!codegen::can_implement(p, b).ok) return false;
      taken.insert(st);
      out.push_back({p, st, parent, method, why});
      return true;
    };
    // The population: verified candidates by score, the best first.
    // A kernel with schedules by size proposes through the schedule it runs at the representative size.
    std::vector<int> ok;
    for (auto& a : res.trajectory)
      if (a.outcome.ok() && a.program.guarded.empty()) ok.push_back(a.index);
    std::stable_sort(ok.begin(), ok.end(), [&](int x, int y) { return res.trajectory[x].outcome.score_us() < res.trajectory[y].outcome.score_us(); });
    std::vector<int> parents = {proposer(res.best)};
    for (int i : ok)
      if (i != parents[0] && parents.size() < o.elites) parents.push_back(i);
    // Now and then (as in GPU Kernel Scientist) a reference version proposes first.
    std::uniform_real_distribution<double> u(0, 1);
    if (parents.size() > 1 && u(rng) < o.reference_parent_prob) std::swap(parents[0], parents[1 + rng() % (parents.size() - 1)]);
    size_t agent_share = random_only ? 0 : expert ? std::max<size_t>(1, (n + 1) / 2) : n;
    for (int cand : parents) {
      if (out.size() >= agent_share) break;
      std::set<std::string> exclude;
      for (auto& [pp, m] : failed_pairs)
        if (pp == cand) exclude.insert(m);
      std::vector<std::string> alog;
      std::vector<agents::Proposal> props = agent.propose(res.trajectory[cand].program, profile_of(cand, cand == parents[0]), b, exclude, &alog);
      // A parent proposes again in later generations while it stays the best; its reasoning is logged once.
      for (auto& l : alog)
        if (logged.insert("[parent c" + std::to_string(cand) + "] " + l).second) say("[parent c" + std::to_string(cand) + "] " + l);
      // The first parent may fill the agent's share; the others get what is left, a few each.
      size_t cap = cand == parents[0] ? agent_share : std::min(agent_share, out.size() + std::max<size_t>(1, n / 8));
      for (auto& p : props) {
        if (out.size() >= cap) break;
        add(p.program, cand, p.method, p.why);
      }
    }
    if ((!random_only && !expert) || out.size() >= n) {
      // An LLM's proposals are its own alone, so that a comparison between agents stays one.
      res.breakdown.propose += propose_seconds();
      return out;
    }
    const LegalSpace& sp = walk.get(seed, b, rng);
    auto from_space = [&](size_t i) { return codegen::with_schedule(seed, sp.schedule(walk.order[i])); };
    if (expert) {
      // Mutations: one knob of one of the fastest schedules so far moved to a neighbouring value
      // of its grid (both neighbours of a number, every other value of a choice).
      std::vector<std::pair<double, int>> fastest;
      for (auto& [i, us] : estimate) fastest.push_back({us, i});
      std::sort(fastest.begin(), fastest.end());
      size_t mut_cap = out.size() + std::max<size_t>(1, n / 4);
      std::vector<std::pair<int, codegen::Schedule>> muts;
      // The fastest three over all sizes, and each schedule the best runs at some size.
      std::vector<int> mparents;
      for (size_t f = 0; f < fastest.size() && f < 3; ++f) mparents.push_back(fastest[f].second);
      for (auto& [size, i] : res.trajectory[res.best].runs_at)
        if (std::find(mparents.begin(), mparents.end(), i) == mparents.end()) mparents.push_back(i);
      for (int pi : mparents) {
        codegen::Schedule s = agents::full_schedule(res.trajectory[pi].program);
        for (size_t k = 0; k < s.size(); ++k) {
          auto g = std::find(sp.keys.begin(), sp.keys.end(), s[k].first);
          if (g == sp.keys.end()) continue;
          const std::vector<std::string>& grid = sp.grids[static_cast<size_t>(g - sp.keys.begin())];
          auto at = std::find(grid.begin(), grid.end(), s[k].second);
          bool numeric = !grid.empty() && grid[0].find_first_not_of("0123456789") == std::string::npos;
          for (size_t v = 0; v < grid.size(); ++v) {
            if (grid[v] == s[k].second) continue;
            if (numeric && at != grid.end() && std::abs(static_cast<long>(v) - static_cast<long>(at - grid.begin())) > 1) continue;
            codegen::Schedule m = s;
            m[k].second = grid[v];
            muts.push_back({pi, m});
          }
        }
      }
      // Moves that helped, together: a parent's children (one or two knobs away) whose screens put
      // them ahead of it at a size where it ran in the best they were screened beside, their knob
      // changes applied together, the two and the three that gained most at that size. Gains too
      // small for a finalist alone add up.
      size_t combo_cap = out.size() + std::max<size_t>(1, n / 8);
      std::vector<int> cparents = {proposer(res.best)};
      for (int i : mparents)
        if (std::find(cparents.begin(), cparents.end(), i) == cparents.end()) cparents.push_back(i);
      for (int pi : cparents) {
        const codegen::Schedule base = agents::full_schedule(res.trajectory[pi].program);
        for (const std::string& size : size_order) {
          std::vector<std::pair<double, int>> helped;
          for (const Attempt& a : res.trajectory) {
            if (a.parent != pi || a.screened_beside < 0 || !a.program.guarded.empty()) continue;
            if (a.method != "mutate" && a.method != "mutate2" && a.method != "combine") continue;
            if (a.note.rfind("failed", 0) == 0) continue;  // it did not run somewhere: not a move that helped
            auto r = a.screen_at.find(size);
            if (r == a.screen_at.end() || r->second >= 1.0 || runs_at(a.screened_beside, size) != pi) continue;
            helped.push_back({r->second, a.index});
          }
          std::sort(helped.begin(), helped.end());
          for (size_t take = 2; take <= 3 && take <= helped.size() && out.size() < combo_cap; ++take) {
            codegen::Schedule m = base;
            std::string from;
            for (size_t h = 0; h < take; ++h) {
              const codegen::Schedule c = agents::full_schedule(res.trajectory[helped[h].second].program);
              for (size_t k = 0; k < m.size() && k < c.size() && k < base.size(); ++k)
                if (c[k].second != base[k].second && m[k].second == base[k].second) m[k].second = c[k].second;
              from += (h ? ", c" : "c") + std::to_string(helped[h].second);
            }
            add(codegen::with_schedule(res.trajectory[pi].program, m), pi, "combine",
                "the knob moves of " + from + ", each faster than c" + std::to_string(pi) + " at " + size + ", together");
          }
        }
      }
      std::shuffle(muts.begin(), muts.end(), rng);
      for (auto& [pi, m] : muts) {
        if (out.size() >= mut_cap) break;
        add(codegen::with_schedule(res.trajectory[pi].program, m), pi, "mutate",
            "one knob of c" + std::to_string(pi) + " (one of the fastest so far) moved to a neighbouring value");
      }
      // Two knobs at once: knobs that trade against each other (vector width against items per
      // thread, tile against stages) are a valley for one-knob steps, whose single moves are slower
      // than both ends. Pairs of the one-knob moves of the same parent, drawn at random.
      size_t pair_cap = out.size() + std::max<size_t>(1, n / 8);
      for (size_t tries = 0; out.size() < pair_cap && muts.size() > 1 && tries < 8 * n; ++tries) {
        auto& [pa, ma] = muts[rng() % muts.size()];
        auto& [pb, mb] = muts[rng() % muts.size()];
        if (pa != pb) continue;
        codegen::Schedule base = agents::full_schedule(res.trajectory[pa].program), m = ma;
        size_t changed = 0;
        for (size_t k = 0; k < m.size() && k < mb.size() && k < base.size(); ++k)
          if (mb[k].second != base[k].second && m[k].second == base[k].second) m[k].second = mb[k].second, ++changed;
        if (changed != 1) continue;
        add(codegen::with_schedule(res.trajectory[pa].program, m), pa, "mutate2",
            "two knobs of c" + std::to_string(pa) + " (one of the fastest so far) moved to neighbouring values together");
      }
      // The cost model's guesses: the untried schedules it ranks fastest, out of a sample.
      if (model.observations() >= 6 && sp.size() > 0) {
        model.fit();
        size_t model_cap = out.size() + std::max<size_t>(1, n / 4);
        std::vector<std::pair<double, size_t>> ranked;
        for (size_t k = walk.next, m = 0; k < walk.order.size() && m < 4096; ++k, ++m)
          ranked.push_back({model.predict(sp.schedule(walk.order[k])), k});
        std::sort(ranked.begin(), ranked.end());
        for (auto& [pred, k] : ranked) {
          if (out.size() >= model_cap) break;
          add(from_space(k), res.best, "model",
              "ranked fastest by the cost model fitted on " + std::to_string(model.observations()) + " screened schedules (predicted " +
                  fmt(std::exp(pred)) + " us at " + size_order[0] + ")");
        }
      }
    }
    // Uniform draws without replacement from the legal space fill the rest.
    while (out.size() < n && walk.next < walk.order.size())
      add(from_space(walk.next++), res.best, "random", "drawn uniformly (without replacement) from " + std::to_string(sp.size()) + " legal schedules");
    res.breakdown.propose += propose_seconds();
    return out;
  };

  // Builds pending proposals into attempts (compile failures are verdicts already).
  auto build_all = [&](std::vector<Pending>& pend, int gen) {
    std::vector<int> made;
    std::vector<BuildItem> items;
    for (auto& p : pend) {
      Attempt a = new_attempt(p.program, p.parent, p.method, p.why, gen);
      seen.insert(a.schedule);
      res.trajectory.push_back(std::move(a));
      made.push_back(res.trajectory.back().index);
    }
    for (int i : made) {
      Attempt& a = res.trajectory[i];
      items.push_back({&a.program, a.outcome.label, parent_id_of(a.parent), a.method});
    }
    auto tb = Clock::now();
    std::vector<Built> bs = ev.build(t, items);
    res.breakdown.build += since(tb);
    for (size_t k = 0; k < made.size() && k < bs.size(); ++k) {
      Attempt& a = res.trajectory[made[k]];
      a.outcome.candidate_id = bs[k].candidate_id;
      if (!bs[k].ok) {
        a.outcome.status = Status::failed;
        a.outcome.error = "compile gate: " + bs[k].error.substr(0, 2000);
        a.note = "failed: " + a.outcome.error;
        failed_pairs.insert({a.parent, move_key(a.method, a.schedule)});
        a.at_seconds = since(t0);
      }
    }
    tried += static_cast<int>(made.size());
    return made;
  };

  // The gamma gate: a verified child replaces the best only when faster by gamma, its CI clear.
  auto gate = [&](Attempt& a) {
    const Attempt& cur = res.trajectory[res.best];
    if (a.outcome.screened) {
      a.note = "screened out: " + a.outcome.error;
      return;
    }
    if (!a.outcome.ok()) {
      failed_pairs.insert({a.parent, move_key(a.method, a.schedule)});
      a.note = "failed: " + a.outcome.error;
      return;
    }
    if (a.program.guarded.empty()) {
      estimate[a.index] = a.outcome.score_us();
      if (double m = rep_median(a.outcome); m > 0) model.observe(agents::full_schedule(a.program), std::log(m));
    }
    double cs = a.outcome.score_us(), bsc = cur.outcome.score_us();
    double clo = cur.outcome.ci_low_us(), chi = a.outcome.ci_high_us();
    bool faster = cs * o.gamma <= bsc;
    bool ci = clo > 0 && chi > 0;
    if (faster && (!ci || chi < clo / o.gamma)) {
      a.accepted = true;
      a.note = "new best: " + fmt(bsc / cs, 3) + "x over c" + std::to_string(res.best);
      res.best = a.index;
    } else {
      a.note = "kept c" + std::to_string(res.best) + ": " + fmt(bsc / cs, 3) + "x < gamma " + fmt(o.gamma, 2) +
               (faster && ci ? " with overlapping CIs" : "");
    }
  };

  // Schedules by size: per visible size, the fastest schedule verified alone where it is clearly
  // faster there than what the best runs (by 2%, its CI clear of the best's). When that picks
  // more than one schedule, the kernel that runs each at its sizes (guards from learn_guards) is
  // built and evaluated in full like any candidate, and becomes the best when faster over the
  // visible sizes (by 1%, its CI clear of the best's) and faster at every size it changed.
  std::vector<SizeDims> size_dims;
  for (auto* sz : visible_sizes(t)) {
    SizeDims sd{sz->name, {}};
    for (const std::string& d : seed.dims)
      if (auto it = sz->dims.find(d); it != sz->dims.end()) sd.dims[d] = static_cast<int64_t>(std::llround(it->second));
    if (sd.dims.size() == seed.dims.size()) size_dims.push_back(sd);
  }
  if (size_dims.size() != visible_sizes(t).size()) size_dims.clear();
  std::set<std::string> dispatch_tried;
  auto try_dispatch = [&](int gen) {
    if (size_dims.size() < 2 || o.dispatch_schedules < 2 || res.best < 0) return;
    if (budget > 0 && since(t_search) + resumed_seconds >= budget) return;
    const int cur_i = res.best;
    const Outcome cur = res.trajectory[cur_i].outcome;
    // A best with schedules by size that this loop did not build (a seed written so) has no
    // schedule per size to start from.
    if (!res.trajectory[cur_i].program.guarded.empty() && res.trajectory[cur_i].runs_at.empty()) return;
    // Components are the seed's algorithm with another schedule (an LLM may rewrite the body too).
    const std::string algorithm = dsl::print_program(codegen::with_schedule(seed, {}));
    auto same_algorithm = [&](const dsl::Program& q) { return dsl::print_program(codegen::with_schedule(q, {})) == algorithm; };
    std::vector<int> comp;  // per entry of size_dims: the schedule (tried alone) to run there
    std::set<std::string> changed_at;
    for (const SizeDims& sd : size_dims) {
      const int here = runs_at(cur_i, sd.name);
      const SizeResult* cr = size_result(cur, sd.name);
      int pick = here;
      double pick_m = median_at(cur, sd.name);
      for (const Attempt& a : res.trajectory) {
        if (!a.outcome.ok() || !a.program.guarded.empty() || !same_algorithm(a.program)) continue;
        const SizeResult* r = size_result(a.outcome, sd.name);
        if (!r || r->status != Status::ok || r->median_us <= 0 || pick_m <= 0) continue;
        if (r->median_us * 1.02 < pick_m && (!cr || cr->ci_low_us <= 0 || r->ci_high_us < cr->ci_low_us)) {
          pick = a.index;
          pick_m = r->median_us;
        }
      }
      comp.push_back(pick);
      if (pick != here) changed_at.insert(sd.name);
    }
    if (changed_at.empty()) return;
    auto distinct_of = [&] {
      std::vector<int> d;
      for (int c : comp)
        if (std::find(d.begin(), d.end(), c) == d.end()) d.push_back(c);
      return d;
    };
    std::vector<int> distinct = distinct_of();
    // At most dispatch_schedules of them: the one whose loss costs least goes (each of its sizes to
    // the kept schedule fastest there, by its own verified time), judged by the predicted score.
    auto reassigned = [&](const std::vector<int>& keep) {
      std::vector<int> c = comp;
      for (size_t k = 0; k < size_dims.size(); ++k) {
        if (std::find(keep.begin(), keep.end(), c[k]) != keep.end()) continue;
        int to = keep[0];
        for (int x : keep)
          if (median_at(res.trajectory[x].outcome, size_dims[k].name) < median_at(res.trajectory[to].outcome, size_dims[k].name)) to = x;
        c[k] = to;
      }
      return c;
    };
    auto predicted_of = [&](const std::vector<int>& c) {
      double sw = 0, sl = 0;
      for (size_t k = 0; k < size_dims.size(); ++k) {
        double w = weight_of.count(size_dims[k].name) ? weight_of[size_dims[k].name] : 1.0;
        sw += w;
        sl += w * std::log(median_at(res.trajectory[c[k]].outcome, size_dims[k].name));
      }
      return std::exp(sl / sw);
    };
    while (distinct.size() > o.dispatch_schedules) {
      std::vector<int> best_comp;
      double best_pred = 0;
      for (size_t d = 0; d < distinct.size(); ++d) {
        std::vector<int> keep = distinct;
        keep.erase(keep.begin() + static_cast<long>(d));
        std::vector<int> c = reassigned(keep);
        double pr = predicted_of(c);
        if (best_comp.empty() || pr < best_pred) best_comp = c, best_pred = pr;
      }
      comp = best_comp;
      distinct = distinct_of();
    }
    if (distinct.size() < 2) return;  // one schedule everywhere: it went through the gate alone
    // Where the kernel runs another schedule than the best does, it must be faster there (checked
    // after its evaluation); everywhere else it must not be slower.
    changed_at.clear();
    for (size_t k = 0; k < size_dims.size(); ++k)
      if (comp[k] != runs_at(cur_i, size_dims[k].name)) changed_at.insert(size_dims[k].name);
    if (changed_at.empty()) return;
    std::vector<size_t> assign;
    double sw = 0, sl = 0;
    for (size_t k = 0; k < size_dims.size(); ++k) {
      assign.push_back(static_cast<size_t>(std::find(distinct.begin(), distinct.end(), comp[k]) - distinct.begin()));
      double w = weight_of.count(size_dims[k].name) ? weight_of[size_dims[k].name] : 1.0;
      sw += w;
      sl += w * std::log(median_at(res.trajectory[comp[k]].outcome, size_dims[k].name));
    }
    const double predicted = std::exp(sl / sw);
    if (predicted * 1.01 > cur.score_us()) return;
    // Its schedules' own verified times must promise what the acceptance asks at each size.
    for (size_t k = 0; k < size_dims.size(); ++k)
      if (changed_at.count(size_dims[k].name) &&
          !(median_at(res.trajectory[comp[k]].outcome, size_dims[k].name) * 1.02 < median_at(cur, size_dims[k].name)))
        return;
    std::string why;
    std::optional<DecisionList> list = learn_guards(seed, size_dims, assign, o.dispatch_schedules - 1, &why);
    if (!list) {
      if (logged.insert("dispatch: " + why).second) say("schedules by size: not built: " + why);
      return;
    }
    std::vector<dsl::Program> progs;
    for (int c : distinct) progs.push_back(res.trajectory[c].program);
    dsl::Program dp = dispatch_program(seed, progs, *list);
    if (!codegen::can_implement(dp, b).ok) return;
    std::string runs;
    for (size_t k = 0; k < size_dims.size(); ++k) runs += (k ? ", " : "") + size_dims[k].name + " c" + std::to_string(comp[k]);
    Attempt a = new_attempt(dp, cur_i, "dispatch", "the fastest verified schedule at each visible size (" + runs + "), predicted " +
                            fmt(cur.score_us() / predicted, 3) + "x over c" + std::to_string(cur_i), gen);
    if (!dispatch_tried.insert(a.schedule).second || seen.count(a.schedule)) return;
    seen.insert(a.schedule);
    for (size_t k = 0; k < size_dims.size(); ++k) a.runs_at[size_dims[k].name] = comp[k];
    BuildItem bi{&a.program, a.outcome.label, parent_id_of(cur_i), "dispatch"};
    auto tb = Clock::now();
    std::vector<Built> bs = ev.build(t, {bi});
    res.breakdown.build += since(tb);
    ++tried;
    if (!bs.empty()) a.outcome.candidate_id = bs[0].candidate_id;
    if (!bs.empty() && !bs[0].ok) {
      a.outcome.status = Status::failed;
      a.outcome.error = "compile gate: " + bs[0].error.substr(0, 2000);
      a.note = "failed: " + a.outcome.error;
    } else {
      evaluate_full(a);
      if (a.outcome.screened) {
        a.note = "screened out: " + a.outcome.error;
      } else if (!a.outcome.ok()) {
        a.note = "failed: " + a.outcome.error;
      } else {
        const double cs = a.outcome.score_us(), bsc = cur.score_us();
        const double clo = cur.ci_low_us(), chi = a.outcome.ci_high_us();
        std::string slower;
        for (const SizeDims& sd : size_dims) {
          const double mine = median_at(a.outcome, sd.name), theirs = median_at(cur, sd.name);
          // Faster by 2% where its schedule changed; within 2% (the run-to-run spread) elsewhere.
          const bool ok = changed_at.count(sd.name) ? mine * 1.02 < theirs : mine <= theirs * 1.02;
          if (!ok) slower += (slower.empty() ? "" : ", ") + sd.name;
        }
        if (cs * 1.01 <= bsc && (clo <= 0 || chi <= 0 || chi < clo) && slower.empty()) {
          a.accepted = true;
          a.note = "new best: " + fmt(bsc / cs, 3) + "x over c" + std::to_string(cur_i) + " with schedules by size";
          res.best = a.index;
        } else {
          a.note = "kept c" + std::to_string(cur_i) + ": " + fmt(bsc / cs, 3) + "x" +
                   (slower.empty() ? " (needs 1.01x, its CI clear)" : "; slower than needed at " + slower);
        }
      }
    }
    a.at_seconds = since(t0);
    say("c" + std::to_string(a.index) + " schedules by size {" + a.schedule + "}: " + a.note);
    res.trajectory.push_back(std::move(a));
  };

  // A generation of programs that build in a second or two (everything but CUTLASS's kernels)
  // is twice the cores: screening is cheap, and more candidates share one verification.
  const size_t batch = std::max<size_t>(1, o.batch) * (codegen::compile_needs(seed).arch == "sm_90a" ? 1 : 2);
  int gen = 0;
  while (res.best >= 0) {
    const Attempt& best = res.trajectory[res.best];
    double secs = since(t_search) + resumed_seconds;
    if (stop_requested()) { res.stop_reason = "interrupted"; break; }
    if (o.target_sol > 0 && best.outcome.pct_sol() >= o.target_sol) { res.stop_reason = "target"; break; }
    if (tried >= o.max_candidates) { res.stop_reason = "candidates"; break; }
    // A generation is begun only when half of what it is expected to take is left: the last one's
    // time, or before the first, what the seed's measurements predict (first_generation).
    const FirstGeneration first = first_generation(ev.screens() ? batch : 1, ev.screens(), seed_build_cost, res.trajectory[0].outcome, seed_eval_seconds);
    const double expect_gen = last_gen > 0 ? last_gen : first.total();
    if (budget > 0 && (secs >= budget || (expect_gen > 0 && budget - secs < 0.5 * expect_gen))) {
      res.stop_reason = "seconds";
      if (gen == 0 && secs < budget)
        say("budget: no generation begun: it is expected to take about " + fmt(expect_gen, 0) + " s (build " + fmt(first.build, 0) +
            " s from the seed's " + fmt(seed_build_cost, 1) + " s compile, screens " + fmt(first.screen, 0) + " s at the seed's times, " +
            "verification " + fmt(first.verify, 0) + " s), more than twice the " + fmt(budget - secs, 1) + " s left");
      break;
    }
    if (o.plateau > 0 && since_best >= o.plateau) { res.stop_reason = "plateau"; break; }
    auto tg = Clock::now();
    ++gen;
    const bool screening = ev.screens();
    size_t n = std::min<size_t>(screening ? batch : 1, static_cast<size_t>(o.max_candidates - tried));
    std::vector<Pending> pend = std::move(ahead);
    ahead.clear();
    // Proposals made ahead may have been tried since: drop those.
    pend.erase(std::remove_if(pend.begin(), pend.end(), [&](const Pending& p) { return seen.count(p.schedule) > 0; }), pend.end());
    if (pend.size() > n) pend.resize(n);
    if (pend.size() < n) {
      for (auto& p : pend) seen.insert(p.schedule);
      std::vector<Pending> more = propose(n - pend.size(), gen);
      for (auto& p : pend) seen.erase(p.schedule);
      for (auto& p : more) pend.push_back(std::move(p));
    }
    if (pend.empty()) { res.stop_reason = "exhausted"; break; }
    std::vector<int> made = build_all(pend, gen);
    const int best_before = res.best;
    std::vector<int> finalists;
    if (!screening) {
      for (int i : made)
        if (res.trajectory[i].note.empty()) finalists.push_back(i);
    } else {
      // 1. The screens: every proposal that runs, at every visible size (the representative one
      // first), the best timed beside them in each call.
      std::vector<int> live;
      for (int i : made)
        if (res.trajectory[i].note.empty()) live.push_back(i);
      std::map<int, std::map<std::string, double>> ratio_at;  // per candidate and size: its time over the best's
      for (size_t si = 0; si < size_order.size() && !live.empty() && !stop_requested(); ++si) {
        const std::string& size = size_order[si];
        std::vector<BuildItem> items;
        items.push_back({&res.trajectory[res.best].program, res.trajectory[res.best].outcome.label, 0, "best"});
        for (int i : live) items.push_back({&res.trajectory[i].program, res.trajectory[i].outcome.label, parent_id_of(res.trajectory[i].parent), res.trajectory[i].method});
        double ws = 0;
        auto ts = Clock::now();
        std::vector<ScreenTime> st = ev.screen(t, items, size, &ws);
        res.breakdown.screen += since(ts);
        res.worker_seconds += ws;
        double ref = !st.empty() && st[0].status == "ok" ? st[0].median_us : 0;
        if (ref <= 0) ref = median_at(res.trajectory[res.best].outcome, size);
        std::vector<int> still;
        for (size_t k = 0; k < live.size(); ++k) {
          Attempt& a = res.trajectory[live[k]];
          const ScreenTime& sc = k + 1 < st.size() ? st[k + 1] : ScreenTime{};
          a.screened_at += (a.screened_at.empty() ? "" : ",") + size;
          if (sc.status != "ok" || ref <= 0) {
            // It did not run here (an error, a crash, a refusal at run time): a failure of the
            // program, not a ranking.
            a.outcome.status = Status::failed;
            a.outcome.error = "screen at " + size + ": " + (sc.message.empty() ? "no time" : sc.message);
            a.note = "failed: " + a.outcome.error;
            failed_pairs.insert({a.parent, move_key(a.method, a.schedule)});
            ev.record_screened(t, a.outcome.candidate_id, size, sc, a.outcome.error);
            a.at_seconds = since(t0);
            continue;
          }
          ratio_at[a.index][size] = sc.median_us / ref;
          a.screen_at[size] = sc.median_us / ref;
          a.screened_beside = res.best;
          if (si == 0) {
            // The model learns absolute times at the representative size: the ratio to the best's
            // verified time there.
            double best_rep = rep_median(res.trajectory[res.best].outcome);
            if (best_rep > 0) model.observe(agents::full_schedule(a.program), std::log(best_rep * sc.median_us / ref));
          }
          still.push_back(a.index);
        }
        live = still;
      }
      // 2. The finalists: those the screens put ahead of the best over every visible size by at
      // least half of gamma's margin, fastest first; then one specialist, the candidate that
      // beats the fastest verified schedule at one size by the most (weighted), for a kernel
      // that runs it at its sizes. The rest stay unverified.
      std::vector<std::pair<double, int>> ranked;
      for (int i : live) {
        double sw = 0, sl = 0;
        for (auto& [size, r] : ratio_at[i]) {
          double w = weight_of.count(size) ? weight_of[size] : 1.0;
          sw += w;
          sl += w * std::log(r);
        }
        Attempt& a = res.trajectory[i];
        a.screen_ratio = sw > 0 ? std::exp(sl / sw) : 0;
        estimate[i] = a.screen_ratio * res.trajectory[res.best].outcome.score_us();
        ranked.push_back({a.screen_ratio, i});
      }
      std::sort(ranked.begin(), ranked.end());
      const double finalist_ratio = 1.0 / (1.0 + (o.gamma - 1.0) / 2.0);
      for (auto& [ratio, i] : ranked)
        if (ratio <= finalist_ratio && finalists.size() < o.finalists) finalists.push_back(i);
      std::map<int, std::string> specialist_at;  // candidate -> the size it is a specialist at
      if (o.specialists > 0) {
        std::vector<std::tuple<double, int, std::string>> gains;  // (weighted log gain, candidate, size)
        for (auto& [ratio, i] : ranked) {
          if (std::find(finalists.begin(), finalists.end(), i) != finalists.end()) continue;
          for (auto& [size, r] : ratio_at[i]) {
            const double best_here = median_at(res.trajectory[res.best].outcome, size);
            const double fastest = fastest_verified_at(size);
            if (best_here <= 0) continue;
            // Its screened time over the fastest verified time at this size.
            const double rel = r * best_here / (fastest > 0 ? std::min(best_here, fastest) : best_here);
            if (rel * o.gamma <= 1.0) gains.push_back({-(weight_of.count(size) ? weight_of[size] : 1.0) * std::log(rel), i, size});
          }
        }
        std::sort(gains.begin(), gains.end(), [](const auto& x, const auto& y) { return std::get<0>(x) > std::get<0>(y); });
        for (auto& [gain, i, size] : gains)
          if (specialist_at.size() < o.specialists && !specialist_at.count(i) &&
              std::none_of(specialist_at.begin(), specialist_at.end(), [&, &sz = size](const auto& kv) { return kv.second == sz; })) {
            specialist_at[i] = size;
            finalists.push_back(i);
          }
      }
      for (auto& [ratio, i] : ranked) {
        if (std::find(finalists.begin(), finalists.end(), i) != finalists.end()) continue;
        Attempt& a = res.trajectory[i];
        a.outcome.status = Status::failed;
        a.outcome.screened = true;
        a.outcome.error = "screened out: " + fmt(ratio, 3) + "x the best's time (c" + std::to_string(res.best) + ") over the visible sizes, " +
                          (ratio <= finalist_ratio ? "behind the generation's finalists" : "not enough to pass the gate (gamma " + fmt(o.gamma, 2) + ")") +
                          ", and no size where it beats the fastest verified schedule by gamma; not verified";
        a.note = a.outcome.error;
        ++res.screened;
        ev.record_screened(t, a.outcome.candidate_id, size_order.back(), ScreenTime{}, a.outcome.error);
        a.at_seconds = since(t0);
      }
      for (auto& [i, size] : specialist_at) res.trajectory[i].why += "; a specialist at " + size;
    }
    // 3. The next generation is proposed and built in the background while the finalists run.
    if (o.prefetch && screening) {
      ahead = propose(std::min<size_t>(batch, static_cast<size_t>(std::max(0, o.max_candidates - tried))), gen + 1);
      std::vector<dsl::Program> progs;
      for (auto& p : ahead) progs.push_back(p.program);
      if (!progs.empty()) ev.prefetch(t, progs);
    }
    // 4. The finalists in full, each against the best at that moment.
    for (size_t f = 0; f < finalists.size(); ++f) {
      Attempt& a = res.trajectory[finalists[f]];
      // Out of time (or stopped): a finalist after the first is not verified, and so not kept.
      if (f > 0 && (stop_requested() || (budget > 0 && since(t_search) + resumed_seconds >= budget))) {
        a.outcome.status = Status::failed;
        a.outcome.screened = true;
        a.outcome.error = "screened in (" + fmt(a.screen_ratio, 3) + "x the best's time) but not verified: the task's time ran out";
        a.note = "screened out: " + a.outcome.error;
        ++res.screened;
        ev.record_screened(t, a.outcome.candidate_id, size_order.back(), ScreenTime{}, a.outcome.error);
        continue;
      }
      if (stop_requested()) break;
      evaluate_full(a);
      gate(a);
    }
    if (!stop_requested()) try_dispatch(gen);
    for (int i : made)
      if (res.trajectory[i].at_seconds == 0) res.trajectory[i].at_seconds = since(t0);
    since_best = res.best != best_before ? 0 : since_best + 1;
    last_gen = since(tg);
    res.generations = gen;
    const Attempt& nb = res.trajectory[res.best];
    double sp = speedup(res.baseline_best, nb.outcome);
    int screened_now = 0, failed_now = 0;
    for (int i : made) {
      if (res.trajectory[i].outcome.screened) ++screened_now;
      else if (!res.trajectory[i].outcome.ok()) ++failed_now;
    }
    double secs2 = since(t_search);
    std::string line = t.name + ": gen " + std::to_string(gen) + ": " + std::to_string(made.size()) + " tried (" + std::to_string(screened_now) +
                       " screened out, " + std::to_string(failed_now) + " failed, " + std::to_string(finalists.size()) + " verified); best c" +
                       std::to_string(res.best) + " " + fmt(nb.outcome.score_us()) + " us, " + (sp > 0 ? fmt(sp, 2) + "x vs best baseline, " : "") +
                       fmt(nb.outcome.pct_sol() * 100, 1) + "% SOL; " + std::to_string(tried) + " tried in " + fmt(secs2, 0) + " s (" +
                       fmt(secs2 > 0 ? 60.0 * tried / secs2 : 0, 0) + "/min)" + (budget > 0 ? ", " + fmt(std::max(0.0, budget - secs2), 0) + " s left" : "");
    if (res.best != best_before) line += "; " + res.trajectory[res.best].note;
    progress(line);
    // Without a screen each proposal is one generation; its own line says what became of it.
    if (!screening)
      for (int i : made) {
        const Attempt& a = res.trajectory[i];
        say("c" + std::to_string(i) + " <- c" + std::to_string(a.parent) + " " + a.method + " {" + a.schedule + "}: " + a.note);
      }
  }
  // Proposals made ahead and never tried are not candidates: nothing of them is reported, and
  // their build in the background stops here.
  ev.cancel_prefetch();
  res.search_seconds = since(t_search);

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
  auto tgr = Clock::now();
  if (!res.use_baseline && res.best >= 0) {
    if (stop_requested()) {
      res.hidden_note = "not graded: the run was interrupted";
    } else if (hidden_sizes(t).empty()) {
      res.hidden_note = "the task has no hidden sizes";
    } else {
      const Attempt& ba = res.trajectory[res.best];
      // The kernel first, then the baselines on the same fresh cases (SessionEvaluator::grade_seed):
      // no output of those cases exists on the device before the kernel's own.
      res.hidden = ev.grade_hidden(t, ba.program, "c" + std::to_string(ba.index));
      res.worker_seconds += res.hidden.worker_seconds;
      add_fixed(res.hidden);
      res.graded = true;
      std::map<std::string, Outcome> hb = stop_requested() ? std::map<std::string, Outcome>{} : ev.baselines_hidden(t);
      for (auto& [name, bo] : hb) res.worker_seconds += bo.worker_seconds, add_fixed(bo);
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
  res.breakdown.grade = since(tgr);
  const Outcome& final_out = res.use_baseline ? res.baseline_best : res.trajectory[res.best].outcome;
  res.speedup_vs_baseline = res.use_baseline ? (res.baseline_best.ok() ? 1.0 : 0.0) : speedup(res.baseline_best, final_out);
  if (res.baselines.count("naive")) res.speedup_vs_naive = speedup_vs_naive(res.baselines["naive"], final_out, &res.naive_from_one_call);
  res.pct_sol_after = res.use_baseline ? res.baseline_best.pct_sol() : final_out.pct_sol();
  if (res.use_baseline && res.baseline_best.ok() && res.pct_sol_after == 0) {
    // baseline_best mixes baselines per size; its pct_sol still comes from each size.
    res.pct_sol_after = wgeo(res.baseline_best, &SizeResult::pct_sol);
  }
  res.seconds = since(t0);
  res.resumed_seconds = resumed_seconds;
  res.budget_seconds = budget;
  return res;
}

nlohmann::json OptimizeResult::to_json() const {
  using nlohmann::json;
  json traj = json::array();
  for (auto& a : trajectory) {
    json j = {{"index", a.index}, {"parent", a.parent}, {"method", a.method}, {"schedule", a.schedule}, {"generation", a.generation},
              {"status", a.outcome.screened ? "screened" : to_string(a.outcome.status)}, {"score_us", a.outcome.score_us()}, {"pct_sol", a.outcome.pct_sol() * 100},
              {"accepted", a.accepted}, {"note", a.note}, {"candidate_id", a.outcome.candidate_id},
              {"kernel", a.outcome.kernel}, {"why", a.why}, {"at_seconds", a.at_seconds}, {"error", a.outcome.error}};
    if (a.screen_ratio > 0) j["screen"] = {{"ratio_to_best", a.screen_ratio}, {"sizes", a.screened_at}};
    traj.push_back(j);
  }
  double per_min = search_seconds > 0 ? 60.0 * static_cast<double>(trajectory.size()) / search_seconds : 0.0;
  json j = {{"task", task}, {"stop_reason", stop_reason}, {"candidates", trajectory.size()}, {"screened", screened}, {"verified", verified},
            {"generations", generations}, {"seconds", seconds}, {"search_seconds", search_seconds}, {"budget_seconds", budget_seconds},
            {"candidates_per_minute", per_min},
            {"worker_seconds", worker_seconds}, {"resumed_seconds", resumed_seconds},
            {"candidates_per_worker_minute", worker_seconds > 0 ? 60.0 * static_cast<double>(trajectory.size()) / worker_seconds : 0.0},
            {"breakdown_seconds", {{"baselines", breakdown.baselines}, {"seed", breakdown.seed}, {"build", breakdown.build},
                                   {"screen", breakdown.screen}, {"verify", breakdown.verify}, {"profile", breakdown.profile},
                                   {"propose", breakdown.propose}, {"grade_hidden", breakdown.grade}}},
            {"fixed_work", {{"worker_seconds", fixed.seconds}, {"evaluations", fixed.evaluations}}},
            {"use_baseline", use_baseline}, {"best_baseline", best_baseline},
            {"speedup_vs_best_baseline", speedup_vs_baseline}, {"speedup_vs_naive", speedup_vs_naive},
            {"speedup_vs_naive_from_one_call", naive_from_one_call},
            {"pct_sol_before", pct_sol_before * 100}, {"pct_sol_after", pct_sol_after * 100}, {"trajectory", traj},
            {"log", log}};
  json hs = json::array();
  for (auto& r : hidden.sizes) {
    json h = {{"size", r.size}, {"status", r.status}, {"median_us", r.median_us}, {"pct_sol", r.pct_sol * 100}, {"message", r.message}};
    for (auto& b : hidden_baseline_best.sizes)
      if (b.size == r.size && b.median_us > 0) h["best_baseline_us"] = b.median_us;
    hs.push_back(h);
  }
  j["hidden"] = {{"note", hidden_note}, {"status", hidden.sizes.empty() ? "not_graded" : to_string(hidden.status)},
                 {"speedup_vs_best_baseline", hidden_speedup}, {"sizes", hs}};
  // Per visible size: the returned kernel's time and %SOL beside the fastest baseline's, what the
  // report leads with.
  json per = json::array();
  const Attempt* b = best_attempt();
  for (auto& bs : baseline_best.sizes) {
    json row = {{"size", bs.size}, {"best_baseline_us", bs.median_us}, {"best_baseline_pct_sol", bs.pct_sol * 100}};
    if (b && !use_baseline)
      for (auto& s : b->outcome.sizes)
        if (s.size == bs.size && s.status == Status::ok) {
          row["returned_us"] = s.median_us;
          row["returned_pct_sol"] = s.pct_sol * 100;
          row["speedup"] = s.median_us > 0 ? bs.median_us / s.median_us : 0;
        }
    per.push_back(row);
  }
  j["sizes"] = per;
  // Every baseline at every visible size as it ended: timed (median_us), or stopped early
  // (far_slower, with its one call's time), or failed (the message).
  json bs = json::object();
  for (auto& [name, o] : baselines) {
    json rows = json::array();
    for (const SizeResult& s : o.sizes) {
      json r = {{"size", s.size}, {"status", to_string(s.status)}};
      if (s.status == Status::ok) r["median_us"] = s.median_us;
      if (s.probe_us > 0) r["probe_us"] = s.probe_us;
      if (s.status != Status::ok && !s.message.empty()) r["message"] = s.message;
      rows.push_back(r);
    }
    bs[name] = rows;
  }
  j["baseline_sizes"] = bs;
  if (b) {
    j["best"] = {{"index", b->index}, {"kernel", b->outcome.kernel}, {"program", dsl::print_source(b->program)},
                 {"schedule", b->schedule}, {"score_us", b->outcome.score_us()}, {"candidate_id", b->outcome.candidate_id}};
  }
  return j;
}

}  // namespace ksol::search
