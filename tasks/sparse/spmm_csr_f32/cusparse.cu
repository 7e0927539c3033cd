// spmm_csr_f32 vendor baseline: cusparseSpMM, CSR A (32-bit indices), row-major dense X and Y,
// fp32 compute, CUSPARSE_SPMM_CSR_ALG2. Handle and external buffer are cached; descriptors per call.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <cstdint>

// CSR_ALG2 is cuSPARSE's algorithm for row-major dense operands. Should a cuSPARSE version refuse
// it for a shape, the default algorithm (which accepts every supported layout) is used instead.
namespace {
cusparseHandle_t g_handle = nullptr;
void* g_buffer = nullptr;
size_t g_buffer_bytes = 0;

struct Descs {
  cusparseConstSpMatDescr_t A = nullptr;
  cusparseConstDnMatDescr_t X = nullptr;
  cusparseDnMatDescr_t Y = nullptr;
  ~Descs() {
    if (A) cusparseDestroySpMat(A);
    if (X) cusparseDestroyDnMat(X);
    if (Y) cusparseDestroyDnMat(Y);
  }
};
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 4)
    return 1;
  const int64_t M = call->dims[0], K = call->dims[1], N = call->dims[2], NNZ = call->dims[3];
  if (M < 0 || K < 0 || N < 0 || NNZ < 0) return 2;
  if (M == 0 || N == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if (NNZ == 0 || K == 0)  // no entries: Y = 0
    return cudaMemsetAsync(call->tensors[4], 0, (size_t)M * (size_t)N * sizeof(float), stream) ==
                   cudaSuccess
               ? 0
               : 3;
  if (!g_handle && cusparseCreate(&g_handle) != CUSPARSE_STATUS_SUCCESS) {
    g_handle = nullptr;
    return 3;
  }
  if (cusparseSetStream(g_handle, stream) != CUSPARSE_STATUS_SUCCESS) return 4;
  Descs d;
  if (cusparseCreateConstCsr(&d.A, M, K, NNZ, call->tensors[0], call->tensors[1], call->tensors[2],
                             CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                             CUDA_R_32F) != CUSPARSE_STATUS_SUCCESS)
    return 5;
  if (cusparseCreateConstDnMat(&d.X, K, N, N, call->tensors[3], CUDA_R_32F, CUSPARSE_ORDER_ROW) !=
      CUSPARSE_STATUS_SUCCESS)
    return 5;
  if (cusparseCreateDnMat(&d.Y, M, N, N, call->tensors[4], CUDA_R_32F, CUSPARSE_ORDER_ROW) !=
      CUSPARSE_STATUS_SUCCESS)
    return 5;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: Y is written, never read
  const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  // Sizes the cached buffer for `alg` and runs it; cuSPARSE validates the arguments before it
  // queues any work, so a refused algorithm leaves Y untouched and the next one can run.
  auto attempt = [&](cusparseSpMMAlg_t alg) -> int {
    size_t need = 0;
    if (cusparseSpMM_bufferSize(g_handle, op, op, &alpha, d.A, d.X, &beta, d.Y, CUDA_R_32F, alg,
                                &need) != CUSPARSE_STATUS_SUCCESS)
      return 6;
    if (need > g_buffer_bytes) {  // grow-only cache; reallocation happens only on a larger size
      if (g_buffer) cudaFree(g_buffer);
      g_buffer = nullptr;
      g_buffer_bytes = 0;
      if (cudaMalloc(&g_buffer, need) != cudaSuccess) return 7;
      g_buffer_bytes = need;
    }
    if (cusparseSpMM(g_handle, op, op, &alpha, d.A, d.X, &beta, d.Y, CUDA_R_32F, alg, g_buffer) !=
        CUSPARSE_STATUS_SUCCESS)
      return 8;
    return 0;
  };
  int rc = attempt(CUSPARSE_SPMM_CSR_ALG2);
  if (rc == 6 || rc == 8) rc = attempt(CUSPARSE_SPMM_ALG_DEFAULT);
  if (rc != 0) return rc;
  return cudaGetLastError() == cudaSuccess ? 0 : 9;
}
