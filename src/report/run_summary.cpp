#include "report/run_summary.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "core/util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::report {
namespace {

std::string us_text(const std::optional<double>& v) { return v && *v > 0 ? fixed(*v, 2) + " us" : "-"; }
std::string x_text(const std::optional<double>& v) { return v && *v > 0 ? fixed(*v, 2) + "x" : "-"; }
std::string pct_text(const std::optional<double>& v) { return v && *v > 0 ? fixed(*v, 1) + "%" : "-"; }
// A number as JSON writes it (the shortest text that reads back the same), "" when absent.
std::string number(const std::optional<double>& v) { return v ? json(*v).dump() : ""; }
json or_null(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
std::optional<double> positive(double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; }

bool is_baseline(const store::CandidateRow& c) { return c.origin.rfind("baseline:", 0) == 0; }

// A candidate's name in a table: the file it came from, its baseline, or its origin and id.
std::string kernel_label(const store::CandidateRow& c) {
  if (c.origin.rfind("file:", 0) == 0) return fs::path(c.origin.substr(5)).filename().string();
  if (is_baseline(c)) return c.origin;
  return c.origin + "#" + std::to_string(c.id);
}

std::string gpu_name(const json& meta) {
  if (meta.is_object() && meta.contains("gpu") && meta["gpu"].is_object()) return meta["gpu"].value("name", "?");
  return "none";
}

// Tasks and candidates by id, each read from the store once.
class Names {
 public:
  explicit Names(const store::Store& s) : s_(s) {}
  const store::CandidateRow& candidate(int64_t id) {
    auto it = candidates_.find(id);
    if (it != candidates_.end()) return it->second;
    std::optional<store::CandidateRow> c = s_.find_candidate(id);
    if (!c) throw std::runtime_error("store: candidate " + std::to_string(id) + " is missing");
    return candidates_.emplace(id, *c).first->second;
  }
  const std::string& task(int64_t id) {
    auto it = tasks_.find(id);
    if (it != tasks_.end()) return it->second;
    std::optional<store::TaskRow> t = s_.task_by_id(id);
    if (!t) throw std::runtime_error("store: task " + std::to_string(id) + " is missing");
    return tasks_.emplace(id, t->name).first->second;
  }

 private:
  const store::Store& s_;
  std::map<int64_t, store::CandidateRow> candidates_;
  std::map<int64_t, std::string> tasks_;
};

// Every kernel at every size (its newest evaluation in the run), beside the fastest baseline there.
std::vector<SizeLine> lines_from_evaluations(const std::vector<store::EvaluationRow>& evs, Names& names) {
  using Key = std::tuple<int64_t, int64_t, std::string>;  // task, candidate, size
  std::vector<Key> order;
  std::map<Key, const store::EvaluationRow*> newest;
  std::map<int64_t, size_t> task_rank, candidate_rank;
  for (const store::EvaluationRow& e : evs) {
    Key k{e.task_id, e.candidate_id, e.size_name};
    if (!newest.count(k)) order.push_back(k);
    newest[k] = &e;
    task_rank.emplace(e.task_id, task_rank.size());
    candidate_rank.emplace(e.candidate_id, candidate_rank.size());
  }
  std::map<std::pair<int64_t, std::string>, double> best;
  for (const auto& [k, e] : newest)
    if (is_baseline(names.candidate(e->candidate_id)) && e->status == Status::ok && e->median_us.value_or(0) > 0) {
      double& b = best[{e->task_id, e->size_name}];
      if (b == 0 || *e->median_us < b) b = *e->median_us;
    }
  // By task, then kernel, in the order the run met them; sizes in the order they were evaluated.
  std::stable_sort(order.begin(), order.end(), [&](const Key& a, const Key& b) {
    return std::pair(task_rank[std::get<0>(a)], candidate_rank[std::get<1>(a)]) < std::pair(task_rank[std::get<0>(b)], candidate_rank[std::get<1>(b)]);
  });
  std::vector<SizeLine> out;
  for (const Key& k : order) {
    const store::EvaluationRow& e = *newest[k];
    SizeLine l;
    l.task = names.task(e.task_id);
    l.kernel = kernel_label(names.candidate(e.candidate_id));
    l.size = e.size_name;
    l.status = to_string(e.status);
    auto b = best.find({e.task_id, e.size_name});
    if (b != best.end()) l.best_baseline_us = b->second;
    if (e.status == Status::ok && e.median_us.value_or(0) > 0) {
      l.time_us = e.median_us;
      if (e.pct_sol) l.pct_sol = *e.pct_sol * 100;
      if (l.best_baseline_us) l.speedup = *l.best_baseline_us / *e.median_us;
    }
    out.push_back(l);
  }
  return out;
}

// The report's statements: per task the returned kernel at each size.
std::vector<SizeLine> lines_from_gains(const std::vector<TaskGain>& gains) {
  std::vector<SizeLine> out;
  for (const TaskGain& g : gains)
    for (const SizeGain& z : g.sizes) {
      SizeLine l;
      l.task = g.task;
      l.kernel = g.returned;
      l.size = z.size;
      // "baseline": the figures are the fastest baseline's, what the task returns at this size.
      l.status = z.returned ? "ok" : "baseline";
      l.time_us = positive(z.time_us);
      l.best_baseline_us = positive(z.best_baseline_us);
      l.pct_sol = positive(z.pct_sol);
      if (z.returned) l.speedup = positive(z.speedup);
      out.push_back(l);
    }
  return out;
}

// Rows of aligned columns, the first the header, a rule under it.
std::string columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < r.size(); ++i) s += (i ? "  " : "") + r[i] + std::string(w[i] - r[i].size(), ' ');
    o << s.substr(0, s.find_last_not_of(' ') + 1) << "\n";
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    line(rows[i]);
    if (i == 0) {
      std::vector<std::string> rule;
      for (size_t x : w) rule.push_back(std::string(x, '-'));
      line(rule);
    }
  }
  return o.str();
}

std::vector<std::string> gain_head() { return {"task", "returned", "vs best baseline", "%SOL", "hidden sizes"}; }
std::vector<std::string> gain_row(const TaskGain& g) {
  return {g.task, g.returned, x_text(positive(g.speedup)), pct_text(positive(g.pct_sol)), g.hidden};
}
std::vector<std::string> line_head() { return {"task", "kernel", "size", "status", "time", "best baseline", "speedup", "%SOL"}; }
std::vector<std::string> line_row(const SizeLine& l) {
  return {l.task, l.kernel, l.size, l.status, us_text(l.time_us), us_text(l.best_baseline_us), x_text(l.speedup), pct_text(l.pct_sol)};
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return o;
}

std::string md_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& r) {
    o << "|";
    for (const std::string& c : r) o << " " << md_cell(c) << " |";
    o << "\n";
  };
  line(head);
  o << "|";
  for (size_t i = 0; i < head.size(); ++i) o << " --- |";
  o << "\n";
  for (const auto& r : rows) line(r);
  return o.str();
}

json run_json(const store::RunRow& r) {
  return {{"id", r.id}, {"started_at", r.started_at}, {"finished_at", r.finished_at ? json(*r.finished_at) : json(nullptr)},
          {"command", r.command}, {"status", r.status}, {"meta", r.meta}};
}

// A name safe as one path component: a task or file name from the store never leaves `dir`.
std::string component(const std::string& name, const std::string& fallback) {
  std::string n = fs::path(name).filename().string();
  return n.empty() || n == "." || n == ".." ? fallback : n;
}

std::string extension_of(const std::string& language) {
  return language == "dsl" ? ".ksol" : language == "c_function" ? ".c" : ".cu";
}

}  // namespace

RunSummary summarize_run(const store::Store& s, int64_t run) {
  std::optional<store::RunRow> row = s.find_run(run);
  if (!row) throw std::invalid_argument("no run " + std::to_string(run));
  RunSummary r;
  r.run = *row;
  r.tasks = s.task_names_for_run(run);
  r.gpu = gpu_name(row->meta);
  if (std::optional<store::RunReport> rep = s.run_report(run)) {
    r.source = "report";
    r.report_dir = rep->report_dir;
    for (const json& item : rep->results.value("results", json::array())) r.gains.push_back(task_gain(item));
    r.lines = lines_from_gains(r.gains);
    // A task the report has and the run recorded no evaluation of (a resumed run reuses, and does
    // not record again, what the run it resumed measured).
    for (const TaskGain& g : r.gains)
      if (std::find(r.tasks.begin(), r.tasks.end(), g.task) == r.tasks.end()) r.tasks.push_back(g.task);
    return r;
  }
  r.source = "evaluations";
  Names names(s);
  r.lines = lines_from_evaluations(s.evaluations_for_run(run), names);
  return r;
}

RunSummary only_task(RunSummary r, const std::string& task) {
  std::erase_if(r.gains, [&](const TaskGain& g) { return g.task != task; });
  std::erase_if(r.lines, [&](const SizeLine& l) { return l.task != task; });
  r.tasks = {task};
  return r;
}

std::string short_command(const std::string& command) {
  if (command.empty()) return command;
  // The binary is the first word, single-quoted by shell_quote where it holds a space or the like.
  size_t end = command.front() == '\'' ? command.find('\'', 1) : command.find(' ');
  if (end != std::string::npos && command.front() == '\'') ++end;
  std::string first = command.substr(0, end);
  if (first.size() >= 2 && first.front() == '\'' && first.back() == '\'') first = first.substr(1, first.size() - 2);
  std::string name = fs::path(first).filename().string();
  return (name.empty() ? first : name) + (end == std::string::npos ? "" : command.substr(end));
}

std::string summary_text(const RunSummary& r) {
  std::ostringstream o;
  o << "run " << r.run.id << " (" << r.run.status << "): " << short_command(r.run.command) << "\n";
  o << "started " << r.run.started_at << (r.run.finished_at ? ", finished " + *r.run.finished_at : "") << "; GPU: " << r.gpu << "\n";
  if (!r.report_dir.empty()) o << "report: " << r.report_dir << "\n";
  if (!r.gains.empty()) {
    std::vector<std::vector<std::string>> rows = {gain_head()};
    for (const TaskGain& g : r.gains) rows.push_back(gain_row(g));
    o << "\n" << columns(rows);
  }
  if (r.lines.empty()) {
    o << "\nno results" << (r.tasks.empty() ? ": the run evaluated nothing" : "") << "\n";
    return o.str();
  }
  std::vector<std::vector<std::string>> rows = {line_head()};
  for (const SizeLine& l : r.lines) rows.push_back(line_row(l));
  o << "\n" << columns(rows);
  if (r.source == "report")
    o << "\nAs the run's report states it: the returned kernel at each size; speedup: the fastest baseline over it\n"
         "(status 'baseline': the task returns its fastest baseline there). vs best baseline and %SOL per task: the\n"
         "search's weighted geometric mean over the sizes.\n";
  else
    o << "\nspeedup: the fastest baseline of this run at that size over the kernel.\n";
  return o.str();
}

std::string summary_markdown(const RunSummary& r) {
  std::ostringstream o;
  o << "# ksol run " << r.run.id << "\n\n`" << short_command(r.run.command) << "`\n\n";
  o << "Status: " << r.run.status << "; started " << r.run.started_at << (r.run.finished_at ? ", finished " + *r.run.finished_at : "")
    << "; GPU: " << r.gpu << ".";
  if (!r.report_dir.empty()) o << " Report: " << r.report_dir << ".";
  o << "\n";
  if (!r.gains.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const TaskGain& g : r.gains) rows.push_back(gain_row(g));
    o << "\n## What the run returned\n\n" << md_table(gain_head(), rows);
  }
  std::vector<std::vector<std::string>> rows;
  for (const SizeLine& l : r.lines) rows.push_back(line_row(l));
  o << "\n## Per size\n\n" << (rows.empty() ? std::string("No results.\n") : md_table(line_head(), rows));
  return o.str();
}

std::string csv_record(const std::vector<std::string>& fields) {
  std::string o;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (i) o += ',';
    if (f.find_first_of(",\"\r\n") == std::string::npos) {
      o += f;
      continue;
    }
    o += '"';
    for (char c : f) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    o += '"';
  }
  return o + "\n";
}

std::string summary_csv(const RunSummary& r) {
  std::string o = csv_record({"run", "task", "kernel", "size", "status", "time_us", "best_baseline_us", "speedup", "pct_sol"});
  for (const SizeLine& l : r.lines)
    o += csv_record({std::to_string(r.run.id), l.task, l.kernel, l.size, l.status, number(l.time_us), number(l.best_baseline_us), number(l.speedup),
                     number(l.pct_sol)});
  return o;
}

json summary_json(const RunSummary& r) {
  json gains = json::array();
  for (const TaskGain& g : r.gains) {
    json sizes = json::array();
    for (const SizeGain& z : g.sizes)
      sizes.push_back({{"size", z.size}, {"returned", z.returned}, {"time_us", z.time_us}, {"best_baseline_us", z.best_baseline_us},
                       {"speedup", z.returned ? json(z.speedup) : json(nullptr)}, {"pct_sol", z.pct_sol}});
    gains.push_back({{"task", g.task}, {"returned", g.returned}, {"speedup_vs_best_baseline", g.speedup}, {"pct_sol", g.pct_sol},
                     {"hidden", g.hidden}, {"sizes", sizes}});
  }
  json lines = json::array();
  for (const SizeLine& l : r.lines)
    lines.push_back({{"task", l.task}, {"kernel", l.kernel}, {"size", l.size}, {"status", l.status}, {"time_us", or_null(l.time_us)},
                     {"best_baseline_us", or_null(l.best_baseline_us)}, {"speedup", or_null(l.speedup)}, {"pct_sol", or_null(l.pct_sol)}});
  return {{"run", run_json(r.run)}, {"tasks", r.tasks}, {"gpu", r.gpu}, {"source", r.source},
          {"report_dir", r.report_dir.empty() ? json(nullptr) : json(r.report_dir)}, {"returned", gains}, {"sizes", lines}};
}

std::string evaluations_csv(const store::Store& s, int64_t run) {
  Names names(s);
  std::string o = csv_record({"run", "evaluation", "task", "candidate", "origin", "size", "status", "failed_gate", "error_class", "median_us",
                              "ci_low_us", "ci_high_us", "sol_us", "pct_sol", "clock_mhz", "throttled", "worker_restarts", "samples", "created_at",
                              "message"});
  for (const store::EvaluationRow& e : s.evaluations_for_run(run)) {
    std::optional<double> pct = e.pct_sol ? std::optional<double>(*e.pct_sol * 100) : std::nullopt;
    o += csv_record({std::to_string(run), std::to_string(e.id), names.task(e.task_id), std::to_string(e.candidate_id),
                     names.candidate(e.candidate_id).origin, e.size_name, to_string(e.status), to_string(e.failed_gate), e.error_class.value_or(""),
                     number(e.median_us), number(e.ci_low_us), number(e.ci_high_us), number(e.sol_us), number(pct), number(e.clock_mhz),
                     e.throttled ? "1" : "0", std::to_string(e.worker_restarts), std::to_string(e.samples.size()), e.created_at,
                     e.message.value_or("")});
  }
  return o;
}

json evaluations_json(const store::Store& s, int64_t run) {
  Names names(s);
  json out = json::array();
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  for (const store::EvaluationRow& e : s.evaluations_for_run(run)) {
    std::optional<double> pct = e.pct_sol ? std::optional<double>(*e.pct_sol * 100) : std::nullopt;
    out.push_back({{"evaluation", e.id}, {"task", names.task(e.task_id)}, {"candidate", e.candidate_id},
                   {"origin", names.candidate(e.candidate_id).origin}, {"size", e.size_name}, {"status", to_string(e.status)},
                   {"failed_gate", e.failed_gate == Gate::none ? json(nullptr) : json(to_string(e.failed_gate))}, {"error_class", opt(e.error_class)}, {"message", opt(e.message)}, {"gates", e.gates},
                   {"median_us", opt(e.median_us)}, {"ci_low_us", opt(e.ci_low_us)}, {"ci_high_us", opt(e.ci_high_us)}, {"sol_us", opt(e.sol_us)},
                   {"pct_sol", opt(pct)}, {"clock_mhz", opt(e.clock_mhz)}, {"throttled", e.throttled}, {"worker_restarts", e.worker_restarts},
                   {"seeds", e.seeds}, {"rerun", e.rerun}, {"created_at", e.created_at}, {"samples_us", e.samples}});
  }
  return out;
}

std::vector<std::string> export_run(const store::Store& s, int64_t run, const std::string& dir, std::vector<std::string>* notes) {
  RunSummary sum = summarize_run(s, run);
  fs::create_directories(dir);
  std::vector<std::string> written;
  auto write = [&](const std::string& rel, const std::string& text) {
    write_file_atomic((fs::path(dir) / rel).string(), text);
    written.push_back(rel);
  };
  write("run.json", json{{"run", run_json(sum.run)}, {"tasks", sum.tasks}, {"store", fs::absolute(s.path()).string()},
                         {"exported_by", std::string("ksol ") + KSOL_VERSION}}
                        .dump(2) + "\n");
  write("summary.md", summary_markdown(sum));
  write("summary.csv", summary_csv(sum));
  write("evaluations.csv", evaluations_csv(s, run));
  write("evaluations.json", evaluations_json(s, run).dump(1) + "\n");

  if (std::optional<store::RunReport> rep = s.run_report(run)) {
    // The report folder's own files where it still has them; else written again from the
    // store's copy of the results document (report.md and report.html by this build).
    const fs::path from(rep->report_dir);
    auto copy_or = [&](const std::string& rel, const std::function<std::optional<std::string>()>& again, const std::string& why_not) {
      std::error_code ec;
      fs::path src = from / rel;
      if (fs::is_regular_file(fs::symlink_status(src, ec))) {
        fs::create_directories((fs::path(dir) / rel).parent_path());
        fs::copy_file(src, fs::path(dir) / rel, fs::copy_options::overwrite_existing);
        written.push_back(rel);
        return;
      }
      if (std::optional<std::string> text = again()) {
        write(rel, *text);
        notes->push_back(rel + ": written again from the store (" + src.string() + " is gone)");
      } else {
        notes->push_back(rel + ": not exported: " + src.string() + " is gone" + why_not);
      }
    };
    const json& doc = rep->results;
    copy_or("results.json", [&] { return std::optional<std::string>(doc.dump(2)); }, "");
    copy_or("report.md", [&] { return std::optional<std::string>(optimize_markdown(doc)); }, "");
    copy_or("report.html", [&] { return std::optional<std::string>(optimize_html(doc)); }, "");
    for (const json& item : doc.value("results", json::array())) {
      if (item.value("use_baseline", false) || !item.contains("best") || !item["best"].is_object()) continue;
      const std::string task = component(item.value("task", ""), "task");
      const json& best = item["best"];
      copy_or(task + "/best.ksol", [&] { return best.contains("program") ? std::optional<std::string>(best.value("program", "")) : std::nullopt; }, "");
      copy_or(task + "/best.cu", [] { return std::nullopt; },
              " (the store keeps the DSL program; 'ksol dsl cuda " + task + "/best.ksol --task " + task + "' prints its CUDA)");
    }
    return written;
  }
  if (sum.run.meta.is_object() && sum.run.meta.contains("optimize")) {
    notes->push_back("no kernels: the run ended before its report (--resume " + std::to_string(run) + " goes on with it)");
    return written;
  }
  // Every candidate that is not a baseline, as the store keeps its source (what the user wrote).
  Names names(s);
  std::set<int64_t> seen;
  std::set<std::string> taken;
  for (const store::EvaluationRow& e : s.evaluations_for_run(run)) {
    if (!seen.insert(e.candidate_id).second) continue;
    const store::CandidateRow& c = names.candidate(e.candidate_id);
    if (is_baseline(c)) continue;
    std::string file = c.origin.rfind("file:", 0) == 0 ? component(c.origin.substr(5), "") : "";
    if (file.empty()) file = "candidate-" + std::to_string(c.id) + extension_of(c.language);
    std::string rel = component(names.task(e.task_id), "task") + "/" + file;
    if (!taken.insert(rel).second) rel = component(names.task(e.task_id), "task") + "/" + std::to_string(c.id) + "-" + file;
    taken.insert(rel);
    write(rel, c.source);
  }
  return written;
}

}  // namespace ksol::report
