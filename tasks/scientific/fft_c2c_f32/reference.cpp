// fft_c2c_f32 float64 CPU reference: per signal, a radix-2 FFT in double (bit-reversed copy, then
// in-place butterflies) with twiddles exp(-2 pi i k / N) from double cos/sin; N a power of two.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>
#include <vector>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t B = call->dims[0], N = call->dims[1];
  if (B < 0 || N < 1 || (N & (N - 1))) return 2;
  int lg = 0;
  while ((int64_t(1) << lg) < N) ++lg;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  const double kPi = 3.14159265358979323846;
  std::vector<double> wr(N / 2 + 1), wi(N / 2 + 1);  // w_k = exp(-2 pi i k / N)
  for (int64_t k = 0; k < N / 2; ++k) {
    const double t = -2.0 * kPi * static_cast<double>(k) / static_cast<double>(N);
    wr[k] = std::cos(t);
    wi[k] = std::sin(t);
  }
  for (int64_t b = 0; b < B; ++b) {
    const double* x = X + 2 * b * N;
    double* y = Y + 2 * b * N;
    for (int64_t n = 0; n < N; ++n) {
      int64_t r = 0;
      for (int bit = 0; bit < lg; ++bit)
        if ((n >> bit) & 1) r |= int64_t(1) << (lg - 1 - bit);
      y[2 * r] = x[2 * n];
      y[2 * r + 1] = x[2 * n + 1];
    }
    for (int64_t h = 1; h < N; h *= 2) {  // butterflies of span m = 2h use w_{j * N/m}
      const int64_t step = N / (2 * h);
      for (int64_t g = 0; g < N; g += 2 * h)
        for (int64_t j = 0; j < h; ++j) {
          double* a = y + 2 * (g + j);
          double* c = y + 2 * (g + j + h);
          const double w_re = wr[j * step], w_im = wi[j * step];
          const double t_re = w_re * c[0] - w_im * c[1], t_im = w_re * c[1] + w_im * c[0];
          const double a_re = a[0], a_im = a[1];
          a[0] = a_re + t_re;
          a[1] = a_im + t_im;
          c[0] = a_re - t_re;
          c[1] = a_im - t_im;
        }
    }
  }
  return 0;
}
