// spmv_ell_f32 float64 CPU reference: y[M] = A[M,N] * x[N], A in row-major ELL (col_idx[M,W] with
// -1 padding, values[M,W]); padding slots are skipped, each row is summed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 4)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], W = call->dims[2], NNZ = call->dims[3];
  if (M < 0 || N < 0 || W < 0 || NNZ < 0) return 2;
  const int32_t* col_idx = static_cast<const int32_t*>(call->tensors[0]);
  const double* values = static_cast<const double*>(call->tensors[1]);
  const double* x = static_cast<const double*>(call->tensors[2]);
  double* y = static_cast<double*>(call->tensors[3]);
  int rc = 0;
  int64_t seen = 0;
  for (int64_t r = 0; r < M; ++r) {
    double acc = 0.0;
    for (int64_t j = 0; j < W; ++j) {
      const int64_t c = col_idx[r * W + j];
      if (c == -1) continue;  // padding: its value is ignored
      if (c < 0 || c >= N) {
        rc = 3;  // malformed structure: skip the slot, still write every output, then report it
        continue;
      }
      acc += values[r * W + j] * x[c];
      ++seen;
    }
    y[r] = acc;
  }
  if (seen != NNZ) rc = 3;
  return rc;
}
