// concat_f32 float64 GPU reference: grid-stride over the M*(N1+N2) outputs, each copied from A or B
// (doubles holding the fp32 inputs), on the call's stream.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void concat_f64(const double* __restrict__ A, const double* __restrict__ B,
                           double* __restrict__ C, int64_t total, int64_t N1, int64_t N2) {
  const int64_t W = N1 + N2;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = p / W, j = p % W;
    C[p] = j < N1 ? A[m * N1 + j] : B[m * N2 + (j - N1)];
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N1 = call->dims[1], N2 = call->dims[2];
  if (M < 0 || N1 < 0 || N2 < 0) return 2;
  const int64_t total = M * (N1 + N2);
  if (total == 0) return 0;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  concat_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), total, N1, N2);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
