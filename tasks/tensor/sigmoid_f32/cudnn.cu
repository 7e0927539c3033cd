// sigmoid_f32 vendor baseline: cudnnActivationForward (CUDNN_ACTIVATION_SIGMOID, CUDNN_PROPAGATE_NAN) on
// X viewed as a packed 1 x 1 x 1 x N NCHW f32 tensor; handle and descriptors are created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <climits>
#include <cstdint>

namespace {
cudnnHandle_t g_handle = nullptr;
cudnnTensorDescriptor_t g_desc = nullptr;
cudnnActivationDescriptor_t g_act = nullptr;
int64_t g_n = -1;  // the N the tensor descriptor currently describes

int init() {
  if (g_handle) return 0;
  cudnnHandle_t h = nullptr;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnCreateTensorDescriptor(&g_desc) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnCreateActivationDescriptor(&g_act) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnSetActivationDescriptor(g_act, CUDNN_ACTIVATION_SIGMOID, CUDNN_PROPAGATE_NAN, 0.0) !=
      CUDNN_STATUS_SUCCESS)
    return 1;
  g_handle = h;
  return 0;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0 || N > INT_MAX) return 2;
  if (N == 0) return 0;
  if (init()) return 3;
  if (N != g_n) {
    if (cudnnSetTensor4dDescriptor(g_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, (int)N) !=
        CUDNN_STATUS_SUCCESS) {
      g_n = -1;
      return 4;
    }
    g_n = N;
  }
  if (cudnnSetStream(g_handle, static_cast<cudaStream_t>(call->stream)) != CUDNN_STATUS_SUCCESS)
    return 5;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: Y is written, never read
  if (cudnnActivationForward(g_handle, g_act, &alpha, g_desc, call->tensors[0], &beta, g_desc,
                             call->tensors[1]) != CUDNN_STATUS_SUCCESS)
    return 6;
  return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
