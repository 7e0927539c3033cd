// maxpool2d_f32 vendor baseline: cudnnPoolingForward (CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2x2
// window, stride 2, no padding) on NCHW f32 tensors; handle and descriptors are created once.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <climits>
#include <cstdint>

namespace {
cudnnHandle_t g_handle = nullptr;
cudnnTensorDescriptor_t g_x = nullptr, g_y = nullptr;
cudnnPoolingDescriptor_t g_pool = nullptr;
int64_t g_shape[4] = {-1, -1, -1, -1};  // the N, C, H, W the tensor descriptors describe

int init() {
  if (g_handle) return 0;
  cudnnHandle_t h = nullptr;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnCreateTensorDescriptor(&g_x) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnCreateTensorDescriptor(&g_y) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnCreatePoolingDescriptor(&g_pool) != CUDNN_STATUS_SUCCESS) return 1;
  if (cudnnSetPooling2dDescriptor(g_pool, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2) !=
      CUDNN_STATUS_SUCCESS)
    return 1;
  g_handle = h;
  return 0;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 4)
    return 1;
  const int64_t N = call->dims[0], C = call->dims[1], H = call->dims[2], W = call->dims[3];
  if (N < 0 || C < 0 || H < 0 || W < 0 || H % 2 || W % 2) return 2;
  if (N * C * H * W > INT_MAX) return 2;
  if (N == 0 || C == 0 || H == 0 || W == 0) return 0;
  if (init()) return 3;
  if (N != g_shape[0] || C != g_shape[1] || H != g_shape[2] || W != g_shape[3]) {
    g_shape[0] = -1;
    if (cudnnSetTensor4dDescriptor(g_x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)N, (int)C, (int)H,
                                   (int)W) != CUDNN_STATUS_SUCCESS ||
        cudnnSetTensor4dDescriptor(g_y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)N, (int)C,
                                   (int)(H / 2), (int)(W / 2)) != CUDNN_STATUS_SUCCESS)
      return 4;
    g_shape[0] = N;
    g_shape[1] = C;
    g_shape[2] = H;
    g_shape[3] = W;
  }
  if (cudnnSetStream(g_handle, static_cast<cudaStream_t>(call->stream)) != CUDNN_STATUS_SUCCESS)
    return 5;
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: Y is written, never read
  if (cudnnPoolingForward(g_handle, g_pool, &alpha, g_x, call->tensors[0], &beta, g_y,
                          call->tensors[1]) != CUDNN_STATUS_SUCCESS)
    return 6;
  return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
