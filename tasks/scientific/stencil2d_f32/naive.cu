// stencil2d_f32 naive baseline: one thread per output cell on a 2D grid of 32x8 blocks, threads
// of a warp along W (coalesced), fp32 arithmetic; launches are split into row chunks for huge H.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kBX = 32, kBY = 8;
constexpr int64_t kMaxGridY = 65535;

__global__ void stencil5(const float* __restrict__ U, float* __restrict__ V, int64_t H, int64_t W,
                         int64_t row0) {
  const int64_t j = (int64_t)blockIdx.x * kBX + threadIdx.x;
  const int64_t i = row0 + (int64_t)blockIdx.y * kBY + threadIdx.y;
  if (j >= W || i >= H) return;
  const int64_t p = i * W + j;
  if (i == 0 || j == 0 || i == H - 1 || j == W - 1)
    V[p] = U[p];
  else
    V[p] = 0.2f * (U[p] + U[p - W] + U[p + W] + U[p - 1] + U[p + 1]);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t H = call->dims[0], W = call->dims[1];
  if (H < 0 || W < 0) return 2;
  if (H == 0 || W == 0) return 0;
  const int64_t gx = (W + kBX - 1) / kBX;
  if (gx > 2147483647LL) return 3;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const float* U = static_cast<const float*>(call->tensors[0]);
  float* V = static_cast<float*>(call->tensors[1]);
  // One launch covers up to 65535 * 8 rows (gridDim.y limit); larger H takes several launches.
  const int64_t rows_per_launch = kMaxGridY * kBY;
  for (int64_t row0 = 0; row0 < H; row0 += rows_per_launch) {
    const int64_t rows = H - row0 < rows_per_launch ? H - row0 : rows_per_launch;
    const dim3 grid((unsigned)gx, (unsigned)((rows + kBY - 1) / kBY));
    stencil5<<<grid, dim3(kBX, kBY), 0, stream>>>(U, V, H, W, row0);
    if (cudaGetLastError() != cudaSuccess) return 4;
  }
  return 0;
}
