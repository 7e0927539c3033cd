// softmax_bf16 float64 CPU reference: row softmax Y = exp(X - max) / sum(exp(X - max)) on the
// bf16 input values (as doubles). NaN-propagating max, so NaN / +inf / all -inf rows give NaN rows.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  for (int64_t r = 0; r < R; ++r) {
    const double* x = X + r * C;
    double* y = Y + r * C;
    double m = -INFINITY;
    for (int64_t c = 0; c < C; ++c)
      if (std::isnan(x[c]) || x[c] > m) m = x[c];  // once m is NaN nothing replaces it
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      y[c] = std::exp(x[c] - m);
      s += y[c];
    }
    for (int64_t c = 0; c < C; ++c) y[c] /= s;
  }
  return 0;
}
