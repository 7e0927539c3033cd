// Never finishes: the coordinator's per-call timeout must kill the worker and record a timeout.
#include <cuda_runtime.h>
#include "ksol/abi.h"

__global__ void spin(volatile int* flag) {
  while (*flag == 0) {
  }
}

extern "C" int ksol_run(const ksol_call* c) {
  // Zero one word of the output, then wait for it to become nonzero: nothing ever writes it.
  cudaMemsetAsync(c->tensors[1], 0, sizeof(int), (cudaStream_t)c->stream);
  spin<<<1, 1, 0, (cudaStream_t)c->stream>>>((volatile int*)c->tensors[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
