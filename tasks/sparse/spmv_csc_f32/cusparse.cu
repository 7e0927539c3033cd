// spmv_csc_f32 vendor baseline: cusparseSpMV on a CSC descriptor (cusparseCreateConstCsc, 32-bit
// indices, fp32 compute, CUSPARSE_SPMV_ALG_DEFAULT). Handle and buffer cached; descriptors per call.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <cstdint>

namespace {
cusparseHandle_t g_handle = nullptr;
void* g_buffer = nullptr;
size_t g_buffer_bytes = 0;

struct Descs {
  cusparseConstSpMatDescr_t A = nullptr;
  cusparseConstDnVecDescr_t x = nullptr;
  cusparseDnVecDescr_t y = nullptr;
  ~Descs() {
    if (A) cusparseDestroySpMat(A);
    if (x) cusparseDestroyDnVec(x);
    if (y) cusparseDestroyDnVec(y);
  }
};
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], NNZ = call->dims[2];
  if (M < 0 || N < 0 || NNZ < 0) return 2;
  if (M == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if (NNZ == 0 || N == 0)  // no entries: y = 0
    return cudaMemsetAsync(call->tensors[4], 0, (size_t)M * sizeof(float), stream) == cudaSuccess ? 0 : 3;
  if (!g_handle && cusparseCreate(&g_handle) != CUSPARSE_STATUS_SUCCESS) {
    g_handle = nullptr;
    return 3;
  }
  if (cusparseSetStream(g_handle, stream) != CUSPARSE_STATUS_SUCCESS) return 4;
  Descs d;
  if (cusparseCreateConstCsc(&d.A, M, N, NNZ, call->tensors[0], call->tensors[1], call->tensors[2],
                             CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                             CUDA_R_32F) != CUSPARSE_STATUS_SUCCESS)
    return 5;
  if (cusparseCreateConstDnVec(&d.x, N, call->tensors[3], CUDA_R_32F) != CUSPARSE_STATUS_SUCCESS)
    return 5;
  if (cusparseCreateDnVec(&d.y, M, call->tensors[4], CUDA_R_32F) != CUSPARSE_STATUS_SUCCESS)
    return 5;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: y is written, never read
  size_t need = 0;
  if (cusparseSpMV_bufferSize(g_handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.A, d.x, &beta,
                              d.y, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &need) !=
      CUSPARSE_STATUS_SUCCESS)
    return 6;
  if (need > g_buffer_bytes) {  // grow-only cache; reallocation happens only on a larger size
    if (g_buffer) cudaFree(g_buffer);
    g_buffer = nullptr;
    g_buffer_bytes = 0;
    if (cudaMalloc(&g_buffer, need) != cudaSuccess) return 7;
    g_buffer_bytes = need;
  }
  if (cusparseSpMV(g_handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.A, d.x, &beta, d.y,
                   CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, g_buffer) != CUSPARSE_STATUS_SUCCESS)
    return 8;
  return cudaGetLastError() == cudaSuccess ? 0 : 9;
}
