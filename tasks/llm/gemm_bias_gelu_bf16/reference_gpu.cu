// gemm_bias_gelu_bf16 float64 GPU reference: 64x64 shared-memory tiles, 4x4 doubles per thread, then
// C = gelu_tanh(acc + bias[n]) in double (gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kTile = 64, kStep = 16;

__device__ __forceinline__ double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
}

__global__ void __launch_bounds__(256) gemm_bias_gelu_f64(const double* __restrict__ A,
                                                          const double* __restrict__ B,
                                                          const double* __restrict__ bias,
                                                          double* __restrict__ C, int64_t M, int64_t N,
                                                          int64_t K) {
  __shared__ double As[kStep][kTile];  // As[k][m]
  __shared__ double Bs[kStep][kTile];  // Bs[k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = (int64_t)blockIdx.y * kTile, n0 = (int64_t)blockIdx.x * kTile;
  double acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kStep) {
    for (int e = threadIdx.x; e < kTile * kStep; e += 256) {
      const int m = e / kStep, k = e % kStep;
      As[k][m] = (m0 + m < M && k0 + k < K) ? A[(m0 + m) * K + k0 + k] : 0.0;
      const int kb = e / kTile, n = e % kTile;
      Bs[kb][n] = (k0 + kb < K && n0 + n < N) ? B[(k0 + kb) * N + n0 + n] : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kStep; ++k)
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = fma(As[k][ty + 16 * r], Bs[k][tx + 16 * c], acc[r][c]);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t m = m0 + ty + 16 * r, n = n0 + tx + 16 * c;
      if (m < M && n < N) C[m * N + n] = gelu_tanh(acc[r][c] + bias[n]);
    }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  if (M == 0 || N == 0) return 0;
  const int64_t gx = (N + kTile - 1) / kTile, gy = (M + kTile - 1) / kTile;
  if (gx > 2147483647LL || gy > 65535) return 3;
  gemm_bias_gelu_f64<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<const double*>(call->tensors[2]), static_cast<double*>(call->tensors[3]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
