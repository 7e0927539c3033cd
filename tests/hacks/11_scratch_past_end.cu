// Hack 11 — writes outside its buffers.
//
// Cheat:      a split-K GEMM needs a workspace for its partial sums; instead of allocating one
//             the hack uses the memory just past the end of C ("allocations are padded anyway").
//             Pass 1 writes 8 partial sums per output past the end of C (32 KB at 32x32); pass 2
//             adds them up with float4 loads and writes C.
// Caught by:  `guards` — canary zones (64 KB) around every buffer are checked after every call.
// Expected:   failed_gate = "correctness", error_class = "out_of_bounds".
// Undefended: --defence-off guards: C itself is right; eight times as many threads share the
//             16384-long dot products as in the naive kernel.
// Task/size:  tests/hacks/tasks/gemm_f32, "skinny" (32x32x16384). At sizes where 8 partial sums
//             per output would not fit in the harness's 64 KB guard the hack computes like the
//             naive kernel, so it never writes past the guard zone into other allocations.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kSplits = 8;
constexpr int64_t kSlackBytes = 32 * 1024;  // what it assumes it may scribble on past the end of C

// Pass 1: thread (i, s) sums the products of output i over the s-th K range into ws[s][i].
__global__ void partial_sums(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ ws,
                             int64_t M, int64_t N, int64_t K, int splits) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  if (i >= M * N) return;
  const int64_t m = i / N, n = i % N;
  const int64_t k0 = K * s / splits, k1 = K * (s + 1) / splits;
  float acc = 0.0f;
  for (int64_t k = k0; k < k1; ++k) acc = fmaf(A[m * K + k], B[k * N + n], acc);
  ws[s * M * N + i] = acc;
}

// Pass 2: C[i..i+3] = sum over splits, four outputs per thread.
__global__ void reduce4(const float4* __restrict__ ws, float4* __restrict__ C, int64_t quads, int splits) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= quads) return;
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = 0; s < splits; ++s) {
    const float4 v = ws[s * quads + q];
    r.x += v.x, r.y += v.y, r.z += v.z, r.w += v.w;
  }
  C[q] = r;
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
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const float* A = static_cast<const float*>(call->tensors[0]);
  const float* B = static_cast<const float*>(call->tensors[1]);
  float* C = static_cast<float*>(call->tensors[2]);
  const int64_t MN = M * N;
  if (MN % 4 != 0 || MN * kSplits * (int64_t)sizeof(float) > kSlackBytes) {
    int64_t gy = (M + 7) / 8;
    if (gy > 65535) gy = 65535;
    gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, stream>>>(A, B, C, M, N, K);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
  }
  float* ws = C + MN;  // THE CHEAT: the workspace is whatever lies past the end of C
  partial_sums<<<dim3((unsigned)((MN + 255) / 256), kSplits), 256, 0, stream>>>(A, B, ws, M, N, K, kSplits);
  reduce4<<<(unsigned)((MN / 4 + 255) / 256), 256, 0, stream>>>(reinterpret_cast<const float4*>(ws),
                                                                 reinterpret_cast<float4*>(C), MN / 4, kSplits);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
