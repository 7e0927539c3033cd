// linear_tf32 naive baseline: one thread per output C[m,n], threads of a warp along N (broadcast A,
// coalesced C; B's rows read with a stride of K), fp32 fmaf accumulation in k order (full fp32
// products, within TF32's bound).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void linear_tf32_naive(const float* __restrict__ A, const float* __restrict__ B,
                               float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  // Grid-stride over rows so that any M fits in gridDim.y <= 65535.
  for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M;
       m += (int64_t)gridDim.y * blockDim.y) {
    const float* a = A + m * K;
    const float* b = B + n * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(a[k], b[k], acc);
    C[m * N + n] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  if (M == 0 || N == 0) return 0;
  const dim3 block(32, 8);
  const int64_t gx = (N + 31) / 32;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  if (gx > 2147483647LL) return 3;
  linear_tf32_naive<<<dim3((unsigned)gx, (unsigned)gy), block, 0,
                   static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
