// causal_attention_bf16 float64 GPU reference: one warp per query row, each lane holding dims lane
// and lane+32; pass 1 finds the max score over keys j <= i, pass 2 sums exp(s - max) and p * v.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kD = 64;
constexpr int kWarps = 8;

// 0.125 * q . k_j; the xor butterfly leaves the identical sum in every lane.
__device__ __forceinline__ double score(double q0, double q1, const double* __restrict__ k, int lane) {
  double part = q0 * k[lane] + q1 * k[lane + 32];
  for (int off = 16; off > 0; off /= 2) part += __shfl_xor_sync(0xffffffffu, part, off);
  return 0.125 * part;
}

__global__ void __launch_bounds__(32 * kWarps) attention_f64(const double* __restrict__ Q,
                                                             const double* __restrict__ K,
                                                             const double* __restrict__ V,
                                                             double* __restrict__ O, int64_t S,
                                                             int64_t rows) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;  // (b*H + h)*S + i
  if (row >= rows) return;  // whole warps leave together
  const int64_t bh = row / S, i = row % S;
  const double* k0 = K + bh * S * kD;
  const double* v0 = V + bh * S * kD;
  const double q0 = Q[row * kD + lane], q1 = Q[row * kD + lane + 32];
  double m = -INFINITY;
  for (int64_t j = 0; j <= i; ++j) {
    const double s = score(q0, q1, k0 + j * kD, lane);
    m = s > m ? s : m;
  }
  double l = 0.0, a0 = 0.0, a1 = 0.0;
  for (int64_t j = 0; j <= i; ++j) {
    const double p = exp(score(q0, q1, k0 + j * kD, lane) - m);
    l += p;
    a0 += p * v0[j * kD + lane];
    a1 += p * v0[j * kD + lane + 32];
  }
  O[row * kD + lane] = a0 / l;
  O[row * kD + lane + 32] = a1 / l;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t B = call->dims[0], H = call->dims[1], S = call->dims[2];
  if (B < 0 || H < 0 || S < 0) return 2;
  const int64_t rows = B * H * S;
  if (rows == 0) return 0;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  if (blocks > 2147483647LL) return 3;
  attention_f64<<<(unsigned)blocks, 32 * kWarps, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<const double*>(call->tensors[2]), static_cast<double*>(call->tensors[3]), S, rows);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
