// batched_gemm_bf16 float64 CPU reference: C[b] = A[b] * B[b], row-major, batch outermost.
// Inputs arrive as doubles holding the bf16 values; every product is computed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 4)
    return 1;
  const int64_t NB = call->dims[0], M = call->dims[1], N = call->dims[2], K = call->dims[3];
  if (NB < 0 || M < 0 || N < 0 || K < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* B = static_cast<const double*>(call->tensors[1]);
  double* C = static_cast<double*>(call->tensors[2]);
  for (int64_t b = 0; b < NB; ++b) {
    const double* a0 = A + b * M * K;
    const double* b0 = B + b * K * N;
    double* c0 = C + b * M * N;
    // i-k-j order: the inner loop streams a row of B into a row of C.
    for (int64_t i = 0; i < M; ++i) {
      double* c = c0 + i * N;
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = a0[i * K + k];
        const double* brow = b0 + k * N;
        for (int64_t j = 0; j < N; ++j) c[j] += a * brow[j];
      }
    }
  }
  return 0;
}
