// gelu_f32 float64 CPU reference: Y = x * Phi(x), evaluated as 0.5 * x * erfc(-x / sqrt(2)),
// which keeps full relative accuracy in the negative tail (1 + erf would cancel there).
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  const double rsqrt2 = 0.70710678118654752440;
  for (int64_t i = 0; i < N; ++i) Y[i] = 0.5 * X[i] * std::erfc(-X[i] * rsqrt2);
  return 0;
}
