// conv2d_f32 naive baseline: one thread per output Y[n,k,h,w] (a warp along W, 8 rows of H per
// block, n*K + k over grid z), fp32 fmaf over c, r, s in order, zero padding by bounds checks.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kBX = 32, kBY = 8;
constexpr int64_t kMaxGridZ = 65535;

__global__ void __launch_bounds__(kBX* kBY) conv3x3(const float* __restrict__ X,
                                                     const float* __restrict__ F,
                                                     float* __restrict__ Y, int64_t N, int64_t C,
                                                     int64_t H, int64_t W, int64_t K) {
  const int64_t w = (int64_t)blockIdx.x * kBX + threadIdx.x;
  const int64_t h = (int64_t)blockIdx.y * kBY + threadIdx.y;
  if (w >= W || h >= H) return;
  for (int64_t nk = blockIdx.z; nk < N * K; nk += gridDim.z) {
    const int64_t n = nk / K, k = nk % K;
    float acc = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float* x = X + (n * C + c) * H * W;
      const float* f = F + (k * C + c) * 9;
      for (int r = 0; r < 3; ++r) {
        const int64_t hh = h + r - 1;
        if (hh < 0 || hh >= H) continue;
        for (int s = 0; s < 3; ++s) {
          const int64_t ww = w + s - 1;
          if (ww < 0 || ww >= W) continue;
          acc = fmaf(x[hh * W + ww], f[r * 3 + s], acc);
        }
      }
    }
    Y[(nk * H + h) * W + w] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 5)
    return 1;
  const int64_t N = call->dims[0], C = call->dims[1], H = call->dims[2], W = call->dims[3],
                K = call->dims[4];
  if (N < 0 || C < 0 || H < 0 || W < 0 || K < 0) return 2;
  if (N == 0 || H == 0 || W == 0 || K == 0) return 0;
  const int64_t gx = (W + kBX - 1) / kBX, gy = (H + kBY - 1) / kBY;
  int64_t gz = N * K;
  if (gz > kMaxGridZ) gz = kMaxGridZ;
  if (gx > 2147483647LL || gy > 65535) return 3;
  conv3x3<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), dim3(kBX, kBY), 0,
            static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), N, C, H, W, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
