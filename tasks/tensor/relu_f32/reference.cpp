// relu_f32 float64 CPU reference: Y[i] = max(X[i], 0) with NaN propagated (PyTorch semantics),
// computed on the fp32 input values held as doubles.
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
  for (int64_t i = 0; i < N; ++i) {
    const double x = X[i];
    Y[i] = (std::isnan(x) || x > 0.0) ? x : 0.0;
  }
  return 0;
}
