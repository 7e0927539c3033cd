// merge_attn_states_f32 float64 CPU reference: m = max(a, b), wa = exp(a - m), wb = exp(b - m),
// O = (wa * O_a + wb * O_b) / (wa + wb), lse = m + log(wa + wb), per (t, h), in double.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 6 || call->num_dims != 3)
    return 1;
  const int64_t T = call->dims[0], H = call->dims[1], D = call->dims[2];
  if (T < 0 || H < 0 || D < 0) return 2;
  const double* Oa = static_cast<const double*>(call->tensors[0]);
  const double* Ob = static_cast<const double*>(call->tensors[1]);
  const double* La = static_cast<const double*>(call->tensors[2]);
  const double* Lb = static_cast<const double*>(call->tensors[3]);
  double* O = static_cast<double*>(call->tensors[4]);
  double* L = static_cast<double*>(call->tensors[5]);
  for (int64_t th = 0; th < T * H; ++th) {
    const double a = La[th], b = Lb[th];
    const double m = a > b ? a : b;
    const double wa = std::exp(a - m), wb = std::exp(b - m), s = wa + wb;
    for (int64_t d = 0; d < D; ++d) O[th * D + d] = (wa * Oa[th * D + d] + wb * Ob[th * D + d]) / s;
    L[th] = m + std::log(s);
  }
  return 0;
}
