// spmv_ell_f32 naive baseline: one thread per row (one thread per output y[r]), walking the row's
// W slots in order and stopping at the first -1 (padding only follows the real entries).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void spmv_ell_row(const int32_t* __restrict__ col_idx, const float* __restrict__ values,
                             const float* __restrict__ x, float* __restrict__ y, int64_t M,
                             int64_t W) {
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < M;
       r += (int64_t)gridDim.x * blockDim.x) {
    const int32_t* cols = col_idx + r * W;
    const float* vals = values + r * W;
    float acc = 0.0f;
    for (int64_t j = 0; j < W; ++j) {
      const int32_t c = cols[j];
      if (c < 0) break;
      acc = fmaf(vals[j], x[c], acc);
    }
    y[r] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 4)
    return 1;
  const int64_t M = call->dims[0], W = call->dims[2];
  if (M < 0 || call->dims[1] < 0 || W < 0 || call->dims[3] < 0) return 2;
  if (M == 0) return 0;
  int64_t blocks = (M + 255) / 256;
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  spmv_ell_row<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<const float*>(call->tensors[2]), static_cast<float*>(call->tensors[3]), M, W);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
