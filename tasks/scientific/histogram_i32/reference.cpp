// histogram_i32 CPU reference: counts[b] = #{x in [0,1) : (int)(x * (float)B) == b}, the product
// rounded once in fp32 (CUB's HistogramEven rule); samples outside [0, 1) (1.0f) are not counted.
#include <ksol/abi.h>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 2)
    return 1;
  const int64_t N = call->dims[0], B = call->dims[1];
  if (N < 0 || B < 1 || B > (int64_t(1) << 24)) return 2;
  const double* X = static_cast<const double*>(call->tensors[0]);  // each an exact f32 value
  int32_t* counts = static_cast<int32_t*>(call->tensors[1]);
  for (int64_t b = 0; b < B; ++b) counts[b] = 0;
  const float fb = static_cast<float>(B);  // exact: B <= 2^24
  for (int64_t i = 0; i < N; ++i) {
    const float x = static_cast<float>(X[i]);
    if (!(x >= 0.0f && x < 1.0f)) continue;
    const float t = x * fb;  // one fp32 multiply, round to nearest (SSE on x86-64: no excess precision)
    ++counts[static_cast<int>(t)];
  }
  return 0;
}
