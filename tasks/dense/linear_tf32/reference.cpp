// linear_tf32 float64 CPU reference: C[M,N] = A[M,K] * B[N,K]^T, row-major (the exact product of the f32
// inputs; the task's tf32 tolerance covers the inputs' rounding).
// Inputs arrive as doubles holding the fp32 values; the product is computed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* B = static_cast<const double*>(call->tensors[1]);
  double* C = static_cast<double*>(call->tensors[2]);
  // Each output is a dot product of a row of A and a row of B, both contiguous.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double c = 0.0;
      for (int64_t k = 0; k < K; ++k) c += A[i * K + k] * B[j * K + k];
      C[i * N + j] = c;
    }
  return 0;
}
