// maxpool2d_f32 float64 CPU reference: 2x2 stride-2 max pooling of NCHW X [N,C,H,W] (H, W even)
// into Y [N,C,H/2,W/2]; a NaN in a window gives NaN (PyTorch semantics).
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

namespace {
inline double nan_max(double m, double v) { return (std::isnan(v) || v > m) ? v : m; }
}  // namespace

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 4)
    return 1;
  const int64_t N = call->dims[0], C = call->dims[1], H = call->dims[2], W = call->dims[3];
  if (N < 0 || C < 0 || H < 0 || W < 0 || H % 2 || W % 2) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  const int64_t Ho = H / 2, Wo = W / 2;
  for (int64_t p = 0; p < N * C; ++p) {
    const double* x = X + p * H * W;
    double* y = Y + p * Ho * Wo;
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        const double* w = x + (2 * i) * W + 2 * j;
        double m = w[0];  // a NaN here stays: nothing compares greater than NaN
        m = nan_max(m, w[1]);
        m = nan_max(m, w[W]);
        m = nan_max(m, w[W + 1]);
        y[i * Wo + j] = m;
      }
  }
  return 0;
}
