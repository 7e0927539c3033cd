// spmm_csr_f32 float64 CPU reference: Y[M,N] = A[M,K] * X[K,N], A in CSR (i32), X and Y row-major.
// values and X arrive as doubles holding the fp32 values; each row of Y is accumulated in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 4)
    return 1;
  const int64_t M = call->dims[0], K = call->dims[1], N = call->dims[2], NNZ = call->dims[3];
  if (M < 0 || K < 0 || N < 0 || NNZ < 0) return 2;
  const int32_t* row_ptr = static_cast<const int32_t*>(call->tensors[0]);
  const int32_t* col_idx = static_cast<const int32_t*>(call->tensors[1]);
  const double* values = static_cast<const double*>(call->tensors[2]);
  const double* X = static_cast<const double*>(call->tensors[3]);
  double* Y = static_cast<double*>(call->tensors[4]);
  int rc = 0;
  if (M > 0 && (row_ptr[0] != 0 || row_ptr[M] != NNZ)) rc = 3;
  for (int64_t r = 0; r < M; ++r) {
    double* y = Y + r * N;
    for (int64_t n = 0; n < N; ++n) y[n] = 0.0;  // empty rows stay 0
    const int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    if (begin < 0 || end < begin || end > NNZ) {
      rc = 3;  // malformed structure: still write every output, then report it
      continue;
    }
    for (int64_t p = begin; p < end; ++p) {
      const int64_t c = col_idx[p];
      if (c < 0 || c >= K) {
        rc = 3;
        continue;
      }
      const double v = values[p];
      const double* x = X + c * N;
      for (int64_t n = 0; n < N; ++n) y[n] += v * x[n];
    }
  }
  return rc;
}
