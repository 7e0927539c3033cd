// simpson_f32 float64 CPU reference: composite Simpson's rule on [0, 1] from Y[0..N] (N even),
// I = (sum of weight(i) * Y[i]) / (3N) with weights 1, 4, 2, 4, ..., 2, 4, 1, in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 2 || N % 2) return 2;  // Simpson's rule needs an even, positive number of intervals
  const double* Y = static_cast<const double*>(call->tensors[0]);
  double* I = static_cast<double*>(call->tensors[1]);
  double acc = Y[0] + Y[N];
  for (int64_t i = 1; i < N; ++i) acc += (i % 2 ? 4.0 : 2.0) * Y[i];
  I[0] = acc / (3.0 * static_cast<double>(N));
  return 0;
}
