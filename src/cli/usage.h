// What every ksol command shares: its exit statuses, the checks on its arguments, and how a
// usage error, a failed run and a missing GPU are reported.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ksol::cli {

// One exit status per outcome, the same for every command (the footer of `ksol --help`).
namespace exit_status {
constexpr int ok = 0;
constexpr int error = 1;    // the run failed: a bad task or DSL file, a compile or worker failure, I/O
constexpr int usage = 2;    // bad flags or arguments: nothing was run
constexpr int waiting = 75;  // optimize with a batch agent: requests written for a batch, the run waits for their answers (sysexits' EX_TEMPFAIL)
constexpr int no_gpu = 77;  // GPU work was asked for and there is no GPU (automake's "skipped")
}  // namespace exit_status

// The table printed under `ksol --help`.
std::string exit_status_footer();

// A bad flag or argument found once the command runs (an unknown --compare baseline, a task name
// that names no task): reported like a parse error, with exit_status::usage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "ksol 0.1.0+<commit>": the CMake project version and the commit the binary was built from.
std::string version_text();

// Checks on numeric arguments, run by CLI11 on the text before it is converted, so that a value
// that is not a number, is out of range, is NaN or infinite, or would wrap (-1 for an unsigned
// seed) is refused with the flag and the value. CLI11's own PositiveNumber and Range accept NaN
// (every comparison with it is false) and infinity, and name the double's limits in their message.
CLI::Validator positive_number();                  // finite, > 0
CLI::Validator non_negative_number();              // finite, >= 0
CLI::Validator number_in(double lo, double hi);    // finite, in [lo, hi]
CLI::Validator fraction();                         // finite, in (0, 1]
CLI::Validator positive_integer();                 // 1 ..  2^63-1
CLI::Validator non_negative_integer();             // 0 ..  2^63-1
CLI::Validator unsigned_integer();                 // 0 ..  2^64-1 (seeds)
// --gpus: a count (2) or device indices (0,1), as parse_gpus reads them.
CLI::Validator gpus_check();
// --precision of a PyTorch module (ksol optimize FILE.py, ksol eval-module): one of
// module_precisions(); bf16 is refused as not supported yet (docs/TORCH.md, precision modes).
CLI::Validator module_precision_check();
const std::vector<std::string>& module_precisions();
// The --help text of --precision for a PyTorch module.
extern const char* const kModulePrecisionHelp;

// The name in `names` nearest to `given` by edit distance (adjacent transpositions count one),
// or "" when none is near enough to be what was meant.
std::string nearest_name(const std::string& given, const std::vector<std::string>& names);
// " did you mean 'x'?" after "; ", or "" when no name is near.
std::string did_you_mean(const std::string& given, const std::vector<std::string>& names);

// Reports a CLI11 parse error as one line naming what was wrong, and the help to read; returns
// exit_status::usage. An argument no command or option took is named first (an unknown command or
// flag, with the nearest valid name), since it is usually why a required one is missing.
// (CLI11's queries on the parsed subcommands are not const; nothing here changes the parse.)
int report_parse_error(CLI::App& app, const CLI::ParseError& e);

// Runs a command's body: UsageError is reported as a usage error, a DslError or TaskError as it
// is (file:line:col and a caret), anything else as "error: ...", with their exit statuses.
// `command` is the command's words after "ksol" ("eval", "dsl print").
int run_command(const std::string& command, const std::function<int()>& body);

// run_command from a CLI11 callback: the exit status ends the parse as CLI::RuntimeError, whose
// exit code main returns.
[[noreturn]] void finish_command(const std::string& command, const std::function<int()>& body);

// The first line a command prints when it was asked for GPU work and there is no GPU:
// "ksol <command>: no GPU (<reason>): <instead>". The command then does what needs no GPU (parse,
// check, compile) and exits with exit_status::no_gpu, or exit_status::error if that failed.
void print_no_gpu_notice(const std::string& command, const std::string& reason, const std::string& instead);

// A --task (or similar) argument as a task folder: a path, or the name of a built-in task. A name
// that is neither is a UsageError naming the nearest task.
std::string task_argument(const std::string& flag, const std::string& name);

}  // namespace ksol::cli
