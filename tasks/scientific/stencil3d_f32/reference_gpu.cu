// stencil3d_f32 float64 GPU reference: one thread per cell (grid-stride), interior
// V = 0.25*U + 0.125*(6 face neighbours) in double, boundary copied from U.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void stencil7_f64(const double* __restrict__ U, double* __restrict__ V, int64_t D,
                             int64_t H, int64_t W) {
  const int64_t P = H * W, total = D * P;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t d = p / P, h = (p / W) % H, w = p % W;
    if (d == 0 || h == 0 || w == 0 || d == D - 1 || h == H - 1 || w == W - 1)
      V[p] = U[p];
    else
      V[p] = 0.25 * U[p] + 0.125 * (U[p - P] + U[p + P] + U[p - W] + U[p + W] + U[p - 1] + U[p + 1]);
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 3)
    return 1;
  const int64_t D = call->dims[0], H = call->dims[1], W = call->dims[2];
  if (D < 0 || H < 0 || W < 0) return 2;
  if (D == 0 || H == 0 || W == 0) return 0;
  int64_t blocks = (D * H * W + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  stencil7_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<double*>(call->tensors[1]), D, H, W);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
