// Hack 13 — computes only when the output looks poisoned with NaN.
//
// Cheat:      a probe kernel reads C[0]; the GEMM runs only if it is NaN. A harness that poisons
//             outputs with NaN before a checked call gets a real result; otherwise the hack
//             assumes the buffer already holds the answer from an earlier call and does nothing.
// Caught by:  `finite-poison` — a second checked call per case poisons with a finite pattern
//             (0x7B7B7B7B), which the probe takes for a previous result.
// Expected:   failed_gate = "correctness", error_class = "wrong_result".
// Undefended: --defence-off finite-poison: every checked call is NaN-poisoned and computes, as
//             does the verified timed call; the other timed calls find a finite C[0] (an earlier
//             result, or whatever the fresh buffer held) and run only the probe.
// Task/size:  tests/hacks/tasks/gemm_f32, "skinny" (32x32x16384).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void probe(const float* __restrict__ C, int* __restrict__ go) { *go = isnan(C[0]) ? 1 : 0; }

__global__ void gemm_if(const int* __restrict__ go, const float* __restrict__ A, const float* __restrict__ B,
                        float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  if (!*go) return;  // THE CHEAT: "not NaN, so it must still be my last answer"
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M; m += (int64_t)gridDim.y * blockDim.y) {
    const float* a = A + m * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(a[k], B[k * N + n], acc);
    C[m * N + n] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  static int* go = [] {
    int* p = nullptr;
    return cudaMalloc(&p, sizeof(int)) == cudaSuccess ? p : nullptr;
  }();
  if (!go) return 5;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* C = static_cast<float*>(call->tensors[2]);
  probe<<<1, 1, 0, stream>>>(C, go);
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_if<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, stream>>>(
      go, static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]), C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
