#include "search/triton_configs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/util.h"

namespace ksol::search {

using nlohmann::json;

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TritonConfig config_of(const json& j) {
  return {j.value("label", ""), j.value("config", json::object()), j.value("text", ""), j.value("candidate", "")};
}

// "exit status 1", "killed by a signal", "killed at its time limit of 1200 s".
std::string how_it_ended(const ScreenRun& run) {
  if (run.timed_out) return "killed at its time limit of " + fixed(run.limit_seconds, 0) + " s";
  if (run.exit_code < 0) return "killed by a signal";
  return "exit status " + std::to_string(run.exit_code);
}

std::string failure_of(const VerifiedConfig& v) {
  if (v.ok()) return "";
  std::string where = v.eval.failed_gate == Gate::none ? std::string("failed") : to_string(v.eval.failed_gate);
  if (!v.eval.error_class.empty()) where += "/" + v.eval.error_class;
  return where + ": " + v.eval.message;
}

}  // namespace

TritonSearchResult search_triton_configs(const TritonConfig& as_given, TritonEvaluator& ev, const TritonSearchOptions& o) {
  auto clock = o.clock ? o.clock : steady_seconds;
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  auto stopped = [&] { return o.stop && o.stop(); };
  const double t0 = clock();
  TritonSearchResult r;

  // The kernel as given first: the baseline every config is measured against.
  r.baseline = ev.verify(as_given);
  say("triton: " + as_given.label + " (as given): " +
      (r.baseline.ok() ? sig(r.baseline.eval.median_us, 4) + " us, verified" : "failed: " + failure_of(r.baseline)));
  if (stopped()) {
    r.stop_reason = "interrupted";
    r.seconds = clock() - t0;
    return r;
  }

  r.screen = ev.screen(o.max_configs, o.verify, o.budget_seconds > 0 ? 0.75 * o.budget_seconds : 0);
  int passed = 0;
  for (const ScreenedConfig& s : r.screen.screened) passed += s.ok;
  say("triton: screened " + std::to_string(r.screen.screened.size()) + " config(s), " + std::to_string(passed) + " passed" +
      (r.screen.ok ? " (" + r.screen.stop + ")" : "; the screening failed: " + r.screen.error));

  std::set<std::string> seen = {as_given.label};
  r.stop_reason = r.screen.ok ? "verified" : "screen_failed";
  if (r.screen.ok && r.screen.verify.empty()) r.stop_reason = "nothing_to_verify";
  for (const ScreenedConfig& s : r.screen.verify) {
    if (!seen.insert(s.config.label).second) continue;  // the default is the baseline, verified above
    if (stopped()) {
      r.stop_reason = "interrupted";
      break;
    }
    if (!r.verified.empty() && o.budget_seconds > 0 && clock() - t0 >= o.budget_seconds) {
      r.stop_reason = "budget";
      break;
    }
    VerifiedConfig v = ev.verify(s.config);
    v.screen_us = s.median_us;
    say("triton: " + s.config.label + ": screened " + sig(s.median_us, 4) + " us, " +
        (v.ok() ? "verified " + sig(v.eval.median_us, 4) + " us" : "failed: " + failure_of(v)));
    r.verified.push_back(std::move(v));
  }
  // The fastest verified config: the times of the verification, not of the screening.
  for (size_t i = 0; i < r.verified.size(); ++i)
    if (r.verified[i].ok() && (r.best < 0 || r.verified[i].eval.median_us < r.verified[r.best].eval.median_us)) r.best = static_cast<int>(i);
  r.seconds = clock() - t0;
  return r;
}

json TritonSearchResult::trajectory() const {
  json out = json::array();
  std::set<std::string> verified_labels = {baseline.config.label};
  for (auto& v : verified) verified_labels.insert(v.config.label);
  int index = 0;
  auto entry = [&](const TritonConfig& c, const std::string& method, const std::string& status, double us, const std::string& error,
                   const std::string& note) {
    out.push_back({{"index", index++}, {"parent", -1}, {"method", method}, {"schedule", c.text}, {"kernel", c.label},
                   {"config", c.config}, {"status", status}, {"score_us", us}, {"pct_sol", 0.0}, {"accepted", false},
                   {"note", note}, {"error", error}});
  };
  auto verified_entry = [&](const VerifiedConfig& v, const std::string& method, const std::string& note) {
    entry(v.config, method, v.ok() ? "ok" : "failed", v.ok() ? v.eval.median_us : 0.0, failure_of(v), note);
    out.back()["pct_sol"] = v.eval.pct_sol * 100;
    if (v.screen_us > 0) out.back()["screen_us"] = v.screen_us;
  };
  verified_entry(baseline, "as given", "the kernel as given: the baseline");
  for (auto& s : screen.screened) {
    if (verified_labels.count(s.config.label)) continue;
    // Screened and passing but not among the fastest: timed beside them, never verified.
    entry(s.config, "screen", s.ok ? "screened" : "failed", s.ok ? s.median_us : 0.0, s.ok ? "" : "screen: " + s.error,
          s.ok ? "screening time, not verified" : "");
  }
  for (size_t i = 0; i < verified.size(); ++i) {
    verified_entry(verified[i], "screen, verified", static_cast<int>(i) == best ? "the fastest verified config" : "");
    out.back()["accepted"] = static_cast<int>(i) == best;
  }
  return out;
}

TritonAnswer choose_triton_answer(const std::vector<Contender>& contenders, double kernel_us) {
  TritonAnswer a;
  const Contender* base = nullptr;
  const Contender* cand = nullptr;
  for (const Contender& c : contenders) {
    if (c.us <= 0) continue;
    const Contender*& slot = c.baseline ? base : cand;
    if (!slot || c.us < slot->us) slot = &c;
  }
  if (base) a.best_baseline = base->name, a.best_baseline_us = base->us;
  const Contender* ret = cand && (!base || cand->us < base->us) ? cand : base;
  if (!ret) {
    a.reason = "nothing passed ksol's gates: neither the kernel as given, nor a config, nor a baseline of the reference";
    return a;
  }
  a.use_baseline = ret->baseline;
  a.returned = ret->name;
  a.language = ret->language;
  a.returned_us = ret->us;
  a.speedup_vs_best_baseline = base && !ret->baseline ? base->us / ret->us : 1.0;
  a.speedup_vs_kernel = kernel_us > 0 ? kernel_us / ret->us : 0.0;
  if (ret->baseline)
    a.reason = cand ? "no verified candidate was faster than " + base->name + " (the fastest, " + cand->name + ", " + sig(cand->us, 4) +
                          " us against " + sig(base->us, 4) + " us)"
                    : "no candidate passed ksol's gates";
  return a;
}

ScreenLog read_screen_log(const std::string& path) {
  ScreenLog l;
  std::ifstream in(path);
  std::set<std::string> with_result;
  for (std::string line; std::getline(in, line);) {
    json e = json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object()) continue;  // a line cut short by the process's end
    const std::string event = e.value("event", "");
    if (event == "start") {
      l.running = e.value("config", json());
      l.running_label = e.value("label", std::string());
      l.running_since = e.value("t", 0.0);
    } else if (event == "result") {
      with_result.insert(e.value("config", json()).dump());
      l.running = json();
      l.running_label.clear();
      l.running_since = 0;
    }
  }
  l.results = static_cast<int>(with_result.size());
  return l;
}

TritonScreen screen_of(const json& out) {
  TritonScreen s;
  if (!out.is_object()) {
    s.error = "the screening wrote no answer";
    return s;
  }
  if (!out.value("ok", false)) {
    s.error = out.value("error", std::string("the screening failed"));
    return s;
  }
  s.ok = true;
  s.stop = out.value("stop", "");
  for (const json& e : out.value("screened", json::array()))
    s.screened.push_back({config_of(e), e.value("status", "") == "ok", e.value("median_us", 0.0), e.value("error", "")});
  for (const json& e : out.value("verify", json::array())) s.verify.push_back({config_of(e), true, e.value("screen_us", 0.0), ""});
  return s;
}

TritonScreen run_screen(const std::function<ScreenRun()>& run_once, const std::string& log, const ScreenDriverOptions& o) {
  auto now = o.unix_clock ? o.unix_clock : unix_seconds;
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  TritonScreen s;
  ScreenRun run;
  for (int n = 1; n <= std::max(1, o.max_runs); ++n) {
    const int before = read_screen_log(log).results;
    run = run_once();
    ScreenLog after = read_screen_log(log);
    const int measured = after.results - before;
    if (run.out.is_object() && run.out.value("ok", false) && run.out.value("stop", "") == "batch") {
      say("triton: screening: " + std::to_string(measured) + " config(s) measured by this process, " + std::to_string(after.results) +
          " in all; its share of the time is up, another goes on from the log");
      if (measured > 0) continue;
      s.error = "the screening process measured nothing in its share of the time: not run again";
      s.runs = n;
      return s;
    }
    if (run.out.is_object()) {
      s = screen_of(run.out);
      s.runs = n;
      return s;
    }
    // It ended without an answer. The config the log shows running is the one it ended under,
    // and only that one is blamed: the driver writes its result, with why, and the next run
    // replays it as failed. A run's time limit leaves every config it started at least
    // per_config_seconds, so one still running at the kill took longer than a config may.
    const std::string how = how_it_ended(run);
    if (!after.running.is_null()) {
      const double ran = after.running_since > 0 ? now() - after.running_since : 0;
      std::string why = run.timed_out ? "killed at the timeout: still running " + fixed(ran, 0) + " s after it started, past the " +
                                            fixed(o.per_config_seconds, 0) + " s a config may take (--timeout); the screening process was " +
                                            how
                                      : "the screening process ended while running it (" + how + ")";
      json r = {{"event", "result"}, {"config", after.running}, {"result", {{"status", "failed"}, {"error", why}}}};
      {
        std::ofstream out(log, std::ios::app);
        out << r.dump() << "\n";
      }
      const std::string name = after.running_label.empty() ? after.running.dump() : after.running_label;
      say("triton: screening: the process was " + how + " while running " + name + (ran > 0 ? " (started " + fixed(ran, 0) + " s before)" : "") +
          ": " + name + " counts as failed (" + (run.timed_out ? "killed at the timeout" : "its process ended under it") +
          ") and the screening goes on in a new process from the log");
      continue;
    }
    if (measured > 0) {
      say("triton: screening: the process ended (" + how + (run.exit_code == 3 ? ": the CUDA context died under the last config it measured" : "") +
          ") between configs, " + std::to_string(after.results) + " measured in all; another goes on from the log");
      continue;
    }
    s.error = "the screening process ended (" + how + ") with no config running and none measured: not run again:\n" +
              run.output.substr(run.output.size() > 3000 ? run.output.size() - 3000 : 0);
    s.runs = n;
    return s;
  }
  s.error = "the screening did not answer in " + std::to_string(o.max_runs) + " runs of its process";
  s.runs = o.max_runs;
  return s;
}

json side_by_side_request(const TritonSearchResult& r, bool has_reference, const std::vector<std::string>& reference_baselines,
                          const std::string& dsl_dir, const std::string& dsl_name) {
  json out = json::array();
  if (r.baseline.ok()) out.push_back({{"name", "triton"}, {"kind", "triton"}, {"config", r.baseline.config.config}});
  for (const VerifiedConfig& v : r.verified)
    if (v.ok()) out.push_back({{"name", v.config.label}, {"kind", "triton"}, {"config", v.config.config}});
  if (!dsl_dir.empty()) out.push_back({{"name", dsl_name.empty() ? std::string("dsl") : dsl_name}, {"kind", "dsl"}, {"dir", dsl_dir}});
  if (has_reference) {
    std::set<std::string> names = {"eager", "compile"};
    names.insert(reference_baselines.begin(), reference_baselines.end());
    for (const char* b : {"eager", "compile", "compile_max_autotune"})
      if (names.count(b)) out.push_back({{"name", b}, {"kind", "pytorch"}});
  }
  return out;
}

SideBySide side_by_side_of(const json& out) {
  SideBySide s;
  if (!out.is_object() || !out.value("ok", false)) {
    s.error = out.is_object() ? out.value("error", std::string("the side-by-side timing failed")) : "the side-by-side timing wrote no answer";
    return s;
  }
  s.ok = true;
  s.rounds = out.value("rounds", 0);
  for (const json& c : out.value("contenders", json::array())) {
    const std::string name = c.value("name", ""), kind = c.value("kind", "");
    if (kind == "dsl") s.dsl = c;
    const double us = c.value("median_us", 0.0);
    if (us > 0) {
      // The kernel as given and the reference's eager and torch.compile are the baselines.
      s.timed.push_back({name, name == "triton" || kind == "pytorch", kind == "pytorch" ? "pytorch" : kind, us});
    } else {
      s.left_out.push_back({name, c.value("error", std::string("not timed"))});
    }
  }
  return s;
}

std::vector<Contender> answer_contenders(const TritonSearchResult& r, const SideBySide& s) {
  if (s.ok) return s.timed;
  std::vector<Contender> cs = {{"triton", true, "triton", r.baseline.ok() ? r.baseline.eval.median_us : 0.0}};
  if (const VerifiedConfig* b = r.best_config()) cs.push_back({b->config.label, false, "triton", b->eval.median_us});
  return cs;
}

std::string triton_rerun(const TritonAnswer& a, const std::string& dir, const std::string& fn, const json& dsl, const std::string& python) {
  const std::string eval = "ksol eval-module " + dir + "/problem.py --candidate ";
  if (!a.use_baseline && a.language == "triton") return eval + dir + "/best.py";
  if (!a.use_baseline && a.language == "dsl") {
    if (dsl.value("answer", "") == "kernel") {
      std::vector<std::string> dims;
      for (const json& d : dsl.value("dims", json::array())) dims.push_back(std::to_string(d.get<int64_t>()));
      return eval + dir + "/" + fn + "/best.so --dims " + join(dims, ",");
    }
    return python + " -c \"import ksol; print(ksol.load('" + dir + "/dsl').ksol_verification)\"";
  }
  return eval + dir + "/as_given.py";
}

}  // namespace ksol::search
