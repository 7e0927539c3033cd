// dot_f32 vendor baseline: cublasSdot_64 with CUBLAS_POINTER_MODE_DEVICE, so the result is written
// into the output tensor on the stream with no host round trip. The handle is created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cstdint>

namespace {
cublasHandle_t g_handle = nullptr;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* out = static_cast<float*>(call->tensors[2]);
  if (N == 0)  // empty sum: out = 0
    return cudaMemsetAsync(out, 0, sizeof(float), stream) == cudaSuccess ? 0 : 3;
  if (!g_handle) {
    if (cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      return 3;
    }
  }
  if (cublasSetStream(g_handle, stream) != CUBLAS_STATUS_SUCCESS) return 4;
  if (cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_DEVICE) != CUBLAS_STATUS_SUCCESS) return 4;
  const cublasStatus_t st = cublasSdot_64(g_handle, N, static_cast<const float*>(call->tensors[0]), 1,
                                          static_cast<const float*>(call->tensors[1]), 1, out);
  if (st != CUBLAS_STATUS_SUCCESS) return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
