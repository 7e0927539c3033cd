// The optimize report from a run of the loop against the scripted evaluator: the Markdown and the
// self-contained HTML carry every task, the plots, the failures by class, and escape what they show.
#include <gtest/gtest.h>

#include <cstdio>

#include "agents/expert.h"
#include "agents/knowledge.h"
#include "core/util.h"
#include "report/optimize_report.h"
#include "search/optimize.h"
#include "task/task.h"

using namespace ksol;
using nlohmann::json;

namespace {
json run_doc() {
  static const agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  Task t = load_task(resolve_task_path("softmax_f32"));
  dsl::Program seed = dsl::parse_program(read_file(t.dir + "/program.ksol"), "program.ksol");
  search::ScriptedEvaluator ev;
  ev.model = {{"vector", {"4", 0.25}}, {"cache_row", {"registers", 0.3}}};
  // Every schedule with items_per_thread = 8 fails to run, so the report has failures.
  ev.fail_run = [](const codegen::Schedule& s) {
    for (auto& [key, v] : s)
      if (key == "items_per_thread" && v == "8") return true;
    return false;
  };
  auto agent = agents::make_agent("expert", k, 3);
  search::OptimizeOptions o;
  o.max_candidates = 40;
  search::OptimizeResult r = search::optimize(t, seed, ev, *agent, o);
  json res = r.to_json();
  res["task"] = "softmax_f32 <&>";  // a name that must be escaped
  return {{"run", 7}, {"gpu", {{"name", "Test GPU"}}}, {"agent", "expert"}, {"results", json::array({res})}};
}
}  // namespace

TEST(Report, MarkdownAndHtml) {
  json doc = run_doc();
  const json& traj = doc["results"][0]["trajectory"];
  ASSERT_GE(traj.size(), 3u);
  int failed = 0;
  for (auto& a : traj) failed += a["status"] != "ok";
  std::string md = report::optimize_markdown(doc);
  EXPECT_NE(md.find("# ksol optimize: run 7"), std::string::npos);
  EXPECT_NE(md.find("| softmax_f32 <&> |"), std::string::npos) << md;
  EXPECT_NE(md.find("```ksol\nkernel softmax"), std::string::npos) << md;
  // The summary over tasks: geomeans against the best and the naive baselines.
  const json& r0 = doc["results"][0];
  char want[160];
  std::snprintf(want, sizeof want, "Geomean over the tasks: %.3fx over the best baseline** (1 tasks), %.3fx over the naive one (1 tasks)",
                r0["speedup_vs_best_baseline"].get<double>(), r0["speedup_vs_naive"].get<double>());
  EXPECT_NE(md.find(want), std::string::npos) << md;
  // It leads with what the run gained: per task the returned kernel and its speed at each size.
  EXPECT_LT(md.find("## What you get"), md.find("## The search")) << md;
  EXPECT_NE(md.find(" us (") == std::string::npos ? md.find("% SOL") : md.find(" us ("), std::string::npos) << md;
  EXPECT_NE(md.find("| tried | screened out | verified | generations |"), std::string::npos) << md;
  EXPECT_NE(md.find("screen "), std::string::npos) << "the seconds' breakdown names the screen: " << md;
  std::string html = report::optimize_html(doc);
  EXPECT_NE(html.find("softmax_f32 &lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(html.find("softmax_f32 <&>"), std::string::npos);  // never raw
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  size_t svgs = 0;
  for (size_t at = 0; (at = html.find("<svg", at)) != std::string::npos; ++at) ++svgs;
  EXPECT_EQ(svgs, 2u);  // %SOL before/after, and the task's progress
  EXPECT_NE(html.find("<path d=\"M"), std::string::npos);  // the best-so-far line
  ASSERT_GT(failed, 0) << traj.dump(1);
  {
    EXPECT_NE(html.find("stroke=\"#d62728\""), std::string::npos);  // failed candidates marked
    EXPECT_NE(md.find("Failed candidates by class:"), std::string::npos);
  }
}

// A run that ended waiting on an LLM batch says so near the top, with the resume command.
// A CUDA kernel returned by the LLM's kernel loop is shown as CUDA, from its source, in both forms.
TEST(Report, ACudaBestShowsItsSource) {
  json doc = run_doc();
  json& b = doc["results"][0]["best"];
  b.erase("program");
  b["language"] = "cuda";
  b["source"] = "__global__ void topk_radix(const float* X) {}";
  std::string md = report::optimize_markdown(doc), html = report::optimize_html(doc);
  EXPECT_NE(md.find("```cuda\n__global__ void topk_radix(const float* X) {}\n```"), std::string::npos) << md;
  EXPECT_EQ(md.find("```ksol\n```"), std::string::npos) << "no empty DSL block for a CUDA kernel: " << md;
  EXPECT_NE(html.find("Best kernel (CUDA):</p><pre>__global__ void topk_radix"), std::string::npos) << html;
}

TEST(Report, AWaitingBatchRunSaysHowItGoesOn) {
  json doc = run_doc();
  EXPECT_EQ(report::optimize_markdown(doc).find("Waiting on LLM batch"), std::string::npos);
  doc["llm"]["batch"] = {{"batch", 2}, {"requests", 3}, {"written", true}, {"requests_file", "/b/requests-2.jsonl"},
                         {"results_file", "/b/results-2.jsonl"}, {"resume", "ksol optimize x --resume 7 <&>"}};
  std::string md = report::optimize_markdown(doc), html = report::optimize_html(doc);
  const std::string want = "Waiting on LLM batch 2: 3 request(s) in /b/requests-2.jsonl. Once the provider's results are saved as "
                           "/b/results-2.jsonl, `ksol optimize x --resume 7 <&>` goes on from here.";
  EXPECT_NE(md.find(want), std::string::npos) << md;
  EXPECT_LT(md.find(want), md.find("## What you get")) << md;
  EXPECT_NE(html.find("--resume 7 &lt;&amp;&gt;"), std::string::npos);
}

TEST(Report, FailureClass) {
  EXPECT_EQ(report::failure_class({{"status", "ok"}}), "");
  EXPECT_EQ(report::failure_class({{"status", "failed"}, {"error", "correctness/wrong_result at h1: output 'Y'"}}), "correctness/wrong_result");
  EXPECT_EQ(report::failure_class({{"status", "failed"}}), "failed");
  EXPECT_EQ(report::html_escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

// A stitched module's result (ksol optimize FILE.py whose forward is not one DSL program) has no
// trajectory: the report shows its pieces, their search, the module's times and the reason.
TEST(Report, StitchedModule) {
  json pieces = json::array({{{"nodes", {"bn", "relu"}}, {"so", "/tmp/p0.so"}, {"family", "elementwise"}, {"kernel", "map_relu_b256"},
                              {"program", "kernel map_relu <&>\n"}},
                             {{"nodes", {"add"}}, {"so", "/tmp/p1.so"}, {"family", "elementwise"}, {"kernel", "map_add_b128"}, {"program", "kernel add\n"}}});
  json item = {{"task", "03_conv_bn_relu"}, {"stop_reason", "stitched"}, {"use_baseline", true}, {"best_baseline", "eager"},
               {"reason", "the stitched module (12.5 us) is not faster than eager"}, {"candidates", 4}, {"speedup_vs_best_baseline", 1.0},
               {"baseline_us", {{"eager", 10.0}, {"compile", 0.0}}}, {"pieces", pieces},
               {"piece_search", json::array({{{"piece", 0}, {"candidates", 3}, {"stop_reason", "candidates"},
                                              {"best", {{"kernel", "map_relu_b256"}, {"schedule", "block=256"}, {"module_us", 12.5}}}}})},
               {"stitched", {{"status", "ok"}, {"median_us", 12.5}, {"seeds_median_us", 14.0}, {"message", ""}}}};
  json doc = {{"run", 0}, {"gpu", {{"name", "none: the CPU emulator"}}}, {"agent", "expert"}, {"emulated", true}, {"results", json::array({item})}};
  EXPECT_EQ(report::optimize_markdown(doc).find("Precision:"), std::string::npos) << "built-in tasks state their task's precision";
  doc["precision"] = {{"mode", "default"}, {"arithmetic", "tf32"}, {"why", "TF32 allowed for cuDNN convolutions"}, {"u_acc", 4.8828125e-4}};
  std::string md = report::optimize_markdown(doc);
  EXPECT_NE(md.find("Precision: default (tf32: TF32 allowed for cuDNN convolutions); eager, torch.compile and every candidate ran under it"),
            std::string::npos)
      << md;
  EXPECT_NE(report::optimize_html(doc).find("<p>Precision: default (tf32:"), std::string::npos);
  EXPECT_NE(md.find("| 03_conv_bn_relu | baseline eager | 1.00x |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 03_conv_bn_relu | 4 | 0 | 0 | 0 | stitched |"), std::string::npos) << md;
  EXPECT_NE(md.find("Emulated:"), std::string::npos) << md;
  EXPECT_NE(md.find("Stitched from 2 DSL piece(s) around the ops kept as PyTorch calls: ok; the module 14.00 us with its pieces at their "
                    "seed schedules, 12.50 us at the end"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 0 | elementwise | bn, relu | map_relu_b256 | 3 | candidates | 12.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | elementwise | add | map_add_b128 | - | not searched | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("Baselines: compile not timed, eager 10.00 us."), std::string::npos) << md;
  EXPECT_EQ(md.find("Kernels per call"), std::string::npos) << "none counted (no GPU): no line";
  EXPECT_NE(md.find("Reason: the stitched module (12.5 us) is not faster than eager"), std::string::npos) << md;
  EXPECT_NE(md.find("```ksol\nkernel add\n```"), std::string::npos) << md;
  EXPECT_EQ(md.find("| # | parent |"), std::string::npos) << "no trajectory table without a trajectory";
  std::string html = report::optimize_html(doc);
  EXPECT_NE(html.find("Stitched from 2 DSL piece(s)"), std::string::npos) << html;
  // The kernels one call launches, counted on a GPU: the returned version's against torch.compile's.
  doc["results"][0]["kernels"] = {{"eager", 5}, {"compile", 3}, {"compile_max_autotune", 2}, {"ksol", 1}};
  EXPECT_NE(report::optimize_markdown(doc).find("Kernels per call: ksol's best verified (not returned) 1, torch.compile 3, "
                                                "torch.compile max-autotune 2, eager 5."),
            std::string::npos)
      << report::optimize_markdown(doc);
  doc["results"][0]["use_baseline"] = false;
  EXPECT_NE(report::optimize_markdown(doc).find("Kernels per call: ksol 1, torch.compile 3"), std::string::npos);
  EXPECT_NE(report::optimize_html(doc).find("<p>Kernels per call: ksol 1, torch.compile 3"), std::string::npos);
  doc["results"][0].erase("kernels");
  doc["results"][0]["use_baseline"] = true;
  EXPECT_NE(html.find("kernel map_relu &lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(html.find("map_relu <&>"), std::string::npos);  // never raw

  // A failed stitched module, and fields missing altogether, render without throwing.
  item["stitched"] = {{"status", "failed"}, {"message", "correctness/wrong_result"}};
  item.erase("pieces");
  item.erase("baseline_us");
  doc["results"] = json::array({item, json{{"task", "bare"}, {"stitched", json::object()}}});
  md = report::optimize_markdown(doc);
  EXPECT_NE(md.find("Stitched from 0 DSL piece(s) around the ops kept as PyTorch calls: failed: correctness/wrong_result."), std::string::npos) << md;
  EXPECT_NO_THROW(report::optimize_html(doc));
}

// A naive baseline stopped after its first call (far slower than the vendor one): the reports say
// so where the "vs naive" figure is shown ("~", with the note) and list each baseline's sizes as
// they ended, the stopped ones with their one call's time and the baseline they were measured
// against.
TEST(Report, ANaiveBaselineStoppedEarlyIsShownAsSuch) {
  EXPECT_EQ(report::naive_speedup_text(285.954, false), "285.95x");
  EXPECT_EQ(report::naive_speedup_text(285.954, true), "~285.95x");
  EXPECT_EQ(report::naive_speedup_text(0, true), "-");
  static const agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  Task t = load_task(resolve_task_path("softmax_f32"));
  dsl::Program seed = dsl::parse_program(read_file(t.dir + "/program.ksol"), "program.ksol");
  search::ScriptedEvaluator ev;
  ev.baseline_us = {{"naive", 4000}, {"vendor", 150}};
  auto agent = agents::make_agent("expert", k, 3);
  search::OptimizeOptions o;
  o.max_candidates = 5;
  json res = search::optimize(t, seed, ev, *agent, o).to_json();
  ASSERT_TRUE(res["speedup_vs_naive_from_one_call"].get<bool>());
  json doc = {{"run", 8}, {"gpu", {{"name", "Test GPU"}}}, {"agent", "expert"}, {"results", json::array({res})}};
  std::string md = report::optimize_markdown(doc), html = report::optimize_html(doc);
  EXPECT_NE(md.find("1 of them with the naive baseline stopped after one call at some size"), std::string::npos) << md;
  EXPECT_NE(md.find("Baselines: naive: "), std::string::npos) << md;
  EXPECT_NE(md.find("far slower than vendor (one call: "), std::string::npos) << md;
  EXPECT_NE(md.find("; vendor: "), std::string::npos) << md;
  EXPECT_NE(html.find("<td>~" + report::naive_speedup_text(res["speedup_vs_naive"].get<double>(), false) + "</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("its time there is that call"), std::string::npos);
}
