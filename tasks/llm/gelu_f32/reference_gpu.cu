// gelu_f32 float64 GPU reference: one thread per element (grid-stride), Y = 0.5 * x * erfc(-x / sqrt(2))
// in double (erfc keeps full relative accuracy in the negative tail).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void gelu_f64(const double* __restrict__ X, double* __restrict__ Y, int64_t n) {
  const double rsqrt2 = 0.70710678118654752440;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    Y[i] = 0.5 * X[i] * erfc(-X[i] * rsqrt2);
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  int64_t blocks = (N + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  gelu_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<double*>(call->tensors[1]), N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
