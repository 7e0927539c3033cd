// broadcast_add_f32 float64 CPU reference: C[m,n] = A[m,n] + b[n], row-major, in double on the
// fp32 input values.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* b = static_cast<const double*>(call->tensors[1]);
  double* C = static_cast<double*>(call->tensors[2]);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) C[m * N + n] = A[m * N + n] + b[n];
  return 0;
}
