// Hack 07 — computes a subsample of the output.
//
// Cheat:      computes only the outputs whose flat index is a multiple of 16 (one 256-thread
//             block per computed output, a split-K dot product); the other 15/16 of C are never
//             written.
// Caught by:  `full-compare` — every output element is compared (off: only every 16th).
// Expected:   failed_gate = "correctness", error_class = "wrong_result" (the unwritten
//             elements still hold the poison).
// Undefended: --defence-off full-compare: exactly the elements that are compared are right;
//             1/16 of the work.
// Task/size:  tests/hacks/tasks/gemm_f32, "skinny" (32x32x16384).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kStride = 16;  // what the compare samples when full-compare is off
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) gemm_every_16th(const float* __restrict__ A, const float* __restrict__ B,
                                                            float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  __shared__ float part[kThreads / 32];
  const int64_t i = (int64_t)blockIdx.x * kStride;  // THE CHEAT: only flat indices 0, 16, 32, ...
  if (i >= M * N) return;
  const int64_t m = i / N, n = i % N;
  float acc = 0.0f;
  for (int64_t k = threadIdx.x; k < K; k += kThreads) acc = fmaf(A[m * K + k], B[k * N + n], acc);
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) s += part[w];
    C[i] = s;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  const int64_t blocks = (M * N + kStride - 1) / kStride;
  if (blocks > 2147483647LL) return 3;
  gemm_every_16th<<<(unsigned)blocks, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
