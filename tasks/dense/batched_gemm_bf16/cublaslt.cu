// batched_gemm_bf16 vendor baseline: one strided-batched cublasLtMatmul, bf16 A/B/C, fp32 compute,
// split-K partials kept in fp32. Handle, workspace and per-shape plans are cached.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <climits>
#include <cstdint>

// Row-major C[b] = A[b]*B[b] is computed as column-major C[b]^T = B[b]^T * A[b]^T. As in
// gemm_bf16, the heuristic is limited to no split-K or split-K reduced in the compute type: the
// unrestricted heuristic may reduce split-K partial sums in bf16, which is not fp32 accumulation.
namespace {
cublasLtHandle_t g_lt = nullptr;
void* g_workspace = nullptr;
constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // 32 MiB, NVIDIA's recommendation for Hopper

struct Plan {
  int64_t NB = -1, M = -1, N = -1, K = -1;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // column-major views
  cublasLtMatmulAlgo_t algo;
};
constexpr int kPlans = 16;
Plan g_plans[kPlans];
int g_next = 0;

void destroy(Plan& p) {
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  p = Plan();
}

// A rows x cols column-major bf16 layout repeated `count` times, `stride` elements apart.
bool make_layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t count) {
  if (cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, (uint64_t)rows, (uint64_t)cols, rows) !=
      CUBLAS_STATUS_SUCCESS)
    return false;
  const int32_t n = (int32_t)count;
  const int64_t stride = rows * cols;
  return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                          sizeof(stride)) == CUBLAS_STATUS_SUCCESS;
}

// Builds the plan for (NB,M,N,K); returns 0 on success.
int build(Plan& p, int64_t NB, int64_t M, int64_t N, int64_t K) {
  destroy(p);
  if (cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return 1;
  // First operand: B[b] viewed as N x K (ld N); second: A[b] viewed as K x M (ld K);
  // result: C[b] viewed as N x M (ld N).
  if (!make_layout(&p.a, N, K, NB) || !make_layout(&p.b, K, M, NB) || !make_layout(&p.c, N, M, NB))
    return 1;
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return 1;
  const uint64_t ws = kWorkspaceBytes;
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;  // plus NONE, always allowed
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  const bool ok =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof(ws)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                           &schemes, sizeof(schemes)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(g_lt, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found) ==
          CUBLAS_STATUS_SUCCESS &&
      found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulPreferenceDestroy(pref);
  if (!ok) return 1;
  p.algo = res.algo;
  p.NB = NB;
  p.M = M;
  p.N = N;
  p.K = K;
  return 0;
}

Plan* get_plan(int64_t NB, int64_t M, int64_t N, int64_t K) {
  for (auto& p : g_plans)
    if (p.NB == NB && p.M == M && p.N == N && p.K == K) return &p;
  Plan& p = g_plans[g_next];
  g_next = (g_next + 1) % kPlans;
  if (build(p, NB, M, N, K)) {
    destroy(p);
    return nullptr;
  }
  return &p;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 4)
    return 1;
  const int64_t NB = call->dims[0], M = call->dims[1], N = call->dims[2], K = call->dims[3];
  if (NB < 0 || M < 0 || N < 0 || K < 0 || NB > INT_MAX || M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return 2;
  if (NB == 0 || M == 0 || N == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  void* C = call->tensors[2];
  if (K == 0)  // empty sums: C = 0 (bf16 +0 is all-zero bits)
    return cudaMemsetAsync(C, 0, (size_t)NB * (size_t)M * (size_t)N * 2, stream) == cudaSuccess ? 0 : 3;
  if (!g_lt) {
    if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
      g_lt = nullptr;
      return 3;
    }
  }
  if (!g_workspace && cudaMalloc(&g_workspace, kWorkspaceBytes) != cudaSuccess) {
    g_workspace = nullptr;
    return 3;
  }
  Plan* p = get_plan(NB, M, N, K);
  if (!p) return 4;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: C is written, never read
  const cublasStatus_t st =
      cublasLtMatmul(g_lt, p->op, &alpha, call->tensors[1], p->a, call->tensors[0], p->b, &beta, C,
                     p->c, C, p->c, &p->algo, g_workspace, kWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
