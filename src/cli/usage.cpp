// Exit statuses, argument checks and error reports shared by every command (usage.h).
#include "cli/usage.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#if __has_include("ksol_git_commit.h")
#include "ksol_git_commit.h"  // generated at build time (CMakeLists.txt)
#endif

#include "coord/session.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "task/task.h"

namespace fs = std::filesystem;

namespace ksol::cli {

std::string exit_status_footer() {
  return "Exit status (every command):\n"
         "  0    ok\n"
         "  1    error: the run failed (a bad task or DSL file, a failed compile, a worker crash it could\n"
         "       not recover from, an I/O error)\n"
         "  2    usage: a bad command, flag or argument; nothing was run\n"
         "  75   waiting: optimize with a batch agent wrote requests for a batch (or its last batch has no\n"
         "       results yet); it printed what to do and the command that goes on once they are in\n"
         "  77   no GPU where GPU work was asked for: what needs no GPU (parsing, checks, compiling) was\n"
         "       done, nothing was timed; the first line printed says so\n"
         "  128+N  interrupted by signal N (optimize: the evaluations in flight finished; --resume)";
}

std::string version_text() {
  std::string v = std::string("ksol ") + KSOL_VERSION;
#ifdef KSOL_GIT_COMMIT
  if (std::string(KSOL_GIT_COMMIT).size()) v += std::string("+") + KSOL_GIT_COMMIT;
#endif
  return v;
}

namespace {

// The text as a finite double, or nothing (not a number, trailing text, NaN, infinity).
std::optional<double> finite_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const char* begin = s.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end != begin + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string shortest(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

CLI::Validator number_check(const std::string& what, const std::string& desc, std::function<bool(double)> ok) {
  return CLI::Validator(
      [what, ok](std::string& s) -> std::string {
        std::optional<double> v = finite_number(s);
        if (v && ok(*v)) return "";
        return "expected " + what + ", got '" + s + "'";
      },
      desc);
}

// Integers as written: digits with an optional leading '-', within [lo, hi] (checked without
// overflow), so that "-1" is never read as 2^64-1 and "1.5" or "1e3" is not an integer.
CLI::Validator integer_check(const std::string& what, const std::string& desc, long double lo, uint64_t hi) {
  return CLI::Validator(
      [what, lo, hi](std::string& s) -> std::string {
        std::string bad = "expected " + what + ", got '" + s + "'";
        bool neg = !s.empty() && s[0] == '-';
        std::string digits = neg ? s.substr(1) : s;
        if (!digits.empty() && digits[0] == '+') return bad;
        uint64_t mag = 0;
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mag);
        if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) return bad;
        long double v = neg ? -static_cast<long double>(mag) : static_cast<long double>(mag);
        if (v < lo || (!neg && mag > hi)) return bad;
        return "";
      },
      desc);
}

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

}  // namespace

const std::vector<std::string>& module_precisions() {
  static const std::vector<std::string> names = {"default", "strict", "tf32"};
  return names;
}

const char* const kModulePrecisionHelp =
    "default, strict or tf32: the TF32 switches eager, torch.compile and the candidates all run under, and the arithmetic "
    "the bound allows (default: PyTorch's own, cuDNN convolutions may use TF32 and matmul stays IEEE unless the problem "
    "sets torch.set_float32_matmul_precision; strict: IEEE float32 everywhere; tf32: TF32 for matmul and cuDNN); ksol's "
    "lowered convolutions and GEMMs multiply in TF32, on the tensor cores, where the mode lets PyTorch's do";

CLI::Validator module_precision_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const auto& names = module_precisions();
        if (std::find(names.begin(), names.end(), s) != names.end()) return "";
        if (s == "bf16")
          return "bf16 is not supported for PyTorch modules yet (the front end lowers float32 modules; a module cast to bf16 "
                 "would be another module): use default, strict or tf32";
        return "expected default, strict or tf32, got '" + s + "'" + did_you_mean(s, names);
      },
      "default|strict|tf32");
}

CLI::Validator positive_number() {
  return number_check("a positive number", "POSITIVE", [](double v) { return v > 0; });
}

CLI::Validator non_negative_number() {
  return number_check("a number >= 0", "NONNEGATIVE", [](double v) { return v >= 0; });
}

CLI::Validator number_in(double lo, double hi) {
  return number_check("a number from " + shortest(lo) + " to " + shortest(hi), "[" + shortest(lo) + ", " + shortest(hi) + "]",
                      [lo, hi](double v) { return v >= lo && v <= hi; });
}

CLI::Validator fraction() {
  return number_check("a fraction above 0 and at most 1", "(0, 1]", [](double v) { return v > 0 && v <= 1; });
}

CLI::Validator positive_integer() { return integer_check("a positive integer", "POSITIVE", 1, kInt64Max); }

CLI::Validator non_negative_integer() { return integer_check("an integer >= 0", "NONNEGATIVE", 0, kInt64Max); }

CLI::Validator unsigned_integer() {
  return integer_check("an integer from 0 to 2^64-1", "NONNEGATIVE", 0, std::numeric_limits<uint64_t>::max());
}

CLI::Validator gpus_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          parse_gpus(s);
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      "COUNT|I,J,...");
}

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// adjacent characters each cost one ("optimise" is one from "optimize", "tsak" one from "task").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string without_dashes(const std::string& s) { return s.substr(std::min(s.find_first_not_of('-'), s.size())); }

}  // namespace

std::string nearest_name(const std::string& given, const std::vector<std::string>& names) {
  const std::string g = without_dashes(given);
  if (g.empty()) return "";
  // Near enough to be a slip: one edit in a short word, up to three in a long one; or the start
  // of exactly the name (three letters or more).
  const size_t allowed = g.size() <= 3 ? 1 : g.size() <= 6 ? 2 : 3;
  std::string best;
  size_t best_d = allowed + 1;
  for (const std::string& n : names) {
    const std::string m = without_dashes(n);
    size_t d = edit_distance(g, m);
    if (g.size() >= 3 && m.rfind(g, 0) == 0) d = std::min<size_t>(d, 1);
    if (d < best_d) best = n, best_d = d;
  }
  return best;
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& names) {
  std::string n = nearest_name(given, names);
  return n.empty() ? "" : "; did you mean '" + n + "'?";
}

namespace {

// "ksol" and the words of the deepest command that was given ("ksol dsl print").
CLI::App* deepest_command(CLI::App& app, std::string* words) {
  CLI::App* at = &app;
  *words = "ksol";
  for (;;) {
    std::vector<CLI::App*> parsed = at->get_subcommands();
    if (parsed.empty()) return at;
    at = parsed.front();
    *words += " " + at->get_name();
  }
}

std::vector<std::string> command_names(CLI::App* at) {
  std::vector<std::string> out;
  for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; })) out.push_back(sub->get_name());
  return out;
}

// The options a command accepts: its own and, since options fall through, its parents'.
std::vector<std::string> option_names(CLI::App* at) {
  std::vector<std::string> out;
  for (; at; at = at->get_parent())
    for (const CLI::Option* o : at->get_options()) {
      for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
      for (const std::string& s : o->get_snames()) out.push_back("-" + s);
    }
  return out;
}

void print_usage_error(const std::string& words, const std::string& message) {
  std::cout.flush();
  std::cerr << words << ": " << message << "\nrun '" << words << " --help' for usage\n" << std::flush;
}

std::string lower_first(std::string s) {
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z') s[0] = static_cast<char>(s[0] - 'A' + 'a');
  return s;
}

}  // namespace

int report_parse_error(CLI::App& app, const CLI::ParseError& e) {
  std::string words;
  CLI::App* at = deepest_command(app, &words);
  std::vector<std::string> extras = app.remaining(true);
  std::string message;
  if (!extras.empty()) {
    const std::string& x = extras.front();
    if (x.size() > 1 && x[0] == '-') {
      std::string name = x.substr(0, x.find('='));
      message = "unknown option '" + name + "'" + did_you_mean(name, option_names(at));
    } else if (!command_names(at).empty()) {
      std::vector<std::string> cmds = command_names(at);
      std::string near = did_you_mean(x, cmds);
      message = "unknown command '" + x + "'" + (near.empty() ? " (commands: " + join(cmds, ", ") + ")" : near);
    } else {
      message = "unexpected argument '" + x + "'";
    }
  } else {
    const std::string what = e.what();
    const std::string type = e.get_name();
    if (type == "RequiredError" && what.rfind("A subcommand", 0) == 0) {
      message = "a command is required: " + join(command_names(at), ", ");
    } else if (type == "ArgumentMismatch" && what.size() > 8 && what.compare(what.size() - 8, 8, " missing") == 0 &&
               what.find(": ") != std::string::npos) {
      message = what.substr(0, what.find(": ")) + " needs a value";
    } else if (type == "ConversionError" && what.rfind("Could not convert: ", 0) == 0 && what.find(" = ") != std::string::npos) {
      // "Could not convert: --batch = x" (where no check of ours ran first)
      std::string rest = what.substr(19);
      message = rest.substr(0, rest.find(" = ")) + ": cannot use '" + rest.substr(rest.find(" = ") + 3) + "'";
    } else {
      message = lower_first(what);
      // A check whose message names its flag itself ("--gpus '0,x': ...") after CLI11's "--gpus: ".
      size_t colon = message.find(": ");
      if (type == "ValidationError" && colon != std::string::npos && message.compare(colon + 2, colon + 1, message.substr(0, colon) + " ") == 0)
        message = message.substr(colon + 2);
    }
  }
  print_usage_error(words, message);
  return exit_status::usage;
}

int run_command(const std::string& command, const std::function<int()>& body) {
  int rc = exit_status::error;
  try {
    rc = body();
  } catch (const UsageError& e) {
    print_usage_error("ksol " + command, e.what());
    rc = exit_status::usage;
  } catch (const dsl::DslError& e) {
    std::cerr << e.what() << "\n";
  } catch (const TaskError& e) {
    std::cerr << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  std::cout.flush();
  return rc;
}

void finish_command(const std::string& command, const std::function<int()>& body) {
  throw CLI::RuntimeError(run_command(command, body));
}

void print_no_gpu_notice(const std::string& command, const std::string& reason, const std::string& instead) {
  std::cerr << "ksol " << command << ": no GPU (" << reason << "): " << instead << "\n" << std::flush;
}

std::string task_argument(const std::string& flag, const std::string& name) {
  if (fs::exists(name)) return resolve_task_path(name);
  std::vector<std::string> names;
  for (const std::string& d : builtin_task_dirs()) {
    names.push_back(fs::path(d).filename().string());
    if (names.back() == name) return d;
  }
  std::string near = did_you_mean(name, names);
  throw UsageError(flag + " '" + name + "': no such task" + (near.empty() ? " ('ksol tasks' lists them)" : near));
}

}  // namespace ksol::cli
