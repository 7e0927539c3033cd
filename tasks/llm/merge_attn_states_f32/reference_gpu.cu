// merge_attn_states_f32 float64 GPU reference: one thread per element of O (grid-stride), weights
// wa = exp(a - m), wb = exp(b - m) in double; the thread with d = 0 writes lse = m + log(wa + wb).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void merge_f64(const double* __restrict__ Oa, const double* __restrict__ Ob,
                          const double* __restrict__ La, const double* __restrict__ Lb,
                          double* __restrict__ O, double* __restrict__ L, int64_t n, int64_t D) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t th = e / D;
    const double a = La[th], b = Lb[th];
    const double m = a > b ? a : b;
    const double wa = exp(a - m), wb = exp(b - m), s = wa + wb;
    O[e] = (wa * Oa[e] + wb * Ob[e]) / s;
    if (e % D == 0) L[th] = m + log(s);
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 6 || call->num_dims != 3)
    return 1;
  const int64_t T = call->dims[0], H = call->dims[1], D = call->dims[2];
  if (T < 0 || H < 0 || D < 0) return 2;
  if (D == 0) return 1;  // lse would need its own pass; no size has D = 0
  const int64_t n = T * H * D;
  if (n == 0) return 0;
  int64_t blocks = (n + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  merge_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<const double*>(call->tensors[2]), static_cast<const double*>(call->tensors[3]),
      static_cast<double*>(call->tensors[4]), static_cast<double*>(call->tensors[5]), n, D);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
