// The evaluation record read from a worker's result (core/evaluation.h): what the protocol allows
// is parsed, everything else is a protocol violation at the worker gate.
#include <gtest/gtest.h>

#include "core/evaluation.h"

namespace {

using ksol::Gate;
using ksol::Status;
using nlohmann::json;

TEST(EvaluationRecord, AWorkersResultIsParsedOnce) {
  ksol::SizeEvaluation ok = ksol::from_worker_result(
      {{"status", "ok"}, {"gates", json::array({{{"gate", "correctness"}, {"ok", true}}})},
       {"timing", {{"median_us", 5.0}, {"ci_low_us", 4.9}, {"ci_high_us", 5.1}, {"clock_mhz_after", 1980}, {"throttled", true}, {"raw_us", {5.0, 5.1}}}},
       {"harness_seconds", {{"total", 0.7}}}});
  EXPECT_EQ(ok.status, Status::ok);
  EXPECT_EQ(ok.failed_gate, Gate::none);
  EXPECT_DOUBLE_EQ(ok.median_us, 5.0);
  EXPECT_DOUBLE_EQ(ok.clock_mhz, 1980);
  EXPECT_TRUE(ok.throttled);
  EXPECT_EQ(ok.samples_us.size(), 2u);
  EXPECT_EQ(ok.gates.size(), 1u);
  EXPECT_DOUBLE_EQ(ok.harness_seconds(), 0.7);

  ksol::SizeEvaluation bad = ksol::from_worker_result(
      {{"status", "failed"}, {"failed_gate", "correctness"}, {"error_class", "wrong_result"}, {"message", "output 0: ..."}});
  EXPECT_EQ(bad.status, Status::failed);
  EXPECT_EQ(bad.failed_gate, Gate::correctness);
  EXPECT_EQ(bad.error_class, "wrong_result");
  EXPECT_EQ(bad.message, "output 0: ...");
}

// A baseline the worker stopped after its first calls: not a failure, not a time; the calls' time
// comes from its probe record and nothing else is read as a measurement.
TEST(EvaluationRecord, AFarSlowerResultKeepsItsProbeTime) {
  ksol::SizeEvaluation e = ksol::from_worker_result(
      {{"status", "far_slower"}, {"message", "one call took 2200 us"},
       {"gates", json::array({{{"gate", "probe"}, {"ok", false}, {"us", 2200.0}, {"calls_us", {2300.0, 2200.0}}, {"stop_above_us", 80.0}}})},
       {"harness_seconds", {{"total", 0.01}}}});
  EXPECT_EQ(e.status, Status::far_slower);
  EXPECT_EQ(e.failed_gate, Gate::none);
  EXPECT_FALSE(e.ok());
  EXPECT_DOUBLE_EQ(e.probe_us, 2200.0);
  EXPECT_EQ(e.median_us, 0);
  EXPECT_EQ(e.message, "one call took 2200 us");
  EXPECT_DOUBLE_EQ(e.harness_seconds(), 0.01);
  json j = ksol::to_json(e);
  EXPECT_EQ(j["status"], "far_slower");
  EXPECT_DOUBLE_EQ(j["probe_us"].get<double>(), 2200.0);
  EXPECT_FALSE(j.contains("timing"));
}

TEST(EvaluationRecord, WhatTheProtocolDoesNotAllowIsAViolation) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), "not an object"},
      {{{"status", "suspect"}}, "status 'suspect'"},  // the coordinator's conclusion, never a worker's
      {{{"status", "failed"}, {"failed_gate", "teleport"}}, "a gate the protocol does not have: 'teleport'"},
      {{{"status", "ok"}, {"failed_gate", "timing"}}, "ok with a failed gate"},
      {{{"status", "failed"}, {"message", "x"}}, "failed without naming a gate"},
      {{{"status", "ok"}, {"timing", {{"median_us", 0}}}}, "no positive median"},
      {{{"status", 1}}, "not a string"},
      {{{"status", "far_slower"}, {"message", "x"}}, "far_slower without a probe record"},
      {{{"status", "far_slower"}, {"failed_gate", "timing"}}, "far_slower with a failed gate"},
      {{{"status", "far_slower"}, {"gates", json::array({{{"gate", "probe"}, {"us", 9.0}}})}, {"timing", {{"median_us", 9.0}}}},
       "far_slower with a timing record"},
  };
  for (const auto& [result, why] : cases) {
    ksol::SizeEvaluation e = ksol::from_worker_result(result);
    EXPECT_EQ(e.status, Status::failed) << result.dump();
    EXPECT_EQ(e.failed_gate, Gate::worker) << result.dump();
    EXPECT_EQ(e.error_class, "protocol_violation") << result.dump();
    EXPECT_NE(e.message.find(why), std::string::npos) << e.message;
    EXPECT_EQ(e.median_us, 0) << result.dump();
  }
}

TEST(EvaluationRecord, NamesRoundTrip) {
  for (Status s : {Status::ok, Status::failed, Status::suspect, Status::no_gpu, Status::skipped, Status::unsupported, Status::far_slower})
    EXPECT_EQ(ksol::parse_status(ksol::to_string(s)), s);
  for (Gate g : {Gate::none, Gate::static_scan, Gate::compile, Gate::load, Gate::launch, Gate::correctness, Gate::timing,
                 Gate::integrity, Gate::screen, Gate::worker})
    EXPECT_EQ(ksol::parse_gate(ksol::to_string(g)), g);
  EXPECT_FALSE(ksol::parse_status("great"));
  EXPECT_EQ(ksol::to_string(Gate::static_scan), std::string("static"));
}

}  // namespace
