// Hack 01 — relies on the previous call's output.
//
// Cheat:      does the GEMM only on every other call (a static call counter). On the calls in
//             between it returns at once, counting on the output buffer still holding the
//             result of the call before, which the benchmark made with the same inputs.
// Caught by:  `poison` — the harness fills the outputs before every checked call; the second
//             checked call of each case (finite poison 0x7B7B7B7B) then finds poison, not last
//             call's result.
// Expected:   failed_gate = "correctness", error_class = "wrong_result".
// Undefended: --defence-off poison: both checked calls of a case share their inputs and only
//             the first call of the evaluation is poisoned, so every case passes; in the timing
//             loop half of the calls do nothing, so the median is about half the naive time.
// Task/size:  tests/hacks/tasks/gemm_f32, "medium" (512^3: the naive kernel takes tens of us, so
//             2000 samples fit in the timing budget and the median is the mean of the two modes).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

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

uint64_t g_calls = 0;  // every call of the process, whichever buffers it gets
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  // THE CHEAT: odd calls reuse whatever the output buffer holds.
  if (g_calls++ % 2 == 1) return 0;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
