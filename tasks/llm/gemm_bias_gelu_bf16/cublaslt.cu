// gemm_bias_gelu_bf16 vendor baseline: cublasLtMatmul with CUBLASLT_EPILOGUE_GELU_BIAS (tanh GELU),
// bf16 A/B/bias/C, CUBLAS_COMPUTE_32F, split-K partials in fp32; handle, workspace and plans cached.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <climits>
#include <cstdint>

// Row-major C = gelu(A*B + bias) is computed as column-major C^T = gelu(B^T * A^T + bias), where
// bias (length N) is added to every row of the N x M column-major result, as cuBLASLt's bias epilogue
// does ("bias vector length must match matrix D rows count"). As in gemm_bf16's baseline, the
// heuristic is restricted to no split-K or split-K reduced in fp32: a bf16 reduction of partial
// sums would not be fp32 accumulation.
//
// When N is not a multiple of 8 (rows of C not 16-byte aligned), the kernels cuBLASLt picks for
// the fused GELU_BIAS epilogue missed the fp32-accumulation bound on the H200 (up to 3.3x at
// 1000x1003x517 and 4097x511x1023: about 2 bf16 ulps, as if the product were rounded to bf16
// before the bias add). There the baseline is what a user needing that precision would write:
// cuBLAS's GEMM into an fp32 buffer (cublasGemmEx), then one kernel for bias + GELU + the bf16
// rounding.
namespace {
// Built with -DKSOL_UNFUSED (the task's cublas_unfused baseline): every shape takes the unfused
// path, the "GEMM, then a separate epilogue kernel" a fused kernel is measured against.
#ifdef KSOL_UNFUSED
constexpr bool kAlwaysUnfused = true;
#else
constexpr bool kAlwaysUnfused = false;
#endif
cublasLtHandle_t g_lt = nullptr;
void* g_workspace = nullptr;
constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // 32 MiB, NVIDIA's recommendation for Hopper

struct Plan {
  int64_t M = -1, N = -1, K = -1;
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

// Builds the plan for (M,N,K); `bias` is the first call's bias pointer (the heuristic reads its
// alignment). Returns 0 on success.
int build(Plan& p, int64_t M, int64_t N, int64_t K, const void* bias) {
  destroy(p);
  if (cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return 1;
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
  const int32_t bias_type = CUDA_R_16BF;
  if (cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) !=
          CUBLAS_STATUS_SUCCESS)
    return 1;
  // Column-major: first operand is B viewed as N x K (ld N), second is A viewed as K x M (ld K),
  // result is C viewed as N x M (ld N).
  if (cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, N, K, N) != CUBLAS_STATUS_SUCCESS) return 1;
  if (cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, K, M, K) != CUBLAS_STATUS_SUCCESS) return 1;
  if (cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, N, M, N) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return 1;
  const uint64_t ws = kWorkspaceBytes;
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;  // plus NONE, always allowed
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  const bool ok =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                           sizeof(schemes)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(g_lt, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found) ==
          CUBLAS_STATUS_SUCCESS &&
      found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulPreferenceDestroy(pref);
  if (!ok) return 1;
  p.algo = res.algo;
  p.M = M;
  p.N = N;
  p.K = K;
  return 0;
}

Plan* get_plan(int64_t M, int64_t N, int64_t K, const void* bias) {
  for (auto& p : g_plans)
    if (p.M == M && p.N == N && p.K == K) return &p;
  Plan& p = g_plans[g_next];
  g_next = (g_next + 1) % kPlans;
  if (build(p, M, N, K, bias)) {
    destroy(p);
    return nullptr;
  }
  return &p;
}

__device__ __forceinline__ float gelu_tanh(float v) {
  return 0.5f * v * (1.0f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
}

// The unfused path's epilogue: C[m,n] = bf16(gelu(D[m,n] + bias[n])) from the fp32 product D.
__global__ void epilogue_kernel(const float* __restrict__ D, const __nv_bfloat16* __restrict__ bias,
                                __nv_bfloat16* __restrict__ C, int64_t M, int64_t N) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < M * N; e += (int64_t)gridDim.x * blockDim.x)
    C[e] = __float2bfloat16_rn(gelu_tanh(D[e] + __bfloat162float(bias[e % N])));
}
float* g_product = nullptr;  // the unfused path's fp32 product, grown as needed
size_t g_product_bytes = 0;
cublasHandle_t g_blas = nullptr;

// K == 0: the product is empty, C[m,n] = gelu(bias[n]).
__global__ void bias_only(const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ C, int64_t M,
                          int64_t N) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < M * N; e += (int64_t)gridDim.x * blockDim.x)
    C[e] = __float2bfloat16_rn(gelu_tanh(__bfloat162float(bias[e % N])));
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX) return 2;
  if (M == 0 || N == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const void* bias = call->tensors[2];
  void* C = call->tensors[3];
  if (K == 0) {
    const int64_t blocks = (M * N + 255) / 256;
    bias_only<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(C), M, N);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
  }
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: C is written, never read
  if (kAlwaysUnfused || N % 8 != 0) {
    // Unfused: cublasGemmEx's bf16 x bf16 -> fp32 product (column-major D^T = B^T A^T), then the
    // bias + GELU kernel.
    if (!g_blas && cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) {
      g_blas = nullptr;
      return 3;
    }
    const size_t bytes = static_cast<size_t>(M) * static_cast<size_t>(N) * sizeof(float);
    if (bytes > g_product_bytes) {
      if (g_product) cudaFree(g_product);
      g_product = nullptr;
      g_product_bytes = 0;
      if (cudaMalloc(&g_product, bytes) != cudaSuccess) return 3;
      g_product_bytes = bytes;
    }
    if (cublasSetStream(g_blas, stream) != CUBLAS_STATUS_SUCCESS ||
        cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, call->tensors[1], CUDA_R_16BF, (int)N,
                     call->tensors[0], CUDA_R_16BF, (int)K, &beta, g_product, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      return 5;
    const int64_t blocks = (M * N + 255) / 256;
    epilogue_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(
        g_product, static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(C), M, N);
    return cudaGetLastError() == cudaSuccess ? 0 : 6;
  }
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
  Plan* p = get_plan(M, N, K, bias);
  if (!p) return 4;
  // The bias buffer differs between calls (the harness rotates buffer sets): set it every call.
  if (cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) !=
      CUBLAS_STATUS_SUCCESS)
    return 4;
  const cublasStatus_t st = cublasLtMatmul(g_lt, p->op, &alpha, call->tensors[1], p->a, call->tensors[0], p->b,
                                           &beta, C, p->c, C, p->c, &p->algo, g_workspace, kWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
