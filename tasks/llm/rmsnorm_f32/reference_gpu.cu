// rmsnorm_f32 float64 GPU reference: one block per row, double sum of squares, then
// Y = X * (1 / sqrt(mean + 1e-6)) * W in double (inputs are doubles holding f32 values).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rmsnorm_rows_f64(const double* __restrict__ X,
                                                             const double* __restrict__ W,
                                                             double* __restrict__ Y, int64_t C) {
  __shared__ double red[kThreads];
  const double* x = X + (int64_t)blockIdx.x * C;
  double* y = Y + (int64_t)blockIdx.x * C;
  const int t = threadIdx.x;
  double ss = 0.0;
  for (int64_t c = t; c < C; c += kThreads) ss += x[c] * x[c];
  red[t] = ss;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) red[t] += red[t + half];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(red[0] / (double)C + 1e-6);
  for (int64_t c = t; c < C; c += kThreads) y[c] = x[c] * inv * W[c];
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0 || C == 0) return 0;
  if (R > 2147483647LL) return 3;
  rmsnorm_rows_f64<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
