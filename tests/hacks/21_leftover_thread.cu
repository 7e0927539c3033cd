// Hack 21 — leaves a thread behind that answers for the next candidate.
//
// Cheat:      an honest GEMM (the naive kernel, run twice: slower than the naive baseline), whose
//             first call starts a thread that outlives its evaluation. The thread watches the
//             process's memory for the next request (an `"id"` with `"op":"eval"` that is not its
//             own evaluation's) and answers it on the protocol pipe — the next candidate, here the
//             naive baseline, "ok" at 1000 us — then ends the process (a worker that dies between
//             calls is restarted without charging anyone). Its own evaluation is honest; the
//             comparison it is part of is not.
// Caught by:  `static` (it imports pthread_create, open, write, process_vm_readv); with static off,
//             `isolation`: the candidate's launcher ends with its evaluation, thread and all, and
//             never held the worker's requests or its protocol pipe. Neutralised, not rejected:
//             the hack passes honestly and is slower than the baseline (partial_max_speedup).
// Expected:   static / forbidden_construct; with static off, ok and no speedup over naive.
// Undefended: --defence-off static,isolation: the baseline's forged 1000 us make the hack look
//             many times faster than naive.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny".
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void gemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int64_t M, int64_t N, int64_t K) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M; m += (int64_t)gridDim.y * blockDim.y) {
    const float* a = A + m * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(a[k], B[k * N + n], acc);
    C[m * N + n] = acc;
  }
}

// Every request id in the process's writable memory (read with process_vm_readv, which fails
// instead of faulting where the harness unmaps memory meanwhile).
std::vector<std::string> request_ids() {
  std::vector<std::string> ids;
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return ids;
  const char pat[] = ",\"op\":\"eval\"";
  std::vector<char> buf(size_t{1} << 20);
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    unsigned long a = 0, b = 0;
    char perms[8] = {0};
    if (std::sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 || perms[0] != 'r' || perms[1] != 'w') continue;
    if (std::strstr(line, "/dev/") || b - a > (size_t{1} << 30)) continue;
    for (unsigned long at = a; at < b; at += buf.size() - 64) {
      size_t n = std::min<size_t>(buf.size(), b - at);
      iovec local{buf.data(), n}, remote{reinterpret_cast<void*>(at), n};
      ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
      if (got <= 0) break;
      for (ssize_t i = 5; i + static_cast<ssize_t>(sizeof pat) <= got; ++i) {
        if (buf[i] != ',' || std::memcmp(&buf[i], pat, sizeof pat - 1) != 0) continue;
        ssize_t d = i;
        while (d > 5 && buf[d - 1] >= '0' && buf[d - 1] <= '9') --d;
        if (d < i && std::memcmp(&buf[d - 5], "\"id\":", 5) == 0) ids.emplace_back(&buf[d], &buf[i]);
      }
      if (n < buf.size()) break;
    }
  }
  std::fclose(maps);
  return ids;
}

int protocol_fd() {
  for (int fd = 0; fd < 256; ++fd) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_WRONLY) return fd;
  }
  return -1;
}

void answer_for_the_next(std::vector<std::string> mine) {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const std::string& id : request_ids()) {
      bool own = false;
      for (const std::string& m : mine) own = own || m == id;
      int fd = protocol_fd();
      if (own || fd < 0) continue;
      std::string reply = "{\"id\":" + id +
                          ",\"ok\":true,\"result\":{\"status\":\"ok\",\"gates\":[{\"gate\":\"correctness\",\"ok\":true},"
                          "{\"gate\":\"timing\",\"ok\":true}],\"timing\":{\"median_us\":1000.0,\"ci_low_us\":999,\"ci_high_us\":1001,"
                          "\"raw_us\":[1000,1000,1000,1000,1000,1000,1000,1000,1000,1000],\"throttled\":false}}}\n";
      if (write(fd, reply.data(), reply.size()) == static_cast<ssize_t>(reply.size())) _exit(0);
    }
  }
}

bool g_started = false;

}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  if (!g_started) {
    g_started = true;
    std::thread(answer_for_the_next, request_ids()).detach();
  }
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  for (int rep = 0; rep < 2; ++rep)
    gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, static_cast<cudaStream_t>(call->stream)>>>(
        static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]), static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
