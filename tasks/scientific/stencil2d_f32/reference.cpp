// stencil2d_f32 float64 CPU reference: V = 0.2 * (5-point sum) on interior cells of U[H,W],
// boundary cells copied; computed in double on the fp32 input values.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t H = call->dims[0], W = call->dims[1];
  if (H < 0 || W < 0) return 2;
  const double* U = static_cast<const double*>(call->tensors[0]);
  double* V = static_cast<double*>(call->tensors[1]);
  for (int64_t i = 0; i < H; ++i) {
    for (int64_t j = 0; j < W; ++j) {
      const int64_t p = i * W + j;
      if (i == 0 || j == 0 || i == H - 1 || j == W - 1)
        V[p] = U[p];
      else
        V[p] = 0.2 * (U[p] + U[p - W] + U[p + W] + U[p - 1] + U[p + 1]);
    }
  }
  return 0;
}
