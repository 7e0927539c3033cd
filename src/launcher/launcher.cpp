#include "launcher/launcher.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

namespace ksol::launcher {

using Clock = std::chrono::steady_clock;

const char* LauncherError::error_class() const {
  switch (kind) {
    case Kind::died: return "launcher_died";
    case Kind::timeout: return "launcher_timeout";
    case Kind::protocol: return "launcher_protocol";
    case Kind::refused: return "launcher_refused";
  }
  return "launcher_protocol";
}

// ---------------------------------------------------------------------------------------------
// Payloads

Writer& Writer::raw(const void* p, size_t n) {
  b_.append(static_cast<const char*>(p), n);
  return *this;
}
Writer& Writer::u8(uint8_t v) { return raw(&v, 1); }
Writer& Writer::i32(int32_t v) {
  uint8_t x[4];
  for (int i = 0; i < 4; ++i) x[i] = static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * i));
  return raw(x, 4);
}
Writer& Writer::u64(uint64_t v) {
  uint8_t x[8];
  for (int i = 0; i < 8; ++i) x[i] = static_cast<uint8_t>(v >> (8 * i));
  return raw(x, 8);
}
Writer& Writer::f64(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return u64(u);
}
Writer& Writer::str(const std::string& s) {
  i32(static_cast<int32_t>(s.size()));
  return raw(s.data(), s.size());
}

void Reader::raw(void* p, size_t n) {
  if (n > b_.size() - at_) throw LauncherError(LauncherError::Kind::protocol, "a launcher message ended early");
  std::memcpy(p, b_.data() + at_, n);
  at_ += n;
}
uint8_t Reader::u8() {
  uint8_t v;
  raw(&v, 1);
  return v;
}
int32_t Reader::i32() {
  uint8_t x[4];
  raw(x, 4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(x[i]) << (8 * i);
  return static_cast<int32_t>(v);
}
uint64_t Reader::u64() {
  uint8_t x[8];
  raw(x, 8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(x[i]) << (8 * i);
  return v;
}
double Reader::f64() {
  uint64_t u = u64();
  double v;
  std::memcpy(&v, &u, 8);
  return v;
}
std::string Reader::str() {
  int32_t n = i32();
  if (n < 0 || static_cast<size_t>(n) > b_.size() - at_) throw LauncherError(LauncherError::Kind::protocol, "a launcher message has a bad string length");
  std::string s(b_.data() + at_, static_cast<size_t>(n));
  at_ += static_cast<size_t>(n);
  return s;
}
void Reader::end() const {
  if (at_ != b_.size()) throw LauncherError(LauncherError::Kind::protocol, "a launcher message has trailing bytes");
}

// ---------------------------------------------------------------------------------------------
// Framing

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

void Channel::send(Msg type, const std::string& payload) {
  if (payload.size() > kMaxPayload) throw LauncherError(LauncherError::Kind::protocol, "a launcher message is too long");
  Writer h;
  h.i32(static_cast<int32_t>(kMagic)).i32(static_cast<int32_t>(type)).i32(static_cast<int32_t>(payload.size()));
  std::string all = h.bytes() + payload;
  size_t at = 0;
  while (at < all.size()) {
    // MSG_NOSIGNAL: a peer that is gone is an error here, not a SIGPIPE that ends this process.
    ssize_t n = ::send(fd_, all.data() + at, all.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) throw LauncherError(LauncherError::Kind::died, std::string("the launcher's socket closed: ") + std::strerror(errno));
    at += static_cast<size_t>(n);
  }
}

void Channel::read_exact(void* p, size_t n, Clock::time_point deadline, Clock::time_point spin_until) {
  auto* out = static_cast<char*>(p);
  size_t at = 0;
  while (at < n) {
    ssize_t r = ::recv(fd_, out + at, n - at, MSG_DONTWAIT);
    if (r > 0) {
      at += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw LauncherError(LauncherError::Kind::died, "the launcher closed its socket");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw LauncherError(LauncherError::Kind::died, std::string("reading from the launcher: ") + std::strerror(errno));
    auto now = Clock::now();
    if (now >= deadline) throw LauncherError(LauncherError::Kind::timeout, "the launcher did not answer in time");
    if (now < spin_until) continue;  // spin: a timed round trip must not pay for a wake-up
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd pf{fd_, POLLIN, 0};
    poll(&pf, 1, static_cast<int>(std::clamp<int64_t>(left, 1, 1000)));
  }
}

Message Channel::recv(double timeout_s, double spin_s) {
  auto now = Clock::now();
  auto deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(timeout_s, 1e7)));
  auto spin_until = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spin_s));
  char h[12];
  read_exact(h, sizeof h, deadline, spin_until);
  std::string hs(h, sizeof h);
  Reader r(hs);
  auto magic = static_cast<uint32_t>(r.i32());
  auto type = static_cast<uint32_t>(r.i32());
  auto len = static_cast<uint32_t>(r.i32());
  if (magic != kMagic) throw LauncherError(LauncherError::Kind::protocol, "the launcher sent bytes that are not a launcher message");
  if (len > kMaxPayload) throw LauncherError(LauncherError::Kind::protocol, "the launcher sent a message of " + std::to_string(len) + " bytes, over the limit");
  if (type < static_cast<uint32_t>(Msg::ready) || type > static_cast<uint32_t>(Msg::ack))
    throw LauncherError(LauncherError::Kind::protocol, "the launcher sent a message of unknown type " + std::to_string(type));
  Message m{static_cast<Msg>(type), std::string(len, '\0')};
  if (len) read_exact(m.payload.data(), len, deadline, spin_until);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Processes

void protect_process() { prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
bool process_protected() { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0; }

namespace {

// An fd at or above 10, close-on-exec, so that the child's dup2 onto 0..3 never clobbers it.
int high_fd(int fd) {
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (h < 0) throw std::runtime_error(std::string("fcntl: ") + std::strerror(errno));
  return h;
}

// Gives up every capability for good, in the child before it executes anything: a launcher run
// by root would otherwise keep CAP_SYS_PTRACE and CAP_DAC_OVERRIDE, which reach a protected
// worker's memory and descriptors all the same. SECBIT_NOROOT keeps exec from granting them back
// to uid 0; no_new_privs keeps a set-uid program from doing so. Raw system calls only (after fork).
void drop_capabilities() {
  syscall(SYS_prctl, PR_SET_SECUREBITS,
          SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED, 0, 0, 0);
  for (int cap = 0; cap <= 63; ++cap) syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
  syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2] = {};
  syscall(SYS_capset, &h, d);
  syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, int log_fd) {
  if (argv.empty()) throw std::invalid_argument("ChildProcess: no program");
  start(&argv, nullptr, log_fd);
}

ChildProcess::ChildProcess(const std::function<int(int)>& body, int log_fd) { start(nullptr, &body, log_fd); }

void ChildProcess::start(const std::vector<std::string>* argv, const std::function<int(int)>* body, int log_fd) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  int child_end = high_fd(sv[1]);
  close(sv[1]);
  int log = high_fd(log_fd);
  // Everything the child needs is made before fork: only async-signal-safe calls follow it.
  std::vector<char*> args;
  if (argv)
    for (auto& a : *argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]), close(child_end), close(log);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent) _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 || dup2(child_end, kChildFd) < 0) _exit(126);
    drop_capabilities();
    // Every other descriptor goes; close_range where the kernel has it, else one by one.
    if (syscall(SYS_close_range, kChildFd + 1, ~0u, 0) != 0) {
      long max = sysconf(_SC_OPEN_MAX);
      for (long fd = kChildFd + 1; fd < (max > 0 ? std::min(max, 1L << 20) : 65536); ++fd) close(static_cast<int>(fd));
    }
    if (body) _exit((*body)(kChildFd));
    execv(args[0], args.data());
    _exit(127);
  }
  close(child_end);
  close(log);
  pid_ = pid;
  channel_ = std::make_unique<Channel>(sv[0]);
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

std::string ChildProcess::try_reap(double wait_s) {
  if (!ended_.empty() || pid_ <= 0) return ended_;
  auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) return ended_ = describe_status(status);
    if (r < 0 && errno != EINTR) return ended_ = "ended (not a child any more)";
    if (Clock::now() >= until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string ChildProcess::kill_and_reap() {
  if (!ended_.empty() || pid_ <= 0) return ended_;
  if (std::string e = try_reap(); !e.empty()) return e;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  ended_ = describe_status(status);
  return ended_;
}

// ---------------------------------------------------------------------------------------------
// The parent's side

Launcher::Launcher(const std::vector<std::string>& argv, int log_fd) : child_(argv, log_fd) {}
Launcher::Launcher(const std::function<int(int)>& body, int log_fd) : child_(body, log_fd) {}

void Launcher::fail(LauncherError::Kind k, const std::string& m) {
  // A child that closed its socket has usually ended: say how (a crash's signal, say).
  std::string how = k == LauncherError::Kind::died ? child_.try_reap(0.5) : "";
  std::string killed = child_.kill_and_reap();
  if (how.empty() && k == LauncherError::Kind::died) how = killed;
  throw LauncherError(k, how.empty() ? m : m + "; the launcher " + how);
}

Message Launcher::expect(Msg type, double timeout_s) {
  Message m;
  try {
    m = child_.channel().recv(timeout_s, spin_s);
  } catch (const LauncherError& e) {
    fail(e.kind, e.what());
  }
  if (m.type != type)
    fail(LauncherError::Kind::protocol, "the launcher sent message type " + std::to_string(static_cast<uint32_t>(m.type)) + " where " +
                                            std::to_string(static_cast<uint32_t>(type)) + " was due");
  return m;
}

void Launcher::wait_ready(double timeout_s) {
  if (ready_) return;
  Message m = expect(Msg::ready, timeout_s);
  uint8_t ok = 0;
  std::string reason;
  try {
    Reader r(m.payload);
    ok = r.u8();
    r.i32();
    reason = r.str();
    r.end();
  } catch (const LauncherError& e) {
    fail(e.kind, e.what());
  }
  if (!ok) fail(LauncherError::Kind::refused, "the launcher has no CUDA context: " + reason);
  ready_ = true;
}

namespace {
std::string read_ack(const Message& m, int32_t* value) {
  Reader r(m.payload);
  uint8_t ok = r.u8();
  std::string err = r.str();
  int32_t v = r.i32();
  r.end();
  if (value) *value = v;
  return ok ? "" : (err.empty() ? std::string("refused") : err);
}
}  // namespace

std::string Launcher::exchange(Msg type, const std::string& payload, int32_t* index) {
  try {
    child_.channel().send(type, payload);
    return read_ack(expect(Msg::ack, call_timeout_s), index);
  } catch (const LauncherError& e) {
    fail(e.kind, e.what());
  }
}

void Launcher::configure(const std::vector<int64_t>& dims, uint64_t flush_bytes) {
  Writer w;
  w.i32(static_cast<int32_t>(dims.size()));
  for (int64_t d : dims) w.u64(static_cast<uint64_t>(d));
  w.u64(flush_bytes);
  std::string err = exchange(Msg::configure, w.bytes(), nullptr);
  if (!err.empty()) fail(LauncherError::Kind::refused, "the launcher could not set up: " + err);
}

void Launcher::map(int32_t set, const std::vector<std::string>& handles, const std::vector<uint64_t>& offsets) {
  if (handles.size() != offsets.size()) throw std::invalid_argument("Launcher::map: one offset per handle");
  Writer w;
  w.i32(set).i32(static_cast<int32_t>(handles.size()));
  for (size_t i = 0; i < handles.size(); ++i) {
    if (handles[i].size() != kIpcHandleBytes) throw std::invalid_argument("Launcher::map: an IPC handle is 64 bytes");
    w.raw(handles[i].data(), kIpcHandleBytes).u64(offsets[i]);
  }
  std::string err = exchange(Msg::map, w.bytes(), nullptr);
  if (!err.empty()) fail(LauncherError::Kind::refused, "the launcher could not map the buffers: " + err);
}

int32_t Launcher::load(const std::string& path) {
  int32_t index = -1;
  std::string err = exchange(Msg::load, Writer().str(path).bytes(), &index);
  // A library that cannot be loaded is the candidate's failure; the launcher is still usable.
  if (!err.empty()) throw LauncherError(LauncherError::Kind::refused, err);
  return index;
}

CallResult Launcher::call(int32_t lib, int32_t set, const std::function<void()>& on_stream_done) {
  CallResult r;
  Writer w;
  w.i32(lib).i32(set).u8(on_stream_done ? 1 : 0);
  auto t0 = Clock::now();
  try {
    child_.channel().send(Msg::call, w.bytes());
  } catch (const LauncherError& e) {
    fail(e.kind, e.what());
  }
  if (on_stream_done) {
    Message h = expect(Msg::half, call_timeout_s);
    if (!h.payload.empty()) fail(LauncherError::Kind::protocol, "the launcher's stream-done message has a payload");
    on_stream_done();
    try {
      child_.channel().send(Msg::resume);
    } catch (const LauncherError& e) {
      fail(e.kind, e.what());
    }
  }
  Message m = expect(Msg::done, call_timeout_s);
  r.bracket_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  try {
    Reader rd(m.payload);
    r.rc = rd.i32();
    r.table_changed = rd.u8() != 0;
    r.dims_changed = rd.u8() != 0;
    r.stream_error = rd.i32();
    r.device_error = rd.i32();
    r.event_us = rd.f64();
    r.gap_us = rd.f64();
    r.error_text = rd.str();
    int32_t n = rd.i32();
    if (n < 0 || n > 256) throw LauncherError(LauncherError::Kind::protocol, "the launcher sent a bad pointer table");
    for (int32_t i = 0; i < n; ++i) {
      int32_t k = rd.i32();
      if (k < -1 || k >= n) throw LauncherError(LauncherError::Kind::protocol, "the launcher sent a bad pointer table");
      r.table_map.push_back(k);
    }
    rd.end();
  } catch (const LauncherError& e) {
    fail(e.kind, e.what());
  }
  if (!std::isfinite(r.event_us) || r.event_us < 0 || r.event_us > 1e10 || !std::isfinite(r.gap_us) || r.gap_us < 0 || r.gap_us > 1e10)
    fail(LauncherError::Kind::protocol, "the launcher reported a time that is not a time");
  return r;
}

std::vector<double> Launcher::calibrate(int n, int warmup, const std::function<void()>& before_each) {
  std::vector<double> over;
  for (int i = 0; i < warmup + n; ++i) {
    if (before_each) before_each();
    CallResult r = call(-1, 0);
    if (i >= warmup) over.push_back(r.bracket_us - r.event_us);
  }
  return over;
}

// ---------------------------------------------------------------------------------------------
// The child's side

int serve(int fd, Backend& backend) {
  Channel ch(fd);
  auto ack = [&](const std::string& err, int32_t v) { ch.send(Msg::ack, Writer().u8(err.empty() ? 1 : 0).str(err).i32(v).bytes()); };
  try {
    std::string why = backend.init();
    ch.send(Msg::ready, Writer().u8(why.empty() ? 1 : 0).i32(static_cast<int32_t>(getpid())).str(why).bytes());
    if (!why.empty()) return 1;
    for (;;) {
      Message m;
      try {
        m = ch.recv(1e9, 0.002);
      } catch (const LauncherError& e) {
        return e.kind == LauncherError::Kind::died ? 0 : 2;  // the parent closed: done
      }
      Reader r(m.payload);
      switch (m.type) {
        case Msg::configure: {
          int32_t n = r.i32();
          if (n < 0 || n > 64) return 2;
          std::vector<int64_t> dims;
          for (int32_t i = 0; i < n; ++i) dims.push_back(static_cast<int64_t>(r.u64()));
          uint64_t flush = r.u64();
          r.end();
          ack(backend.configure(dims, flush), 0);
          break;
        }
        case Msg::map: {
          int32_t set = r.i32(), n = r.i32();
          if (n < 0 || n > 256) return 2;
          std::vector<std::string> handles;
          std::vector<uint64_t> offsets;
          for (int32_t i = 0; i < n; ++i) {
            std::string h(kIpcHandleBytes, '\0');
            r.raw(h.data(), kIpcHandleBytes);
            handles.push_back(h);
            offsets.push_back(r.u64());
          }
          r.end();
          ack(backend.map(set, handles, offsets), 0);
          break;
        }
        case Msg::load: {
          std::string path = r.str();
          r.end();
          int32_t index = -1;
          std::string err = backend.load(path, &index);
          ack(err, index);
          break;
        }
        case Msg::call: {
          int32_t lib = r.i32(), set = r.i32();
          bool hold = r.u8() != 0;
          r.end();
          CallResult c = backend.call(lib, set, [&] {
            if (!hold) return;
            ch.send(Msg::half);
            Message go = ch.recv(1e9, 0.002);
            if (go.type != Msg::resume) throw LauncherError(LauncherError::Kind::protocol, "expected resume");
          });
          ch.send(Msg::done, Writer()
                                 .i32(c.rc)
                                 .u8(c.table_changed)
                                 .u8(c.dims_changed)
                                 .i32(c.stream_error)
                                 .i32(c.device_error)
                                 .f64(c.event_us)
                                 .f64(c.gap_us)
                                 .str(c.error_text)
                                 .i32(static_cast<int32_t>(c.table_map.size()))
                                 .bytes() +
                             [&] {
                               Writer t;
                               for (int32_t k : c.table_map) t.i32(k);
                               return t.bytes();
                             }());
          break;
        }
        default:
          return 2;
      }
    }
  } catch (const LauncherError& e) {
    return e.kind == LauncherError::Kind::died ? 0 : 2;
  }
}

}  // namespace ksol::launcher
