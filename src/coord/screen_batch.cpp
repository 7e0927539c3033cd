#include "coord/screen_batch.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace ksol {

namespace {

// The K of the last "screen: candidate K" line in a worker's log tail (the Python worker names
// each candidate before its first calls), or -1.
int last_named_candidate(const std::string& log) {
  const std::string tag = "screen: candidate ";
  size_t at = log.rfind(tag);
  if (at == std::string::npos) return -1;
  size_t i = at + tag.size(), j = i;
  while (j < log.size() && j - i < 6 && log[j] >= '0' && log[j] <= '9') ++j;
  return j > i ? std::stoi(log.substr(i, j - i)) : -1;
}

}  // namespace

namespace {
ScreenBatch screen_once(size_t n, const std::function<WorkerReply(const std::vector<size_t>&)>& call) {
  ScreenBatch out;
  out.times.resize(n);
  auto screen_group = [&](auto& self, std::vector<size_t> group) -> void {
    if (group.empty()) return;
    WorkerReply r = call(group);
    ++out.calls;
    out.worker_seconds += r.seconds;
    if (r.ok && r.body.contains("result") && r.body["result"].contains("results") && r.body["result"]["results"].is_array() &&
        r.body["result"]["results"].size() == group.size()) {
      const nlohmann::json& res = r.body["result"]["results"];
      for (size_t k = 0; k < group.size(); ++k) {
        const nlohmann::json& j = res[k];
        ScreenTime& st = out.times[group[k]];
        if (!j.is_object()) {
          st.error_class = "worker_error", st.message = "the worker's screen reply is malformed";
          continue;
        }
        auto num = [&](const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; };
        st.status = j.value("status", "failed") == "ok" ? "ok" : "failed";
        st.median_us = num("median_us");
        st.ci_low_us = num("ci_low_us");
        st.ci_high_us = num("ci_high_us");
        st.min_us = num("min_us");
        st.samples = j.contains("samples") && j["samples"].is_array() ? static_cast<int>(j["samples"].size()) : 0;
        st.dropped = j.value("dropped", false);
        st.error_class = j.value("error_class", "");
        st.message = j.value("message", "");
        if (st.status == "ok" && st.median_us <= 0) st.status = "failed", st.error_class = "no_samples", st.message = "no time";
      }
      return;
    }
    std::string why = r.ok ? "the worker's screen reply is malformed" : r.failure + ": " + r.message;
    if (!r.ok && r.failure == "error") {
      // The worker answered and lives on, but could not screen at all (the problem did not load,
      // memory ran out before any candidate ran): the same for any part of the group.
      for (size_t i : group) out.times[i].error_class = "worker_error", out.times[i].message = why;
      return;
    }
    // The worker broke under the group. A sticky CUDA error (or a thread left running) names its
    // candidate, and so does the last "screen: candidate K" line of the log before a timeout;
    // otherwise the culprit is unknown while the group holds more than one.
    int named = r.body.is_object() && r.body.contains("candidate") && r.body["candidate"].is_number_integer() ? r.body["candidate"].get<int>() : -1;
    if (named < 0 && r.failure == "timeout") named = last_named_candidate(r.message);
    if (named >= 0 && static_cast<size_t>(named) < group.size()) {
      ScreenTime& st = out.times[group[static_cast<size_t>(named)]];
      st.error_class = r.failure == "timeout" ? "timeout" : "sticky_cuda_error";
      st.message = why;
      group.erase(group.begin() + named);
      self(self, group);
      return;
    }
    if (group.size() == 1) {
      ScreenTime& st = out.times[group[0]];
      st.error_class = r.failure == "timeout" ? "timeout" : r.failure == "crash" ? "crash" : "worker_error";
      st.message = why;
      return;
    }
    std::vector<size_t> a(group.begin(), group.begin() + static_cast<long>(group.size() / 2)), b(group.begin() + static_cast<long>(group.size() / 2), group.end());
    self(self, a);
    self(self, b);
  };
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  screen_group(screen_group, all);
  return out;
}
}  // namespace

ScreenBatch screen_in_groups(size_t n, const std::function<WorkerReply(const std::vector<size_t>&)>& call) {
  ScreenBatch first = screen_once(n, call);
  const int refused = static_cast<int>(std::count_if(first.times.begin(), first.times.end(),
                                                     [](const ScreenTime& st) { return st.error_class == "timing_inconsistent"; }));
  if (refused == 0) return first;
  // Round trips slowed by other work on the host (the run's compiles) against a calibration made
  // before it: the libraries that ran are screened once more, together, so that every time returned
  // comes from one pass beside the same reference; a launcher whose times are short is refused
  // again. Those the first pass blamed for breaking the worker (a crash, a hang) keep that verdict.
  std::vector<size_t> again;
  for (size_t i = 0; i < n; ++i)
    if (first.times[i].status == "ok" || first.times[i].error_class == "timing_inconsistent") again.push_back(i);
  ScreenBatch second = screen_once(again.size(), [&](const std::vector<size_t>& group) {
    std::vector<size_t> libs;
    for (size_t k : group) libs.push_back(again[k]);
    return call(libs);
  });
  for (size_t k = 0; k < again.size(); ++k) first.times[again[k]] = second.times[k];
  first.calls += second.calls;
  first.worker_seconds += second.worker_seconds;
  first.bracket_refused_first = refused;
  return first;
}

}  // namespace ksol
