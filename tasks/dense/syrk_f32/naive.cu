// syrk_f32 naive baseline: one thread per output C[i,j] = sum_k A[i,k] A[j,k] (both triangles,
// computed directly), threads of a warp along j, fp32 fmaf accumulation in k order.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void syrk_f32_naive(const float* __restrict__ A, float* __restrict__ C, int64_t N,
                               int64_t K) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= N) return;
  const float* aj = A + j * K;
  // Grid-stride over rows so that any N fits in gridDim.y <= 65535.
  for (int64_t i = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; i < N;
       i += (int64_t)gridDim.y * blockDim.y) {
    const float* ai = A + i * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(ai[k], aj[k], acc);
    C[i * N + j] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t N = call->dims[0], K = call->dims[1];
  if (N < 0 || K < 0) return 2;
  if (N == 0) return 0;
  const dim3 block(32, 8);
  const int64_t gx = (N + 31) / 32;
  int64_t gy = (N + 7) / 8;
  if (gy > 65535) gy = 65535;
  if (gx > 2147483647LL) return 3;
  syrk_f32_naive<<<dim3((unsigned)gx, (unsigned)gy), block, 0,
                   static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<float*>(call->tensors[1]), N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
