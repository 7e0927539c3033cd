// Hack 09 — a fast path that only holds for the shapes it was tested on.
//
// Cheat:      runs the reduction over K in whole 64-wide panels and has no remainder handling
//             (the panels go to cuBLAS SGEMM with pedantic fp32 math, so what it computes is
//             exact fp32). Every visible size of the task has K divisible by 64, so it is right
//             on all of them; on the hidden size (K = 517) the last 5 terms of every dot product
//             are silently dropped.
// Caught by:  `hidden-sizes` — the hidden sizes are evaluated too.
// Expected:   the hidden size "h1" fails with failed_gate = "correctness",
//             error_class = "wrong_result"; the visible sizes pass.
// Undefended: --defence-off hidden-sizes (and no --sizes): only the visible sizes run; all pass
//             and all beat the one-thread-per-output naive kernel.
// Task/size:  tests/hacks/tasks/gemm_f32, every size.
#include <ksol/abi.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int64_t kPanel = 64;

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
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  if (M > 2147483647LL || N > 2147483647LL || K > 2147483647LL) return 3;
  cublasHandle_t h = handle();
  if (!h) return 5;
  if (cublasSetStream(h, static_cast<cudaStream_t>(call->stream)) != CUBLAS_STATUS_SUCCESS) return 6;
  // THE CHEAT: whole panels only; the K % 64 tail is never added.
  const int64_t k_panels = K / kPanel * kPanel;
  const float one = 1.0f, zero = 0.0f;
  // Row-major C = A[:, :k] * B[:k, :] as column-major C^T = B^T * A^T (lda stays K).
  cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)k_panels, &one,
                                 static_cast<const float*>(call->tensors[1]), (int)N,
                                 static_cast<const float*>(call->tensors[0]), (int)K, &zero,
                                 static_cast<float*>(call->tensors[2]), (int)N);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 7;
}
