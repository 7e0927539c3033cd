// causal_attention_bf16 naive baseline: one thread per query row (128 consecutive rows of one (b, h)
// per block); q and a 64-wide fp32 accumulator in registers, an online softmax over keys 0..i.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
constexpr int kD = 64;
constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) attention_rows(const __nv_bfloat162* __restrict__ Q,
                                                           const __nv_bfloat162* __restrict__ K,
                                                           const __nv_bfloat162* __restrict__ V,
                                                           __nv_bfloat162* __restrict__ O, int64_t S,
                                                           int64_t tiles) {
  const int64_t bh = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * kThreads + threadIdx.x;
  if (i >= S) return;
  // Rows are 64 bf16 = 32 bf16x2; the scale 0.125 is a power of two, so q * 0.125 is exact.
  const __nv_bfloat162* qr = Q + (bh * S + i) * (kD / 2);
  const __nv_bfloat162* k0 = K + bh * S * (kD / 2);
  const __nv_bfloat162* v0 = V + bh * S * (kD / 2);
  float q[kD], acc[kD];
#pragma unroll
  for (int d = 0; d < kD / 2; ++d) {
    const float2 f = __bfloat1622float2(qr[d]);
    q[2 * d] = 0.125f * f.x;
    q[2 * d + 1] = 0.125f * f.y;
    acc[2 * d] = 0.0f;
    acc[2 * d + 1] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j <= i; ++j) {
    const __nv_bfloat162* k = k0 + j * (kD / 2);
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < kD / 2; ++d) {
      const float2 f = __bfloat1622float2(k[d]);
      s = fmaf(q[2 * d], f.x, s);
      s = fmaf(q[2 * d + 1], f.y, s);
    }
    if (s > m) {  // new running max: rescale what was accumulated (expf(-inf) = 0 the first time)
      const float corr = expf(m - s);
      l *= corr;
#pragma unroll
      for (int d = 0; d < kD; ++d) acc[d] *= corr;
      m = s;
    }
    const float p = expf(s - m);
    l += p;
    const __nv_bfloat162* v = v0 + j * (kD / 2);
#pragma unroll
    for (int d = 0; d < kD / 2; ++d) {
      const float2 f = __bfloat1622float2(v[d]);
      acc[2 * d] = fmaf(p, f.x, acc[2 * d]);
      acc[2 * d + 1] = fmaf(p, f.y, acc[2 * d + 1]);
    }
  }
  __nv_bfloat162* o = O + (bh * S + i) * (kD / 2);
#pragma unroll
  for (int d = 0; d < kD / 2; ++d) o[d] = __floats2bfloat162_rn(acc[2 * d] / l, acc[2 * d + 1] / l);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t B = call->dims[0], H = call->dims[1], S = call->dims[2];
  if (B < 0 || H < 0 || S < 0) return 2;
  if (B == 0 || H == 0 || S == 0) return 0;
  const int64_t tiles = (S + kThreads - 1) / kThreads;
  if (B * H * tiles > 2147483647LL) return 3;
  attention_rows<<<(unsigned)(B * H * tiles), kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const __nv_bfloat162*>(call->tensors[0]), static_cast<const __nv_bfloat162*>(call->tensors[1]),
      static_cast<const __nv_bfloat162*>(call->tensors[2]), static_cast<__nv_bfloat162*>(call->tensors[3]), S,
      tiles);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
