// copy_f32 vendor baseline: cudaMemcpyAsync device to device on the call's stream (the CUDA
// runtime's copy, i.e. the copy engine or the driver's copy kernel).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  if (cudaMemcpyAsync(call->tensors[1], call->tensors[0], (size_t)N * sizeof(float),
                      cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(call->stream)) != cudaSuccess)
    return 3;
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
