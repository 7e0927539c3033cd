// axpy_f32 float64 GPU reference: z[i] = 1.5 * x[i] + y[i] in double on the device,
// one grid-stride thread per element.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void axpy_f64(const double* __restrict__ x, const double* __restrict__ y,
                         double* __restrict__ z, int64_t N) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < N;
       i += (int64_t)gridDim.x * blockDim.x)
    z[i] = 1.5 * x[i] + y[i];
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  int64_t blocks = (N + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;
  axpy_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
