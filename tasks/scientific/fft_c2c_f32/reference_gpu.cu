// fft_c2c_f32 float64 GPU reference: per signal, a radix-2 FFT in double: one kernel gathering X into
// Y in bit-reversed order, then log2(N) in-place butterfly kernels with sincospi twiddles.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1048576;  // grid-stride beyond this

__host__ __device__ inline int64_t bit_reverse(int64_t k, int lg) {
  int64_t r = 0;
  for (int bit = 0; bit < lg; ++bit) r |= ((k >> bit) & 1) << (lg - 1 - bit);
  return r;
}

// Butterfly t of the stage with half-span h (span 2h): pairs elements i0 and i1 = i0 + h of one signal
// (row-major [B, N]); j is the position inside the half-span, the twiddle exponent over 2h.
__host__ __device__ inline void butterfly_indices(int64_t t, int64_t N, int64_t h, int64_t* i0, int64_t* j) {
  const int64_t half = N / 2;
  const int64_t b = t / half, r = t % half;
  const int64_t g = r / h;
  *j = r % h;
  *i0 = b * N + g * 2 * h + *j;
}

__global__ void bitrev_gather(const double2* __restrict__ X, double2* __restrict__ Y, int64_t total,
                              int64_t N, int lg) {
  for (int64_t p = (int64_t)blockIdx.x * kThreads + threadIdx.x; p < total; p += (int64_t)gridDim.x * kThreads) {
    const int64_t b = p / N, k = p % N;
    Y[p] = X[b * N + bit_reverse(k, lg)];
  }
}

__global__ void butterflies(double2* __restrict__ Y, int64_t total_bf, int64_t N, int64_t h) {
  for (int64_t t = (int64_t)blockIdx.x * kThreads + threadIdx.x; t < total_bf; t += (int64_t)gridDim.x * kThreads) {
    int64_t i0, j;
    butterfly_indices(t, N, h, &i0, &j);
    double s, c;
    sincospi(-(double)j / (double)h, &s, &c);  // exp(-2 pi i j / (2h)); j/h exact (h a power of two)
    const double2 a = Y[i0], v = Y[i0 + h];
    const double tr = c * v.x - s * v.y, ti = c * v.y + s * v.x;
    Y[i0] = make_double2(a.x + tr, a.y + ti);
    Y[i0 + h] = make_double2(a.x - tr, a.y - ti);
  }
}

int64_t blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return b < kMaxBlocks ? (b > 0 ? b : 1) : kMaxBlocks;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t B = call->dims[0], N = call->dims[1];
  if (B < 0 || N < 1 || (N & (N - 1))) return 2;
  if (B == 0) return 0;
  int lg = 0;
  while ((int64_t(1) << lg) < N) ++lg;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const double2* X = static_cast<const double2*>(call->tensors[0]);
  double2* Y = static_cast<double2*>(call->tensors[1]);
  const int64_t total = B * N;
  bitrev_gather<<<(unsigned)blocks_for(total), kThreads, 0, stream>>>(X, Y, total, N, lg);
  if (cudaGetLastError() != cudaSuccess) return 4;
  for (int64_t h = 1; h < N; h *= 2) {
    butterflies<<<(unsigned)blocks_for(total / 2), kThreads, 0, stream>>>(Y, total / 2, N, h);
    if (cudaGetLastError() != cudaSuccess) return 4;
  }
  return 0;
}
