// broadcast_add_f32 float64 GPU reference: grid-stride over the M*N outputs,
// C[m,n] = A[m,n] + b[n] in double, on the call's stream.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void bias_add_f64(const double* __restrict__ A, const double* __restrict__ b,
                             double* __restrict__ C, int64_t total, int64_t N) {
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
       p += (int64_t)gridDim.x * blockDim.x)
    C[p] = A[p] + b[p % N];
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  if (M == 0 || N == 0) return 0;
  int64_t blocks = (M * N + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  bias_add_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), M * N, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
