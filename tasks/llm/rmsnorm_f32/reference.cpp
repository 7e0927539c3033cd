// rmsnorm_f32 float64 CPU reference: Y = X * (1 / sqrt(mean(X^2) + 1e-6)) * W, per row.
// X and W arrive as doubles holding the f32 values; everything is computed in double.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  const double eps = 1e-6;
  const double* X = static_cast<const double*>(call->tensors[0]);
  const double* W = static_cast<const double*>(call->tensors[1]);
  double* Y = static_cast<double*>(call->tensors[2]);
  for (int64_t r = 0; r < R; ++r) {
    const double* x = X + r * C;
    double* y = Y + r * C;
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
    const double inv = 1.0 / std::sqrt(ss / (double)C + eps);
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * inv * W[c];
  }
  return 0;
}
