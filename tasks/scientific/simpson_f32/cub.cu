// simpson_f32 vendor baseline: cub::DeviceReduce::TransformReduce over the indices 0..N (a counting
// iterator mapped to weight(i) * Y[i]) into I[0], then a one-thread kernel scaling I[0] by 1/(3N).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>
#include <climits>
#include <cstdint>

namespace {
void* g_temp = nullptr;
size_t g_temp_bytes = 0;

template <typename IndexT>
struct Weighted {
  const float* Y;
  IndexT N;
  __device__ __forceinline__ float operator()(IndexT i) const {
    const float w = (i == 0 || i == N) ? 1.0f : (i % 2 ? 4.0f : 2.0f);
    return w * Y[i];
  }
};

__global__ void scale_one(float* __restrict__ I, float s) { I[0] *= s; }

template <typename IndexT>
int run(const float* Y, float* I, IndexT N, cudaStream_t stream) {
  thrust::counting_iterator<IndexT> first(0);
  const Weighted<IndexT> op{Y, N};
  const IndexT n = N + 1;
  size_t need = 0;
  if (cub::DeviceReduce::TransformReduce(nullptr, need, first, I, n, ::cuda::std::plus<float>{}, op, 0.0f,
                                         stream) != cudaSuccess)
    return 5;
  if (need > g_temp_bytes) {
    if (g_temp) cudaFree(g_temp);
    g_temp = nullptr;
    g_temp_bytes = 0;
    if (cudaMalloc(&g_temp, need) != cudaSuccess) return 6;
    g_temp_bytes = need;
  }
  size_t have = g_temp_bytes;
  if (cub::DeviceReduce::TransformReduce(g_temp, have, first, I, n, ::cuda::std::plus<float>{}, op, 0.0f,
                                         stream) != cudaSuccess)
    return 7;
  return cudaGetLastError() == cudaSuccess ? 0 : 8;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 2 || N % 2) return 2;  // Simpson's rule needs an even, positive number of intervals
  const float* Y = static_cast<const float*>(call->tensors[0]);
  float* I = static_cast<float*>(call->tensors[1]);
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const int rc = N < INT_MAX ? run<int>(Y, I, (int)N, stream) : run<int64_t>(Y, I, N, stream);
  if (rc) return rc;
  scale_one<<<1, 1, 0, stream>>>(I, (float)(1.0 / (3.0 * (double)N)));
  return cudaGetLastError() == cudaSuccess ? 0 : 9;
}
