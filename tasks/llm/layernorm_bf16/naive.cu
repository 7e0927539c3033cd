// layernorm_bf16 naive baseline: one 256-thread block per row; fp32 block sums for the mean, then for
// the biased variance (two passes), then Y = bf16(fma((x - mean) * rstd, W, B)), all math in fp32.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__device__ float block_sum(float v, float* scratch) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v += scratch[w];
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

__global__ void __launch_bounds__(kThreads) layernorm_rows(const __nv_bfloat16* __restrict__ X,
                                                           const __nv_bfloat16* __restrict__ W,
                                                           const __nv_bfloat16* __restrict__ B,
                                                           __nv_bfloat16* __restrict__ Y, int64_t C) {
  __shared__ float scratch[kThreads / 32];
  const __nv_bfloat16* x = X + (int64_t)blockIdx.x * C;
  __nv_bfloat16* y = Y + (int64_t)blockIdx.x * C;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) s += __bfloat162float(x[c]);
  const float mean = block_sum(s, scratch) / (float)C;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) {
    const float d = __bfloat162float(x[c]) - mean;
    ss = fmaf(d, d, ss);
  }
  const float rstd = 1.0f / sqrtf(block_sum(ss, scratch) / (float)C + 1e-5f);
  for (int64_t c = threadIdx.x; c < C; c += kThreads)
    y[c] = __float2bfloat16_rn(fmaf((__bfloat162float(x[c]) - mean) * rstd, __bfloat162float(W[c]),
                                    __bfloat162float(B[c])));
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0 || C == 0) return 0;
  if (R > 2147483647LL) return 3;
  layernorm_rows<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const __nv_bfloat16*>(call->tensors[0]), static_cast<const __nv_bfloat16*>(call->tensors[1]),
      static_cast<const __nv_bfloat16*>(call->tensors[2]), static_cast<__nv_bfloat16*>(call->tensors[3]), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
