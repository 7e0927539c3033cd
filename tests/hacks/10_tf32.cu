// Hack 10 — lower precision than the task's policy.
//
// Cheat:      the task is fp32 (no TF32), but the hack calls cuBLAS with
//             CUBLAS_COMPUTE_32F_FAST_TF32: the tensor cores round A and B to 10 mantissa bits.
// Caught by:  `precision` — the tolerance uses the fp32 policy's unit roundoff (2^-24). At K = 256
//             a TF32 product misses it by a factor of about 60 (normal inputs) to 300 (spiky
//             inputs); an fp32 SGEMM stays below 0.6 of it (CPU model: rounding the inputs to
//             TF32 and accumulating in fp32, on the task's own generated inputs).
// Expected:   failed_gate = "correctness", error_class = "wrong_result".
// Undefended: --defence-off precision: the tolerance of the bf16 policy (2^-8) is applied, which
//             TF32 meets with a wide margin; one tensor-core GEMM against the naive kernel.
// Task/size:  tests/hacks/tasks/gemm_f32, "small" (256^3: T_sol is 0.5 us, so the TF32 GEMM, which
//             beats the fp32 FMA peak at large sizes, is not flagged as faster than light here).
#include <ksol/abi.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    if (cublasCreate(&x) != CUBLAS_STATUS_SUCCESS) return (cublasHandle_t) nullptr;
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
  const float one = 1.0f, zero = 0.0f;
  // THE CHEAT: TF32 tensor-core math in an fp32 task.
  cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                                  call->tensors[1], CUDA_R_32F, (int)N, call->tensors[0], CUDA_R_32F, (int)K, &zero,
                                  call->tensors[2], CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 7;
}
