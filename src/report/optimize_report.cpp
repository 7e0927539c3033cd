#include "report/optimize_report.h"

#include "core/util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace ksol::report {

using nlohmann::json;

namespace {

std::string num(double v, int prec = 2) { return fixed(v, prec); }

// Seconds at three significant figures ("0.000412 s" for a scripted run, "41.2 s" for a real one).
std::string secs(double t) { return sig(t, 3) + " s"; }

// "c<i>", a candidate's label (built by append: GCC 12 warns falsely on "c" + std::string).
std::string clabel(int i) { return std::string("c").append(std::to_string(i)); }

double getd(const json& j, const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }
std::string gets(const json& j, const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; }

// Best-so-far speedup over the first verified program (the seed, c0, unless it failed) at each
// new best.
struct Point {
  double t, speedup;
};
std::vector<Point> best_so_far(const json& r) {
  std::vector<Point> pts;
  double seed = 0, best = 0;
  for (auto& a : r.value("trajectory", json::array())) {
    double s = getd(a, "score_us");
    if (gets(a, "status") != "ok" || s <= 0) continue;
    if (seed == 0) seed = s;
    if (best == 0 || s < best) {
      best = s;
      pts.push_back({getd(a, "at_seconds"), seed / best});
    }
  }
  return pts;
}

std::string svg_open(int w, int h, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
         "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) + "\" role=\"img\"><title>" + html_escape(title) +
         "</title><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>";
}

// One task's best-so-far over time (a step line) with failed candidates as red crosses.
std::string svg_progress(const json& r) {
  const int W = 560, H = 220, L = 50, R = 18, T = 24, B = 34;
  std::vector<Point> pts = best_so_far(r);
  double tmax = 1e-9, ymax = 1.0;
  for (auto& a : r.value("trajectory", json::array())) tmax = std::max(tmax, getd(a, "at_seconds"));
  for (auto& p : pts) ymax = std::max(ymax, p.speedup);
  ymax *= 1.1;
  auto X = [&](double t) { return L + (W - L - R) * t / tmax; };
  auto Y = [&](double y) { return H - B - (H - T - B) * y / ymax; };
  std::ostringstream o;
  o << svg_open(W, H, gets(r, "task") + ": best speedup over the first verified program, over time");
  o << "<text x=\"" << L << "\" y=\"16\" font-size=\"12\" font-family=\"sans-serif\">" << html_escape(gets(r, "task"))
    << ": best so far (times the first verified program) over time; red: failed</text>";
  o << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"#333\"/>";
  o << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" stroke=\"#333\"/>";
  for (int k = 0; k <= 4; ++k) {
    double y = ymax * k / 4;
    o << "<text x=\"" << L - 4 << "\" y=\"" << num(Y(y), 1) << "\" font-size=\"10\" text-anchor=\"end\" font-family=\"sans-serif\">"
      << num(y, 2) << "</text>";
    double t = tmax * k / 4;
    o << "<text x=\"" << num(X(t), 1) << "\" y=\"" << H - B + 14 << "\" font-size=\"10\" text-anchor=\"middle\" font-family=\"sans-serif\">"
      << secs(t) << "</text>";
  }
  if (!pts.empty()) {
    std::ostringstream path;
    path << "M" << num(X(pts[0].t), 1) << "," << num(Y(pts[0].speedup), 1);
    for (size_t i = 1; i < pts.size(); ++i)
      path << " H" << num(X(pts[i].t), 1) << " V" << num(Y(pts[i].speedup), 1);
    path << " H" << num(X(tmax), 1);
    o << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>";
    for (auto& p : pts) o << "<circle cx=\"" << num(X(p.t), 1) << "\" cy=\"" << num(Y(p.speedup), 1) << "\" r=\"3\" fill=\"#1f77b4\"/>";
  }
  for (auto& a : r.value("trajectory", json::array()))
    if (gets(a, "status") != "ok" && gets(a, "status") != "screened") {
      double x = X(getd(a, "at_seconds")), y = Y(0) - 6;
      o << "<path d=\"M" << num(x - 4, 1) << "," << num(y - 4, 1) << " l8,8 m0,-8 l-8,8\" stroke=\"#d62728\" stroke-width=\"1.5\"><title>"
        << html_escape(clabel(a.value("index", 0)) + " " + gets(a, "method") + ": " + failure_class(a)) << "</title></path>";
    }
  o << "</svg>";
  return o.str();
}

// %SOL before and after, one pair of bars per task.
std::string svg_sol(const json& results) {
  const int row = 26, L = 170, W = 560, T = 28;
  int H = T + row * static_cast<int>(results.size()) + 20;
  double xmax = 100;
  for (auto& r : results) xmax = std::max({xmax, getd(r, "pct_sol_before"), getd(r, "pct_sol_after")});
  auto X = [&](double v) { return (W - L - 60) * v / xmax; };
  std::ostringstream o;
  o << svg_open(W, H, "%SOL per task before and after");
  o << "<text x=\"4\" y=\"16\" font-size=\"12\" font-family=\"sans-serif\">%SOL per task: grey before (best baseline or seed), blue after</text>";
  int i = 0;
  for (auto& r : results) {
    int y = T + row * i++;
    double b = getd(r, "pct_sol_before"), a = getd(r, "pct_sol_after");
    o << "<text x=\"" << L - 6 << "\" y=\"" << y + 14 << "\" font-size=\"11\" text-anchor=\"end\" font-family=\"sans-serif\">"
      << html_escape(gets(r, "task")) << "</text>";
    o << "<rect x=\"" << L << "\" y=\"" << y + 2 << "\" width=\"" << num(X(b), 1) << "\" height=\"9\" fill=\"#bbb\"/>";
    o << "<rect x=\"" << L << "\" y=\"" << y + 12 << "\" width=\"" << num(X(a), 1) << "\" height=\"9\" fill=\"#1f77b4\"/>";
    o << "<text x=\"" << L + X(std::max(a, b)) + 4 << "\" y=\"" << y + 19 << "\" font-size=\"10\" font-family=\"sans-serif\">"
      << num(b, 1) << "% to " << num(a, 1) << "%</text>";
  }
  o << "</svg>";
  return o.str();
}

// Text for a Markdown table cell: no pipes or line breaks.
std::string cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else o += c == '\n' ? ' ' : c;
  }
  return o;
}

std::map<std::string, int> failures_of(const json& r) {
  std::map<std::string, int> m;
  for (auto& a : r.value("trajectory", json::array()))
    if (std::string c = failure_class(a); !c.empty()) ++m[c];
  return m;
}

const json& array_at(const json& j, const char* k) {
  static const json none = json::array();
  return j.contains(k) && j[k].is_array() ? j[k] : none;
}

bool emulated(const json& doc) { return doc.contains("emulated") && doc["emulated"] == true; }

// A PyTorch module's precision mode (ksol optimize FILE.py --precision), or "" for built-in tasks,
// whose precision is their task's: "Precision: default (tf32: TF32 allowed for cuDNN convolutions)...".
// A run that ended waiting on an LLM batch (batch mode): what it wrote and how it goes on.
std::string batch_sentence(const json& doc) {
  if (!doc.contains("llm") || !doc["llm"].is_object() || !doc["llm"].contains("batch") || !doc["llm"]["batch"].is_object()) return "";
  const json& b = doc["llm"]["batch"];
  return "Waiting on LLM batch " + std::to_string(b.value("batch", 0)) + ": " + std::to_string(b.value("requests", 0)) +
         " request(s) in " + b.value("requests_file", std::string("?")) + ". Once the provider's results are saved as " +
         b.value("results_file", std::string("?")) + ", `" + b.value("resume", std::string("?")) + "` goes on from here.";
}

std::string precision_sentence(const json& doc) {
  if (!doc.contains("precision") || !doc["precision"].is_object()) return "";
  const json& p = doc["precision"];
  std::string s = "Precision: " + p.value("mode", std::string("?"));
  if (p.contains("arithmetic")) s += " (" + p.value("arithmetic", std::string()) + ": " + p.value("why", std::string()) + ")";
  return s + "; eager, torch.compile and every candidate ran under it, and the bound allowed its arithmetic.";
}

// A stitched module (ksol optimize FILE.py whose forward is not one DSL program): its DSL pieces
// around the ops kept as PyTorch calls, each searched in turn with the module evaluated whole.
bool stitched(const json& r) { return r.contains("stitched") && r["stitched"].is_object(); }

std::string stitched_summary(const json& r) {
  const json& st = r["stitched"];
  size_t kept = 0;
  for (auto& p : array_at(r, "pieces")) kept += p.is_object() && p.value("keep", false) ? 1 : 0;
  const bool vendor = gets(r, "plan") == "vendor";
  std::string s = "Stitched from " + std::to_string(array_at(r, "pieces").size() - kept) + " DSL piece(s) around the ops kept as PyTorch calls" +
                  (vendor ? " (the vendor-call plan: every convolution and GEMM is cuDNN's or cuBLAS's call)" : std::string()) +
                  (kept ? " (" + std::to_string(kept) + " more piece(s) left as PyTorch's calls: see the pieces)" : std::string()) +
                  ": " + (gets(st, "status").empty() ? std::string("?") : gets(st, "status"));
  if (gets(st, "status") == "ok")
    s += "; the module " + num(getd(st, "seeds_median_us")) + " us with its pieces at their seed schedules, " + num(getd(st, "median_us")) +
         " us at the end (median).";
  else
    s += ": " + gets(st, "message") + (getd(st, "seeds_median_us") > 0 ? " (at the seed schedules: " + num(getd(st, "seeds_median_us")) + " us)" : "") + ".";
  if (vendor && r.contains("own_plan") && r["own_plan"].is_object())
    s += " The module's own plan (convolutions and GEMMs as ksol's kernels) answered " + num(getd(r["own_plan"], "answer_us")) + " us.";
  return s;
}

// The vendor-call plan where it was tried and not returned ("vendor_plan"): its stitched module's
// time and why it lost; "" where it was not tried.
std::string vendor_plan_line(const json& r) {
  if (!r.contains("vendor_plan") || !r["vendor_plan"].is_object()) return "";
  const json& v = r["vendor_plan"];
  return "the vendor-call plan (convolutions and GEMMs cuDNN's and cuBLAS's, the ops around them " +
         std::to_string(array_at(v, "pieces").size()) + " DSL piece(s)): " +
         (gets(v, "status") == "ok" ? num(getd(v, "median_us")) + " us, " : std::string()) + gets(v, "reason");
}

// The kernels one call launches (a module's results: "kernels", counted on a GPU): "ksol 1,
// torch.compile 3, eager 5", ksol's verified version first (said to be not returned where a
// baseline is); "" when none was counted.
std::string kernels_line(const json& r) {
  if (!r.contains("kernels") || !r["kernels"].is_object() || r["kernels"].empty()) return "";
  const json& k = r["kernels"];
  const std::string ksol = r.value("use_baseline", false) ? "ksol's best verified (not returned)" : "ksol";
  std::vector<std::string> v;
  for (auto [key, name] : std::vector<std::pair<std::string, std::string>>{
           {"ksol", ksol}, {"compile", "torch.compile"}, {"compile_max_autotune", "torch.compile max-autotune"}, {"eager", "eager"}})
    if (k.contains(key) && k[key].is_number_integer()) v.push_back(name + " " + std::to_string(k[key].get<int>()));
  return join(v, ", ");
}

// The baselines' times, "compile 12.00 us, eager 10.00 us", or "" when none is recorded. A
// search's baselines per size: "cublas: small 5.10 us, large 300.00 us; naive: small 40.00 us,
// large far slower than cublas (one call: ...): not verified or timed in full".
std::string baselines_line(const json& r) {
  if (r.contains("baseline_sizes") && r["baseline_sizes"].is_object() && !r["baseline_sizes"].empty()) {
    std::vector<std::string> per;
    for (auto& [name, rows] : r["baseline_sizes"].items()) {
      if (!rows.is_array()) continue;
      std::vector<std::string> v;
      for (auto& z : rows) {
        const std::string st = gets(z, "status"), msg = gets(z, "message");
        v.push_back(gets(z, "size") + " " + (st == "ok" ? num(getd(z, "median_us")) + " us" : msg.empty() ? st : st == "far_slower" ? msg : st + ": " + msg));
      }
      per.push_back(name + ": " + join(v, ", "));
    }
    return join(per, "; ");
  }
  if (!r.contains("baseline_us") || !r["baseline_us"].is_object()) return "";
  std::vector<std::string> v;
  for (auto& [name, us] : r["baseline_us"].items())
    v.push_back(name + " " + (us.is_number() && us.get<double>() > 0 ? num(us.get<double>()) + " us" : std::string("not timed")));
  return join(v, ", ");
}

// One row per piece: its id, family, nodes, kernel, and its search (candidates, stop, the
// module's time with the faster schedule found, or "-" when none was).
struct PieceRow {
  std::string piece, family, nodes, kernel, candidates, stop, module_us, program;
};
std::vector<PieceRow> piece_rows(const json& r) {
  std::vector<PieceRow> rows;
  const json& ps = array_at(r, "pieces");
  for (size_t i = 0; i < ps.size(); ++i) {
    std::vector<std::string> nodes;
    for (auto& n : array_at(ps[i], "nodes"))
      if (n.is_string()) nodes.push_back(n.get<std::string>());
    const bool keep = ps[i].is_object() && ps[i].value("keep", false);
    // A kept piece: PyTorch's calls, and why (not built, or failing a gate at its seed; else
    // they were the faster candidate).
    const std::string why = gets(ps[i], "why");
    const std::string kernel = !keep ? gets(ps[i], "kernel")
                               : why.empty() ? std::string("PyTorch's calls (faster)")
                                             : "PyTorch's calls (" + (why.size() > 160 ? why.substr(0, 160) + "..." : why) + ")";
    rows.push_back({std::to_string(i), gets(ps[i], "family"), join(nodes, ", "), kernel, "-", "not searched", "-", keep ? std::string() : gets(ps[i], "program")});
  }
  for (auto& rec : array_at(r, "piece_search")) {
    int i = rec.contains("piece") && rec["piece"].is_number_integer() ? rec["piece"].get<int>() : -1;
    if (i < 0 || i >= static_cast<int>(rows.size())) continue;
    rows[i].candidates = std::to_string(rec.value("candidates", 0));
    rows[i].stop = gets(rec, "stop_reason");
    if (rec.contains("best") && rec["best"].is_object()) rows[i].module_us = num(getd(rec["best"], "module_us"));
    if (rec.value("kept_as_pytorch", false) && rec.contains("pytorch")) rows[i].module_us = num(getd(rec["pytorch"], "module_us"));
  }
  return rows;
}

// The per-size cells of "What you get": "large 62.6 us 1.41x 89.3% SOL" for the returned kernel,
// "large 70.0 us (80.0% SOL)" for the fastest baseline where the baseline is what was returned.
std::string sizes_cell(const TaskGain& g) {
  std::vector<std::string> cells;
  for (const SizeGain& z : g.sizes)
    cells.push_back(z.returned ? z.size + " " + num(z.time_us) + " us " + num(z.speedup) + "x " + num(z.pct_sol, 1) + "% SOL"
                               : z.size + " " + num(z.time_us) + " us (" + num(z.pct_sol, 1) + "% SOL)");
  return join(cells, "; ");
}

// The search's own figures: how much it tried, how fast, and where the task's seconds went.
std::string breakdown_text(const json& r) {
  if (!r.contains("breakdown_seconds") || !r["breakdown_seconds"].is_object()) return "-";
  std::vector<std::string> v;
  for (const char* k : {"baselines", "seed", "build", "screen", "verify", "profile", "propose", "grade_hidden"}) {
    double x = getd(r["breakdown_seconds"], k);
    if (x > 0) v.push_back(std::string(k) + " " + num(x, 1));
  }
  return v.empty() ? "-" : join(v, ", ");
}

// "Baselines: ... an earlier run's ...": a module run that reused eager's and torch.compile's
// times (results.json's "baselines_reused"); "" when they were timed in this run.
std::string baselines_reused_sentence(const json& doc) {
  if (!doc.contains("baselines_reused") || !doc["baselines_reused"].is_object()) return "";
  return "Baselines: eager's and torch.compile's times are an earlier run's, timed at " + doc["baselines_reused"].value("at", std::string("?")) +
         " on the same GPU model, problem file, precision mode, PyTorch and worker code (ksol optimize --fresh-baselines times them again).";
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string failure_class(const json& a) {
  if (gets(a, "status") == "ok" || gets(a, "status") == "screened") return "";
  std::string e = gets(a, "error");
  if (e.empty()) return gets(a, "status").empty() ? "failed" : gets(a, "status");
  // "correctness/wrong_result at medium: ..." -> "correctness/wrong_result"
  size_t cut = e.find_first_of(" :\n");
  return e.substr(0, std::min<size_t>(cut, 60));
}

TaskGain task_gain(const json& r) {
  TaskGain g;
  g.task = gets(r, "task");
  const bool base = r.value("use_baseline", false);
  g.returned = base ? "baseline " + gets(r, "best_baseline")
               : r.contains("best") ? gets(r["best"], "kernel") + (gets(r["best"], "language").empty() ? "" : " (" + gets(r["best"], "language") + ")")
               : stitched(r)        ? "stitched, " + std::to_string(array_at(r, "pieces").size()) + " piece(s)"
                                    : "-";
  g.speedup = getd(r, "speedup_vs_best_baseline");
  g.pct_sol = getd(r, "pct_sol_after");
  for (auto& z : array_at(r, "sizes")) {
    SizeGain s;
    s.size = gets(z, "size");
    s.best_baseline_us = getd(z, "best_baseline_us");
    s.returned = !base && z.contains("returned_us");
    s.time_us = s.returned ? getd(z, "returned_us") : s.best_baseline_us;
    s.pct_sol = s.returned ? getd(z, "returned_pct_sol") : getd(z, "best_baseline_pct_sol");
    s.speedup = s.returned ? getd(z, "speedup") : 0;
    g.sizes.push_back(s);
  }
  // The grade on the hidden sizes, in a few words: the speedup there, a failure, or why none.
  g.hidden = "-";
  if (r.contains("hidden") && r["hidden"].is_object()) {
    const json& h = r["hidden"];
    if (gets(h, "status") == "ok" && getd(h, "speedup_vs_best_baseline") > 0) g.hidden = num(getd(h, "speedup_vs_best_baseline")) + "x vs best baseline";
    else if (gets(h, "status") == "failed") g.hidden = "failed: baseline returned";
    else if (!gets(h, "note").empty()) g.hidden = gets(h, "note");
  }
  return g;
}

// What the LLM cost, per task and for the requests behind each task's returned kernel: rows
// only for the tasks an LLM worked on. Dollars only where the run was given prices.
struct LlmRow {
  std::string task, requests, tokens_in, tokens_out, dollars, best_tokens, best_dollars;
  std::string accepted;  // each accepted (new best) kernel the model wrote, with its tokens and dollars
};
std::vector<LlmRow> llm_rows(const json& doc) {
  std::vector<LlmRow> out;
  bool priced = doc.contains("llm") && doc["llm"].is_object() && doc["llm"].value("priced", false);
  auto money = [&](const json& j) { return priced ? "$" + num(j.value("dollars", 0.0), 4) : std::string("- (no prices)"); };
  for (auto& r : doc.value("results", json::array())) {
    if (!r.contains("llm") || !r["llm"].is_object()) continue;
    const json& l = r["llm"];
    LlmRow row{gets(r, "task"), std::to_string(l.value("requests", 0)), std::to_string(l.value("prompt_tokens", 0)),
               std::to_string(l.value("completion_tokens", 0)), money(l), "-", "-"};
    if (l.contains("best_kernel") && l["best_kernel"].is_object()) {
      const json& b = l["best_kernel"];
      row.best_tokens = std::to_string(b.value("prompt_tokens", 0)) + " + " + std::to_string(b.value("completion_tokens", 0));
      row.best_dollars = money(b);
    }
    for (auto& a : r.value("trajectory", json::array()))
      if (a.value("accepted", false) && a.contains("llm") && a["llm"].is_object())
        row.accepted += (row.accepted.empty() ? "" : "; ") + std::string("c") + std::to_string(a.value("index", 0)) + " " +
                        std::to_string(a["llm"].value("prompt_tokens", 0)) + " + " + std::to_string(a["llm"].value("completion_tokens", 0)) +
                        (priced ? ", " + money(a["llm"]) : std::string());
    if (row.accepted.empty()) row.accepted = "-";
    out.push_back(row);
  }
  return out;
}

std::string naive_speedup_text(double speedup, bool from_one_call) {
  if (!(speedup > 0) || !std::isfinite(speedup)) return "-";
  return (from_one_call ? "~" : "") + num(speedup) + "x";
}

Geomeans geomeans(const json& results) {
  Geomeans g;
  double log_best = 0, log_naive = 0;
  if (!results.is_array()) return g;
  for (const json& r : results) {
    if (getd(r, "speedup_vs_best_baseline") > 0) log_best += std::log(getd(r, "speedup_vs_best_baseline")), ++g.n_best;
    if (getd(r, "speedup_vs_naive") > 0) {
      log_naive += std::log(getd(r, "speedup_vs_naive")), ++g.n_naive;
      g.naive_one_call += r.value("speedup_vs_naive_from_one_call", false) ? 1 : 0;
    }
  }
  if (g.n_best) g.best = std::exp(log_best / g.n_best);
  if (g.n_naive) g.naive = std::exp(log_naive / g.n_naive);
  return g;
}

std::string optimize_markdown(const json& doc) {
  std::ostringstream o;
  const json& res = doc.value("results", json::array());
  o << "# ksol optimize: run " << doc.value("run", 0) << "\n\n";
  o << "GPU: " << (doc.contains("gpu") && doc["gpu"].is_object() ? doc["gpu"].value("name", "?") : std::string("?")) << "; agent: "
    << gets(doc, "agent") << "\n\n";
  if (emulated(doc)) o << "Emulated: candidates ran on the CPU through ksol's CUDA emulator; the times are the emulator's, never a result.\n\n";
  if (std::string p = precision_sentence(doc); !p.empty()) o << p << "\n\n";
  if (std::string b = baselines_reused_sentence(doc); !b.empty()) o << b << "\n\n";
  if (std::string b = batch_sentence(doc); !b.empty()) o << b << "\n\n";
  // What the run gained comes first: per task the kernel returned and, per size, its speed.
  o << "## What you get\n\n| task | returned | vs best baseline | %SOL | per size (time, speedup over the fastest baseline, %SOL) | hidden sizes |\n";
  o << "| --- | --- | --- | --- | --- | --- |\n";
  for (auto& r : res) {
    TaskGain g = task_gain(r);
    std::string sizes = sizes_cell(g);
    o << "| " << cell(g.task) << " | " << cell(g.returned) << " | " << num(g.speedup) << "x | " << num(g.pct_sol, 1) << "% | "
      << cell(sizes.empty() ? "-" : sizes) << " | " << cell(g.hidden) << " |\n";
  }
  const Geomeans gm = geomeans(res);
  if (gm.n_best || gm.n_naive)
    o << "\n**Geomean over the tasks: " << (gm.n_best ? num(gm.best, 3) : std::string("-")) << "x over the best baseline** ("
      << gm.n_best << " tasks), " << (gm.n_naive ? num(gm.naive, 3) : std::string("-")) << "x over the naive one (" << gm.n_naive
      << " tasks" << (gm.naive_one_call ? ", " + std::to_string(gm.naive_one_call) + " of them with the naive baseline stopped after one call at some size, "
                                          "counted there at that call's time" : std::string())
      << "). A task whose search beat no baseline returns that baseline and counts 1.00x against it.\n";
  o << "\n## The search\n\n| task | tried | screened out | verified | generations | stop | %SOL before | %SOL after | wall s | "
       "tried per minute | where the seconds went |\n";
  o << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (auto& r : res)
    o << "| " << cell(gets(r, "task")) << " | " << r.value("candidates", 0) << " | " << r.value("screened", 0) << " | " << r.value("verified", 0)
      << " | " << r.value("generations", 0) << " | " << gets(r, "stop_reason") << " | " << num(getd(r, "pct_sol_before"), 1) << "% | "
      << num(getd(r, "pct_sol_after"), 1) << "% | " << num(getd(r, "seconds"), 1) << " | " << num(getd(r, "candidates_per_minute"), 1) << " | "
      << cell(breakdown_text(r)) << " |\n";
  if (std::vector<LlmRow> lr = llm_rows(doc); !lr.empty()) {
    o << "\n## LLM use\n\nTokens in and out and dollars per task; the returned kernel's are those of the requests that wrote it "
         "(\"-\": the returned kernel is not the LLM's). Every request is in the store (`llm_requests`).\n\n";
    o << "| task | requests | tokens in | tokens out | dollars | returned kernel's tokens (in + out) | returned kernel's dollars | "
         "accepted kernels the LLM wrote (tokens in + out, dollars) |\n";
    o << "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (auto& l : lr)
      o << "| " << cell(l.task) << " | " << l.requests << " | " << l.tokens_in << " | " << l.tokens_out << " | " << l.dollars << " | "
        << l.best_tokens << " | " << l.best_dollars << " | " << cell(l.accepted) << " |\n";
  }
  if (doc.contains("interrupted") && doc["interrupted"].is_object()) {
    o << "\nInterrupted (signal " << doc["interrupted"].value("signal", 0) << "): the evaluations in flight finished";
    const json& ns = doc["interrupted"].value("not_started", json::array());
    if (!ns.empty()) {
      o << "; not started:";
      for (auto& n : ns) o << " " << n.get<std::string>();
    }
    o << ". `ksol optimize --resume " << doc.value("run", 0) << "` goes on from here.\n";
  }
  for (auto& r : res) {
    o << "\n## " << gets(r, "task") << "\n\n";
    auto f = failures_of(r);
    if (!f.empty()) {
      o << "Failed candidates by class:";
      for (auto& [k, n] : f) o << " " << k << " " << n << ";";
      o << "\n\n";
    }
    std::vector<PieceRow> pieces = stitched(r) ? piece_rows(r) : std::vector<PieceRow>{};
    if (stitched(r)) {
      o << stitched_summary(r) << "\n\n";
      o << "| piece | family | nodes | kernel | candidates | stop | module us with its best |\n| --- | --- | --- | --- | --- | --- | --- |\n";
      for (auto& p : pieces)
        o << "| " << p.piece << " | " << cell(p.family) << " | " << cell(p.nodes) << " | " << cell(p.kernel) << " | " << p.candidates << " | "
          << cell(p.stop) << " | " << p.module_us << " |\n";
      o << "\n";
    }
    if (std::string b = baselines_line(r); !b.empty()) o << "Baselines: " << b << ".\n\n";
    if (std::string k = kernels_line(r); !k.empty()) o << "Kernels per call: " << k << ".\n\n";
    if (!gets(r, "reason").empty()) o << "Reason: " << gets(r, "reason") << "\n\n";
    if (std::string v = vendor_plan_line(r); !v.empty()) o << "Not returned: " << v << ".\n\n";
    for (auto& p : pieces)
      if (!p.program.empty()) o << "Piece " << p.piece << " program:\n\n```ksol\n" << p.program << "```\n\n";
    // A module that was not searched as one program (stitched, or the better baseline) has no trajectory.
    if (!r.contains("trajectory")) continue;
    int screened = 0;
    for (auto& a : r.value("trajectory", json::array())) screened += gets(a, "status") == "screened";
    if (screened)
      o << screened << " candidate(s) screened out (timed beside the best, never verified) are left out of this table; results.json lists them.\n\n";
    o << "| # | parent | method | schedule | status | score (us) | %SOL | note |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (auto& a : r.value("trajectory", json::array())) {
      if (gets(a, "status") == "screened") continue;
      o << "| c" << a.value("index", 0) << " | " << (a.value("parent", -1) >= 0 ? clabel(a["parent"].get<int>()) : std::string("-"))
        << " | " << cell(gets(a, "method")) << " | `" << cell(gets(a, "schedule")) << "` | " << cell(gets(a, "status")) << " | "
        << num(getd(a, "score_us")) << " | " << num(getd(a, "pct_sol"), 1) << " | " << cell(gets(a, "note")) << " |\n";
    }
    if (r.contains("best")) {
      const json& b = r["best"];
      bool cuda = gets(b, "language") == "cuda";
      std::string text = cuda ? gets(b, "source") : gets(b, "program");
      o << "\nBest " << (cuda ? "kernel (CUDA, also in " + gets(r, "task") + "/best.cu)" : std::string("program")) << ":\n\n```"
        << (cuda ? "cuda" : "ksol") << "\n" << text << (text.empty() || text.back() == '\n' ? "" : "\n") << "```\n";
    }
  }
  return o.str();
}

std::string optimize_html(const json& doc) {
  std::ostringstream o;
  const json& res = doc.value("results", json::array());
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ksol optimize: run " << doc.value("run", 0)
    << "</title><style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}code,pre{font-size:12px}pre{background:#f6f6f6;padding:8px}"
       ".fail{color:#b00}</style></head><body>\n";
  o << "<h1>ksol optimize: run " << doc.value("run", 0) << "</h1>\n<p>GPU: "
    << html_escape(doc.contains("gpu") && doc["gpu"].is_object() ? doc["gpu"].value("name", "?") : std::string("?")) << "; agent: "
    << html_escape(gets(doc, "agent")) << "</p>\n";
  if (emulated(doc)) o << "<p>Emulated: candidates ran on the CPU through ksol's CUDA emulator; the times are the emulator's, never a result.</p>\n";
  if (std::string p = precision_sentence(doc); !p.empty()) o << "<p>" << html_escape(p) << "</p>\n";
  if (std::string b = baselines_reused_sentence(doc); !b.empty()) o << "<p>" << html_escape(b) << "</p>\n";
  if (std::string b = batch_sentence(doc); !b.empty()) o << "<p><b>" << html_escape(b) << "</b></p>\n";
  o << "<h2>What you get</h2>\n<table><tr><th>task</th><th>returned</th><th>vs best baseline</th><th>%SOL</th>"
       "<th>per size (time, speedup over the fastest baseline, %SOL)</th><th>hidden sizes</th></tr>\n";
  for (auto& r : res) {
    TaskGain g = task_gain(r);
    o << "<tr><td>" << html_escape(g.task) << "</td><td>" << html_escape(g.returned) << "</td><td>" << num(g.speedup) << "x</td><td>"
      << num(g.pct_sol, 1) << "%</td><td>" << html_escape(sizes_cell(g)) << "</td><td>" << html_escape(g.hidden) << "</td></tr>\n";
  }
  o << "</table>\n";
  if (const Geomeans gm = geomeans(res); gm.n_best)
    o << "<p><b>Geomean over the tasks: " << num(gm.best, 3) << "x over the best baseline</b> (" << gm.n_best << " tasks).</p>\n";
  o << svg_sol(res) << "\n";
  o << "<h2>The search</h2>\n<table><tr><th>task</th><th>tried</th><th>screened out</th><th>verified</th><th>stop</th><th>vs naive</th><th>%SOL before</th>"
       "<th>%SOL after</th><th>tried per minute</th><th>where the seconds went</th><th>failed, by class</th></tr>\n";
  for (auto& r : res) {
    std::string f;
    for (auto& [k, n] : failures_of(r)) f += html_escape(k) + " " + std::to_string(n) + "; ";
    o << "<tr><td>" << html_escape(gets(r, "task")) << "</td><td>" << r.value("candidates", 0) << "</td><td>" << r.value("screened", 0) << "</td><td>"
      << r.value("verified", 0) << "</td><td>" << html_escape(gets(r, "stop_reason")) << "</td><td>"
      << html_escape(naive_speedup_text(getd(r, "speedup_vs_naive"), r.value("speedup_vs_naive_from_one_call", false))) << "</td><td>"
      << num(getd(r, "pct_sol_before"), 1) << "%</td><td>" << num(getd(r, "pct_sol_after"), 1) << "%</td><td>" << num(getd(r, "candidates_per_minute"), 1)
      << "</td><td>" << html_escape(breakdown_text(r)) << "</td><td class=\"fail\">" << f << "</td></tr>\n";
  }
  o << "</table>\n";
  for (auto& r : res)
    if (r.value("speedup_vs_naive_from_one_call", false)) {
      o << "<p>" << html_escape(kNaiveFromOneCallNote) << ".</p>\n";
      break;
    }
  if (std::vector<LlmRow> lr = llm_rows(doc); !lr.empty()) {
    o << "<h2>LLM use</h2>\n<p>Tokens in and out and dollars per task; the returned kernel's are those of the requests that wrote it "
         "(\"-\": the returned kernel is not the LLM's). Every request is in the store (<code>llm_requests</code>).</p>\n"
         "<table><tr><th>task</th><th>requests</th><th>tokens in</th><th>tokens out</th><th>dollars</th>"
         "<th>returned kernel's tokens (in + out)</th><th>returned kernel's dollars</th><th>accepted kernels the LLM wrote</th></tr>\n";
    for (auto& l : lr)
      o << "<tr><td>" << html_escape(l.task) << "</td><td>" << l.requests << "</td><td>" << l.tokens_in << "</td><td>" << l.tokens_out
        << "</td><td>" << html_escape(l.dollars) << "</td><td>" << l.best_tokens << "</td><td>" << html_escape(l.best_dollars) << "</td><td>"
        << html_escape(l.accepted) << "</td></tr>\n";
    o << "</table>\n";
  }
  for (auto& r : res) {
    o << "<h2>" << html_escape(gets(r, "task")) << "</h2>\n";
    std::vector<PieceRow> pieces = stitched(r) ? piece_rows(r) : std::vector<PieceRow>{};
    if (stitched(r)) {
      o << "<p>" << html_escape(stitched_summary(r)) << "</p>\n<table><tr><th>piece</th><th>family</th><th>nodes</th><th>kernel</th>"
           "<th>candidates</th><th>stop</th><th>module us with its best</th></tr>\n";
      for (auto& p : pieces)
        o << "<tr><td>" << p.piece << "</td><td>" << html_escape(p.family) << "</td><td>" << html_escape(p.nodes) << "</td><td>"
          << html_escape(p.kernel) << "</td><td>" << p.candidates << "</td><td>" << html_escape(p.stop) << "</td><td>" << p.module_us << "</td></tr>\n";
      o << "</table>\n";
    }
    if (std::string b = baselines_line(r); !b.empty()) o << "<p>Baselines: " << html_escape(b) << ".</p>\n";
    if (std::string k = kernels_line(r); !k.empty()) o << "<p>Kernels per call: " << html_escape(k) << ".</p>\n";
    if (!gets(r, "reason").empty()) o << "<p>Reason: " << html_escape(gets(r, "reason")) << "</p>\n";
    if (std::string v = vendor_plan_line(r); !v.empty()) o << "<p>Not returned: " << html_escape(v) << ".</p>\n";
    for (auto& p : pieces)
      if (!p.program.empty()) o << "<details><summary>piece " << p.piece << " program</summary><pre>" << html_escape(p.program) << "</pre></details>\n";
    if (!r.contains("trajectory")) continue;
    o << svg_progress(r) << "\n";
    if (r.contains("best")) {
      bool cuda = gets(r["best"], "language") == "cuda";
      o << "<p>Best " << (cuda ? "kernel (CUDA)" : "program") << ":</p><pre>" << html_escape(gets(r["best"], cuda ? "source" : "program")) << "</pre>\n";
    }
    o << "<details><summary>trajectory</summary><table><tr><th>#</th><th>method</th><th>schedule</th><th>status</th><th>us</th><th>%SOL</th><th>note</th></tr>\n";
    for (auto& a : r.value("trajectory", json::array()))
      o << "<tr><td>c" << a.value("index", 0) << "</td><td>" << html_escape(gets(a, "method")) << "</td><td><code>" << html_escape(gets(a, "schedule"))
        << "</code></td><td" << (gets(a, "status") == "ok" ? "" : " class=\"fail\"") << ">" << html_escape(gets(a, "status")) << "</td><td>"
        << num(getd(a, "score_us")) << "</td><td>" << num(getd(a, "pct_sol"), 1) << "</td><td>" << html_escape(gets(a, "note")) << "</td></tr>\n";
    o << "</table></details>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace ksol::report
