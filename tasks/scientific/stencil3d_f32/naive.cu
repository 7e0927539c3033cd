// stencil3d_f32 naive baseline: one thread per cell on a 2D grid of 32x8 blocks over (W, D*H rows),
// a warp along W (coalesced), fp32 arithmetic; launches are split into row chunks for huge D*H.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kBX = 32, kBY = 8;
constexpr int64_t kMaxGridY = 65535;

__global__ void stencil7(const float* __restrict__ U, float* __restrict__ V, int64_t D, int64_t H,
                         int64_t W, int64_t row0) {
  const int64_t w = (int64_t)blockIdx.x * kBX + threadIdx.x;
  const int64_t row = row0 + (int64_t)blockIdx.y * kBY + threadIdx.y;  // row = d*H + h
  if (w >= W || row >= D * H) return;
  const int64_t d = row / H, h = row % H;
  const int64_t P = H * W, p = row * W + w;
  if (d == 0 || h == 0 || w == 0 || d == D - 1 || h == H - 1 || w == W - 1)
    V[p] = U[p];
  else
    V[p] = 0.25f * U[p] + 0.125f * (U[p - P] + U[p + P] + U[p - W] + U[p + W] + U[p - 1] + U[p + 1]);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 3)
    return 1;
  const int64_t D = call->dims[0], H = call->dims[1], W = call->dims[2];
  if (D < 0 || H < 0 || W < 0) return 2;
  if (D == 0 || H == 0 || W == 0) return 0;
  const int64_t gx = (W + kBX - 1) / kBX;
  if (gx > 2147483647LL) return 3;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const float* U = static_cast<const float*>(call->tensors[0]);
  float* V = static_cast<float*>(call->tensors[1]);
  const int64_t rows = D * H;
  // One launch covers up to 65535 * 8 rows (gridDim.y limit); more rows take several launches.
  const int64_t rows_per_launch = kMaxGridY * kBY;
  for (int64_t row0 = 0; row0 < rows; row0 += rows_per_launch) {
    const int64_t n = rows - row0 < rows_per_launch ? rows - row0 : rows_per_launch;
    const dim3 grid((unsigned)gx, (unsigned)((n + kBY - 1) / kBY));
    stencil7<<<grid, dim3(kBX, kBY), 0, stream>>>(U, V, D, H, W, row0);
    if (cudaGetLastError() != cudaSuccess) return 4;
  }
  return 0;
}
