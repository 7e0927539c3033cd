// histogram_i32 vendor baseline: cub::DeviceHistogram::HistogramEven with B + 1 levels over [0.0f, 1.0f),
// int32 counters (CUB zeroes them); temporary storage allocated once and grown when needed.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cub/device/device_histogram.cuh>
#include <climits>
#include <cstdint>

// CUB's float rule: scale = (float)B / (1.0f - 0.0f) = B exactly, bin = (int)((x - 0.0f) * scale),
// samples outside [0, 1) dropped: the task's definition, bit for bit.
namespace {
void* g_temp = nullptr;
size_t g_temp_bytes = 0;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t N = call->dims[0], B = call->dims[1];
  if (N < 0 || N > INT_MAX || B < 1 || B > (int64_t(1) << 24)) return 2;
  const float* X = static_cast<const float*>(call->tensors[0]);
  int* counts = static_cast<int*>(call->tensors[1]);
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const int levels = (int)B + 1;
  size_t need = 0;
  if (cub::DeviceHistogram::HistogramEven(nullptr, need, X, counts, levels, 0.0f, 1.0f, (int)N, stream) !=
      cudaSuccess)
    return 5;
  if (need > g_temp_bytes) {
    if (g_temp) cudaFree(g_temp);
    g_temp = nullptr;
    g_temp_bytes = 0;
    if (cudaMalloc(&g_temp, need) != cudaSuccess) return 6;
    g_temp_bytes = need;
  }
  size_t have = g_temp_bytes;
  if (cub::DeviceHistogram::HistogramEven(g_temp, have, X, counts, levels, 0.0f, 1.0f, (int)N, stream) !=
      cudaSuccess)
    return 7;
  return cudaGetLastError() == cudaSuccess ? 0 : 8;
}
