// spmv_csc_f32 naive baseline: y zeroed, then one thread per column j scatters
// values[p] * x[j] into y[row_idx[p]] with fp32 atomicAdd; adjacent threads take adjacent columns.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void spmv_csc_scatter(const int32_t* __restrict__ col_ptr,
                                 const int32_t* __restrict__ row_idx,
                                 const float* __restrict__ values, const float* __restrict__ x,
                                 float* __restrict__ y, int64_t N) {
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < N;
       c += (int64_t)gridDim.x * blockDim.x) {
    const int32_t begin = col_ptr[c], end = col_ptr[c + 1];
    const float xc = x[c];
    for (int32_t p = begin; p < end; ++p) atomicAdd(&y[row_idx[p]], values[p] * xc);
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0 || call->dims[2] < 0) return 2;
  if (M == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* y = static_cast<float*>(call->tensors[4]);
  if (cudaMemsetAsync(y, 0, (size_t)M * sizeof(float), stream) != cudaSuccess) return 3;
  if (N == 0) return 0;
  int64_t blocks = (N + 255) / 256;
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  spmv_csc_scatter<<<(unsigned)blocks, 256, 0, stream>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const int32_t*>(call->tensors[1]),
      static_cast<const float*>(call->tensors[2]), static_cast<const float*>(call->tensors[3]), y, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
