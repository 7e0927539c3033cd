// Writes through a wild pointer: a sticky CUDA error. The worker must report it as fatal and
// exit; the coordinator records the failure and starts a fresh worker for what comes next.
#include <cuda_runtime.h>
#include "ksol/abi.h"

__global__ void wild(float* p) { p[(1ll << 40) + threadIdx.x] = 1.0f; }

extern "C" int ksol_run(const ksol_call* c) {
  wild<<<1, 32, 0, (cudaStream_t)c->stream>>>((float*)c->tensors[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
