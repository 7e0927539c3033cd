/* A CUDA library built to ksol's C ABI for the one DSL program ksol writes for x / (1 + |x|) (its
 * table input0[D0, D1], output0[D0, D1]; dims D0, D1): the GPU tests' stand-in for a run's CUDA
 * kernel. It keeps the stream it was last given, which ksol_test_last_stream returns, so that a
 * test can check that a call queued its work on PyTorch's current stream. */
#include <cuda_runtime.h>
#include <ksol/abi.h>

static void* last_stream;

__global__ void softsign(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.0f + fabsf(x[i]));
}

extern "C" int ksol_run(const ksol_call* c) {
  if (!c || c->abi_version != KSOL_ABI_VERSION || c->num_tensors != 2 || c->num_dims != 2) return 1;
  const long long n = c->dims[0] * c->dims[1];
  last_stream = c->stream;
  softsign<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)c->stream>>>((const float*)c->tensors[0], (float*)c->tensors[1], n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

extern "C" void* ksol_test_last_stream(void) { return last_stream; }
