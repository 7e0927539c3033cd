// gelu_f32 naive baseline: one thread per element (grid-stride), PyTorch's exact-GELU formula
// Y = 0.5f * x * (1 + erff(x * M_SQRT1_2)) in fp32.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void gelu(const float* __restrict__ X, float* __restrict__ Y, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float x = X[i];
    Y[i] = 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
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
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  gelu<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<float*>(call->tensors[1]), N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
