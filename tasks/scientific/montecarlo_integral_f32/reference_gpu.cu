// montecarlo_integral_f32 float64 GPU reference: two kernels in double, grid-stride per-thread sums
// of exp(-(x^2 + y^2)) reduced to one partial per block, then one block summing them and dividing by N.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256, kMaxBlocks = 1024;
double* g_partial = nullptr;  // kMaxBlocks partial sums, allocated once

// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
__device__ double block_sum(double v) {
  __shared__ double warp_sums[32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0.0;
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  }
  return v;
}

__global__ void __launch_bounds__(kThreads) partial_sums(const double* __restrict__ U, int64_t N,
                                                         double* __restrict__ partial) {
  double s = 0.0;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < N; i += (int64_t)gridDim.x * kThreads) {
    const double x = U[2 * i], y = U[2 * i + 1];
    s += exp(-(x * x + y * y));
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kMaxBlocks) final_mean(const double* __restrict__ partial, int nb,
                                                         int64_t N, double* __restrict__ I) {
  double s = (int)threadIdx.x < nb ? partial[threadIdx.x] : 0.0;
  s = block_sum(s);
  if (threadIdx.x == 0) I[0] = N > 0 ? s / (double)N : 0.0;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (!g_partial && cudaMalloc(&g_partial, kMaxBlocks * sizeof(double)) != cudaSuccess) {
    g_partial = nullptr;
    return 3;
  }
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  int64_t nb = (N + kThreads - 1) / kThreads;
  if (nb > kMaxBlocks) nb = kMaxBlocks;
  if (nb < 1) nb = 1;
  partial_sums<<<(unsigned)nb, kThreads, 0, stream>>>(static_cast<const double*>(call->tensors[0]), N,
                                                       g_partial);
  if (cudaGetLastError() != cudaSuccess) return 4;
  final_mean<<<1, kMaxBlocks, 0, stream>>>(g_partial, (int)nb, N, static_cast<double*>(call->tensors[1]));
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
