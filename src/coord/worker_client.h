// The coordinator's handle on one ksol-worker process: line-delimited JSON over pipes, a
// timeout per call, and a restart after a crash, a hang or a sticky CUDA error. The failure is
// returned to the caller as data, to be recorded against the candidate that caused it.
#pragma once
#include <sys/types.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksol {

struct WorkerReply {
  bool ok = false;              // the worker answered and said ok
  nlohmann::json body;          // the reply (when the worker answered)
  std::string failure;          // "", "timeout", "crash", "fatal", "error"; "lost": the worker's
                                // MPI rank is gone (never recorded: the call moves to another worker)
  std::string message;          // what went wrong, with the tail of the worker's stderr
  double seconds = 0;
};

// What a Session calls: one protocol request, one reply. WorkerClient runs a local process; an
// MPI job adds workers on other ranks and a pool that moves calls off a lost rank (src/mpi).
class Worker {
 public:
  virtual ~Worker() = default;
  // Sends one request and waits up to timeout_s for its reply; failures come back as data.
  virtual WorkerReply call(nlohmann::json request, double timeout_s) = 0;
  virtual int restarts() const = 0;
  virtual void stop() = 0;
};

class WorkerClient : public Worker {
 public:
  // argv: the worker command (e.g. {"/path/ksol-worker", "--device", "0"}).
  explicit WorkerClient(std::vector<std::string> argv, std::string log_path = "");
  ~WorkerClient() override;
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  // Sends one request and waits up to timeout_s for its reply. Starts the worker if needed;
  // after a timeout, crash or fatal reply the worker is gone and the next call starts a new one.
  WorkerReply call(nlohmann::json request, double timeout_s) override;
  int restarts() const override { return restarts_; }
  bool running() const { return pid_ > 0; }
  void stop() override;

 private:
  void start();
  void kill_worker();
  std::string stderr_tail() const;
  std::string reap();

  std::vector<std::string> argv_;
  std::string log_path_;
  pid_t pid_ = -1;
  int to_fd_ = -1, from_fd_ = -1;
  std::string buffer_;
  std::mt19937_64 rng_{std::random_device{}()};
  int starts_ = 0, restarts_ = 0;
};

// The worker binary next to the running ksol, or $KSOL_WORKER.
std::string default_worker_path();

}  // namespace ksol
