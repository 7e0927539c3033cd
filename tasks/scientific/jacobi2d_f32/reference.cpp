// jacobi2d_f32 float64 CPU reference: interior v = 0.25*(4 neighbours of u + h2*f) with h2 = 0.0625,
// boundary cells copied from u; computed in double on the fp32 input values.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t H = call->dims[0], W = call->dims[1];
  if (H < 0 || W < 0) return 2;
  const double* u = static_cast<const double*>(call->tensors[0]);
  const double* f = static_cast<const double*>(call->tensors[1]);
  double* v = static_cast<double*>(call->tensors[2]);
  const double h2 = 0.0625;
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) {
      const int64_t p = i * W + j;
      if (i == 0 || j == 0 || i == H - 1 || j == W - 1)
        v[p] = u[p];
      else
        v[p] = 0.25 * (u[p - W] + u[p + W] + u[p - 1] + u[p + 1] + h2 * f[p]);
    }
  return 0;
}
