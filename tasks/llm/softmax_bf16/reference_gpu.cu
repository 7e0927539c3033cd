// softmax_bf16 float64 GPU reference: one block per row, double max / exp / sum / divide on the
// bf16 input values (as doubles), with the IEEE special-value semantics of reference.cpp.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__device__ __forceinline__ double nan_max(double a, double b) { return (a != a || a > b) ? a : b; }

__global__ void __launch_bounds__(kThreads) softmax_rows_f64(const double* __restrict__ X,
                                                             double* __restrict__ Y, int64_t C) {
  __shared__ double red[kThreads];
  const double* x = X + (int64_t)blockIdx.x * C;
  double* y = Y + (int64_t)blockIdx.x * C;
  const int t = threadIdx.x;

  double m = -INFINITY;
  for (int64_t c = t; c < C; c += kThreads) m = nan_max(m, x[c]);
  red[t] = m;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) red[t] = nan_max(red[t], red[t + half]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();  // red is reused for the sum

  double s = 0.0;
  for (int64_t c = t; c < C; c += kThreads) s += exp(x[c] - m);
  red[t] = s;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) red[t] += red[t + half];
    __syncthreads();
  }
  s = red[0];

  for (int64_t c = t; c < C; c += kThreads) y[c] = exp(x[c] - m) / s;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0 || C == 0) return 0;
  if (R > 2147483647LL) return 3;
  softmax_rows_f64<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<double*>(call->tensors[1]), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
