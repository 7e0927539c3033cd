// silu_mul_bf16 float64 CPU reference: Y[t,f] = silu(X[t,f]) * X[t,F+f] with
// silu(g) = g / (1 + exp(-g)), in double on the bf16 input values.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t T = call->dims[0], F = call->dims[1];
  if (T < 0 || F < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  for (int64_t t = 0; t < T; ++t) {
    const double* g = X + t * 2 * F;
    const double* u = g + F;
    double* y = Y + t * F;
    for (int64_t f = 0; f < F; ++f) y[f] = g[f] / (1.0 + std::exp(-g[f])) * u[f];
  }
  return 0;
}
