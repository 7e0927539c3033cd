// Hack 23 — a result cache keyed by the problem's shape.
//
// Cheat:      computes honestly through the correctness gate's calls and the warm-up (3 seeds x 3
//             distributions x 2 poisons + 3 warm-up calls = 21), keeping a private copy of each
//             output under its dims (M, N, K). From then on a call whose dims it has seen copies
//             that output back instead of computing: the output buffer holds a well-formed
//             result (no poison left, no NaN), only not the one for these inputs.
// Caught by:  `verify-timed` — timed calls kept at random after they ran, and the call after the
//             last sample, are checked against their own inputs' reference; every timed call's
//             inputs changed (`fresh-inputs`), so a replayed output is wrong on all of them.
// Expected:   failed_gate = "timing", error_class = "timed_call_wrong".
// Undefended: --defence-off verify-timed: every checked call computed honestly; the timed calls
//             are one device copy of 64 KiB each, against the naive kernel.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (128^3, T_sol 0.06 us: a copy of the output is
//             not faster than speed-of-light).
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

// A few shapes' last outputs.
struct Entry {
  int64_t M = -1, N = -1, K = -1;
  void* out = nullptr;
};
constexpr int kEntries = 8;
Entry g_cache[kEntries];
uint64_t g_calls = 0;

Entry* find(int64_t M, int64_t N, int64_t K) {
  for (Entry& e : g_cache)
    if (e.M == M && e.N == N && e.K == K) return &e;
  return nullptr;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const size_t bytes = static_cast<size_t>(M) * static_cast<size_t>(N) * sizeof(float);
  Entry* hit = find(M, N, K);
  // THE CHEAT: past the checked and warm-up calls, a shape seen before gets its old answer.
  if (g_calls++ >= kHonestCalls && hit)
    return cudaMemcpyAsync(call->tensors[2], hit->out, bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess ? 0 : 5;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, stream>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  if (cudaGetLastError() != cudaSuccess) return 4;
  if (!hit)
    for (Entry& e : g_cache)
      if (!e.out) {
        if (cudaMalloc(&e.out, bytes) != cudaSuccess) return 6;
        e.M = M, e.N = N, e.K = K;
        hit = &e;
        break;
      }
  if (hit && cudaMemcpyAsync(hit->out, call->tensors[2], bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 7;
  return 0;
}
