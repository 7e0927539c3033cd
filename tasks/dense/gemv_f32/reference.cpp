// gemv_f32 float64 CPU reference: y[M] = A[M,N] * x[N], A row-major.
// Inputs arrive as doubles holding the fp32 values; each row is summed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* x = static_cast<const double*>(call->tensors[1]);
  double* y = static_cast<double*>(call->tensors[2]);
  for (int64_t i = 0; i < M; ++i) {
    const double* a = A + i * N;
    double acc = 0.0;
    for (int64_t j = 0; j < N; ++j) acc += a[j] * x[j];
    y[i] = acc;
  }
  return 0;
}
