#include "agents/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "core/util.h"

namespace ksol::agents::profile {

const std::map<std::string, std::string>& ncu_metrics() {
  static const std::map<std::string, std::string> m = {
      {"achieved_bw_frac", "dram__throughput.avg.pct_of_peak_sustained_elapsed"},
      {"achieved_flop_frac", "sm__throughput.avg.pct_of_peak_sustained_elapsed"},
      {"occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"},
      {"l2_hit_rate", "lts__t_sector_hit_rate.pct"},
      {"coalesced_frac", "smsp__sass_average_data_bytes_per_sector_mem_global.pct"},
      {"bank_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"},
      {"shared_requests", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"},
      {"stall_long_scoreboard", "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio"},
      {"stall_barrier", "smsp__average_warp_latency_issue_stalled_barrier.ratio"},
      {"stall_total", "smsp__average_warp_latency_per_inst_issued.ratio"},
      {"duration_ns", "gpu__time_duration.sum"},
  };
  return m;
}

std::vector<std::string> ncu_command(const std::string& kernel_regex, const std::vector<std::string>& argv, const std::string& ncu) {
  std::string metrics;
  for (auto& [k, v] : ncu_metrics()) metrics += (metrics.empty() ? "" : ",") + v;
  std::vector<std::string> c = {ncu, "--clock-control", "none", "--csv", "--print-units", "base", "--kernel-name", "regex:" + kernel_regex,
                                "--metrics", metrics};
  c.insert(c.end(), argv.begin(), argv.end());
  return c;
}

bool ncu_available(std::string* why, const std::string& ncu) {
  ProcessResult r = run_process({"sh", "-c", "command -v " + shell_quote(ncu) + " >/dev/null && " + shell_quote(ncu) + " --version"}, 60);
  if (r.exit_code == 0) return true;
  if (why) *why = "Nsight Compute (" + ncu + ") is not on the PATH or does not run: profiling falls back to the roofline (time against SOL)";
  return false;
}

namespace {

// Splits one CSV line with double-quoted fields ("" inside quotes is a quote).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (q) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') q = false;
      else cur += c;
    } else if (c == '"') {
      q = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

double to_number(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());  // "1,234.5" in some locales' output
  return std::stod(s);
}

}  // namespace

std::map<std::string, double> parse_ncu_csv(const std::string& csv, const std::string& kernel_substr) {
  std::map<std::string, std::string> by_metric;
  for (auto& [f, m] : ncu_metrics()) by_metric[m] = f;
  std::istringstream in(csv);
  std::vector<std::string> head;
  int ck = -1, cm = -1, cv = -1;
  std::map<std::string, std::pair<double, int>> acc;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '"') continue;  // ncu's own "==PROF==" lines and the program's output
    std::vector<std::string> f = csv_fields(line);
    if (ck < 0) {
      for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] == "Kernel Name") ck = static_cast<int>(i);
        if (f[i] == "Metric Name") cm = static_cast<int>(i);
        if (f[i] == "Metric Value") cv = static_cast<int>(i);
      }
      if (ck < 0 || cm < 0 || cv < 0) throw std::runtime_error("ncu CSV: no \"Kernel Name\", \"Metric Name\" and \"Metric Value\" columns");
      continue;
    }
    if (static_cast<int>(f.size()) <= std::max({ck, cm, cv})) continue;
    if (!kernel_substr.empty() && f[ck].find(kernel_substr) == std::string::npos) continue;
    auto it = by_metric.find(f[cm]);
    if (it == by_metric.end()) continue;
    double v = 0;
    try {
      v = to_number(f[cv]);
    } catch (const std::exception&) {  // "n/a" for a metric the kernel does not exercise
      continue;
    }
    auto& a = acc[it->second];
    a.first += v;
    a.second += 1;
  }
  if (ck < 0) throw std::runtime_error("ncu CSV: no header row (was the kernel profiled at all?)");
  if (acc.empty()) throw std::runtime_error("ncu CSV: no metrics for kernel '" + kernel_substr + "'");
  std::map<std::string, double> out;
  for (auto& [f, a] : acc) out[f] = a.first / a.second;
  for (const char* pct : {"achieved_bw_frac", "achieved_flop_frac", "occupancy", "l2_hit_rate", "coalesced_frac"})
    if (out.count(pct)) out[pct] = std::clamp(out[pct] / 100.0, 0.0, 1.0);
  // Bank conflicts as extra wavefronts per conflict-free one (31 for a 32-way conflict), as the
  // feature is defined: conflicts / (wavefronts - conflicts).
  if (out.count("bank_conflicts") && out.count("shared_requests") && out["shared_requests"] > out["bank_conflicts"])
    out["bank_conflicts"] /= out["shared_requests"] - out["bank_conflicts"];
  else if (out.count("bank_conflicts"))
    out["bank_conflicts"] = 0;
  out.erase("shared_requests");
  // Stalls as a share of all the cycles a warp waits per issued instruction.
  if (out.count("stall_total") && out["stall_total"] > 0) {
    for (const char* k : {"stall_long_scoreboard", "stall_barrier"})
      if (out.count(k)) out[k] = std::clamp(out[k] / out["stall_total"], 0.0, 1.0);
  } else {
    out.erase("stall_long_scoreboard");  // no total to relate them to: better absent than wrong
    out.erase("stall_barrier");
  }
  out.erase("stall_total");
  return out;
}

double otsu(const std::vector<double>& values) {
  const int bins = 256;
  std::vector<double> h(bins, 0);
  for (double v : values) h[std::clamp(static_cast<int>(v * (bins - 1) + 0.5), 0, bins - 1)] += 1;
  double total = static_cast<double>(values.size()), sum = 0;
  for (int i = 0; i < bins; ++i) sum += i * h[i];
  double w0 = 0, sum0 = 0, best = -1;
  int at = bins / 2;
  for (int t = 0; t < bins; ++t) {
    w0 += h[t];
    if (w0 == 0) continue;
    double w1 = total - w0;
    if (w1 == 0) break;
    sum0 += t * h[t];
    double m0 = sum0 / w0, m1 = (sum - sum0) / w1;
    double between = w0 * w1 * (m0 - m1) * (m0 - m1);
    if (between > best) best = between, at = t;
  }
  return (at + 0.5) / (bins - 1);
}

Thresholds fit_thresholds(const std::vector<std::map<std::string, double>>& history, size_t min_kernels) {
  Thresholds t;
  std::vector<double> mem, comp;
  for (auto& f : history) {
    if (f.count("achieved_bw_frac")) mem.push_back(f.at("achieved_bw_frac"));
    if (f.count("achieved_flop_frac")) comp.push_back(f.at("achieved_flop_frac"));
  }
  if (mem.size() < min_kernels || comp.size() < min_kernels) return t;
  t.memory = std::clamp(otsu(mem), 0.3, 0.9);
  t.compute = std::clamp(otsu(comp), 0.3, 0.9);
  t.source = "otsu(n=" + std::to_string(std::min(mem.size(), comp.size())) + ")";
  return t;
}

namespace {
std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", v * 100);
  return b;
}
double get(const std::map<std::string, double>& f, const char* k, double d = -1) {
  auto it = f.find(k);
  return it == f.end() ? d : it->second;
}
}  // namespace

std::string classify(const std::map<std::string, double>& f, const Thresholds& t, std::string* why) {
  double m = get(f, "achieved_bw_frac", 0), c = get(f, "achieved_flop_frac", 0);
  std::string cls, reason;
  if (c >= t.compute && c >= m) {
    cls = "compute";
    reason = "SM throughput " + pct(c) + " >= " + pct(t.compute);
  } else if (m >= t.memory) {
    cls = "memory_bandwidth";
    reason = "DRAM throughput " + pct(m) + " >= " + pct(t.memory);
  } else {
    cls = "memory_latency";
    reason = "neither DRAM (" + pct(m) + " < " + pct(t.memory) + ") nor SM throughput (" + pct(c) + " < " + pct(t.compute) + ") is near its peak";
  }
  if (why) *why = reason + " [thresholds " + t.source + "]";
  return cls;
}

const std::vector<std::string>& class_metrics(const std::string& cls) {
  // A compute-bound kernel is limited by issue: how full the SMs are and what stalls the warps
  // at barriers and shared memory. A bandwidth-bound one by how well each DRAM byte is used. A
  // latency-bound one by how many loads are in flight: occupancy and the stalls on them, with
  // the access pattern that decides how many bytes each load brings.
  static const std::map<std::string, std::vector<std::string>> by_class = {
      {"compute", {"achieved_flop_frac", "occupancy", "stall_barrier", "bank_conflicts"}},
      {"memory_bandwidth", {"achieved_bw_frac", "coalesced_frac", "l2_hit_rate"}},
      {"memory_latency", {"achieved_bw_frac", "occupancy", "stall_long_scoreboard", "coalesced_frac", "l2_hit_rate"}},
  };
  static const std::vector<std::string> none;
  auto it = by_class.find(cls);
  return it == by_class.end() ? none : it->second;
}

namespace {
// One metric as a prompt line, with what it means and, past its threshold, the problem it shows.
std::string metric_line(const std::string& k, double v) {
  if (k == "achieved_bw_frac") return "DRAM throughput: " + pct(v) + " of peak";
  if (k == "achieved_flop_frac") return "SM throughput: " + pct(v) + " of peak";
  if (k == "occupancy")
    return v < 0.5 ? "low occupancy: " + pct(v) + " of the warps an SM can hold" : "occupancy: " + pct(v) + " of the warps an SM can hold";
  if (k == "coalesced_frac")
    return v < 0.8 ? "poor coalescing: " + pct(v) + " of each 32-byte sector is used" : "coalescing: " + pct(v) + " of each 32-byte sector is used";
  if (k == "l2_hit_rate") return "L2 hit rate: " + pct(v);
  if (k == "bank_conflicts") {
    char b[64];
    std::snprintf(b, sizeof b, "%.3g", v);
    return v >= 1 ? std::string("shared-memory bank conflicts: ") + b + " extra wavefronts per request"
                  : std::string("shared-memory bank conflicts: ") + b + " extra wavefronts per request (none to speak of)";
  }
  if (k == "stall_long_scoreboard")
    return v >= 0.5 ? "warps wait on global memory most of the time (" + pct(v) + " of stalls)" : "stalls on global memory: " + pct(v) + " of stalls";
  if (k == "stall_barrier") return v >= 0.3 ? "warps wait at barriers (" + pct(v) + " of stalls)" : "stalls at barriers: " + pct(v) + " of stalls";
  return k;
}
}  // namespace

std::string summary(const std::map<std::string, double>& f, const Thresholds& t, bool by_class) {
  std::string why;
  std::string cls = classify(f, t, &why);
  std::ostringstream o;
  o << "bottleneck: " << cls << " (" << why << ")\n";
  static const std::vector<std::string> every = {"achieved_bw_frac", "achieved_flop_frac", "occupancy", "coalesced_frac", "l2_hit_rate",
                                                 "bank_conflicts", "stall_long_scoreboard", "stall_barrier"};
  for (const std::string& k : by_class ? class_metrics(cls) : every)
    if (double v = get(f, k.c_str()); v >= 0) o << metric_line(k, v) << "\n";
  return o.str();
}

std::string full_listing(const std::map<std::string, double>& f) {
  std::ostringstream o;
  for (auto& [k, v] : f) o << k << " = " << v << "  (" << (ncu_metrics().count(k) ? ncu_metrics().at(k) : "derived") << ")\n";
  return o.str();
}

}  // namespace ksol::agents::profile
