// ksol runs, ksol show, ksol export: the store read as the user's record of what ran. They only
// read it (store::Store::open_read_only): the store is never created, migrated or written, and a
// missing one is an error (exit status 1) that says where it was looked for.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/util.h"
#include "report/run_summary.h"
#include "store/store.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {
namespace {

store::Store open_store(const std::string& path) {
  if (path.empty()) throw std::runtime_error("no store: --store is empty");
  if (!fs::exists(path)) throw std::runtime_error("no store at " + path + " (ksol eval, bench and optimize create it; --store names another)");
  return store::Store::open_read_only(path);
}

// RUN: a run id, or "last" for the newest run.
CLI::Validator run_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string copy = s;
        if (s == "last" || positive_integer()(copy).empty()) return "";
        return "expected a run id (a positive integer) or 'last', got '" + s + "'";
      },
      "ID|last");
}

int64_t resolve_run(const store::Store& s, const std::string& spec, const std::string& store_path) {
  if (spec == "last") {
    std::vector<store::RunRow> runs = s.runs();
    if (runs.empty()) throw std::runtime_error("no runs in " + store_path);
    return runs.front().id;
  }
  int64_t id = std::stoll(spec);
  if (!s.find_run(id)) throw UsageError("run " + spec + ": no such run in " + store_path + " ('ksol runs' lists them)");
  return id;
}

// "a, b, c and 4 more"
std::string some_of(const std::vector<std::string>& names, size_t shown) {
  if (names.empty()) return "-";
  if (names.size() <= shown + 1) return join(names, ", ");
  return join(std::vector<std::string>(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown)), ", ") + " and " +
         std::to_string(names.size() - shown) + " more";
}

std::string clipped(const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n - 3) + "..." : s; }

int cmd_runs(const std::string& store_path, bool json_out) {
  store::Store s = open_store(store_path);
  std::vector<store::RunRow> runs = s.runs();
  if (json_out) {
    json rows = json::array();
    for (const store::RunRow& r : runs)
      rows.push_back({{"run", r.id}, {"started_at", r.started_at}, {"finished_at", r.finished_at ? json(*r.finished_at) : json(nullptr)},
                      {"status", r.status}, {"command", r.command}, {"tasks", s.task_names_for_run(r.id)}});
    std::cout << json{{"store", store_path}, {"runs", rows}}.dump(2) << "\n";
    return exit_status::ok;
  }
  if (runs.empty()) {
    std::cout << "no runs in " << store_path << "\n";
    return exit_status::ok;
  }
  std::vector<std::vector<std::string>> rows = {{"run", "started (UTC)", "status", "tasks", "command"}};
  for (const store::RunRow& r : runs)
    rows.push_back({std::to_string(r.id), r.started_at, r.status, some_of(s.task_names_for_run(r.id), 3),
                    clipped(report::short_command(r.command), 72)});
  std::cout << "store: " << store_path << "\n";
  print_columns(std::cout, rows);
  return exit_status::ok;
}

struct ShowArgs {
  std::string run, task;
  bool csv = false, md = false;
};

int cmd_show(const std::string& store_path, const ShowArgs& a, bool json_out) {
  if (json_out && (a.csv || a.md)) throw UsageError(std::string(a.csv ? "--csv" : "--md") + " excludes --json");
  store::Store s = open_store(store_path);
  const int64_t run = resolve_run(s, a.run, store_path);
  report::RunSummary r = report::summarize_run(s, run);
  if (!a.task.empty()) {
    if (std::find(r.tasks.begin(), r.tasks.end(), a.task) == r.tasks.end()) {
      std::string near = did_you_mean(a.task, r.tasks);
      throw UsageError("--task '" + a.task + "': run " + std::to_string(run) + " has no such task" +
                       (!near.empty() ? near : r.tasks.empty() ? " (it has none)" : " (its tasks: " + join(r.tasks, ", ") + ")"));
    }
    r = report::only_task(std::move(r), a.task);
  }
  if (json_out) std::cout << report::summary_json(r).dump(2) << "\n";
  else if (a.csv) std::cout << report::summary_csv(r);
  else if (a.md) std::cout << report::summary_markdown(r);
  else std::cout << report::summary_text(r);
  return exit_status::ok;
}

int cmd_export(const std::string& store_path, const std::string& run_spec, const std::string& dir, bool json_out) {
  // The store first: a missing store or run leaves no folder behind.
  store::Store s = open_store(store_path);
  const int64_t run = resolve_run(s, run_spec, store_path);
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw UsageError("'" + dir + "' exists and is not an empty folder: name a new one, so that nothing is overwritten");
  std::vector<std::string> notes;
  std::vector<std::string> files = report::export_run(s, run, dir, &notes);
  for (const std::string& n : notes) std::cerr << "ksol export: " << n << "\n";
  if (json_out) {
    std::cout << json{{"run", run}, {"dir", fs::absolute(dir).lexically_normal().string()}, {"files", files}, {"notes", notes}}.dump(2) << "\n";
    return exit_status::ok;
  }
  std::cout << "run " << run << " exported to " << dir << ":\n";
  for (const std::string& f : files) std::cout << "  " << f << "\n";
  return exit_status::ok;
}

}  // namespace

void add_run_commands(CLI::App& app, const std::string& store, const bool& json_out) {
  auto* runs = app.add_subcommand("runs", "list the runs in the store: id, when, status, tasks, command (reads the store, never creates it)");
  runs->callback([&store, &json_out] { finish_command("runs", [&] { return cmd_runs(store, json_out); }); });

  auto a = std::make_shared<ShowArgs>();
  auto* show = app.add_subcommand("show", "a run's results per task and size: the returned kernel, its speedup over the fastest baseline and "
                                          "%SOL, as the run's report states them (other runs: every kernel from the store's rows); a table, "
                                          "or --csv, --md, --json (reads the store, never creates it)");
  show->add_option("run", a->run, "the run's id (ksol runs lists them), or 'last'")->required()->check(run_check());
  show->add_option("--task", a->task, "only this task");
  auto* csv = show->add_flag("--csv", a->csv, "print CSV (one line per kernel and size)");
  auto* md = show->add_flag("--md", a->md, "print Markdown");
  csv->excludes(md);
  show->callback([a, &store, &json_out] { finish_command("show", [&] { return cmd_show(store, *a, json_out); }); });

  auto dest = std::make_shared<std::pair<std::string, std::string>>();
  auto* exp = app.add_subcommand("export", "write a run's record into a new folder: its report and returned kernels (best.ksol, best.cu), "
                                           "or its candidates' sources, summary.md/.csv, and every evaluation as CSV and JSON (reads the store, never "
                                           "creates it)");
  exp->add_option("run", dest->first, "the run's id (ksol runs lists them), or 'last'")->required()->check(run_check());
  exp->add_option("dir", dest->second, "the folder to write (created; an existing one must be empty)")->required();
  exp->callback([dest, &store, &json_out] { finish_command("export", [&] { return cmd_export(store, dest->first, dest->second, json_out); }); });
}

}  // namespace ksol::cli
