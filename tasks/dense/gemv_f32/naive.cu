// gemv_f32 naive baseline: one warp per output row y[r] (lanes stride the row, so A is read
// coalesced), per-lane fp32 fmaf sums, then a warp-shuffle tree sum.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void gemv_f32_warp(const float* __restrict__ A, const float* __restrict__ x,
                              float* __restrict__ y, int64_t M, int64_t N) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  // Grid-stride over rows (whole warps stay together, so the shuffle below is safe).
  for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < M; r += warps) {
    const float* a = A + r * N;
    float acc = 0.0f;
    for (int64_t j = lane; j < N; j += 32) acc = fmaf(a[j], x[j], acc);
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[r] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1];
  if (M < 0 || N < 0) return 2;
  if (M == 0) return 0;
  int64_t blocks = (M + 7) / 8;  // 8 warps (rows) per 256-thread block
  if (blocks > 1048576) blocks = 1048576;
  gemv_f32_warp<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
