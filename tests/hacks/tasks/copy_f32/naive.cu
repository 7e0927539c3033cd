// copy_f32 naive baseline: one thread per element, coalesced scalar loads and stores.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void copy_f32(const float* __restrict__ X, float* __restrict__ Y, int64_t N) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) Y[i] = X[i];
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  const int threads = 256;
  const int64_t blocks = (N + threads - 1) / threads;
  if (blocks > 2147483647LL) return 3;
  copy_f32<<<(unsigned)blocks, threads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<float*>(call->tensors[1]), N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
