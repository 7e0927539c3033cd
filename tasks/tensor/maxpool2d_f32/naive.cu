// maxpool2d_f32 naive baseline: one thread per output of the 2x2 stride-2 max pool (NCHW), threads
// of a warp along the output width; NaN-propagating max; grid-stride only past 2^20 blocks of 256.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__device__ __forceinline__ float nan_max(float m, float v) { return (v != v || v > m) ? v : m; }

__global__ void maxpool2x2(const float* __restrict__ X, float* __restrict__ Y, int64_t total,
                           int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = p % Wo, i = (p / Wo) % Ho, nc = p / (Wo * Ho);
    const float* w = X + nc * H * W + (2 * i) * W + 2 * j;
    float m = w[0];  // a NaN here stays: nothing compares greater than NaN
    m = nan_max(m, w[1]);
    m = nan_max(m, w[W]);
    m = nan_max(m, w[W + 1]);
    Y[p] = m;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 4)
    return 1;
  const int64_t N = call->dims[0], C = call->dims[1], H = call->dims[2], W = call->dims[3];
  if (N < 0 || C < 0 || H < 0 || W < 0 || H % 2 || W % 2) return 2;
  const int64_t total = N * C * (H / 2) * (W / 2);
  if (total == 0) return 0;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;
  maxpool2x2<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<float*>(call->tensors[1]), total, H, W);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
