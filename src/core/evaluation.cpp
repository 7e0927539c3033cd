#include "core/evaluation.h"

#include <array>
#include <cstdio>
#include <utility>

namespace ksol {
namespace {

constexpr std::array<std::pair<Status, const char*>, 7> kStatuses{{
    {Status::ok, "ok"},
    {Status::failed, "failed"},
    {Status::suspect, "suspect"},
    {Status::no_gpu, "no_gpu"},
    {Status::skipped, "skipped"},
    {Status::unsupported, "unsupported"},
    {Status::far_slower, "far_slower"},
}};

constexpr std::array<std::pair<Gate, const char*>, 10> kGates{{
    {Gate::none, ""},
    {Gate::static_scan, "static"},
    {Gate::compile, "compile"},
    {Gate::load, "load"},
    {Gate::launch, "launch"},
    {Gate::correctness, "correctness"},
    {Gate::timing, "timing"},
    {Gate::integrity, "integrity"},
    {Gate::screen, "screen"},
    {Gate::worker, "worker"},
}};

template <class E, size_t N>
const char* name_of(const std::array<std::pair<E, const char*>, N>& table, E e) {
  for (auto& [v, n] : table)
    if (v == e) return n;
  return "?";
}

template <class E, size_t N>
std::optional<E> value_of(const std::array<std::pair<E, const char*>, N>& table, std::string_view s) {
  for (auto& [v, n] : table)
    if (s == n) return v;
  return std::nullopt;
}

SizeEvaluation protocol_violation(SizeEvaluation e, const std::string& why) {
  e.status = Status::failed;
  e.failed_gate = Gate::worker;
  e.error_class = "protocol_violation";
  e.message = why;
  e.median_us = e.ci_low_us = e.ci_high_us = e.clock_mhz = e.probe_us = 0;
  e.throttled = false;
  e.samples_us.clear();
  return e;
}

}  // namespace

const char* to_string(Status s) { return name_of(kStatuses, s); }
const char* to_string(Gate g) { return name_of(kGates, g); }
std::optional<Status> parse_status(std::string_view s) { return value_of(kStatuses, s); }
std::optional<Gate> parse_gate(std::string_view s) { return value_of(kGates, s); }

double SizeEvaluation::harness_seconds() const {
  const nlohmann::json* h = nullptr;
  if (provenance.is_object() && provenance.contains("harness_seconds")) h = &provenance["harness_seconds"];
  else if (raw.is_object() && raw.contains("harness_seconds")) h = &raw["harness_seconds"];
  if (!h || !h->is_object() || !h->contains("total") || !(*h)["total"].is_number()) return 0;
  return (*h)["total"].get<double>();
}

SizeEvaluation from_worker_result(const nlohmann::json& result) {
  SizeEvaluation e;
  e.raw = result;
  if (!result.is_object()) return protocol_violation(std::move(e), "the worker's result is not an object");
  auto text = [&](const char* k) -> std::optional<std::string> {
    if (!result.contains(k)) return std::string();
    if (!result[k].is_string()) return std::nullopt;
    return result[k].get<std::string>();
  };
  auto status = text("status");
  auto gate = text("failed_gate");
  auto cls = text("error_class");
  auto msg = text("message");
  if (!status || !gate || !cls || !msg)
    return protocol_violation(std::move(e), "the worker's result has a status, failed_gate, error_class or message that is not a string");
  // The worker decides ok, failed or (asked for it) far_slower; suspect, skipped, no_gpu and
  // unsupported are the coordinator's conclusions and never taken from a reply. Whether a
  // far_slower was asked for is the coordinator's to check (Session::run_size).
  if (*status != "ok" && *status != "failed" && *status != "far_slower")
    return protocol_violation(std::move(e), "the worker's result has status '" + *status + "' (ok, failed or far_slower expected)");
  std::optional<Gate> g = parse_gate(*gate);
  if (!g) return protocol_violation(std::move(e), "the worker's result names a gate the protocol does not have: '" + *gate + "'");
  if (*status == "far_slower") {
    e.status = Status::far_slower;
    if (*g != Gate::none) return protocol_violation(std::move(e), "the worker's result is far_slower with a failed gate");
    if (result.contains("gates") && result["gates"].is_array()) e.gates = result["gates"];
    e.message = *msg;
    e.probe_us = probe_us_of(e.gates);
    if (!(e.probe_us > 0)) return protocol_violation(std::move(e), "the worker's result is far_slower without a probe record of a positive time");
    if (result.contains("timing")) return protocol_violation(std::move(e), "the worker's result is far_slower with a timing record");
    return e;
  }
  e.status = *status == "ok" ? Status::ok : Status::failed;
  if (e.ok() && *g != Gate::none) return protocol_violation(std::move(e), "the worker's result is ok with a failed gate");
  if (!e.ok() && *g == Gate::none) return protocol_violation(std::move(e), "the worker's result failed without naming a gate");
  e.failed_gate = *g;
  e.error_class = *cls;
  e.message = *msg;
  if (result.contains("gates") && result["gates"].is_array()) e.gates = result["gates"];
  if (result.contains("timing") && result["timing"].is_object()) {
    const nlohmann::json& tm = result["timing"];
    auto num = [&](const char* k) { return tm.contains(k) && tm[k].is_number() ? tm[k].get<double>() : 0.0; };
    e.median_us = num("median_us");
    e.ci_low_us = num("ci_low_us");
    e.ci_high_us = num("ci_high_us");
    e.clock_mhz = num("clock_mhz_after");
    e.throttled = tm.contains("throttled") && tm["throttled"].is_boolean() && tm["throttled"].get<bool>();
    if (tm.contains("raw_us") && tm["raw_us"].is_array())
      for (const auto& v : tm["raw_us"])
        if (v.is_number()) e.samples_us.push_back(v.get<double>());
  }
  if (e.ok() && !(e.median_us > 0) && result.contains("timing"))
    return protocol_violation(std::move(e), "the worker's result is ok with a timing record but no positive median");
  return e;
}

std::string far_slower_message(const FarSlowerLimit& limit, double probe_us) {
  auto text = [](double v, int prec) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return std::string(b);
  };
  auto us = [&](double v) { return text(v, v >= 100 ? 0 : 2); };
  char factor[32];
  std::snprintf(factor, sizeof factor, "%.3g", limit.factor);
  return "far slower than " + limit.than + " (one call: " + us(probe_us) + " us, above " + factor + "x its median of " + us(limit.than_us) +
         " us): not verified or timed in full";
}

double probe_us_of(const nlohmann::json& gates) {
  if (!gates.is_array()) return 0;
  for (const auto& g : gates)
    if (g.is_object() && g.value("gate", "") == "probe" && g.contains("us") && g["us"].is_number()) return g["us"].get<double>();
  return 0;
}

nlohmann::json to_json(const SizeEvaluation& e) {
  nlohmann::json j = {{"size", e.size}, {"hidden", e.hidden}, {"status", to_string(e.status)}};
  if (e.failed_gate != Gate::none) j["failed_gate"] = to_string(e.failed_gate);
  if (!e.error_class.empty()) j["error_class"] = e.error_class;
  if (!e.message.empty()) j["message"] = e.message;
  if (e.median_us > 0)
    j["timing"] = {{"median_us", e.median_us}, {"ci_low_us", e.ci_low_us}, {"ci_high_us", e.ci_high_us},
                   {"clock_mhz", e.clock_mhz}, {"throttled", e.throttled}};
  if (e.probe_us > 0) j["probe_us"] = e.probe_us;
  j["sol_us"] = e.sol_us;
  if (e.pct_sol > 0) j["pct_sol"] = e.pct_sol;
  if (!e.bound.empty()) j["bound"] = e.bound;
  j["gates"] = e.gates;
  j["seeds"] = e.seeds;
  j["provenance"] = e.provenance;
  if (e.evaluation_id) j["evaluation_id"] = e.evaluation_id;
  return j;
}

}  // namespace ksol
