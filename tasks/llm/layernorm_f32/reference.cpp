// layernorm_f32 float64 CPU reference: per row, mean and biased variance (two passes, double), then
// Y = (X - mean) / sqrt(var + 1e-5) * W + B.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  const double eps = 1e-5;
  const double* X = static_cast<const double*>(call->tensors[0]);
  const double* W = static_cast<const double*>(call->tensors[1]);
  const double* B = static_cast<const double*>(call->tensors[2]);
  double* Y = static_cast<double*>(call->tensors[3]);
  for (int64_t r = 0; r < R; ++r) {
    const double* x = X + r * C;
    double* y = Y + r * C;
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += x[c];
    const double mean = s / (double)C;
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += (x[c] - mean) * (x[c] - mean);
    const double rstd = 1.0 / std::sqrt(ss / (double)C + eps);
    for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - mean) * rstd * W[c] + B[c];
  }
  return 0;
}
