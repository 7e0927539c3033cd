// axpy_f32 float64 CPU reference: z[i] = 1.5 * x[i] + y[i] in double on the fp32 input values.
// The constant a = 1.5 is part of the task, not a tensor.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double a = 1.5;
  const double* x = static_cast<const double*>(call->tensors[0]);
  const double* y = static_cast<const double*>(call->tensors[1]);
  double* z = static_cast<double*>(call->tensors[2]);
  for (int64_t i = 0; i < N; ++i) z[i] = a * x[i] + y[i];
  return 0;
}
