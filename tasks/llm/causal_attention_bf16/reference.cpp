// causal_attention_bf16 float64 CPU reference: per query row, scores s_j = 0.125 * q . k_j for j <= i,
// p = exp(s - max) / sum, O = sum_j p_j v_j; two passes in double on the bf16 input values.
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>
#include <vector>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 3)
    return 1;
  const int64_t B = call->dims[0], H = call->dims[1], S = call->dims[2];
  constexpr int64_t D = 64;
  if (B < 0 || H < 0 || S < 0) return 2;
  const double* Q = static_cast<const double*>(call->tensors[0]);
  const double* K = static_cast<const double*>(call->tensors[1]);
  const double* V = static_cast<const double*>(call->tensors[2]);
  double* O = static_cast<double*>(call->tensors[3]);
  std::vector<double> s(S > 0 ? S : 1);
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const double* q0 = Q + bh * S * D;
    const double* k0 = K + bh * S * D;
    const double* v0 = V + bh * S * D;
    for (int64_t i = 0; i < S; ++i) {
      const double* q = q0 + i * D;
      double m = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) dot += q[d] * k0[j * D + d];
        s[j] = 0.125 * dot;
        m = s[j] > m ? s[j] : m;
      }
      double l = 0.0, acc[D] = {};
      for (int64_t j = 0; j <= i; ++j) {
        const double p = std::exp(s[j] - m);
        l += p;
        for (int64_t d = 0; d < D; ++d) acc[d] += p * v0[j * D + d];
      }
      double* o = O + (bh * S + i) * D;
      for (int64_t d = 0; d < D; ++d) o[d] = acc[d] / l;
    }
  }
  return 0;
}
