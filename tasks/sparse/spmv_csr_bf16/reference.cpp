// spmv_csr_bf16 float64 CPU reference: y[M] = A[M,N] * x[N], A in CSR (i32 row_ptr/col_idx).
// values and x arrive as doubles holding the bf16 values; each row is summed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], NNZ = call->dims[2];
  if (M < 0 || N < 0 || NNZ < 0) return 2;
  const int32_t* row_ptr = static_cast<const int32_t*>(call->tensors[0]);
  const int32_t* col_idx = static_cast<const int32_t*>(call->tensors[1]);
  const double* values = static_cast<const double*>(call->tensors[2]);
  const double* x = static_cast<const double*>(call->tensors[3]);
  double* y = static_cast<double*>(call->tensors[4]);
  int rc = 0;
  if (M > 0 && (row_ptr[0] != 0 || row_ptr[M] != NNZ)) rc = 3;
  for (int64_t r = 0; r < M; ++r) {
    const int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    double acc = 0.0;
    if (begin < 0 || end < begin || end > NNZ) {
      rc = 3;  // malformed structure: still write every output, then report it
    } else {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = col_idx[p];
        if (c < 0 || c >= N) {
          rc = 3;
          continue;
        }
        acc += values[p] * x[c];
      }
    }
    y[r] = acc;
  }
  return rc;
}
