// concat_f32 float64 CPU reference: C[m, :] = [A[m, :] | B[m, :]] (row-major), a copy of the
// fp32 input values held as doubles.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N1 = call->dims[1], N2 = call->dims[2];
  if (M < 0 || N1 < 0 || N2 < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* B = static_cast<const double*>(call->tensors[1]);
  double* C = static_cast<double*>(call->tensors[2]);
  const int64_t W = N1 + N2;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t j = 0; j < N1; ++j) C[m * W + j] = A[m * N1 + j];
    for (int64_t j = 0; j < N2; ++j) C[m * W + N1 + j] = B[m * N2 + j];
  }
  return 0;
}
