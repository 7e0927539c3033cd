// montecarlo_integral_f32 naive baseline: up to 1024 blocks of 256 threads sum expf(-(x^2 + y^2)) over
// grid-stride slices of the samples into fp32 block partials, then one block sums them and scales by 1/N.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256, kMaxBlocks = 1024;
float* g_partial = nullptr;  // kMaxBlocks partial sums, allocated once

// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = 0.0f;
  if (warp == 0) {
    v = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  }
  return v;
}

__global__ void __launch_bounds__(kThreads) partial_sums(const float* __restrict__ U, int64_t N,
                                                         float* __restrict__ partial) {
  float s = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < N; i += (int64_t)gridDim.x * kThreads) {
    const float x = U[2 * i], y = U[2 * i + 1];
    s += expf(-(x * x + y * y));
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kMaxBlocks) final_mean(const float* __restrict__ partial, int nb,
                                                         float inv_n, float* __restrict__ I) {
  float s = (int)threadIdx.x < nb ? partial[threadIdx.x] : 0.0f;
  s = block_sum(s);
  if (threadIdx.x == 0) I[0] = s * inv_n;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (!g_partial && cudaMalloc(&g_partial, kMaxBlocks * sizeof(float)) != cudaSuccess) {
    g_partial = nullptr;
    return 3;
  }
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  int64_t nb = (N + kThreads - 1) / kThreads;
  if (nb > kMaxBlocks) nb = kMaxBlocks;
  if (nb < 1) nb = 1;  // N = 0: the sum is 0 and so is the estimate
  const float inv_n = N > 0 ? (float)(1.0 / (double)N) : 0.0f;
  partial_sums<<<(unsigned)nb, kThreads, 0, stream>>>(static_cast<const float*>(call->tensors[0]), N,
                                                       g_partial);
  if (cudaGetLastError() != cudaSuccess) return 4;
  final_mean<<<1, kMaxBlocks, 0, stream>>>(g_partial, (int)nb, inv_n, static_cast<float*>(call->tensors[1]));
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
