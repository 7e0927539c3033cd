// gemm_bias_gelu_bf16 naive baseline: one thread per output C[m,n], threads of a warp along N; fp32
// dot product of bf16 values, then v = acc + bias[n] and the tanh-GELU in fp32, one bf16 rounding.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
__device__ __forceinline__ float gelu_tanh(float v) {
  return 0.5f * v * (1.0f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
}

__global__ void gemm_bias_gelu(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                               const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ C,
                               int64_t M, int64_t N, int64_t K) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float b = __bfloat162float(bias[n]);
  // Grid-stride over rows so that any M fits in gridDim.y <= 65535.
  for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M; m += (int64_t)gridDim.y * blockDim.y) {
    const __nv_bfloat16* a = A + m * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(__bfloat162float(a[k]), __bfloat162float(B[k * N + n]), acc);
    C[m * N + n] = __float2bfloat16_rn(gelu_tanh(acc + b));
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  if (M == 0 || N == 0) return 0;
  const dim3 block(32, 8);
  const int64_t gx = (N + 31) / 32;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  if (gx > 2147483647LL) return 3;
  gemm_bias_gelu<<<dim3((unsigned)gx, (unsigned)gy), block, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const __nv_bfloat16*>(call->tensors[0]), static_cast<const __nv_bfloat16*>(call->tensors[1]),
      static_cast<const __nv_bfloat16*>(call->tensors[2]), static_cast<__nv_bfloat16*>(call->tensors[3]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
