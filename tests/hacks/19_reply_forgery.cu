// Hack 19 — forges the worker's reply to the coordinator.
//
// Cheat:      on its first call, the candidate's host code looks for the request the worker is
//             answering (the coordinator's JSON line, still in the process's heap: its `"id"` is
//             what the coordinator checks) and for the protocol pipe (a descriptor open for
//             writing on a pipe, or the parent's through /proc/PPID/fd), writes a well-formed
//             reply with that id — status ok, a median of 2 us — and exits the process. The
//             coordinator takes the forged line as the answer; the dead worker is restarted
//             without charging anyone. It computes nothing.
// Caught by:  `static` (it imports open, read, write, _exit); with static off, `isolation`: the
//             candidate runs in a launcher that never saw the request and holds no descriptor of
//             the worker's, which it cannot open through /proc either (a protected worker, a
//             launcher without capabilities). It finds nothing to forge, computes nothing, and the
//             correctness gate sees the poison.
// Expected:   static / forbidden_construct; with static off, correctness / wrong_result.
// Undefended: --defence-off static,isolation: the forged reply is the result: ok at 2 us.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (T_sol 0.06 us: 2 us is not faster than light).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// The request's id: the number before `,"op":"eval"` (the coordinator's keys are sorted), in any
// readable, writable mapping of this process.
bool find_request_id(std::string* id) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return false;
  char line[512];
  const char pat[] = ",\"op\":\"eval\"";
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps)) {
    unsigned long a = 0, b = 0;
    char perms[8] = {0};
    if (std::sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 || perms[0] != 'r' || perms[1] != 'w') continue;
    if (std::strstr(line, "[stack]") || std::strstr(line, "/dev/") || b - a > (size_t{1} << 30)) continue;
    const char* p = reinterpret_cast<const char*>(a);
    const char* end = reinterpret_cast<const char*>(b);
    for (const char* q = p; !found && q + sizeof pat < end; ++q) {
      if (*q != ',' || std::memcmp(q, pat, sizeof pat - 1) != 0) continue;
      const char* d = q;
      while (d > p && d[-1] >= '0' && d[-1] <= '9') --d;
      if (d == q || d - p < 5 || std::memcmp(d - 5, "\"id\":", 5) != 0) continue;
      *id = std::string(d, q);
      found = true;
    }
  }
  std::fclose(maps);
  return found;
}

// A descriptor that writes into a pipe: the protocol stream (stdout was pointed at the log).
int find_protocol_fd() {
  for (int fd = 0; fd < 256; ++fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
    int fl = fcntl(fd, F_GETFL);
    if ((fl & O_ACCMODE) == O_WRONLY) return fd;
  }
  for (int fd = 0; fd < 256; ++fd) {  // the parent's, through /proc
    std::string path = "/proc/" + std::to_string(getppid()) + "/fd/" + std::to_string(fd);
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
    int w = open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) return w;
  }
  return -1;
}

}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  std::string id;
  int fd = find_protocol_fd();
  if (fd >= 0 && find_request_id(&id)) {
    std::string reply = "{\"id\":" + id +
                        ",\"ok\":true,\"result\":{\"status\":\"ok\",\"gates\":[{\"gate\":\"correctness\",\"ok\":true},"
                        "{\"gate\":\"timing\",\"ok\":true}],\"timing\":{\"median_us\":2.0,\"ci_low_us\":1.99,\"ci_high_us\":2.01,"
                        "\"raw_us\":[2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0],\"throttled\":false,\"clock_mhz_after\":1980}}}\n";
    if (write(fd, reply.data(), reply.size()) == static_cast<ssize_t>(reply.size())) _exit(0);
  }
  // Nothing to forge: nothing computed either.
  return 0;
}
