/* A library built to ksol's C ABI for the stitched piece relu(input0) * w[i1] (its table input0[D0,
 * D1], w[D1], output0[D0, D1]; dims D0, D1), on host memory: the CPU tests' stand-in for a piece's
 * CUDA kernel. */
#include <ksol/abi.h>

int ksol_run(const ksol_call* c) {
  if (!c || c->abi_version != KSOL_ABI_VERSION || c->num_tensors != 3 || c->num_dims != 2) return 1;
  const float* x = (const float*)c->tensors[0];
  const float* w = (const float*)c->tensors[1];
  float* y = (float*)c->tensors[2];
  const int64_t R = c->dims[0], C = c->dims[1];
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float v = x[i * C + j];
      y[i * C + j] = (v > 0.0f ? v : 0.0f) * w[j];
    }
  return 0;
}
