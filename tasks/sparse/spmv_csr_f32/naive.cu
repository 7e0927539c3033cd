// spmv_csr_f32 naive baseline: scalar CSR, one thread per row (one thread per output y[r]),
// fp32 accumulation in column order; adjacent threads handle adjacent rows.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void spmv_csr_scalar(const int32_t* __restrict__ row_ptr,
                                const int32_t* __restrict__ col_idx,
                                const float* __restrict__ values, const float* __restrict__ x,
                                float* __restrict__ y, int64_t M) {
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M) return;
  const int32_t begin = row_ptr[r], end = row_ptr[r + 1];
  float acc = 0.0f;
  for (int32_t p = begin; p < end; ++p) acc = fmaf(values[p], x[col_idx[p]], acc);
  y[r] = acc;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0];
  if (M < 0) return 2;
  if (M == 0) return 0;
  const int threads = 256;
  const int64_t blocks = (M + threads - 1) / threads;
  if (blocks > 2147483647LL) return 3;
  spmv_csr_scalar<<<(unsigned)blocks, threads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const int32_t*>(call->tensors[1]),
      static_cast<const float*>(call->tensors[2]), static_cast<const float*>(call->tensors[3]),
      static_cast<float*>(call->tensors[4]), M);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
