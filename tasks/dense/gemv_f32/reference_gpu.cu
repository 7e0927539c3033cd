// gemv_f32 float64 GPU reference: y = A * x with A row-major, doubles on the device.
// One warp per row (lanes stride the row), warp-shuffle sum in double.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void gemv_f64_warp(const double* __restrict__ A, const double* __restrict__ x,
                              double* __restrict__ y, int64_t M, int64_t N) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < M; r += warps) {
    const double* a = A + r * N;
    double acc = 0.0;
    for (int64_t j = lane; j < N; j += 32) acc += a[j] * x[j];
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[r] = acc;
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  if (M == 0) return 0;
  int64_t blocks = (M + 7) / 8;  // 8 warps (rows) per 256-thread block
  if (blocks > 1048576) blocks = 1048576;
  gemv_f64_warp<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), M, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
