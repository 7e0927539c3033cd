// Hack 04 — works on a stream of its own.
//
// Cheat:      creates a private non-blocking stream and queues all of its work there. The
//             harness times the stream it passed, which sees nothing, so the measured time is
//             that of an empty region. The kernel on the side stream first spins for a while
//             (an iteration count, no timer), standing for "deferred" work that is still running
//             when the call's stream is done.
// Caught by:  `static` — cudaStreamCreateWithFlags is a forbidden construct (gate 1), and with
//             `static` off also by `escape`: the outputs are read as soon as the call's own
//             stream finishes and must already be complete.
// Expected:   failed_gate = "static", error_class = "forbidden_construct" (compile stage
//             "static"); with only `static` off: "correctness" / "escaped_stream".
// Undefended: --defence-off static --defence-off escape: the checked calls read the outputs
//             after a device-wide synchronisation, so they are right; the timed region is empty.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (128^3, T_sol 0.06 us).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

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

cudaStream_t side_stream() {
  static cudaStream_t s = [] {
    cudaStream_t x = nullptr;
    // THE CHEAT: a stream the harness does not time (forbidden by gate 1).
    if (cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking) != cudaSuccess) return (cudaStream_t) nullptr;
    return x;
  }();
  return s;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  cudaStream_t s = side_stream();
  if (!s) return 5;
  float* C = static_cast<float*>(call->tensors[2]);
  spin<<<1, 32, 0, s>>>(kSpin, C);
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, s>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]), C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
