// rmsnorm_f32 naive baseline: one 256-thread block per row; fp32 sum of squares (block
// reduction), then Y = x * rsqrt(mean + 1e-6) * w, all in fp32.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rmsnorm_rows(const float* __restrict__ X,
                                                         const float* __restrict__ W,
                                                         float* __restrict__ Y, int64_t C) {
  __shared__ float scratch[kThreads / 32];
  const float* x = X + (int64_t)blockIdx.x * C;
  float* y = Y + (int64_t)blockIdx.x * C;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) ss = fmaf(x[c], x[c], ss);
  for (int off = 16; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  const float inv = rsqrtf(total / (float)C + 1e-6f);
  for (int64_t c = threadIdx.x; c < C; c += kThreads) y[c] = x[c] * inv * W[c];
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0 || C == 0) return 0;
  if (R > 2147483647LL) return 3;
  rmsnorm_rows<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
