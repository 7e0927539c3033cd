// transpose_f32 GPU reference: B[j,i] = A[i,j] on doubles on the device, one thread per output
// element (grid-stride over B's rows).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void transpose_f64(const double* __restrict__ A, double* __restrict__ B, int64_t M,
                              int64_t N) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;  // column of B, row of A
  if (i >= M) return;
  for (int64_t j = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; j < N;
       j += (int64_t)gridDim.y * blockDim.y)
    B[j * M + i] = A[i * N + j];
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  if (M == 0 || N == 0) return 0;
  const int64_t gx = (M + 31) / 32;
  int64_t gy = (N + 7) / 8;
  if (gy > 65535) gy = 65535;
  if (gx > 2147483647LL) return 3;
  transpose_f64<<<dim3((unsigned)gx, (unsigned)gy), dim3(32, 8), 0,
                  static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<double*>(call->tensors[1]), M, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
