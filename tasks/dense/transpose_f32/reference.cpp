// transpose_f32 CPU reference: B[j,i] = A[i,j] with A [M,N] and B [N,M] row-major.
// Values arrive as doubles holding the fp32 values and are copied unchanged.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  double* B = static_cast<double*>(call->tensors[1]);
  // 32x32 blocks keep both the reads and the writes cache-friendly.
  constexpr int64_t T = 32;
  for (int64_t i0 = 0; i0 < M; i0 += T)
    for (int64_t j0 = 0; j0 < N; j0 += T)
      for (int64_t i = i0; i < i0 + T && i < M; ++i)
        for (int64_t j = j0; j < j0 + T && j < N; ++j) B[j * M + i] = A[i * N + j];
  return 0;
}
