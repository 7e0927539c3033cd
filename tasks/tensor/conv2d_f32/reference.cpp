// conv2d_f32 float64 CPU reference: NCHW 3x3 cross-correlation, stride 1, zero padding 1, no bias:
// Y[n,k,h,w] = sum_{c,r,s} X[n,c,h+r-1,w+s-1] * F[k,c,r,s], summed in double.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 5)
    return 1;
  const int64_t N = call->dims[0], C = call->dims[1], H = call->dims[2], W = call->dims[3],
                K = call->dims[4];
  if (N < 0 || C < 0 || H < 0 || W < 0 || K < 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  const double* F = static_cast<const double*>(call->tensors[1]);
  double* Y = static_cast<double*>(call->tensors[2]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      double* y = Y + (n * K + k) * H * W;
      for (int64_t p = 0; p < H * W; ++p) y[p] = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const double* x = X + (n * C + c) * H * W;
        const double* f = F + (k * C + c) * 9;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            double acc = 0.0;
            for (int64_t r = 0; r < 3; ++r) {
              const int64_t hh = h + r - 1;
              if (hh < 0 || hh >= H) continue;
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t ww = w + s - 1;
                if (ww < 0 || ww >= W) continue;
                acc += x[hh * W + ww] * f[r * 3 + s];
              }
            }
            y[h * W + w] += acc;
          }
      }
    }
  return 0;
}
