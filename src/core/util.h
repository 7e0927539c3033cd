// Small helpers shared by every stage: files, processes, time.
#pragma once
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace ksol {

std::string read_file(const std::string& path);  // throws std::runtime_error naming the path
void write_file_atomic(const std::string& path, const std::string& data);
// write_file_atomic for a file that may hold a secret (the LLM answer cache): the file is created
// with mode 0600 from the start, never readable by others even for a moment, whatever the umask.
void write_file_private(const std::string& path, const std::string& data);
// Creates `dir` and its missing parents; `dir` itself gets mode 0700 (owner only).
void create_private_dirs(const std::string& dir);
std::string now_iso8601();
double seconds_since(std::chrono::steady_clock::time_point t0);

struct ProcessResult {
  int exit_code = -1;      // -1 when killed by a signal or timed out
  bool timed_out = false;
  bool cancelled = false;  // `cancel` was set while it ran: killed
  std::string output;      // stdout and stderr, interleaved
  double seconds = 0;
};
// Runs argv (no shell) with a wall-clock limit; output is captured. `niceness` > 0 lowers the
// process's CPU priority (batch work such as compiles, which must not delay a timed call's
// round trip on the same host). When `cancel` is set while it runs, its process group is killed
// within about 50 ms.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s, const std::string& cwd = "", int niceness = 0,
                          const std::atomic<bool>* cancel = nullptr);

std::string shell_quote(const std::string& s);
std::string join(const std::vector<std::string>& v, const std::string& sep);
std::string trim(const std::string& s);
// printf("%.*f") and printf("%.*g") of one number ("-" for NaN or infinity).
std::string fixed(double v, int prec);
std::string sig(double v, int digits = 3);
// Where ksol keeps its files, after the XDG Base Directory spec: an XDG_* variable counts only
// when it holds an absolute path (the spec says to ignore a relative one); the home folder is
// $HOME, else the user's passwd entry.
// Directory for caches (compile cache, calibrations, LLM answers, worker logs): $KSOL_CACHE_DIR,
// else $XDG_CACHE_HOME/ksol, else ~/.cache/ksol; ".ksol-cache" when there is no home at all.
std::string cache_dir();
// Directory for data that is a record (the store): $XDG_DATA_HOME/ksol, else ~/.local/share/ksol;
// "" when there is no home at all.
std::string data_dir();
// The store every command uses without --store: data_dir()/ksol.db, or ksol.db in the current
// folder when there is no home.
std::string default_store_path();
std::string self_exe_dir();
// The ksol source tree (include/, tasks/, third_party/): $KSOL_HOME, else the tree this binary
// was built from, else the folder above the binary's. Lets a build move to another machine.
std::string source_root();
// The python3 that can import torch (the PyTorch front end, python/ksol_torch): $KSOL_PYTHON,
// else the first of python3 and /usr/bin/python3 that can; empty, with `why` set, if none can.
std::string find_torch_python(std::string* why);
// The PYTHONPATH for that python: ksol's python/ folder, then the caller's PYTHONPATH.
std::string ksol_python_path();

}  // namespace ksol
