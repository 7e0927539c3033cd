// transpose_f32 vendor baseline: cublasSgeam, B = 1 * op(A) + 0 * A with op = transpose, on the
// column-major views (A is N x M with lda N, B is M x N with ldb M). The handle is created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <climits>
#include <cstdint>

namespace {
cublasHandle_t g_handle = nullptr;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0 || M > INT_MAX || N > INT_MAX) return 2;
  if (M == 0 || N == 0) return 0;
  if (!g_handle) {
    if (cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      return 3;
    }
  }
  if (cublasSetStream(g_handle, static_cast<cudaStream_t>(call->stream)) != CUBLAS_STATUS_SUCCESS)
    return 4;
  if (cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) return 4;
  const float one = 1.0f, zero = 0.0f;
  const float* A = static_cast<const float*>(call->tensors[0]);
  float* B = static_cast<float*>(call->tensors[1]);
  // Result: M x N column-major, ldc M (= row-major [N,M]). op(A): A's buffer as N x M (lda N),
  // transposed. The beta operand must be an M x N matrix; with beta = 0 its values do not
  // matter, so A's buffer (M*N elements) is passed again with ldb M, as is customary.
  const cublasStatus_t st = cublasSgeam(g_handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, &one, A,
                                        (int)N, &zero, A, (int)M, B, (int)M);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
