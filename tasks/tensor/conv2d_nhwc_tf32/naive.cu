// conv2d_nhwc_tf32 naive baseline: one thread per output Y[n,h,w,k], threads of a warp along K (coalesced
// Y, broadcast X; F's rows read with a stride of 9*C), 8 pixels per block; fp32 fmaf accumulation over
// r, s, c in order (full fp32 products, within TF32's bound), zero padding by bounds checks.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kBX = 32, kBY = 8;

__global__ void __launch_bounds__(kBX* kBY) conv3x3_nhwc(const float* __restrict__ X,
                                                          const float* __restrict__ F,
                                                          float* __restrict__ Y, int64_t N, int64_t H,
                                                          int64_t W, int64_t C, int64_t K) {
  const int64_t k = (int64_t)blockIdx.x * kBX + threadIdx.x;
  if (k >= K) return;
  const float* f = F + k * 9 * C;  // F[k, 0, 0, 0]
  // Grid-stride over pixels (n, h, w) so that any N*H*W fits in gridDim.y <= 65535.
  for (int64_t p = (int64_t)blockIdx.y * kBY + threadIdx.y; p < N * H * W; p += (int64_t)gridDim.y * kBY) {
    const int64_t w = p % W, h = (p / W) % H, n = p / (W * H);
    float acc = 0.0f;
    for (int r = 0; r < 3; ++r) {
      const int64_t hh = h + r - 1;
      if (hh < 0 || hh >= H) continue;
      for (int s = 0; s < 3; ++s) {
        const int64_t ww = w + s - 1;
        if (ww < 0 || ww >= W) continue;
        const float* x = X + ((n * H + hh) * W + ww) * C;
        const float* g = f + (r * 3 + s) * C;
        for (int64_t c = 0; c < C; ++c) acc = fmaf(x[c], g[c], acc);
      }
    }
    Y[p * K + k] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 5)
    return 1;
  const int64_t N = call->dims[0], H = call->dims[1], W = call->dims[2], C = call->dims[3],
                K = call->dims[4];
  if (N < 0 || H < 0 || W < 0 || C < 0 || K < 0) return 2;
  if (N == 0 || H == 0 || W == 0 || K == 0) return 0;
  const int64_t gx = (K + kBX - 1) / kBX;
  int64_t gy = (N * H * W + kBY - 1) / kBY;
  if (gy > 65535) gy = 65535;
  if (gx > 2147483647LL) return 3;
  conv3x3_nhwc<<<dim3((unsigned)gx, (unsigned)gy), dim3(kBX, kBY), 0,
                 static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), N, H, W, C, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
