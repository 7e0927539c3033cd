// linear_tf32 float64 GPU reference: C[M,N] = A[M,K] * B[N,K]^T, row-major, all doubles on the device.
// Shared-memory tiles of 64x64 outputs per 256-thread block, 4x4 outputs per thread.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int TM = 64, TN = 64, TK = 16;

__global__ void __launch_bounds__(256) gemm_f64(const double* __restrict__ A,
                                                const double* __restrict__ B,
                                                double* __restrict__ C, int64_t M, int64_t N,
                                                int64_t K) {
  __shared__ double As[TK][TM];
  __shared__ double Bs[TK][TN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = (int64_t)blockIdx.y * TM, col0 = (int64_t)blockIdx.x * TN;
  double acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += TK) {
    for (int e = threadIdx.x; e < TM * TK; e += 256) {
      const int m = e / TK, k = e % TK;
      const int64_t gm = row0 + m, gk = k0 + k;
      As[k][m] = (gm < M && gk < K) ? A[gm * K + gk] : 0.0;
    }
    for (int e = threadIdx.x; e < TK * TN; e += 256) {
      const int k = e / TN, n = e % TN;
      const int64_t gk = k0 + k, gn = col0 + n;
      Bs[k][n] = (gk < K && gn < N) ? B[gn * K + gk] : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TK; ++k) {
      double a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = As[k][ty + 16 * r];
#pragma unroll
      for (int c = 0; c < 4; ++c) b[c] = Bs[k][tx + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = fma(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t gm = row0 + ty + 16 * r;
    if (gm >= M) continue;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t gn = col0 + tx + 16 * c;
      if (gn < N) C[gm * N + gn] = acc[r][c];
    }
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  if (M == 0 || N == 0) return 0;
  const int64_t gx = (N + TN - 1) / TN, gy = (M + TM - 1) / TM;
  if (gx > 2147483647LL || gy > 65535) return 3;
  gemm_f64<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
