// Searching one piece of a stitched module (src/search/stitched.h): every candidate is built and
// the module is evaluated whole with it in the piece's place; the loop keeps the fastest. The
// worker is replaced by a cost model over the piece's kernel name (this machine has no GPU).
#include <gtest/gtest.h>

#include <regex>

#include "agents/expert.h"
#include "agents/knowledge.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "search/stitched.h"
#include "task/lowered.h"

using namespace ksol;
using nlohmann::json;

namespace {

json relu_piece() {
  return {{"program",
           "kernel model(input0: f32[D0, D1, D2, D3]) -> (output0: f32[D0, D1, D2, D3]) {\n"
           "  output0[i0, i1, i2, i3] = relu(input0[i0, i1, i2, i3])\n}\nschedule {\n  threads = 256\n  vector = 1\n}\n"},
          {"family", "elementwise"},
          {"tensors", json::array({{{"name", "input0"}, {"role", "in"}, {"shape", {"D0", "D1", "D2", "D3"}}, {"dtype", "f32"}},
                                   {{"name", "output0"}, {"role", "out"}, {"shape", {"D0", "D1", "D2", "D3"}}, {"dtype", "f32"}}})},
          {"dims", {{"D0", 8}, {"D1", 64}, {"D2", 64}, {"D3", 64}}},
          {"dim_order", {"D0", "D1", "D2", "D3"}}};
}

// Module time from the piece's kernel name: vector loads and a few items per thread help.
double cost(const std::string& kernel) {
  std::smatch m;
  double v = 1, i = 1, t = 256;
  if (std::regex_search(kernel, m, std::regex("_t(\\d+)"))) t = std::stod(m[1]);
  if (std::regex_search(kernel, m, std::regex("_v(\\d+)"))) v = std::stod(m[1]);
  if (std::regex_search(kernel, m, std::regex("_i(\\d+)"))) i = std::stod(m[1]);
  return 50.0 + 200.0 / v + 20.0 * std::abs(std::log2(i / 2.0)) + 10.0 * std::abs(std::log2(t / 256.0));
}

// The worker's evaluation of a stitched module, timed by the cost model over its first piece.
search::StitchedRun modelled_run(const json& ps) {
  search::StitchedRun r;
  r.ok = true;
  double us = cost(ps[0]["kernel"].get<std::string>());
  r.result = {{"status", "ok"}, {"timing", {{"median_us", us}, {"ci_low_us", us * 0.999}, {"ci_high_us", us * 1.001}}}};
  r.seconds = 0.5;
  return r;
}

// The searched piece (the ReLU, at a seed library) and another one the search leaves alone.
json two_pieces() {
  return json::array({{{"nodes", {"relu"}}, {"so", "/nowhere/seed.so"}, {"dims", {8, 64, 64, 64}}, {"kernel", "seed"}},
                      {{"nodes", {"other"}}, {"so", "/nowhere/other.so"}, {"dims", {4}}, {"kernel", "other"}}});
}

// Eager PyTorch's time for the whole module: the baseline.
search::Outcome eager_module() {
  search::Outcome eager;
  eager.status = Status::ok;
  search::SizeResult es;
  es.size = "module";
  es.status = Status::ok;
  es.median_us = 400, es.ci_low_us = 399, es.ci_high_us = 401;
  eager.sizes.push_back(es);
  return eager;
}

}  // namespace

TEST(StitchedSearch, EachCandidateIsTheWholeModuleWithThePieceInPlace) {
  std::string file = source_root() + "/tests/torch/problems/03_conv_bn_relu.py";
  json piece = relu_piece();
  Task t = lowered_task(piece, file, "_p0");
  dsl::Program seed = dsl::parse_program(piece["program"].get<std::string>(), "p0.ksol");
  json pieces = two_pieces();
  std::vector<json> seen;
  auto run = [&](const json& ps) {
    seen.push_back(ps);
    return modelled_run(ps);
  };
  search::Outcome eager = eager_module();
  search::PieceEvaluator pe(pieces, 0, run, {{"eager", eager}});

  agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  auto agent = agents::make_agent("expert", k, 1);
  search::OptimizeOptions o;
  o.max_candidates = 5;
  o.budget_seconds = 0;
  o.prune = 0;
  o.profile = false;
  o.target_sol = 0;
  search::OptimizeResult r = search::optimize(t, seed, pe, *agent, o);

  ASSERT_GE(r.best, 0);
  ASSERT_EQ(seen.size(), r.trajectory.size());
  for (size_t c = 0; c < seen.size(); ++c) {
    const search::Attempt& a = r.trajectory[c];
    // The searched piece is this candidate's library; the other piece is untouched.
    ASSERT_TRUE(pe.libraries().count(a.outcome.label)) << a.outcome.label << ": " << a.outcome.error;
    EXPECT_EQ(seen[c][0]["so"], pe.libraries().at(a.outcome.label));
    EXPECT_EQ(seen[c][0]["kernel"], a.outcome.kernel);
    EXPECT_EQ(seen[c][1]["so"], "/nowhere/other.so");
    EXPECT_DOUBLE_EQ(a.outcome.score_us(), cost(a.outcome.kernel));
  }
  const search::Attempt& best = r.trajectory[r.best];
  EXPECT_LT(best.outcome.score_us(), r.trajectory[0].outcome.score_us()) << "the expert found nothing faster than the seed";
  json out = pe.with_piece(pe.libraries().at(best.outcome.label), best.outcome.kernel);
  EXPECT_EQ(out[0]["kernel"], best.outcome.kernel);
  EXPECT_EQ(out[1], pieces[1]);
}

TEST(StitchedSearch, AFailedOrSilentWorkerIsAFailedCandidate) {
  search::StitchedRun dead;
  dead.message = "the worker exited";
  EXPECT_FALSE(search::stitched_outcome(dead, "c1").ok());
  EXPECT_NE(search::stitched_outcome(dead, "c1").error.find("the worker exited"), std::string::npos);
  search::StitchedRun wrong;
  wrong.ok = true;
  wrong.result = {{"status", "failed"}, {"failed_gate", "correctness"}, {"error_class", "wrong_result"}, {"message", "output 0: out of tolerance"}};
  EXPECT_NE(search::stitched_outcome(wrong, "c2").error.find("out of tolerance"), std::string::npos);
  EXPECT_EQ(search::stitched_outcome(wrong, "c2").sizes.at(0).failed_gate, Gate::correctness);
  // A failure that names no gate is not the protocol: the worker's gate, whatever it said.
  search::StitchedRun nameless;
  nameless.ok = true;
  nameless.result = {{"status", "failed"}, {"message", "output 0: out of tolerance"}};
  const search::Outcome n = search::stitched_outcome(nameless, "c3");
  EXPECT_EQ(n.sizes.at(0).failed_gate, Gate::worker);
  EXPECT_EQ(n.sizes.at(0).error_class, "protocol_violation");
  search::StitchedRun untimed;
  untimed.ok = true;
  untimed.result = {{"status", "ok"}};
  EXPECT_FALSE(search::stitched_outcome(untimed, "c3").ok()) << "a pass without a time is not a result";
  search::StitchedRun fast;
  fast.ok = true;
  fast.result = {{"status", "ok"}, {"timing", {{"median_us", 1.0}}}};
  EXPECT_TRUE(search::stitched_outcome(fast, "c4", 0.5).ok()) << "50% of SOL";
  search::Outcome lie = search::stitched_outcome(fast, "c5", 10.0);
  EXPECT_FALSE(lie.ok()) << "ten times faster than speed-of-light";
  EXPECT_EQ(lie.sizes.at(0).status, Status::suspect);
}

// With the worker's screen, a generation is timed in one call, the module with each candidate's
// library in the piece's place, and only its contenders are evaluated in full.
TEST(StitchedSearch, AScreenTimesABatchAndOnlyContendersAreEvaluated) {
  std::string file = source_root() + "/tests/torch/problems/03_conv_bn_relu.py";
  json piece = relu_piece();
  Task t = lowered_task(piece, file, "_p0");
  dsl::Program seed = dsl::parse_program(piece["program"].get<std::string>(), "p0.ksol");
  json pieces = two_pieces();
  int runs = 0, screens = 0;
  size_t screened = 0;
  auto run = [&](const json& ps) {
    ++runs;
    return modelled_run(ps);
  };
  auto screen = [&](const std::vector<json>& stitched) {
    ++screens;
    screened += stitched.size();
    ScreenBatch sb;
    for (const json& ps : stitched) {
      EXPECT_EQ(ps[1]["so"], "/nowhere/other.so") << "the other piece stays as it is";
      EXPECT_NE(ps[0]["so"], "/nowhere/seed.so") << "each candidate's own library is in the piece's place";
      ScreenTime st;
      st.status = "ok";
      st.median_us = st.ci_low_us = st.ci_high_us = cost(ps[0]["kernel"].get<std::string>());
      st.samples = 10;
      sb.times.push_back(st);
    }
    sb.worker_seconds = 0.1;
    return sb;
  };
  search::Outcome eager = eager_module();
  search::PieceEvaluator pe(pieces, 0, run, {{"eager", eager}}, nullptr, 0, screen);
  ASSERT_TRUE(pe.screens());

  agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  auto agent = agents::make_agent("expert", k, 1);
  search::OptimizeOptions o;
  o.max_candidates = 12;
  o.budget_seconds = 0;
  o.profile = false;
  o.target_sol = 0;
  o.prefetch = true;  // the next generation built in the background while the finalists run
  search::OptimizeResult r = search::optimize(t, seed, pe, *agent, o);

  ASSERT_GE(r.best, 0);
  EXPECT_EQ(r.trajectory.size(), 12u);
  EXPECT_GE(screens, 1);
  // Every screen holds the best beside the generation's candidates.
  EXPECT_EQ(screened, static_cast<size_t>(screens) + r.trajectory.size() - 1);
  EXPECT_EQ(runs, r.verified) << "a full evaluation for the seed and each contender only";
  EXPECT_LT(runs, static_cast<int>(r.trajectory.size()));
  EXPECT_GT(r.screened, 0);
  for (const search::Attempt& a : r.trajectory)
    if (a.index > 0) EXPECT_TRUE(a.outcome.screened || a.outcome.ok()) << a.note;
  const search::Attempt& best = r.trajectory[r.best];
  EXPECT_LT(best.outcome.score_us(), r.trajectory[0].outcome.score_us()) << "the expert found nothing faster than the seed";
  EXPECT_DOUBLE_EQ(best.outcome.score_us(), cost(best.outcome.kernel));
}

// A module that fails a gate at its seeds: each piece ksol computes is kept as PyTorch's calls in
// turn, and the fastest module that passes goes on, the kept piece saying why.
TEST(StitchedSearch, APieceThatFailsAtItsSeedIsKeptAsPyTorchCalls) {
  json pieces = json::array({{{"nodes", {"conv"}}, {"so", "/nowhere/a.so"}, {"family", "conv"}, {"kernel", "a"}},
                             {{"nodes", {"relu"}}, {"so", "/nowhere/b.so"}, {"family", "elementwise"}, {"kernel", "b"}},
                             {{"nodes", {"pool"}}, {"so", "/nowhere/c.so"}, {"family", "direct"}, {"kernel", "c"}}});
  std::vector<json> seen;
  // The pool's library computes wrong values: only the module with the pool kept passes.
  auto run = [&](const json& ps) {
    seen.push_back(ps);
    search::StitchedRun r;
    r.ok = true;
    if (!ps[2].value("keep", false)) {
      r.result = {{"status", "failed"}, {"failed_gate", "correctness"}, {"error_class", "wrong_result"}, {"message", "output 0: out of tolerance"}};
      return r;
    }
    const double us = 120.0;
    r.result = {{"status", "ok"}, {"timing", {{"median_us", us}, {"ci_low_us", us}, {"ci_high_us", us}}}};
    return r;
  };
  auto sol = [](const json&) { return 10.0; };
  search::KeptRescue kr = search::keep_a_failing_piece(pieces, "correctness: out of tolerance", run, sol, nullptr);
  ASSERT_TRUE(kr.ok) << kr.tries.dump(1);
  ASSERT_EQ(seen.size(), 3u);  // each piece kept in turn, one at a time
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(seen[i][i].value("keep", false));
    EXPECT_FALSE(seen[i][i].contains("so"));
    for (size_t j = 0; j < 3; ++j)
      if (j != i) EXPECT_EQ(seen[i][j], pieces[j]);
  }
  EXPECT_TRUE(kr.pieces[2].value("keep", false));
  EXPECT_EQ(kr.pieces[2]["nodes"], pieces[2]["nodes"]);
  EXPECT_NE(kr.pieces[2].value("why", std::string()).find("out of tolerance"), std::string::npos) << kr.pieces.dump(1);
  EXPECT_EQ(kr.pieces[0], pieces[0]);
  EXPECT_DOUBLE_EQ(kr.outcome.score_us(), 120.0);
  EXPECT_DOUBLE_EQ(kr.sol_us, 10.0);
  ASSERT_EQ(kr.tries.size(), 3u);
  EXPECT_TRUE(kr.tries[0].contains("error"));
  EXPECT_DOUBLE_EQ(kr.tries[2]["module_us"].get<double>(), 120.0);

  // A piece kept already is not tried again, and the last piece ksol computes is never kept.
  json two = json::array({search::kept_piece(pieces[0], "does not compile"), pieces[1]});
  seen.clear();
  EXPECT_FALSE(search::keep_a_failing_piece(two, "e", run, sol, nullptr).ok);
  EXPECT_TRUE(seen.empty());
  // Stopped: no try.
  EXPECT_TRUE(search::keep_a_failing_piece(pieces, "e", run, sol, [] { return true; }).tries.empty());
}
