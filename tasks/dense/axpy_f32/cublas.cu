// axpy_f32 vendor baseline: z = y by cudaMemcpyAsync (device to device), then cublasSaxpy_64
// z += 1.5 * x, both on the call's stream. The handle is created once.
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
  if (N == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* z = static_cast<float*>(call->tensors[2]);
  if (!g_handle) {
    if (cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      return 3;
    }
  }
  if (cublasSetStream(g_handle, stream) != CUBLAS_STATUS_SUCCESS) return 4;
  if (cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) return 4;
  if (cudaMemcpyAsync(z, call->tensors[1], (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice,
                      stream) != cudaSuccess)
    return 5;
  const float a = 1.5f;
  if (cublasSaxpy_64(g_handle, N, &a, static_cast<const float*>(call->tensors[0]), 1, z, 1) !=
      CUBLAS_STATUS_SUCCESS)
    return 6;
  return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
