// A run in the store, as `ksol runs`, `ksol show` and `ksol export` give it: what it was (command,
// when, tasks, status) and what it gave per task and size. An optimize run is shown as its report
// states it (the returned kernel, its speedup over the fastest baseline and %SOL per size, from the
// results document the store keeps); any other run (eval, bench, or an optimize run that ended
// before its report) from its evaluations: every kernel at every size beside the fastest baseline.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/optimize_report.h"
#include "store/store.h"

namespace ksol::report {

// A kernel at one size.
struct SizeLine {
  std::string task, kernel, size, status;
  std::optional<double> time_us;           // median
  std::optional<double> best_baseline_us;  // the fastest baseline's median at this size in this run
  std::optional<double> speedup;           // best_baseline_us / time_us
  std::optional<double> pct_sol;           // percent
};

struct RunSummary {
  store::RunRow run;
  std::vector<std::string> tasks;  // in the order the run first evaluated them
  std::string gpu;                 // the GPU's name, or "none"
  std::string source;              // "report" or "evaluations": where the lines come from
  std::string report_dir;          // where the run wrote its report ("" when none is recorded)
  std::vector<TaskGain> gains;     // per task, from the report only
  std::vector<SizeLine> lines;
};

// The run's summary; throws std::invalid_argument when the store has no such run.
RunSummary summarize_run(const store::Store& s, int64_t run);
// Only what concerns `task`.
RunSummary only_task(RunSummary r, const std::string& task);

// The output formats of `ksol show`: aligned plain-text tables, Markdown, CSV (one line per kernel
// and size, with a header) and JSON.
std::string summary_text(const RunSummary& r);
std::string summary_markdown(const RunSummary& r);
std::string summary_csv(const RunSummary& r);
nlohmann::json summary_json(const RunSummary& r);

// The command as `ksol runs` lists it: the binary's folder left out ("ksol optimize softmax_f32").
std::string short_command(const std::string& command);

// One CSV record, quoted as RFC 4180 says (fields with a comma, a quote or a line break in double
// quotes, a quote doubled), ended by "\n" rather than its "\r\n", as Unix tools expect; readers of
// the RFC (Python's csv, pandas, spreadsheets) take either.
std::string csv_record(const std::vector<std::string>& fields);

// Every evaluation of the run, one CSV record each (samples counted), and as JSON (samples
// included), with the task's name and the candidate's origin beside their ids.
std::string evaluations_csv(const store::Store& s, int64_t run);
nlohmann::json evaluations_json(const store::Store& s, int64_t run);

// Writes into `dir` (created; it must not exist or be empty: checked by the caller) the run's
// record: run.json, summary.md, summary.csv, evaluations.csv, evaluations.json, and its kernels
// and report: for an optimize run, the report's files (report.md, report.html, results.json,
// <task>/best.ksol, <task>/best.cu) copied from its report folder, or written again from the
// store where that folder is gone (best.cu then cannot be: a note says so); for another run, the
// source of each candidate that is not a baseline, as <task>/<file name>. Returns the files
// written, relative to `dir`; `notes` gets what could not be exported and why.
std::vector<std::string> export_run(const store::Store& s, int64_t run, const std::string& dir, std::vector<std::string>* notes);

}  // namespace ksol::report
