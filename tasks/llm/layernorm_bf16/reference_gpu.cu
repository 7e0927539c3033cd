// layernorm_bf16 float64 GPU reference: one block per row, double mean and biased variance (two
// passes), then Y = (X - mean) / sqrt(var + 1e-5) * W + B in double.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__device__ double block_sum_f64(double v, double* red) {
  const int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) red[t] += red[t + half];
    __syncthreads();
  }
  v = red[0];
  __syncthreads();  // red is reused by the next reduction
  return v;
}

__global__ void __launch_bounds__(kThreads) layernorm_rows_f64(const double* __restrict__ X,
                                                               const double* __restrict__ W,
                                                               const double* __restrict__ B,
                                                               double* __restrict__ Y, int64_t C) {
  __shared__ double red[kThreads];
  const double* x = X + (int64_t)blockIdx.x * C;
  double* y = Y + (int64_t)blockIdx.x * C;
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) s += x[c];
  const double mean = block_sum_f64(s, red) / (double)C;
  double ss = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) ss += (x[c] - mean) * (x[c] - mean);
  const double rstd = 1.0 / sqrt(block_sum_f64(ss, red) / (double)C + 1e-5);
  for (int64_t c = threadIdx.x; c < C; c += kThreads) y[c] = (x[c] - mean) * rstd * W[c] + B[c];
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0 || C == 0) return 0;
  if (R > 2147483647LL) return 3;
  layernorm_rows_f64<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<const double*>(call->tensors[2]), static_cast<double*>(call->tensors[3]), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
