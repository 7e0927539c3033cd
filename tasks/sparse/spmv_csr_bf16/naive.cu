// spmv_csr_bf16 naive baseline: scalar CSR, one thread per row (one thread per output y[r]), bf16
// loads widened to fp32, fp32 fmaf accumulation in column order, one bf16 rounding per output.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
__global__ void spmv_csr_bf16_scalar(const int32_t* __restrict__ row_ptr,
                                     const int32_t* __restrict__ col_idx,
                                     const __nv_bfloat16* __restrict__ values,
                                     const __nv_bfloat16* __restrict__ x,
                                     __nv_bfloat16* __restrict__ y, int64_t M) {
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < M;
       r += (int64_t)gridDim.x * blockDim.x) {
    const int32_t begin = row_ptr[r], end = row_ptr[r + 1];
    float acc = 0.0f;
    for (int32_t p = begin; p < end; ++p)
      acc = fmaf(__bfloat162float(values[p]), __bfloat162float(x[col_idx[p]]), acc);
    y[r] = __float2bfloat16_rn(acc);
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0];
  if (M < 0 || call->dims[1] < 0 || call->dims[2] < 0) return 2;
  if (M == 0) return 0;
  int64_t blocks = (M + 255) / 256;
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  spmv_csr_bf16_scalar<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const int32_t*>(call->tensors[1]),
      static_cast<const __nv_bfloat16*>(call->tensors[2]),
      static_cast<const __nv_bfloat16*>(call->tensors[3]),
      static_cast<__nv_bfloat16*>(call->tensors[4]), M);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
