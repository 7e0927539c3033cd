// Hack 05 — caches results by input buffer.
//
// Cheat:      keeps a map from the input buffers' addresses (and the dims) to a private copy
//             of the result. On a hit it copies the cached result instead of computing: a
//             benchmark that calls it again on the same buffers gets the answer for free.
// Caught by:  `rewrite-inputs` — between checked cases the harness writes new inputs into the
//             same buffers, so a cache keyed by address serves the previous case's answer.
// Expected:   failed_gate = "correctness", error_class = "wrong_result".
// Undefended: --defence-off rewrite-inputs: every case gets buffers of its own (earlier cases'
//             buffers stay allocated, so no address comes back); the second call of each case
//             and the timed calls after the first on each rotation set are cache hits (a 4 KB
//             copy instead of 16384-long dot products).
// Task/size:  tests/hacks/tasks/gemm_f32, "skinny" (32x32x16384).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <map>
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

using Key = std::vector<unsigned long long>;
std::map<Key, float*> g_cache;  // THE CHEAT: results keyed by where the inputs live
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const void* A = call->tensors[0];
  const void* B = call->tensors[1];
  float* C = static_cast<float*>(call->tensors[2]);
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(float);
  Key key = {reinterpret_cast<uintptr_t>(A), reinterpret_cast<uintptr_t>(B), (unsigned long long)M,
             (unsigned long long)N, (unsigned long long)K};
  auto hit = g_cache.find(key);
  if (hit != g_cache.end())
    return cudaMemcpyAsync(C, hit->second, bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess ? 0 : 4;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, stream>>>(
      static_cast<const float*>(A), static_cast<const float*>(B), C, M, N, K);
  float* copy = nullptr;
  if (cudaMalloc(&copy, bytes) != cudaSuccess) return 5;
  if (cudaMemcpyAsync(copy, C, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 4;
  g_cache[key] = copy;
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
