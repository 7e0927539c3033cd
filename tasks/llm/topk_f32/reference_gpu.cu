// topk_f32 float64 GPU reference: one 256-thread block per row; each thread keeps a sorted list of
// the best K of its strided elements, then K block-wide argmax rounds over the list heads.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;
constexpr int kMaxK = 64;  // per-thread list length; larger K uses the pass-per-output kernel

// Total order of the output: larger value first, then smaller index.
__device__ __forceinline__ bool better(double v1, int64_t i1, double v2, int64_t i2) {
  return v1 > v2 || (v1 == v2 && i1 < i2);
}

// Block-wide argmax of (v, i) under `better`; every thread gets the winner.
__device__ void block_best(double& v, int64_t& i, double* sv, int64_t* si) {
  const int t = threadIdx.x;
  sv[t] = v;
  si[t] = i;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half && better(sv[t + half], si[t + half], sv[t], si[t])) {
      sv[t] = sv[t + half];
      si[t] = si[t + half];
    }
    __syncthreads();
  }
  v = sv[0];
  i = si[0];
  __syncthreads();  // sv/si are reused by the next round
}

__global__ void __launch_bounds__(kThreads) topk_lists_f64(const double* __restrict__ X,
                                                           double* __restrict__ V,
                                                           int32_t* __restrict__ I, int64_t N,
                                                           int64_t K) {
  __shared__ double sv[kThreads];
  __shared__ int64_t si[kThreads];
  const int64_t r = blockIdx.x;
  const double* x = X + r * N;
  double lv[kMaxK];
  int32_t li[kMaxK];
  int cnt = 0;
  for (int64_t c = threadIdx.x; c < N; c += kThreads) {
    const double v = x[c];
    if (cnt == K && !better(v, c, lv[cnt - 1], li[cnt - 1])) continue;
    int p = cnt < K ? cnt++ : cnt - 1;  // slot freed at the end of the list
    while (p > 0 && better(v, c, lv[p - 1], li[p - 1])) {
      lv[p] = lv[p - 1];
      li[p] = li[p - 1];
      --p;
    }
    lv[p] = v;
    li[p] = (int32_t)c;
  }
  int head = 0;
  for (int64_t k = 0; k < K; ++k) {
    double v = head < cnt ? lv[head] : -INFINITY;
    int64_t i = head < cnt ? (int64_t)li[head] : INT64_MAX;
    block_best(v, i, sv, si);
    if (head < cnt && li[head] == i) ++head;  // this thread owned the winner
    if (threadIdx.x == 0) {
      V[r * K + k] = v;
      I[r * K + k] = (int32_t)i;
    }
  }
}

// Fallback for K > kMaxK: pass k takes the best element ordered after pass k-1's pick.
__global__ void __launch_bounds__(kThreads) topk_passes_f64(const double* __restrict__ X,
                                                            double* __restrict__ V,
                                                            int32_t* __restrict__ I, int64_t N,
                                                            int64_t K) {
  __shared__ double sv[kThreads];
  __shared__ int64_t si[kThreads];
  const int64_t r = blockIdx.x;
  const double* x = X + r * N;
  double pv = INFINITY;
  int64_t pi = -1;
  for (int64_t k = 0; k < K; ++k) {
    double v = -INFINITY;
    int64_t i = INT64_MAX;
    for (int64_t c = threadIdx.x; c < N; c += kThreads)
      if (better(pv, pi, x[c], c) && better(x[c], c, v, i)) {
        v = x[c];
        i = c;
      }
    block_best(v, i, sv, si);
    pv = v;
    pi = i;
    if (threadIdx.x == 0) {
      V[r * K + k] = v;
      I[r * K + k] = (int32_t)i;
    }
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t R = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (R < 0 || N < 0 || K < 0 || K > N || N > 2147483647LL) return 2;
  if (R == 0 || K == 0) return 0;
  if (R > 2147483647LL) return 3;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* V = static_cast<double*>(call->tensors[1]);
  int32_t* I = static_cast<int32_t*>(call->tensors[2]);
  if (K <= kMaxK)
    topk_lists_f64<<<(unsigned)R, kThreads, 0, stream>>>(X, V, I, N, K);
  else
    topk_passes_f64<<<(unsigned)R, kThreads, 0, stream>>>(X, V, I, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
