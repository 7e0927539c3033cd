// rope_bf16 naive baseline: one thread per output pair (grid-stride), a bf16x2 load of (x0, x1),
// fp32 y0 = x0*cos - x1*sin and y1 = x0*sin + x1*cos, one bf16x2 store.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {
__global__ void rope_pairs(const __nv_bfloat162* __restrict__ X, const float* __restrict__ COS,
                           const float* __restrict__ SIN, __nv_bfloat162* __restrict__ Y,
                           int64_t pairs, int64_t H, int64_t P) {
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = p % P, t = p / (H * P);
    const float c = COS[t * P + i], s = SIN[t * P + i];
    const float2 x = __bfloat1622float2(X[p]);
    const float y0 = fmaf(x.x, c, -(x.y * s));
    const float y1 = fmaf(x.x, s, x.y * c);
    Y[p] = __floats2bfloat162_rn(y0, y1);
  }
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t T = call->dims[0], H = call->dims[1], D = call->dims[2];
  if (T < 0 || H < 0 || D < 0 || D % 2 != 0) return 2;
  const int64_t P = D / 2, pairs = T * H * P;
  if (pairs == 0) return 0;
  int64_t blocks = (pairs + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  // X and Y hold T*H*D bf16 values; D is even, so pair p is the aligned bf16x2 at element 2p.
  rope_pairs<<<(unsigned)blocks, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const __nv_bfloat162*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<const float*>(call->tensors[2]), static_cast<__nv_bfloat162*>(call->tensors[3]), pairs, H, P);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
