// gemm_bias_gelu_bf16 float64 CPU reference: C = gelu_tanh(A * B + bias), row-major, bias over columns,
// gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), all in double on the bf16 values.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M < 0 || N < 0 || K < 0) return 2;
  const double* A = static_cast<const double*>(call->tensors[0]);
  const double* B = static_cast<const double*>(call->tensors[1]);
  const double* bias = static_cast<const double*>(call->tensors[2]);
  double* C = static_cast<double*>(call->tensors[3]);
  const double k0 = 0.79788456080286535588;  // sqrt(2/pi)
  for (int64_t i = 0; i < M; ++i) {
    double* c = C + i * N;
    for (int64_t j = 0; j < N; ++j) c[j] = 0.0;
    for (int64_t k = 0; k < K; ++k) {  // i-k-j order: the inner loop streams a row of B
      const double a = A[i * K + k];
      const double* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
    for (int64_t j = 0; j < N; ++j) {
      const double v = c[j] + bias[j];
      c[j] = 0.5 * v * (1.0 + std::tanh(k0 * (v + 0.044715 * v * v * v)));
    }
  }
  return 0;
}
