// topk_f32 naive baseline: one 256-thread block per row, K block-wide argmax passes; pass k takes
// the best element ordered after pass k-1's pick (larger value first, then smaller index).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

// Total order of the output: larger value first, then smaller index.
__device__ __forceinline__ bool better(float v1, int i1, float v2, int i2) {
  return v1 > v2 || (v1 == v2 && i1 < i2);
}

__global__ void __launch_bounds__(kThreads) topk_rows(const float* __restrict__ X, float* __restrict__ V,
                                                      int32_t* __restrict__ I, int N, int K) {
  __shared__ float wv[kThreads / 32];
  __shared__ int wi[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float* x = X + r * N;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float pv = INFINITY;  // previous pick; every element is ordered after (+inf, -1)
  int pi = -1;
  for (int k = 0; k < K; ++k) {
    float v = -INFINITY;
    int i = 0x7fffffff;  // "none" sentinel, ordered after every element
    for (int c = threadIdx.x; c < N; c += kThreads) {
      const float xc = x[c];
      if (better(pv, pi, xc, c) && better(xc, c, v, i)) {
        v = xc;
        i = c;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, off);
      const int oi = __shfl_xor_sync(0xffffffffu, i, off);
      if (better(ov, oi, v, i)) {
        v = ov;
        i = oi;
      }
    }
    if (lane == 0) {
      wv[warp] = v;
      wi[warp] = i;
    }
    __syncthreads();
    v = wv[0];
    i = wi[0];
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(wv[w], wi[w], v, i)) {
        v = wv[w];
        i = wi[w];
      }
    __syncthreads();  // wv/wi are rewritten by the next pass
    if (threadIdx.x == 0) {
      V[r * K + k] = v;
      I[r * K + k] = i;
    }
    pv = v;
    pi = i;
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t R = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (R < 0 || N < 0 || K < 0 || K > N) return 2;
  if (R == 0 || K == 0) return 0;
  if (R > 2147483647LL || N > 2147483647LL - kThreads) return 3;  // int column indices
  topk_rows<<<(unsigned)R, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<float*>(call->tensors[1]),
      static_cast<int32_t*>(call->tensors[2]), (int)N, (int)K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
