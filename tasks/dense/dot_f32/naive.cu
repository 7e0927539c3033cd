// dot_f32 naive baseline: out zeroed, then one grid-stride kernel (at most 1024 blocks of 256):
// per-thread fmaf sums, a shared-memory tree per block, one float atomicAdd per block into out.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) dot_f32_naive(const float* __restrict__ x,
                                                          const float* __restrict__ y,
                                                          float* __restrict__ out, int64_t N) {
  __shared__ float part[kThreads];
  float acc = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < N;
       i += (int64_t)gridDim.x * kThreads)
    acc = fmaf(x[i], y[i], acc);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* out = static_cast<float*>(call->tensors[2]);
  if (cudaMemsetAsync(out, 0, sizeof(float), stream) != cudaSuccess) return 3;
  if (N == 0) return 0;
  int64_t blocks = (N + kThreads - 1) / kThreads;
  if (blocks > 1024) blocks = 1024;
  dot_f32_naive<<<(unsigned)blocks, kThreads, 0, stream>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]), out, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
