/* A candidate built to ksol's C ABI for problems/01_gemm_relu.py, on host memory (the CPU tests'
 * stand-in for a CUDA kernel): tensors x[B, IN], fc.weight[OUT, IN], fc.bias[OUT], y[B, OUT];
 * dims B, IN, OUT. fp32 products and sums, as a kernel would do them. With -DKSOL_WRONG it is off
 * by 1e-2 at one element; with -DKSOL_FAIL it reports a failure; with -DKSOL_REPEAT=N it does the
 * same work N times (a slow but correct kernel). */
#include <ksol/abi.h>

int ksol_run(const ksol_call* c) {
  if (!c || c->abi_version != KSOL_ABI_VERSION || c->num_tensors != 4 || c->num_dims != 3) return 1;
#ifdef KSOL_FAIL
  return 7;
#endif
  const float* x = (const float*)c->tensors[0];
  const float* w = (const float*)c->tensors[1];
  const float* b = (const float*)c->tensors[2];
  float* y = (float*)c->tensors[3];
  const int64_t B = c->dims[0], IN = c->dims[1], OUT = c->dims[2];
#ifndef KSOL_REPEAT
#define KSOL_REPEAT 1
#endif
  for (int r = 0; r < KSOL_REPEAT; ++r) {
    __asm__ volatile("" ::: "memory"); /* each repetition reads and writes memory again */
    for (int64_t i = 0; i < B; ++i)
      for (int64_t o = 0; o < OUT; ++o) {
        float acc = b[o];
        for (int64_t k = 0; k < IN; ++k) acc += x[i * IN + k] * w[o * IN + k];
        y[i * OUT + o] = acc > 0.0f ? acc : 0.0f;
      }
  }
#ifdef KSOL_WRONG
  y[3] += 1e-2f;
#endif
  return 0;
}
