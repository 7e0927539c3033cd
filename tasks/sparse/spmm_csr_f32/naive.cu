// spmm_csr_f32 naive baseline: one thread per output Y[r,n] (flat index r*N+n: a warp reads a row
// of X coalesced and shares row r's indices and values), fp32 fmaf accumulation in column order.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void spmm_csr_naive(const int32_t* __restrict__ row_ptr,
                               const int32_t* __restrict__ col_idx,
                               const float* __restrict__ values, const float* __restrict__ X,
                               float* __restrict__ Y, int64_t M, int64_t N) {
  const int64_t total = M * N;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / N, n = t % N;
    const int32_t begin = row_ptr[r], end = row_ptr[r + 1];
    float acc = 0.0f;
    for (int32_t p = begin; p < end; ++p) acc = fmaf(values[p], X[(int64_t)col_idx[p] * N + n], acc);
    Y[t] = acc;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 5 || call->num_dims != 4)
    return 1;
  const int64_t M = call->dims[0], K = call->dims[1], N = call->dims[2], NNZ = call->dims[3];
  if (M < 0 || K < 0 || N < 0 || NNZ < 0) return 2;
  if (M == 0 || N == 0) return 0;
  int64_t blocks = (M * N + 255) / 256;
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  spmm_csr_naive<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const int32_t*>(call->tensors[0]), static_cast<const int32_t*>(call->tensors[1]),
      static_cast<const float*>(call->tensors[2]), static_cast<const float*>(call->tensors[3]),
      static_cast<float*>(call->tensors[4]), M, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
