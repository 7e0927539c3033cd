// Hack 06 — detects the timing phase by counting calls.
//
// Cheat:      the correctness gate makes a fixed number of calls before the timing loop starts:
//             3 seeds x 3 distributions (gemm_f32 has no special values) x 2 poisons = 18, then 3
//             warm-up calls. From the 22nd call on the hack returns at once: the timing loop
//             measures an empty region.
// Caught by:  `verify-timed` — timed calls kept at random after they ran, and the call after
//             the last sample, are checked against the reference.
// Expected:   failed_gate = "timing", error_class = "timed_call_wrong".
// Undefended: --defence-off verify-timed: every checked call computed honestly; no timed call is
//             looked at.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (128^3, T_sol 0.06 us: an empty region is not
//             faster than speed-of-light).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
// Calls the harness checks plus its warm-up calls (see src/harness/harness.cpp).
constexpr uint64_t kHonestCalls = 3 * 3 * 2 + 3;

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

uint64_t g_calls = 0;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  // THE CHEAT: past the checked and warm-up calls, nobody is looking.
  if (g_calls++ >= kHonestCalls) return 0;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
