// gemm_f32 vendor baseline: cublasSgemm in CUBLAS_DEFAULT_MATH (fp32 FMA, no TF32 tensor cores).
// Row-major C = A*B is computed as column-major C^T = B^T * A^T; the handle is created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <climits>
#include <cstdint>

// Why default math and not CUBLAS_COMPUTE_32F_PEDANTIC: the default math mode already forbids
// TF32 for SGEMM (only CUBLAS_TF32_TENSOR_OP_MATH or COMPUTE_32F_FAST_TF32 enable it, and
// NVIDIA_TF32_OVERRIDE can only disable TF32), while cuBLAS documents the pedantic modes as
// possibly slower; the fastest honest fp32 path is the fair baseline.
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
  if (!g_handle) {
    if (cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      return 3;
    }
    if (cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) return 3;
  }
  if (cublasSetStream(g_handle, stream) != CUBLAS_STATUS_SUCCESS) return 4;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: C is written, never read
  // Column-major: C^T (N x M, ld N) = B^T (N x K, ld N) * A^T (K x M, ld K).
  const cublasStatus_t st = cublasSgemm(
      g_handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
      static_cast<const float*>(call->tensors[1]), (int)N,
      static_cast<const float*>(call->tensors[0]), (int)K, &beta, C, (int)N);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
