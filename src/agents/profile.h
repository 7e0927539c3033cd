// The profile stage: Nsight Compute's metric set for one kernel, parsed into the features the
// decision table reads (knowledge/features.toml, source "ncu"), the classification into
// compute-bound, memory-bandwidth-bound or memory-latency-bound, and the short summary that goes
// into prompts. Thresholds are fixed until at least 30 kernels have been profiled, then chosen by
// Otsu's method over the recorded ones; which applies is logged. Without ncu, the roofline
// fallback classifies from the measured time against SOL (agents::bottleneck_of).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace ksol::agents::profile {

// The metrics ksol asks ncu for, by feature name (names from Nsight Compute's sections; this
// parsing has been tested on CSV written in ncu's format, not yet on a live ncu run).
const std::map<std::string, std::string>& ncu_metrics();

// ncu's command line for the kernels named `kernel_regex` of `argv` (the process to profile).
std::vector<std::string> ncu_command(const std::string& kernel_regex, const std::vector<std::string>& argv, const std::string& ncu = "ncu");

// Whether ncu can run here: it is on the PATH and answers --version; `why` when not.
bool ncu_available(std::string* why, const std::string& ncu = "ncu");

// One kernel's metrics from ncu's CSV (`--csv --metrics ...`, one row per metric: the columns
// "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"), as features in 0..1 where they
// are fractions. Several launches of the kernel are averaged. Throws std::runtime_error when the
// CSV lacks those columns or the kernel.
std::map<std::string, double> parse_ncu_csv(const std::string& csv, const std::string& kernel_substr = "");

struct Thresholds {
  double memory = 0.60;   // achieved_bw_frac at or above: memory_bandwidth
  double compute = 0.60;  // achieved_flop_frac at or above (and above the memory fraction): compute
  std::string source = "fixed";  // fixed | otsu(n=N)
};

// Thresholds from recorded profiles: fixed below `min_kernels`, Otsu's method on each fraction
// from then on (clamped to [0.3, 0.9], so a one-sided history cannot make every kernel one class).
Thresholds fit_thresholds(const std::vector<std::map<std::string, double>>& history, size_t min_kernels = 30);

// compute | memory_bandwidth | memory_latency, and the reason (for the log).
std::string classify(const std::map<std::string, double>& f, const Thresholds& t, std::string* why = nullptr);

// The threshold that maximises the between-class variance of `values` (in [0, 1], 256 bins).
double otsu(const std::vector<double>& values);

// The metrics that matter for a bottleneck class (compute | memory_bandwidth | memory_latency),
// in prompt order; empty for another name.
const std::vector<std::string>& class_metrics(const std::string& cls);
// A few lines for a prompt: the class with the fractions that decided it, then only the class's
// metrics (class_metrics), each with what it means and the problem it shows past its threshold.
// `by_class` false: every metric in the same form (the unfiltered prompt, for measuring the filter).
std::string summary(const std::map<std::string, double>& f, const Thresholds& t, bool by_class = true);
// All metrics, one per line (what the summary filters; for logging the prompt-size saving).
std::string full_listing(const std::map<std::string, double>& f);

}  // namespace ksol::agents::profile
