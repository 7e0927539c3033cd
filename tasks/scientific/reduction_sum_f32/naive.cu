// reduction_sum_f32 naive baseline: up to 1024 blocks of 256 threads sum grid-stride slices into one
// fp32 partial per block (warp shuffles), then one 1024-thread block sums the partials into S.
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

__global__ void __launch_bounds__(kThreads) partial_sums(const float* __restrict__ X, int64_t N,
                                                         float* __restrict__ partial) {
  float s = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < N; i += (int64_t)gridDim.x * kThreads)
    s += X[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kMaxBlocks) final_sum(const float* __restrict__ partial, int nb,
                                                        float* __restrict__ S) {
  float s = (int)threadIdx.x < nb ? partial[threadIdx.x] : 0.0f;
  s = block_sum(s);
  if (threadIdx.x == 0) S[0] = s;
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
  if (nb < 1) nb = 1;  // N = 0: one block writes a zero partial, so S = 0
  partial_sums<<<(unsigned)nb, kThreads, 0, stream>>>(static_cast<const float*>(call->tensors[0]), N,
                                                       g_partial);
  if (cudaGetLastError() != cudaSuccess) return 4;
  final_sum<<<1, kMaxBlocks, 0, stream>>>(g_partial, (int)nb, static_cast<float*>(call->tensors[1]));
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
