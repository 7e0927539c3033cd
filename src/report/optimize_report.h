// Reports of a `ksol optimize` run, from the run's JSON document (what --json prints):
// Markdown, and a self-contained HTML page (no scripts, no external resources) with SVG plots:
// each task's best-so-far over time with its failed candidates marked, %SOL per task before and
// after, and where candidates failed.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksol::report {

// What a run gained on one task, as the report's "What you get" table states it (and `ksol show`).
struct SizeGain {
  std::string size;
  bool returned = false;        // the returned kernel's figures; false: the fastest baseline's
  double time_us = 0;           // median
  double best_baseline_us = 0;  // the fastest baseline's median at this size
  double speedup = 0;           // best_baseline_us / time_us for the returned kernel; 0 otherwise
  double pct_sol = 0;           // percent
};
struct TaskGain {
  std::string task;
  std::string returned;  // the kernel's name, "baseline NAME", "stitched, N piece(s)" or "-"
  double speedup = 0;    // over the best baseline, the search's weighted geomean over the sizes
  double pct_sol = 0;    // percent, the same mean
  std::string hidden;    // the grade on the hidden sizes in words ("1.38x vs best baseline", "-")
  std::vector<SizeGain> sizes;
};
// One item of the document's "results".
TaskGain task_gain(const nlohmann::json& result);

// The "vs naive" figure: "285.95x", "-" when there is none, "~285.95x" when the naive baseline was
// stopped early at some size (status far_slower) and counted there at its one call's time.
std::string naive_speedup_text(double speedup, bool from_one_call);
inline constexpr const char* kNaiveFromOneCallNote =
    "~: the naive baseline was stopped after its first call at some size, far slower than the fastest baseline there; "
    "its time there is that call's, not a verified median";

// Over a run's tasks (the document's "results"): the geometric mean of each task's speedup over its
// best baseline (a task returning a baseline counts 1.00x) and over its naive baseline, with how
// many tasks each counts and of those how many had the naive baseline stopped after one call.
struct Geomeans {
  double best = 0, naive = 0;
  int n_best = 0, n_naive = 0, naive_one_call = 0;
};
Geomeans geomeans(const nlohmann::json& results);

std::string optimize_markdown(const nlohmann::json& doc);
std::string optimize_html(const nlohmann::json& doc);

// Escapes text for HTML and SVG.
std::string html_escape(const std::string& s);

// The failure class of a trajectory entry: "" when it passed, else the first words of its
// error (the gate and class the harness reported, e.g. "correctness/wrong_result").
std::string failure_class(const nlohmann::json& attempt);

}  // namespace ksol::report
