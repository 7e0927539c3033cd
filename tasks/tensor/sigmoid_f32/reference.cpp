// sigmoid_f32 float64 CPU reference: Y[i] = 1 / (1 + exp(-X[i])) in double on the fp32 inputs;
// +inf gives 1, -inf gives 0 (exp(inf) = inf), NaN gives NaN.
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
  for (int64_t i = 0; i < N; ++i) Y[i] = 1.0 / (1.0 + std::exp(-X[i]));
  return 0;
}
