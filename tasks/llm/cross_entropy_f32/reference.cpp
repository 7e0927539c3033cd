// cross_entropy_f32 float64 CPU reference: loss[r] = (max - X[r,t]) + log(sum_j exp(X[r,j] - max))
// with target t = min(floor(U[r] * C), C - 1) (the product is exact in double).
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 2)
    return 1;
  const int64_t R = call->dims[0], C = call->dims[1];
  if (R < 0 || C < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  const double* U = static_cast<const double*>(call->tensors[1]);
  double* L = static_cast<double*>(call->tensors[2]);
  for (int64_t r = 0; r < R; ++r) {
    if (C == 0) {  // no classes: the loss is undefined
      L[r] = NAN;
      continue;
    }
    const double* x = X + r * C;
    double m = -INFINITY;
    for (int64_t c = 0; c < C; ++c) m = x[c] > m ? x[c] : m;
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[c] - m);
    int64_t t = (int64_t)std::floor(U[r] * (double)C);
    if (t > C - 1) t = C - 1;
    if (t < 0) t = 0;
    L[r] = (m - x[t]) + std::log(s);
  }
  return 0;
}
