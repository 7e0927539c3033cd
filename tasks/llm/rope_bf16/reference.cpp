// rope_bf16 float64 CPU reference: interleaved rotary embedding, Y[t,h,2i] = x0*cos - x1*sin,
// Y[t,h,2i+1] = x0*sin + x1*cos with (x0, x1) = X[t,h,2i..2i+1] and cos/sin = COS/SIN[t,i].
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t T = call->dims[0], H = call->dims[1], D = call->dims[2];
  if (T < 0 || H < 0 || D < 0 || D % 2 != 0) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  const double* COS = static_cast<const double*>(call->tensors[1]);
  const double* SIN = static_cast<const double*>(call->tensors[2]);
  double* Y = static_cast<double*>(call->tensors[3]);
  const int64_t P = D / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const double* x = X + (t * H + h) * D;
      double* y = Y + (t * H + h) * D;
      for (int64_t i = 0; i < P; ++i) {
        const double c = COS[t * P + i], s = SIN[t * P + i];
        y[2 * i] = x[2 * i] * c - x[2 * i + 1] * s;
        y[2 * i + 1] = x[2 * i] * s + x[2 * i + 1] * c;
      }
    }
  return 0;
}
