// concat_f32 vendor baseline: two cudaMemcpy2DAsync device-to-device copies on the call's stream,
// A [M,N1] into C's left columns and B [M,N2] into its right ones (destination pitch 4*(N1+N2)).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N1 = call->dims[1], N2 = call->dims[2];
  if (M < 0 || N1 < 0 || N2 < 0) return 2;
  if (M == 0 || N1 + N2 == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const float* A = static_cast<const float*>(call->tensors[0]);
  const float* B = static_cast<const float*>(call->tensors[1]);
  float* C = static_cast<float*>(call->tensors[2]);
  const size_t pitch = sizeof(float) * (size_t)(N1 + N2);
  if (N1 > 0 && cudaMemcpy2DAsync(C, pitch, A, sizeof(float) * (size_t)N1, sizeof(float) * (size_t)N1,
                                  (size_t)M, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return 3;
  if (N2 > 0 && cudaMemcpy2DAsync(C + N1, pitch, B, sizeof(float) * (size_t)N2, sizeof(float) * (size_t)N2,
                                  (size_t)M, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return 4;
  return 0;
}
