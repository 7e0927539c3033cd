// relu_f32 naive baseline: one thread per element (grid-stride only past 2^20 blocks of 256),
// Y = X > 0 || X is NaN ? X : 0, coalesced scalar loads and stores.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void relu(const float* __restrict__ X, float* __restrict__ Y, int64_t N) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < N;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float x = X[i];
    Y[i] = (x != x || x > 0.0f) ? x : 0.0f;  // NaN propagates, like torch.relu
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  int64_t blocks = (N + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;
  relu<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<float*>(call->tensors[1]), N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
