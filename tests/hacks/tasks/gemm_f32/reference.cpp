// gemm_f32 float64 CPU reference: C = A * B, row-major, summed in k order.
#include <ksol/abi.h>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* B = static_cast<const double*>(call->tensors[1]);
  double* C = static_cast<double*>(call->tensors[2]);
  std::vector<double> row(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) row[n] = 0.0;
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[m * K + k];
      const double* b = B + k * N;
      for (int64_t n = 0; n < N; ++n) row[n] += a * b[n];
    }
    for (int64_t n = 0; n < N; ++n) C[m * N + n] = row[n];
  }
  return 0;
}
