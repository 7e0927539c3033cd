// fft_c2c_f32 naive baseline: radix-2 Cooley-Tukey per signal: one kernel gathering X into Y in
// bit-reversed order, then log2(N) in-place butterfly kernels, one thread each, sincospif twiddles.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1048576;  // grid-stride beyond this

__global__ void bitrev_gather(const float2* __restrict__ X, float2* __restrict__ Y, int64_t total, int lg) {
  for (int64_t p = (int64_t)blockIdx.x * kThreads + threadIdx.x; p < total; p += (int64_t)gridDim.x * kThreads) {
    const int64_t k = p & ((int64_t(1) << lg) - 1);  // position in the signal
    const int64_t r = lg > 0 ? (int64_t)(__brevll((unsigned long long)k) >> (64 - lg)) : 0;
    Y[p] = X[p - k + r];
  }
}

// Stage with half-span h = 2^s: butterfly t pairs i0 and i0 + h; twiddle exp(-2 pi i j / (2h)).
__global__ void butterflies(float2* __restrict__ Y, int64_t total_bf, int s) {
  const int64_t h = int64_t(1) << s;
  for (int64_t t = (int64_t)blockIdx.x * kThreads + threadIdx.x; t < total_bf; t += (int64_t)gridDim.x * kThreads) {
    const int64_t j = t & (h - 1);
    const int64_t i0 = ((t >> s) << (s + 1)) + j;  // t's group of h butterflies starts at a multiple of 2h
    float sn, cs;
    if (s <= 24) {
      sincospif(-(float)j / (float)h, &sn, &cs);  // j < 2^24 and h a power of two: the argument is exact
    } else {
      double sd, cd;
      sincospi(-(double)j / (double)h, &sd, &cd);
      sn = (float)sd;
      cs = (float)cd;
    }
    const float2 a = Y[i0], v = Y[i0 + h];
    const float tr = cs * v.x - sn * v.y, ti = cs * v.y + sn * v.x;
    Y[i0] = make_float2(a.x + tr, a.y + ti);
    Y[i0 + h] = make_float2(a.x - tr, a.y - ti);
  }
}

int64_t blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return b < kMaxBlocks ? (b > 0 ? b : 1) : kMaxBlocks;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t B = call->dims[0], N = call->dims[1];
  if (B < 0 || N < 1 || (N & (N - 1))) return 2;  // N must be a power of two
  if (B == 0) return 0;
  int lg = 0;
  while ((int64_t(1) << lg) < N) ++lg;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const float2* X = static_cast<const float2*>(call->tensors[0]);
  float2* Y = static_cast<float2*>(call->tensors[1]);
  const int64_t total = B * N;
  bitrev_gather<<<(unsigned)blocks_for(total), kThreads, 0, stream>>>(X, Y, total, lg);
  if (cudaGetLastError() != cudaSuccess) return 4;
  for (int s = 0; s < lg; ++s) {
    butterflies<<<(unsigned)blocks_for(total / 2), kThreads, 0, stream>>>(Y, total / 2, s);
    if (cudaGetLastError() != cudaSuccess) return 4;
  }
  return 0;
}
