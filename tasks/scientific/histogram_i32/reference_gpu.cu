// histogram_i32 GPU reference: zero the counts, then one thread per sample (grid-stride) adds 1 to
// bin (int)(x * (float)B) (one fp32 multiply) with a global atomic for x in [0, 1).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void histogram_ref(const double* __restrict__ X, int64_t N, float fb, int32_t* __restrict__ counts) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += (int64_t)gridDim.x * blockDim.x) {
    const float x = (float)X[i];  // exact: X holds f32 values
    if (x >= 0.0f && x < 1.0f) atomicAdd(&counts[(int)__fmul_rn(x, fb)], 1);
  }
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t N = call->dims[0], B = call->dims[1];
  if (N < 0 || B < 1 || B > (int64_t(1) << 24)) return 2;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  int32_t* counts = static_cast<int32_t*>(call->tensors[1]);
  if (cudaMemsetAsync(counts, 0, sizeof(int32_t) * (size_t)B, stream) != cudaSuccess) return 3;
  if (N == 0) return 0;
  int64_t blocks = (N + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;  // grid-stride beyond this
  histogram_ref<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const double*>(call->tensors[0]), N,
                                                       (float)B, counts);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
