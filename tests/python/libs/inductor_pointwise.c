/* A library built to ksol's C ABI for the region of the pointwise fixture's kernel
 * (tests/python/inductor/pointwise_fusion.py): output0 = relu(input0 + input1[i1]) * 2 + sigmoid(input0),
 * table input0[D0, D1], input1[D1], output0[D0, D1]; dims D0, D1. On host memory: the CPU tests'
 * stand-in for the DSL kernel a search would return. Built with -DRELU_ONLY it computes relu(input0)
 * alone: a replacement that must fail against the Inductor kernel's outputs. */
#include <math.h>

#include <ksol/abi.h>

int ksol_run(const ksol_call* c) {
  if (!c || c->abi_version != KSOL_ABI_VERSION || c->num_tensors != 3 || c->num_dims != 2) return 1;
  const float* x = (const float*)c->tensors[0];
  const float* b = (const float*)c->tensors[1];
  float* y = (float*)c->tensors[2];
  const int64_t R = c->dims[0], C = c->dims[1];
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float v = x[i * C + j];
#ifdef RELU_ONLY
      y[i * C + j] = v > 0.0f ? v : 0.0f;
#else
      float s = v + b[j];
      y[i * C + j] = (s > 0.0f ? s : 0.0f) * 2.0f + 1.0f / (1.0f + expf(-v));
#endif
    }
  return 0;
}
