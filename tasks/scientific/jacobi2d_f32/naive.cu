// jacobi2d_f32 naive baseline: one thread per cell on a 2D grid of 32x8 blocks, a warp along W
// (coalesced), v = 0.25f*(4 neighbours + 0.0625f*f) in fp32; row chunks for huge H.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kBX = 32, kBY = 8;
constexpr int64_t kMaxGridY = 65535;
constexpr float kH2 = 0.0625f;  // h*h with h = 0.25

__global__ void jacobi5(const float* __restrict__ u, const float* __restrict__ f, float* __restrict__ v,
                        int64_t H, int64_t W, int64_t row0) {
  const int64_t j = (int64_t)blockIdx.x * kBX + threadIdx.x;
  const int64_t i = row0 + (int64_t)blockIdx.y * kBY + threadIdx.y;
  if (j >= W || i >= H) return;
  const int64_t p = i * W + j;
  if (i == 0 || j == 0 || i == H - 1 || j == W - 1)
    v[p] = u[p];
  else
    v[p] = 0.25f * (u[p - W] + u[p + W] + u[p - 1] + u[p + 1] + kH2 * f[p]);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t H = call->dims[0], W = call->dims[1];
  if (H < 0 || W < 0) return 2;
  if (H == 0 || W == 0) return 0;
  const int64_t gx = (W + kBX - 1) / kBX;
  if (gx > 2147483647LL) return 3;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const float* u = static_cast<const float*>(call->tensors[0]);
  const float* f = static_cast<const float*>(call->tensors[1]);
  float* v = static_cast<float*>(call->tensors[2]);
  // One launch covers up to 65535 * 8 rows (gridDim.y limit); larger H takes several launches.
  const int64_t rows_per_launch = kMaxGridY * kBY;
  for (int64_t row0 = 0; row0 < H; row0 += rows_per_launch) {
    const int64_t rows = H - row0 < rows_per_launch ? H - row0 : rows_per_launch;
    const dim3 grid((unsigned)gx, (unsigned)((rows + kBY - 1) / kBY));
    jacobi5<<<grid, dim3(kBX, kBY), 0, stream>>>(u, f, v, H, W, row0);
    if (cudaGetLastError() != cudaSuccess) return 4;
  }
  return 0;
}
