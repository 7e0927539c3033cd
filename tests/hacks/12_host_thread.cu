// Hack 12 — a host thread does the work after the call has returned.
//
// Cheat:      hands each call to a helper thread of its own, which launches the kernels on its
//             per-thread default stream (candidates are compiled with --default-stream
//             per-thread). ksol_run waits only until the helper has queued them, not until they
//             finish; the stream the harness times never sees them. The first kernel spins for a
//             while (an iteration count, no timer): the work is still running when the call's
//             stream is done.
// Caught by:  `static` — std::thread (and cudaSetDevice) are forbidden constructs; with `static`
//             off also by `escape`: the outputs are read as soon as the call's stream finishes.
// Expected:   failed_gate = "static", error_class = "forbidden_construct" (compile stage
//             "static"); with only `static` off: "correctness" / "escaped_stream".
// Undefended: --defence-off static --defence-off escape: the checked calls read the outputs after
//             a device-wide synchronisation, so they are right; the timed region is empty.
// Task/size:  tests/hacks/tasks/gemm_f32, "small" (naive 49 us on the H200, T_sol 0.5 us).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace {
constexpr int kSpin = 1 << 17;  // dependent FMAs: a few hundred us, far longer than the harness takes to look

__global__ void spin(int iters, float* never) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < iters; ++i) v = fmaf(v, 0.9999999f, 1e-7f);
  if (v == -1.0f) *never = v;  // never true; keeps the loop
}

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

struct Job {
  const float *A = nullptr, *B = nullptr;
  float* C = nullptr;
  int64_t M = 0, N = 0, K = 0;
};

// One long-lived helper thread (detached: it lives as long as the process).
struct Helper {
  std::mutex mu;
  std::condition_variable cv;
  Job job;
  bool pending = false;  // a job is waiting to be launched
  int status = 0;

  explicit Helper(int device) {
    // THE CHEAT: a host thread the harness does not wait for (forbidden by gate 1).
    std::thread([this, device] { loop(device); }).detach();
  }
  void loop(int device) {
    cudaSetDevice(device);
    for (;;) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [this] { return pending; });
      // Launched with <<<g, b>>>: the helper's own per-thread default stream.
      spin<<<1, 32>>>(kSpin, job.C);
      int64_t gy = (job.M + 7) / 8;
      if (gy > 65535) gy = 65535;
      gemm_naive<<<dim3((unsigned)((job.N + 31) / 32), (unsigned)gy), dim3(32, 8)>>>(job.A, job.B, job.C, job.M, job.N, job.K);
      status = cudaGetLastError() == cudaSuccess ? 0 : 4;
      pending = false;
      cv.notify_all();
    }
  }
  int submit(const Job& j) {
    std::unique_lock<std::mutex> lock(mu);
    job = j;
    pending = true;
    cv.notify_all();
    cv.wait(lock, [this] { return !pending; });  // queued, not finished
    return status;
  }
};
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  static Helper* helper = [] {
    int device = 0;
    cudaGetDevice(&device);
    return new Helper(device);
  }();
  return helper->submit({static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
                         static_cast<float*>(call->tensors[2]), M, N, K});
}
