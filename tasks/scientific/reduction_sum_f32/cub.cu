// reduction_sum_f32 vendor baseline: cub::DeviceReduce::Sum on f32 into S[0].
// Temporary storage is allocated once, cached, and grown only when a larger size needs more.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cub/device/device_reduce.cuh>
#include <climits>
#include <cstdint>

namespace {
void* g_temp = nullptr;
size_t g_temp_bytes = 0;

template <typename NumT>
int run_sum(const float* X, float* S, NumT n, cudaStream_t stream) {
  size_t need = 0;
  if (cub::DeviceReduce::Sum(nullptr, need, X, S, n, stream) != cudaSuccess) return 5;
  if (need > g_temp_bytes) {
    if (g_temp) cudaFree(g_temp);
    g_temp = nullptr;
    g_temp_bytes = 0;
    if (cudaMalloc(&g_temp, need) != cudaSuccess) return 6;
    g_temp_bytes = need;
  }
  size_t have = g_temp_bytes;
  if (cub::DeviceReduce::Sum(g_temp, have, X, S, n, stream) != cudaSuccess) return 7;
  return cudaGetLastError() == cudaSuccess ? 0 : 8;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const float* X = static_cast<const float*>(call->tensors[0]);
  float* S = static_cast<float*>(call->tensors[1]);
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if (N <= INT_MAX) return run_sum<int>(X, S, (int)N, stream);
  return run_sum<int64_t>(X, S, N, stream);
}
