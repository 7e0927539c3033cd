// Hack 22 — a vendor kernel the task does not offer, wrapped as the candidate's own.
//
// Cheat:      no kernel of its own: every call hands the GEMM to cuBLASLt (fp32, pedantic: the
//             result is right). The task's baselines use cuBLAS, so its candidates are linked with
//             cuBLAS, and cuBLAS brings cuBLASLt into the process as its own dependency; a
//             candidate that calls it presents a vendor kernel the task never offered as its own
//             work, and is scored against the naive kernel as if it were.
// Caught by:  `static` — the import allowlist admits a vendor library's functions only where the
//             task's baselines link that library (here cuBLAS, not cuBLASLt).
// Expected:   failed_gate = "static", error_class = "forbidden_construct".
// Undefended: --defence-off static: the library loads (cuBLASLt resolves through cuBLAS) and the
//             vendor GEMM is several times faster than the naive baseline timed in the same run.
// Task/size:  tests/hacks/tasks/gemm_f32, "medium" (512^3: enough work that the descriptors made
//             on the first call and cuBLASLt's host side are small beside the naive kernel).
#include <ksol/abi.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
struct Plan {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  int64_t M = -1, N = -1, K = -1;
};
Plan plan;

// C = A * B row-major is C^T = B^T * A^T column-major: cuBLASLt's A is B (N x K, ld N), its B is
// A (K x M, ld K), its C is C (N x M, ld N).
bool prepare(int64_t M, int64_t N, int64_t K) {
  if (plan.M == M && plan.N == N && plan.K == K) return true;
  if (!plan.lt && cublasLtCreate(&plan.lt) != CUBLAS_STATUS_SUCCESS) return false;
  if (!plan.op && cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
  if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
  if (cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_32F, N, K, N) != CUBLAS_STATUS_SUCCESS) return false;
  if (cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_32F, K, M, K) != CUBLAS_STATUS_SUCCESS) return false;
  if (cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, N, M, N) != CUBLAS_STATUS_SUCCESS) return false;
  plan.M = M, plan.N = N, plan.K = K;
  return true;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  if (M > 2147483647LL || N > 2147483647LL || K > 2147483647LL) return 3;
  // Keeps cuBLAS (the task's library, whose dependency cuBLASLt is) among the library's needs.
  int version = 0;
  if (cublasGetProperty(MAJOR_VERSION, &version) != CUBLAS_STATUS_SUCCESS) return 5;
  if (!prepare(M, N, K)) return 6;
  const float one = 1.0f, zero = 0.0f;
  // THE CHEAT: the whole GEMM is a cuBLASLt call.
  cublasStatus_t s = cublasLtMatmul(plan.lt, plan.op, &one, call->tensors[1], plan.a, call->tensors[0], plan.b, &zero,
                                    call->tensors[2], plan.c, call->tensors[2], plan.c, nullptr, nullptr, 0,
                                    static_cast<cudaStream_t>(call->stream));
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 7;
}
