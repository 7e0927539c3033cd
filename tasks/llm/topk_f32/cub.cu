// topk_f32 vendor baseline: cub::DeviceSegmentedSort::SortPairsDescending sorts every row (keys X,
// values column indices), then a copy kernel takes each row's first K. Scratch is cached per shape.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cub/device/device_segmented_sort.cuh>
#include <climits>
#include <cstdint>

namespace {
// Scratch, each buffer grown only when a larger size needs more. The column-index and offset
// arrays depend only on (R, N): they are refilled when the shape changes or they are reallocated.
float* g_keys_out = nullptr;
int* g_vals_in = nullptr;
int* g_vals_out = nullptr;
int* g_offsets = nullptr;
char* g_temp = nullptr;
size_t g_keys_cap = 0, g_vin_cap = 0, g_vout_cap = 0, g_off_cap = 0, g_temp_cap = 0;
int64_t g_R = -1, g_N = -1;  // the shape g_vals_in and g_offsets were filled for

__global__ void fill_shape(int* __restrict__ vals, int* __restrict__ offsets, int64_t R, int64_t N) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < R * N; e += stride) vals[e] = (int)(e % N);
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r <= R; r += stride) offsets[r] = (int)(r * N);
}

__global__ void take_first_k(const float* __restrict__ keys, const int* __restrict__ vals,
                             float* __restrict__ V, int32_t* __restrict__ I, int64_t R, int64_t N,
                             int64_t K) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < R * K; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e / K, k = e % K;
    V[e] = keys[r * N + k];
    I[e] = vals[r * N + k];
  }
}

unsigned grid_for(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// Ensures *p holds at least `need` elements; sets *moved when it had to reallocate.
template <class T>
bool grow(T** p, size_t* cap, size_t need, bool* moved = nullptr) {
  if (need <= *cap) return true;
  if (*p) cudaFree(*p);
  *p = nullptr;
  *cap = 0;
  if (moved) *moved = true;
  if (cudaMalloc(reinterpret_cast<void**>(p), need * sizeof(T)) != cudaSuccess) return false;
  *cap = need;
  return true;
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3)
    return 1;
  const int64_t R = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (R < 0 || N < 0 || K < 0 || K > N) return 2;
  if (R == 0 || K == 0) return 0;
  if (R * N > INT_MAX) return 3;  // 32-bit offsets and indices
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const size_t items = (size_t)(R * N);
  bool moved = false;
  const bool ok = grow(&g_keys_out, &g_keys_cap, items) && grow(&g_vals_out, &g_vout_cap, items) &&
                  grow(&g_vals_in, &g_vin_cap, items, &moved) &&
                  grow(&g_offsets, &g_off_cap, (size_t)R + 1, &moved);
  if (moved) g_R = g_N = -1;
  if (!ok) return 5;
  if (g_R != R || g_N != N) {
    fill_shape<<<grid_for(R * N), 256, 0, stream>>>(g_vals_in, g_offsets, R, N);
    if (cudaGetLastError() != cudaSuccess) return 6;
    g_R = R;
    g_N = N;
  }
  const float* X = static_cast<const float*>(call->tensors[0]);
  size_t need = 0;
  if (cub::DeviceSegmentedSort::SortPairsDescending(nullptr, need, X, g_keys_out, g_vals_in, g_vals_out,
                                                     (int64_t)items, R, g_offsets, g_offsets + 1,
                                                     stream) != cudaSuccess)
    return 7;
  if (!grow(&g_temp, &g_temp_cap, need)) return 5;
  size_t have = g_temp_cap;
  if (cub::DeviceSegmentedSort::SortPairsDescending(g_temp, have, X, g_keys_out, g_vals_in, g_vals_out,
                                                     (int64_t)items, R, g_offsets, g_offsets + 1,
                                                     stream) != cudaSuccess)
    return 8;
  take_first_k<<<grid_for(R * K), 256, 0, stream>>>(g_keys_out, g_vals_out,
                                                     static_cast<float*>(call->tensors[1]),
                                                     static_cast<int32_t*>(call->tensors[2]), R, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 9;
}
