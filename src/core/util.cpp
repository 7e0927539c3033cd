#include <cmath>
#include "core/util.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ksol {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_file_atomic(const std::string& path, const std::string& data) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  // Unique per process, thread and call: two threads writing the same path never share a temp.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw std::runtime_error("cannot write " + tmp);
    f << data;
    if (!f.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

void write_file_private(const std::string& path, const std::string& data) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  // O_EXCL: a file an attacker placed at the temporary name (with wider permissions) is refused,
  // not written into.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  std::filesystem::rename(tmp, path);
}

void create_private_dirs(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace);
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s, const std::string& cwd, int niceness,
                          const std::atomic<bool>* cancel) {
  ProcessResult r;
  auto t0 = std::chrono::steady_clock::now();
  if (cancel && cancel->load()) {
    r.cancelled = true;
    return r;
  }
  int fds[2];
  // Close-on-exec, so processes started by other threads at the same time do not hold this
  // pipe open (which would delay our EOF until they exit).
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  // Built before fork: after it, a multi-threaded process may only make async-signal-safe calls.
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    // The child dies with this process (SIGKILL when the thread that forked it ends, and that
    // thread waits here until the child has exited): a ksol killed outright, or by a signal it
    // does not catch, leaves no lowering or compiler running, holding CPU or GPU memory.
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent) _exit(127);
    if (niceness > 0) setpriority(PRIO_PROCESS, 0, niceness);  // best effort: a refusal leaves the priority as it was
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    execvp(args[0], args.data());
    _exit(127);
  }
  // The group is made on both sides of the fork, so that a kill right after it reaches the child
  // (the parent's call fails harmlessly once the child has exec'd).
  setpgid(pid, pid);
  close(fds[1]);
  // The child's group, or the child alone if the group is not there.
  auto kill_all = [pid] {
    if (kill(-pid, SIGKILL) != 0) kill(pid, SIGKILL);
  };
  char buf[65536];
  for (;;) {
    double left = timeout_s - seconds_since(t0);
    if (left <= 0) {
      r.timed_out = true;
      kill_all();
      break;
    }
    if (cancel && cancel->load()) {
      r.cancelled = true;
      kill_all();
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min(left, cancel ? 0.05 : 1.0) * 1000) + 1);
    if (n > 0) {
      ssize_t got = read(fds[0], buf, sizeof buf);
      if (got <= 0) break;
      r.output.append(buf, static_cast<size_t>(got));
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!r.timed_out && !r.cancelled && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.seconds = seconds_since(t0);
  return r;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+") == std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? sep : "") + v[i];
  return o;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

namespace {

// An XDG_* variable's folder, when it names an absolute path.
std::string xdg_dir(const char* name) {
  const char* v = std::getenv(name);
  return v && v[0] == '/' ? std::string(v) : std::string();
}

std::string home_dir() {
  if (const char* h = std::getenv("HOME"); h && *h) return h;
  // No HOME (a bare container, a daemon): the passwd entry's home, as ssh and git fall back to.
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_dir && *found->pw_dir) return found->pw_dir;
  return "";
}

}  // namespace

std::string cache_dir() {
  if (const char* d = std::getenv("KSOL_CACHE_DIR"); d && *d) return d;
  if (std::string x = xdg_dir("XDG_CACHE_HOME"); !x.empty()) return x + "/ksol";
  if (std::string home = home_dir(); !home.empty()) return home + "/.cache/ksol";
  return ".ksol-cache";  // a relative cache beats refusing to run
}

std::string data_dir() {
  if (std::string x = xdg_dir("XDG_DATA_HOME"); !x.empty()) return x + "/ksol";
  if (std::string home = home_dir(); !home.empty()) return home + "/.local/share/ksol";
  return "";
}

std::string default_store_path() {
  std::string dir = data_dir();
  return dir.empty() ? "ksol.db" : dir + "/ksol.db";
}

std::string self_exe_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

std::string source_root() {
  if (const char* h = std::getenv("KSOL_HOME"); h && *h) return h;
  if (std::filesystem::exists(std::string(KSOL_SOURCE_DIR) + "/include/ksol/abi.h")) return KSOL_SOURCE_DIR;
  return std::filesystem::path(self_exe_dir()).parent_path().string();
}

std::string ksol_python_path() {
  std::string p = source_root() + "/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) p += std::string(":") + old;
  return p;
}

std::string find_torch_python(std::string* why) {
  std::vector<std::string> tries;
  if (const char* e = std::getenv("KSOL_PYTHON"); e && *e) tries = {e};
  else tries = {"python3", "/usr/bin/python3"};
  for (auto& py : tries)
    if (run_process({py, "-c", "import torch, torch.fx"}, 120).exit_code == 0) return py;
  if (why)
    *why = "no python3 that can import torch (tried " + join(tries, ", ") +
           "); setup.sh installs python3-torch, or set KSOL_PYTHON to an interpreter that has PyTorch";
  return "";
}

std::string fixed(double v, int prec) {
  if (!std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::string sig(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

}  // namespace ksol
