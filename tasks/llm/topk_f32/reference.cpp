// topk_f32 float64 CPU reference: per row, the K largest values in descending order (ties broken
// by the smaller index) and their column indices (i32), by a partial sort of the row's indices.
#include <ksol/abi.h>
#include <algorithm>
#include <cstdint>
#include <vector>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t R = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (R < 0 || N < 0 || K < 0 || K > N || N > 2147483647LL) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* V = static_cast<double*>(call->tensors[1]);
  int32_t* I = static_cast<int32_t*>(call->tensors[2]);
  std::vector<int32_t> idx(N);
  for (int64_t r = 0; r < R; ++r) {
    const double* x = X + r * N;
    for (int64_t c = 0; c < N; ++c) idx[c] = (int32_t)c;
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(), [x](int32_t a, int32_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    for (int64_t k = 0; k < K; ++k) {
      V[r * K + k] = x[idx[k]];
      I[r * K + k] = idx[k];
    }
  }
  return 0;
}
