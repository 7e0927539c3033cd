// rope_bf16 float64 GPU reference: one thread per pair (grid-stride), Y[2i] = x0*cos - x1*sin,
// Y[2i+1] = x0*sin + x1*cos in double, with cos/sin = COS/SIN[t,i].
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void rope_f64(const double* __restrict__ X, const double* __restrict__ COS,
                         const double* __restrict__ SIN, double* __restrict__ Y, int64_t pairs,
                         int64_t H, int64_t P) {
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = p % P, t = p / (H * P);
    const double c = COS[t * P + i], s = SIN[t * P + i];
    const double x0 = X[2 * p], x1 = X[2 * p + 1];
    Y[2 * p] = x0 * c - x1 * s;
    Y[2 * p + 1] = x0 * s + x1 * c;
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t T = call->dims[0], H = call->dims[1], D = call->dims[2];
  if (T < 0 || H < 0 || D < 0 || D % 2 != 0) return 2;
  const int64_t P = D / 2, pairs = T * H * P;
  if (pairs == 0) return 0;
  int64_t blocks = (pairs + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  rope_f64<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<const double*>(call->tensors[2]), static_cast<double*>(call->tensors[3]), pairs, H, P);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
