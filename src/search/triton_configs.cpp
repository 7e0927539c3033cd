#include "search/triton_configs.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/util.h"

namespace ksol::search {

using nlohmann::json;

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

}  // namespace ksol::search
