// spmv_csr_f32 float64 GPU reference: y = A * x with A in CSR, doubles on the device.
// One warp per row (strided over the row's entries), warp-shuffle sum in double.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void spmv_csr_f64_warp(const int32_t* __restrict__ row_ptr,
                                  const int32_t* __restrict__ col_idx,
                                  const double* __restrict__ values, const double* __restrict__ x,
                                  double* __restrict__ y, int64_t M) {
  const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= M) return;
  const int64_t begin = row_ptr[warp], end = row_ptr[warp + 1];
  double acc = 0.0;
  for (int64_t p = begin + lane; p < end; p += 32) acc += values[p] * x[col_idx[p]];
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[warp] = acc;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0];
  if (M < 0 || call->dims[1] < 0 || call->dims[2] < 0) return 2;
  if (M == 0) return 0;
  const int threads = 256;  // 8 rows per block
  const int64_t blocks = (M + 7) / 8;
  if (blocks > 2147483647LL) return 3;
  spmv_csr_f64_warp<<<(unsigned)blocks, threads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const int32_t*>(call->tensors[1]),
      static_cast<const double*>(call->tensors[2]), static_cast<const double*>(call->tensors[3]),
      static_cast<double*>(call->tensors[4]), M);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
