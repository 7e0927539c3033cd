// conv2d_nhwc_tf32 float64 GPU reference: NHWC 3x3 cross-correlation with a KRSC filter, stride 1,
// zero padding 1, in double, as the GEMM Y[N*H*W, K] = A[N*H*W, 9*C] * F[K, 9*C]^T, where A's row
// for a pixel gathers its 3x3 patch from X on load (taps in the padding read 0) and a KRSC filter is
// already row-major [K, 9*C]. Shared-memory tiles of 64x64 outputs per 256-thread block, 4x4
// outputs per thread. Inputs are doubles holding the fp32 values.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int TM = 64, TN = 64, TK = 16;  // pixels, filters and taps (r, s, c) of a tile

__global__ void __launch_bounds__(256) conv3x3_nhwc_f64(const double* __restrict__ X,
                                                        const double* __restrict__ F,
                                                        double* __restrict__ Y, int64_t N, int64_t H,
                                                        int64_t W, int64_t C, int64_t K) {
  // As[j][m]: tap j of the slice for pixel m; Fs[j][k] likewise for filter k. One column of
  // padding: the stores below run along j.
  __shared__ double As[TK][TM + 1];
  __shared__ double Fs[TK][TN + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t M = N * H * W, L = 9 * C;
  const int64_t row0 = (int64_t)blockIdx.x * TM, col0 = (int64_t)blockIdx.y * TN;
  double acc[4][4] = {};
  for (int64_t j0 = 0; j0 < L; j0 += TK) {
    // Consecutive threads along the taps: channels are contiguous in X and in F's rows.
    for (int e = threadIdx.x; e < TM * TK; e += 256) {
      const int m = e / TK, j = e % TK;
      const int64_t gm = row0 + m, gj = j0 + j;
      double v = 0.0;
      if (gm < M && gj < L) {
        const int64_t rs = gj / C, c = gj % C;  // tap (r, s) = (rs / 3, rs % 3)
        const int64_t w = gm % W, h = (gm / W) % H, n = gm / (W * H);
        const int64_t hh = h + rs / 3 - 1, ww = w + rs % 3 - 1;
        if (hh >= 0 && hh < H && ww >= 0 && ww < W) v = X[((n * H + hh) * W + ww) * C + c];
      }
      As[j][m] = v;
    }
    for (int e = threadIdx.x; e < TN * TK; e += 256) {
      const int k = e / TK, j = e % TK;
      const int64_t gk = col0 + k, gj = j0 + j;
      Fs[j][k] = (gk < K && gj < L) ? F[gk * L + gj] : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TK; ++j) {
      double a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = As[j][ty + 16 * r];
#pragma unroll
      for (int c = 0; c < 4; ++c) b[c] = Fs[j][tx + 16 * c];
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
      const int64_t gk = col0 + tx + 16 * c;
      if (gk < K) Y[gm * K + gk] = acc[r][c];
    }
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 5)
    return 1;
  const int64_t N = call->dims[0], H = call->dims[1], W = call->dims[2], C = call->dims[3],
                K = call->dims[4];
  if (N < 0 || H < 0 || W < 0 || C < 0 || K < 0) return 2;
  if (N == 0 || H == 0 || W == 0 || K == 0) return 0;
  // C = 0 needs no case of its own: the tap loop is empty and every output is written as 0.
  const int64_t gx = (N * H * W + TM - 1) / TM, gy = (K + TN - 1) / TN;
  if (gx > 2147483647LL || gy > 65535) return 3;
  conv3x3_nhwc_f64<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), N, H, W, C, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
