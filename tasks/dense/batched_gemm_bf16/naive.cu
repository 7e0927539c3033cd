// batched_gemm_bf16 naive baseline: one thread per output C[b,m,n], threads of a warp along N
// (coalesced B and C, broadcast A), fp32 accumulation of bf16 products, one bf16 rounding.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
__global__ void bgemm_bf16_naive(const __nv_bfloat16* __restrict__ A,
                                 const __nv_bfloat16* __restrict__ B,
                                 __nv_bfloat16* __restrict__ C, int64_t NB, int64_t M, int64_t N,
                                 int64_t K) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  // Grid-stride over rows (grid y) and batches (grid z), so any M and BATCH fit the grid limits.
  for (int64_t b = blockIdx.z; b < NB; b += gridDim.z) {
    const __nv_bfloat16* Bb = B + b * K * N;
    for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M;
         m += (int64_t)gridDim.y * blockDim.y) {
      const __nv_bfloat16* a = A + (b * M + m) * K;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        acc = fmaf(__bfloat162float(a[k]), __bfloat162float(Bb[k * N + n]), acc);
      C[(b * M + m) * N + n] = __float2bfloat16_rn(acc);
    }
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 4)
    return 1;
  const int64_t NB = call->dims[0], M = call->dims[1], N = call->dims[2], K = call->dims[3];
  if (NB < 0 || M < 0 || N < 0 || K < 0) return 2;
  if (NB == 0 || M == 0 || N == 0) return 0;
  const dim3 block(32, 8);
  const int64_t gx = (N + 31) / 32;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  const int64_t gz = NB < 65535 ? NB : 65535;
  if (gx > 2147483647LL) return 3;
  bgemm_bf16_naive<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), block, 0,
                     static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const __nv_bfloat16*>(call->tensors[0]),
      static_cast<const __nv_bfloat16*>(call->tensors[1]),
      static_cast<__nv_bfloat16*>(call->tensors[2]), NB, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
