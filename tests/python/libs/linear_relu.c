/* A library built to ksol's C ABI for the one DSL program ksol writes for relu(linear(x)) (its
 * tensor table input0[M, K], w_net_weight[N, K], w_net_bias[N], output0[M, N]; dims M, N, K), on
 * host memory: the CPU tests' stand-in for the CUDA kernel a run verified. With -DKSOL_WRONG one
 * element is off by 1e-2. */
#include <ksol/abi.h>

int ksol_run(const ksol_call* c) {
  if (!c || c->abi_version != KSOL_ABI_VERSION || c->num_tensors != 4 || c->num_dims != 3) return 1;
  const float* x = (const float*)c->tensors[0];
  const float* w = (const float*)c->tensors[1];
  const float* b = (const float*)c->tensors[2];
  float* y = (float*)c->tensors[3];
  const int64_t M = c->dims[0], N = c->dims[1], K = c->dims[2];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += x[i * K + k] * w[n * K + k];
      acc += b[n];
      y[i * N + n] = acc > 0.0f ? acc : 0.0f;
    }
#ifdef KSOL_WRONG
  y[3] += 1e-2f;
#endif
  return 0;
}
