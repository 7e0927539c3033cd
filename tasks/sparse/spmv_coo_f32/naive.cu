// spmv_coo_f32 naive baseline: y zeroed, then one thread per nonzero atomically adds
// values[p] * x[col[p]] into y[row[p]] (fp32 products and atomic fp32 sums).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void spmv_coo_atomic(const int32_t* __restrict__ row, const int32_t* __restrict__ col,
                                const float* __restrict__ values, const float* __restrict__ x,
                                float* __restrict__ y, int64_t NNZ) {
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < NNZ;
       p += (int64_t)gridDim.x * blockDim.x)
    atomicAdd(&y[row[p]], values[p] * x[col[p]]);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], NNZ = call->dims[2];
  if (M < 0 || call->dims[1] < 0 || NNZ < 0) return 2;
  if (M == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* y = static_cast<float*>(call->tensors[4]);
  if (cudaMemsetAsync(y, 0, (size_t)M * sizeof(float), stream) != cudaSuccess) return 3;
  if (NNZ == 0) return 0;
  int64_t blocks = (NNZ + 255) / 256;
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  spmv_coo_atomic<<<(unsigned)blocks, 256, 0, stream>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const int32_t*>(call->tensors[1]),
      static_cast<const float*>(call->tensors[2]), static_cast<const float*>(call->tensors[3]), y,
      NNZ);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
