// dot_f32 float64 CPU reference: out[0] = sum_i x[i] * y[i], summed sequentially in double on the
// fp32 input values.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double* x = static_cast<const double*>(call->tensors[0]);
  const double* y = static_cast<const double*>(call->tensors[1]);
  double* out = static_cast<double*>(call->tensors[2]);
  double acc = 0.0;
  for (int64_t i = 0; i < N; ++i) acc += x[i] * y[i];
  out[0] = acc;
  return 0;
}
