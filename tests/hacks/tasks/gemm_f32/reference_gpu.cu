// gemm_f32 float64 GPU reference: 16x16 shared-memory tiles, one thread per output, fp64 FMA in
// k order (device pointers to double arrays, as the harness passes them).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kT = 16;

__global__ void gemm_f64(const double* __restrict__ A, const double* __restrict__ B, double* __restrict__ C,
                         int64_t M, int64_t N, int64_t K) {
  __shared__ double As[kT][kT], Bs[kT][kT];
  const int64_t m = (int64_t)blockIdx.y * kT + threadIdx.y, n = (int64_t)blockIdx.x * kT + threadIdx.x;
  double acc = 0.0;
  for (int64_t k0 = 0; k0 < K; k0 += kT) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (m < M && ka < K) ? A[m * K + ka] : 0.0;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && n < N) ? B[kb * N + n] : 0.0;
    __syncthreads();
    for (int k = 0; k < kT; ++k) acc = fma(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
    __syncthreads();
  }
  if (m < M && n < N) C[m * N + n] = acc;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  if (M == 0 || N == 0) return 0;
  if ((M + kT - 1) / kT > 65535 || (N + kT - 1) / kT > 2147483647LL) return 3;
  const dim3 grid((unsigned)((N + kT - 1) / kT), (unsigned)((M + kT - 1) / kT));
  gemm_f64<<<grid, dim3(kT, kT), 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
