// conv2d_nhwc_tf32 float64 CPU reference: NHWC 3x3 cross-correlation with a KRSC filter, stride 1,
// zero padding 1, no bias: Y[n,h,w,k] = sum_{r,s,c} X[n,h+r-1,w+s-1,c] * F[k,r,s,c], summed in double.
// The exact sums of the f32 inputs (the task's tf32 tolerance covers the inputs' rounding); inputs
// arrive as doubles holding the fp32 values.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 5)
    return 1;
  const int64_t N = call->dims[0], H = call->dims[1], W = call->dims[2], C = call->dims[3],
                K = call->dims[4];
  if (N < 0 || H < 0 || W < 0 || C < 0 || K < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  const double* F = static_cast<const double*>(call->tensors[1]);
  double* Y = static_cast<double*>(call->tensors[2]);
  // Channels are innermost in X and F: each tap is a dot product of two contiguous rows of C.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        double* y = Y + ((n * H + h) * W + w) * K;
        for (int64_t k = 0; k < K; ++k) {
          double acc = 0.0;
          for (int64_t r = 0; r < 3; ++r) {
            const int64_t hh = h + r - 1;
            if (hh < 0 || hh >= H) continue;
            for (int64_t s = 0; s < 3; ++s) {
              const int64_t ww = w + s - 1;
              if (ww < 0 || ww >= W) continue;
              const double* x = X + ((n * H + hh) * W + ww) * C;
              const double* f = F + ((k * 3 + r) * 3 + s) * C;
              for (int64_t c = 0; c < C; ++c) acc += x[c] * f[c];
            }
          }
          y[k] = acc;
        }
      }
  return 0;
}
