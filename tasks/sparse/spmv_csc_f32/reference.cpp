// spmv_csc_f32 float64 CPU reference: y[M] = A[M,N] * x[N], A in CSC (i32 col_ptr/row_idx).
// values and x arrive as doubles holding the fp32 values; column by column, summed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], NNZ = call->dims[2];
  if (M < 0 || N < 0 || NNZ < 0) return 2;
  const int32_t* col_ptr = static_cast<const int32_t*>(call->tensors[0]);
  const int32_t* row_idx = static_cast<const int32_t*>(call->tensors[1]);
  const double* values = static_cast<const double*>(call->tensors[2]);
  const double* x = static_cast<const double*>(call->tensors[3]);
  double* y = static_cast<double*>(call->tensors[4]);
  for (int64_t r = 0; r < M; ++r) y[r] = 0.0;  // empty rows stay 0
  int rc = 0;
  if (col_ptr[0] != 0 || col_ptr[N] != NNZ) rc = 3;
  for (int64_t c = 0; c < N; ++c) {
    const int64_t begin = col_ptr[c], end = col_ptr[c + 1];
    if (begin < 0 || end < begin || end > NNZ) {
      rc = 3;  // malformed structure: skip the column, still write every output, then report it
      continue;
    }
    const double xc = x[c];
    for (int64_t p = begin; p < end; ++p) {
      const int64_t r = row_idx[p];
      if (r < 0 || r >= M) {
        rc = 3;
        continue;
      }
      y[r] += values[p] * xc;
    }
  }
  return rc;
}
