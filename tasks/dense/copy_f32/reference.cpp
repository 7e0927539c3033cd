// copy_f32 CPU reference: B[i] = A[i]. Values arrive as doubles holding the fp32 values and are
// copied unchanged.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  double* B = static_cast<double*>(call->tensors[1]);
  for (int64_t i = 0; i < N; ++i) B[i] = A[i];
  return 0;
}
