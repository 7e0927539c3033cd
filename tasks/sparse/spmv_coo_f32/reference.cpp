// spmv_coo_f32 float64 CPU reference: y[M] = A[M,N] * x[N], A in COO (i32 row/col, NNZ entries).
// values and x arrive as doubles holding the fp32 values; every entry is accumulated in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], NNZ = call->dims[2];
  if (M < 0 || N < 0 || NNZ < 0) return 2;
  const int32_t* row = static_cast<const int32_t*>(call->tensors[0]);
  const int32_t* col = static_cast<const int32_t*>(call->tensors[1]);
  const double* values = static_cast<const double*>(call->tensors[2]);
  const double* x = static_cast<const double*>(call->tensors[3]);
  double* y = static_cast<double*>(call->tensors[4]);
  for (int64_t r = 0; r < M; ++r) y[r] = 0.0;  // empty rows stay 0
  int rc = 0;
  for (int64_t p = 0; p < NNZ; ++p) {
    const int64_t r = row[p], c = col[p];
    if (r < 0 || r >= M || c < 0 || c >= N) {
      rc = 3;  // malformed structure: skip the entry, still write every output, then report it
      continue;
    }
    y[r] += values[p] * x[c];
  }
  return rc;
}
