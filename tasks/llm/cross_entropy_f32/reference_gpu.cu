// cross_entropy_f32 float64 GPU reference: one block per row, double max and sum of exp(x - max),
// loss = (max - X[r,t]) + log(sum) with t = min(floor(U[r] * C), C - 1).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) xent_rows_f64(const double* __restrict__ X,
                                                          const double* __restrict__ U,
                                                          double* __restrict__ L, int64_t C) {
  __shared__ double red[kThreads];
  const int64_t r = blockIdx.x;
  const double* x = X + r * C;
  const int t = threadIdx.x;
  double m = -INFINITY;
  for (int64_t c = t; c < C; c += kThreads) m = x[c] > m ? x[c] : m;
  red[t] = m;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) red[t] = red[t + half] > red[t] ? red[t + half] : red[t];
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
  if (t == 0) {
    int64_t tg = (int64_t)floor(U[r] * (double)C);
    if (tg > C - 1) tg = C - 1;
    if (tg < 0) tg = 0;
    L[r] = (m - x[tg]) + log(red[0]);
  }
}

__global__ void fill_nan(double* L, int64_t R) {
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < R; r += (int64_t)gridDim.x * blockDim.x)
    L[r] = __longlong_as_double(0x7ff8000000000000LL);
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  if (R == 0) return 0;
  if (R > 2147483647LL) return 3;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  double* L = static_cast<double*>(call->tensors[2]);
  if (C == 0) {  // no classes: the loss is undefined
    fill_nan<<<(unsigned)((R + 255) / 256 < 65535 ? (R + 255) / 256 : 65535), 256, 0, stream>>>(L, R);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
  }
  xent_rows_f64<<<(unsigned)R, kThreads, 0, stream>>>(static_cast<const double*>(call->tensors[0]),
                                                      static_cast<const double*>(call->tensors[1]), L, C);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
