// The worker-launcher protocol: how the worker (which owns the buffers, the references and the
// verdict) has a candidate's ksol_run called in a process of its own (docs/HARNESS.md,
// "Isolation"; docs/PROTOCOL.md, "Worker and launcher"). Everything here is host code with no
// CUDA: the framing, the messages, the launcher process's spawning and descriptor hygiene, the
// parent's side of the conversation and the child's message loop. The CUDA side of the child
// (src/worker/launcher_main.cpp) and of the parent (src/harness/isolation.cpp) plug into it.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ksol::launcher {

// Message types. Every message is a 12-byte header (magic, type, payload length, all
// little-endian uint32) and a payload of at most kMaxPayload bytes.
enum class Msg : uint32_t {
  ready = 1,     // child: its CUDA context exists (or why not)
  configure = 2, // parent: the dims and the child's L2 flush size
  map = 3,       // parent: one buffer set's IPC handles
  load = 4,      // parent: dlopen a library, find ksol_run
  call = 5,      // parent: call a library (or nothing: calibration) on a set
  half = 6,      // child: a held call's stream has finished
  resume = 7,    // parent: go on with a held call
  done = 8,      // child: a call's result
  ack = 9,       // child: configure / map / load answered
};
constexpr uint32_t kMagic = 0x4e4c534bu;  // "KSLN"
constexpr uint32_t kMaxPayload = 1u << 20;
constexpr size_t kIpcHandleBytes = 64;    // cudaIpcMemHandle_t
// The fd the launcher's socket has in the child.
constexpr int kChildFd = 3;

// A failure of the launcher as seen by the parent, with the candidate to blame.
struct LauncherError : std::runtime_error {
  enum class Kind { died, timeout, protocol, refused };
  LauncherError(Kind k, const std::string& m) : std::runtime_error(m), kind(k) {}
  Kind kind;
  // The evaluation's error class for this failure.
  const char* error_class() const;
};

// Little-endian payload builder and bounds-checked reader (a short or malformed payload throws
// LauncherError protocol; nothing is read past the end).
class Writer {
 public:
  Writer& u8(uint8_t v);
  Writer& i32(int32_t v);
  Writer& u64(uint64_t v);
  Writer& f64(double v);
  Writer& str(const std::string& s);  // u32 length, bytes
  Writer& raw(const void* p, size_t n);
  const std::string& bytes() const { return b_; }

 private:
  std::string b_;
};
class Reader {
 public:
  explicit Reader(const std::string& b) : b_(b) {}
  uint8_t u8();
  int32_t i32();
  uint64_t u64();
  double f64();
  std::string str();
  void raw(void* p, size_t n);
  void end() const;  // every byte consumed, or protocol error

 private:
  const std::string& b_;
  size_t at_ = 0;
};

struct Message {
  Msg type;
  std::string payload;
};

// One end of the launcher socket. recv waits at most `timeout_s`, spinning (no sleep) for the
// first `spin_s` of it, so that a reply that comes within a timed round trip is seen at once.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  void send(Msg type, const std::string& payload = "");
  Message recv(double timeout_s, double spin_s = 0);
  int fd() const { return fd_; }

 private:
  void read_exact(void* p, size_t n, std::chrono::steady_clock::time_point deadline, std::chrono::steady_clock::time_point spin_until);
  int fd_ = -1;
};

// Makes this process's memory and descriptors unreachable to other processes of the same user
// (no ptrace, no /proc/PID/mem, no /proc/PID/fd/N): the worker calls it at start, so that a
// launcher cannot open the worker's protocol descriptor or patch its memory through /proc.
void protect_process();
bool process_protected();

// A child process with one socket to its parent (at fd kChildFd in the child). Everything else
// is closed in the child: fd 0 is /dev/null, fds 1 and 2 are `log_fd` (text the parent only
// logs), and no other descriptor of the parent survives (the coordinator's protocol pipes above
// all). It holds no capability, even when started by root, and can gain none (no_new_privs). The
// child dies with the parent (PR_SET_PDEATHSIG) and is killed with SIGKILL when this object ends.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, int log_fd);
  // The same child, running `body(kChildFd)` and exiting with its value instead of executing a
  // program: for the protocol's tests, which play the launcher with a fake backend.
  ChildProcess(const std::function<int(int)>& body, int log_fd);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  Channel& channel() { return *channel_; }
  pid_t pid() const { return pid_; }
  // Kills the child (if alive) and reaps it; says how it ended ("exited with status 3",
  // "killed by signal 11 (Segmentation fault)"). After the first call, repeats that answer.
  std::string kill_and_reap();
  // Reaps the child if it has already ended (no kill); empty while it lives.
  std::string try_reap(double wait_s = 0);

 private:
  pid_t pid_ = -1;
  void start(const std::vector<std::string>* argv, const std::function<int(int)>* body, int log_fd);
  std::string ended_;
  std::unique_ptr<Channel> channel_;
};

// The result of one call as the child reports it. Only ever used to fail a candidate (a liar
// can hide a failure, not create a pass): the parent checks outputs in its own context.
struct CallResult {
  int32_t rc = 0;
  bool table_changed = false, dims_changed = false;
  int32_t stream_error = 0, device_error = 0;  // cudaError_t after the stream sync and the device sync
  double event_us = 0;                         // the child's events around the call
  double gap_us = 0;                           // from the stream's end to the device's (escape check)
  std::string error_text;                      // the CUDA error's name and text, if any
  // When the candidate rewrote its pointer table: for each entry, the index of the original
  // entry whose pointer it now holds (-1: none), so the worker can follow it in its own context.
  std::vector<int32_t> table_map;
  double bracket_us = 0;                       // the parent's own clock, send to reply
};

// The parent's side: the launcher process and the conversation with it. Every wait is bounded;
// a child that dies, hangs past the deadline or answers out of protocol throws LauncherError
// and is killed.
class Launcher {
 public:
  Launcher(const std::vector<std::string>& argv, int log_fd);
  Launcher(const std::function<int(int)>& body, int log_fd);  // tests: see ChildProcess
  // Waits for the child's ready message: throws refused with the child's reason when it has no
  // CUDA context.
  void wait_ready(double timeout_s);
  bool ready() const { return ready_; }
  void configure(const std::vector<int64_t>& dims, uint64_t flush_bytes);
  void map(int32_t set, const std::vector<std::string>& handles, const std::vector<uint64_t>& offsets);
  int32_t load(const std::string& path);
  // Calls library `lib` (-1: no library, the calibration's empty call) on set `set`. With
  // `on_stream_done`, the child stops once the call's stream has finished and waits while the
  // parent runs it (the escape check's early fingerprint), then syncs the device.
  CallResult call(int32_t lib, int32_t set, const std::function<void()>& on_stream_done = {});
  // Round-trip overheads of empty calls (bracket minus the child's event time), after `warmup`
  // unrecorded ones; `before_each` (outside the bracket) does what the worker does before a real
  // call, so that what follows on the device is the same (its own context's work, then the
  // launcher's).
  std::vector<double> calibrate(int n, int warmup, const std::function<void()>& before_each = {});
  pid_t pid() const { return child_.pid(); }
  std::string kill() { return child_.kill_and_reap(); }
  double call_timeout_s = 60;
  double spin_s = 0.05;  // spun, not slept, through calls up to 50 ms (a wake-up would widen the bracket)

 private:
  Message expect(Msg type, double timeout_s);
  // Sends `type` and reads its ack: the launcher's error text ("" when it succeeded), `index`
  // set where the ack carries one. A broken channel fails the launcher (fail).
  std::string exchange(Msg type, const std::string& payload, int32_t* index);
  [[noreturn]] void fail(LauncherError::Kind k, const std::string& m);
  ChildProcess child_;
  bool ready_ = false;
};

// The child's side: a CUDA backend (src/worker/launcher_main.cpp) or a test's fake.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string init() = 0;  // "" when the context is ready, else why not
  virtual std::string configure(const std::vector<int64_t>& dims, uint64_t flush_bytes) = 0;
  virtual std::string map(int32_t set, const std::vector<std::string>& handles, const std::vector<uint64_t>& offsets) = 0;
  virtual std::string load(const std::string& path, int32_t* index) = 0;
  // Runs the call; `stream_done` is called once the call's stream has finished (it blocks for
  // the parent's resume when the call is held), before the device-wide sync.
  virtual CallResult call(int32_t lib, int32_t set, const std::function<void()>& stream_done) = 0;
};
// The child's loop over parent messages on `fd` until the parent closes it (exit 0) or sends
// something out of protocol (exit 2). Replies to calls in order; never reads anything else.
int serve(int fd, Backend& backend);

}  // namespace ksol::launcher
