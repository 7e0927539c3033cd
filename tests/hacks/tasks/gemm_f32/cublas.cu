// gemm_f32 vendor baseline: cuBLAS SGEMM with CUBLAS_PEDANTIC_MATH (true fp32, no TF32 and no
// reduced-precision reductions). Row-major C = A*B is computed as column-major C^T = B^T * A^T.
#include <ksol/abi.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    if (cublasCreate(&x) != CUBLAS_STATUS_SUCCESS) return (cublasHandle_t) nullptr;
    if (cublasSetMathMode(x, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) return (cublasHandle_t) nullptr;
    return x;
  }();
  return h;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  if (M == 0 || N == 0) return 0;
  if (M > 2147483647LL || N > 2147483647LL || K > 2147483647LL) return 3;
  cublasHandle_t h = handle();
  if (!h) return 5;
  if (cublasSetStream(h, static_cast<cudaStream_t>(call->stream)) != CUBLAS_STATUS_SUCCESS) return 6;
  const float one = 1.0f, zero = 0.0f;
  const float* A = static_cast<const float*>(call->tensors[0]);
  const float* B = static_cast<const float*>(call->tensors[1]);
  float* C = static_cast<float*>(call->tensors[2]);
  cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, (int)N, A, (int)K,
                                 &zero, C, (int)N);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 7;
}
