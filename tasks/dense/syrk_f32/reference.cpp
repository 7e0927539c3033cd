// syrk_f32 float64 CPU reference: C[N,N] = A[N,K] * A^T, full symmetric C, row-major.
// Each lower-triangle element is one double dot product, then mirrored into the upper triangle.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t N = call->dims[0], K = call->dims[1];
  if (N < 0 || K < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  double* C = static_cast<double*>(call->tensors[1]);
  for (int64_t i = 0; i < N; ++i) {
    const double* ai = A + i * K;
    for (int64_t j = 0; j <= i; ++j) {
      const double* aj = A + j * K;
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += ai[k] * aj[k];
      C[i * N + j] = acc;
      C[j * N + i] = acc;
    }
  }
  return 0;
}
