// softmax_bf16 naive baseline: one 256-thread block per row; passes for a NaN-propagating max, the
// sum of exp(x - max) and the write of bf16(exp(x - max) / sum); fp32 math, IEEE expf, bf16 I/O.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

// NaN-propagating max (fmaxf would drop NaN): returns a NaN operand if there is one.
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || a > b) ? a : b; }

__device__ float block_max(float v, float* scratch) {
  for (int off = 16; off > 0; off /= 2) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v = nan_max(v, scratch[w]);
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

__device__ float block_sum(float v, float* scratch) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v += scratch[w];
  __syncthreads();
  return v;
}

__global__ void __launch_bounds__(kThreads) softmax_rows(const __nv_bfloat16* __restrict__ X,
                                                         __nv_bfloat16* __restrict__ Y, int64_t C) {
  __shared__ float scratch[kThreads / 32];
  const __nv_bfloat16* x = X + (int64_t)blockIdx.x * C;
  __nv_bfloat16* y = Y + (int64_t)blockIdx.x * C;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) m = nan_max(m, __bfloat162float(x[c]));
  m = block_max(m, scratch);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) s += expf(__bfloat162float(x[c]) - m);
  s = block_sum(s, scratch);
  for (int64_t c = threadIdx.x; c < C; c += kThreads)
    y[c] = __float2bfloat16_rn(expf(__bfloat162float(x[c]) - m) / s);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0 || C == 0) return 0;
  if (R > 2147483647LL) return 3;
  softmax_rows<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const __nv_bfloat16*>(call->tensors[0]), static_cast<__nv_bfloat16*>(call->tensors[1]), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
