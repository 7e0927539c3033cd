// leaky_relu_f32 float64 CPU reference: Y[i] = X[i] > 0 ? X[i] : s * X[i] with s = (double)0.01f,
// so the only difference from an fp32 result is the fp32 rounding of the product.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  const double slope = static_cast<double>(0.01f);
  for (int64_t i = 0; i < N; ++i) {
    const double x = X[i];
    Y[i] = x > 0.0 ? x : slope * x;  // NaN: the comparison is false and slope * NaN is NaN
  }
  return 0;
}
