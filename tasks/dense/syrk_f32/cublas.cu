// syrk_f32 vendor baseline: cublasSsyrk fills one triangle of C = A A^T (default math, no TF32),
// then a 32x32 shared-memory tiled kernel mirrors it into the other triangle. Handle cached.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <climits>
#include <cstdint>

namespace {
cublasHandle_t g_handle = nullptr;
constexpr int kTile = 32;

// cuBLAS sees row-major C as its column-major transpose; CUBLAS_FILL_MODE_LOWER there is the
// part of memory with column >= row when read row-major. This kernel copies it into the rest:
// C[r][c] = C[c][r] for r > c. Block (bx, by) writes tile rows by*32.., columns bx*32..; tiles
// entirely above the diagonal (bx > by) have nothing to do.
__global__ void __launch_bounds__(kTile * 8) mirror_upper_to_lower(float* __restrict__ C, int64_t N) {
  if (blockIdx.x > blockIdx.y) return;
  __shared__ float tile[kTile][kTile + 1];
  const int64_t r0 = (int64_t)blockIdx.y * kTile, c0 = (int64_t)blockIdx.x * kTile;
  // Load the source tile rows c0.., columns r0.. (coalesced along threadIdx.x).
  for (int t = threadIdx.y; t < kTile; t += 8) {
    const int64_t row = c0 + t, col = r0 + threadIdx.x;
    if (row < N && col < N && col > row) tile[t][threadIdx.x] = C[row * N + col];
  }
  __syncthreads();
  // Write the destination tile rows r0.., columns c0.. (coalesced along threadIdx.x).
  for (int t = threadIdx.y; t < kTile; t += 8) {
    const int64_t row = r0 + t, col = c0 + threadIdx.x;
    if (row < N && col < N && row > col) C[row * N + col] = tile[threadIdx.x][t];
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t N = call->dims[0], K = call->dims[1];
  if (N < 0 || K < 0 || N > INT_MAX || K > INT_MAX) return 2;
  if (N == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* C = static_cast<float*>(call->tensors[1]);
  if (K == 0)  // empty sums: C = 0
    return cudaMemsetAsync(C, 0, (size_t)N * (size_t)N * sizeof(float), stream) == cudaSuccess ? 0 : 3;
  if (!g_handle) {
    if (cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      return 3;
    }
    if (cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) return 3;
  }
  if (cublasSetStream(g_handle, stream) != CUBLAS_STATUS_SUCCESS) return 4;
  if (cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) return 4;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: C is written, never read
  // Row-major A[N,K] is the column-major K x N matrix A^T (lda K); trans = T gives
  // (A^T)^T (A^T) = A A^T, N x N.
  if (cublasSsyrk(g_handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, (int)N, (int)K, &alpha,
                  static_cast<const float*>(call->tensors[0]), (int)K, &beta, C, (int)N) !=
      CUBLAS_STATUS_SUCCESS)
    return 5;
  const int64_t g = (N + kTile - 1) / kTile;
  if (g > 65535) return 6;
  mirror_upper_to_lower<<<dim3((unsigned)g, (unsigned)g), dim3(kTile, 8), 0, stream>>>(C, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
