// montecarlo_integral_f32 float64 CPU reference: I[0] = (1/N) * sum_i exp(-(x_i^2 + y_i^2)) over the
// given (x, y) samples U [N, 2], accumulated sequentially in double.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double* U = static_cast<const double*>(call->tensors[0]);
  double* I = static_cast<double*>(call->tensors[1]);
  double acc = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    const double x = U[2 * i], y = U[2 * i + 1];
    acc += std::exp(-(x * x + y * y));
  }
  I[0] = N > 0 ? acc / static_cast<double>(N) : 0.0;
  return 0;
}
