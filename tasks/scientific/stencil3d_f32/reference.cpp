// stencil3d_f32 float64 CPU reference: interior V = 0.25*U + 0.125*(6 face neighbours) on a row-major
// D x H x W grid, boundary cells copied from U; computed in double on the fp32 input values.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 3)
    return 1;
  const int64_t D = call->dims[0], H = call->dims[1], W = call->dims[2];
  if (D < 0 || H < 0 || W < 0) return 2;
  const double* U = static_cast<const double*>(call->tensors[0]);
  double* V = static_cast<double*>(call->tensors[1]);
  const int64_t P = H * W;  // plane stride
  for (int64_t d = 0; d < D; ++d)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        const int64_t p = d * P + h * W + w;
        if (d == 0 || h == 0 || w == 0 || d == D - 1 || h == H - 1 || w == W - 1)
          V[p] = U[p];
        else
          V[p] = 0.25 * U[p] +
                 0.125 * (U[p - P] + U[p + P] + U[p - W] + U[p + W] + U[p - 1] + U[p + 1]);
      }
  return 0;
}
