#include "coord/worker_client.h"
#include "launcher/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "core/util.h"

namespace ksol {

std::string default_worker_path() {
  if (const char* e = std::getenv("KSOL_WORKER"); e && *e) return e;
  return self_exe_dir() + "/ksol-worker";
}

WorkerClient::WorkerClient(std::vector<std::string> argv, std::string log_path)
    : argv_(std::move(argv)), log_path_(std::move(log_path)) {
  if (log_path_.empty()) log_path_ = cache_dir() + "/worker-" + std::to_string(::getpid()) + ".log";
  signal(SIGPIPE, SIG_IGN);
}

WorkerClient::~WorkerClient() { stop(); }

void WorkerClient::start() {
  // A launcher runs candidate code as this user: it must not open this process's end of a
  // worker's pipe through /proc/PID/fd, nor read the requests' ids in its memory.
  launcher::protect_process();
  std::filesystem::create_directories(std::filesystem::path(log_path_).parent_path());
  int in[2], out[2];
  // Close-on-exec everywhere: compilers and other workers forked meanwhile must not inherit
  // these ends, or EOF would never come.
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  // Everything the child needs is built before fork: only async-signal-safe calls follow it.
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // A process group of its own: a signal meant for ksol (Ctrl-C in a terminal, `timeout`
    // signalling its child's group) does not kill the evaluation in flight; ksol finishes it and
    // closes the worker, and a worker whose ksol is gone reads end of input and exits.
    setpgid(0, 0);
    dup2(in[0], 0);
    dup2(out[1], 1);
    if (log >= 0) dup2(log, 2);
    execvp(args[0], args.data());
    _exit(127);
  }
  if (log >= 0) close(log);
  close(in[0]);
  close(out[1]);
  pid_ = pid;
  to_fd_ = in[1];
  from_fd_ = out[0];
  buffer_.clear();
  if (starts_++ > 0) ++restarts_;
}

void WorkerClient::kill_worker() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // the worker's group: anything it started goes too
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (to_fd_ >= 0) close(to_fd_);
  if (from_fd_ >= 0) close(from_fd_);
  pid_ = -1;
  to_fd_ = from_fd_ = -1;
}

void WorkerClient::stop() {
  if (pid_ > 0) {
    std::string bye = "{\"op\":\"exit\"}\n";
    (void)!write(to_fd_, bye.data(), bye.size());
    // Give it a moment to leave cleanly, then make sure.
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      usleep(10000);
    }
  }
  kill_worker();
}

std::string WorkerClient::reap() {
  // The pipe closed: the worker is gone or going; wait for it and say how it ended.
  int status = 0;
  if (pid_ <= 0) return "the worker is gone";
  // A worker that closed its end but lives on must not hang the coordinator: if it has not
  // exited within a moment, it is killed.
  for (int i = 0; i < 50 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10000);
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  return WIFSIGNALED(status) ? "the worker died with signal " + std::to_string(WTERMSIG(status))
                             : "the worker exited with code " + std::to_string(WEXITSTATUS(status));
}

std::string WorkerClient::stderr_tail() const {
  std::string s;
  try {
    s = read_file(log_path_);
  } catch (...) {
    return "";
  }
  if (s.size() > 2000) s = s.substr(s.size() - 2000);
  return s;
}

WorkerReply WorkerClient::call(nlohmann::json request, double timeout_s) {
  auto t0 = std::chrono::steady_clock::now();
  WorkerReply r;
  // A worker that died between calls is restarted without charging anyone.
  if (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      kill_worker();
    }
  }
  if (pid_ <= 0) start();
  // Ids are unpredictable, so a candidate that writes to the protocol stream cannot forge the
  // reply to the request in flight.
  int64_t id = static_cast<int64_t>(rng_() >> 12);
  request["id"] = id;
  std::string line = request.dump() + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = write(to_fd_, line.data() + sent, line.size() - sent);
    if (n <= 0) {
      r.failure = "crash";
      r.message = "the worker exited before taking the request: " + reap() + "\n" + stderr_tail();
      kill_worker();
      return r;
    }
    sent += static_cast<size_t>(n);
  }
  for (;;) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      try {
        r.body = nlohmann::json::parse(reply);
      } catch (const std::exception& e) {
        r.failure = "crash";
        r.message = std::string("the worker sent a line that is not JSON: ") + e.what();
        kill_worker();
        return r;
      }
      if (!r.body.is_object() || !r.body.contains("id") || !r.body["id"].is_number_integer() || r.body["id"].get<int64_t>() != id) {
        // Every abandoned call kills its worker, so no stale reply can exist: this line was
        // written by someone else on the protocol stream.
        r.failure = "crash";
        r.message = "protocol violation: the worker's stream carried a line that is not the reply to this request: " +
                    reply.substr(0, 200);
        kill_worker();
        r.seconds = seconds_since(t0);
        return r;
      }
      r.seconds = seconds_since(t0);
      if (r.body.contains("fatal") && r.body["fatal"] == true) {
        r.failure = "fatal";
        r.message = r.body.contains("error") && r.body["error"].is_string() ? r.body["error"].get<std::string>() : "sticky CUDA error";
        kill_worker();
        return r;
      }
      r.ok = r.body.contains("ok") && r.body["ok"].is_boolean() && r.body["ok"].get<bool>();
      if (!r.ok) {
        r.failure = "error";
        r.message = r.body.contains("error") && r.body["error"].is_string() ? r.body["error"].get<std::string>()
                                                                             : "the worker reported an error";
      }
      return r;
    }
    double left = timeout_s - seconds_since(t0);
    if (left <= 0) {
      r.failure = "timeout";
      r.message = "no reply within " + std::to_string(static_cast<int>(timeout_s)) + " s; the worker was killed";
      kill_worker();
      // What it was doing: the end of its log (the Python worker's screen names each candidate there).
      if (std::string tail = stderr_tail(); !tail.empty()) r.message += "\n" + tail;
      r.seconds = seconds_since(t0);
      return r;
    }
    pollfd p{from_fd_, POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min(left, 0.5) * 1000) + 1);
    if (n <= 0) continue;
    char buf[65536];
    ssize_t got = read(from_fd_, buf, sizeof buf);
    if (got <= 0) {
      r.failure = "crash";
      r.message = reap() + "\n" + stderr_tail();
      kill_worker();
      r.seconds = seconds_since(t0);
      return r;
    }
    buffer_.append(buf, static_cast<size_t>(got));
  }
}

}  // namespace ksol
