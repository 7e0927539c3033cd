// gemv_f32 vendor baseline: cublasSgemv. Row-major A[M,N] is the column-major N x M matrix A^T
// (lda N), so y = A x is op = CUBLAS_OP_T on it. The handle is created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <climits>
#include <cstdint>

namespace {
cublasHandle_t g_handle = nullptr;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0 || M > INT_MAX || N > INT_MAX) return 2;
  if (M == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* y = static_cast<float*>(call->tensors[2]);
  if (N == 0)  // empty sums: y = 0
    return cudaMemsetAsync(y, 0, (size_t)M * sizeof(float), stream) == cudaSuccess ? 0 : 3;
  if (!g_handle) {
    if (cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      return 3;
    }
  }
  if (cublasSetStream(g_handle, stream) != CUBLAS_STATUS_SUCCESS) return 4;
  if (cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) return 4;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: y is written, never read
  const cublasStatus_t st =
      cublasSgemv(g_handle, CUBLAS_OP_T, (int)N, (int)M, &alpha,
                  static_cast<const float*>(call->tensors[0]), (int)N,
                  static_cast<const float*>(call->tensors[1]), 1, &beta, y, 1);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
