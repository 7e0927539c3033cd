// linear_tf32 vendor baseline: cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (fp32 data, TF32 tensor-core
// products, fp32 accumulation): what cuBLAS runs for nn.Linear with allow_tf32. Row-major
// C = A * B^T is computed as column-major C^T = B * A^T; the handle is created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <climits>
#include <cstdint>

namespace {
cublasHandle_t g_handle = nullptr;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX) return 2;
  if (M == 0 || N == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* C = static_cast<float*>(call->tensors[2]);
  if (K == 0)  // empty sum: C = 0
    return cudaMemsetAsync(C, 0, (size_t)M * (size_t)N * sizeof(float), stream) == cudaSuccess ? 0 : 3;
  if (!g_handle && cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
    g_handle = nullptr;
    return 3;
  }
  if (cublasSetStream(g_handle, stream) != CUBLAS_STATUS_SUCCESS) return 4;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: C is written, never read
  // Column-major: row-major B[N, K] is a K x N matrix with ld K, A[M, K] a K x M one, C[M, N] an
  // N x M one: C^T (N x M, ld N) = (B's K x N)^T * (A's K x M).
  const cublasStatus_t st = cublasGemmEx(
      g_handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
      call->tensors[1], CUDA_R_32F, (int)K, call->tensors[0], CUDA_R_32F, (int)K, &beta,
      C, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
