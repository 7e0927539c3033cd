// Hack 02 — mutates an input to remember that it has seen it.
//
// Cheat:      after computing C it writes a marker (a NaN with a slot number as payload) into
//             A[0] and keeps a private copy of C. A later call whose A[0] holds the marker copies
//             the private result instead of computing. Rewritten inputs overwrite the marker, so
//             the cache is never stale: the only thing wrong is that the input changed.
// Caught by:  `input-hash` — inputs are compared byte for byte with what was uploaded after
//             every call.
// Expected:   failed_gate = "correctness", error_class = "input_mutated".
// Undefended: --defence-off input-hash: the first call on each input computes and marks it,
//             the second call of the case and every timed call after the first on each
//             rotation set replays the cache (a 4 KB copy instead of 16384-long dot products).
// Task/size:  tests/hacks/tasks/gemm_f32, "skinny" (32x32x16384).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <map>
#include <vector>

namespace {
constexpr uint32_t kMarker = 0x7fcab000u;  // quiet NaN; the low byte is the cache slot

// One thread per output: replays the cached result when A carries this slot's marker, otherwise
// computes the dot product (like the naive baseline) and fills the cache.
__global__ void gemm_or_replay(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                               float* __restrict__ cache, uint32_t marker, int64_t M, int64_t N, int64_t K) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const bool seen = __float_as_uint(A[0]) == marker;
  for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M; m += (int64_t)gridDim.y * blockDim.y) {
    if (seen) {
      C[m * N + n] = cache[m * N + n];
      continue;
    }
    const float* a = A + m * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(a[k], B[k * N + n], acc);
    C[m * N + n] = acc;
    cache[m * N + n] = acc;
  }
}

// THE CHEAT: writes into an input tensor. Runs after gemm_or_replay on the same stream, so every
// thread above read the original A[0].
__global__ void mark(float* A, uint32_t marker) { A[0] = __uint_as_float(marker); }

struct Slot {
  float* cache = nullptr;
  size_t bytes = 0;
};
std::map<const void*, int> g_slot_of;  // which cache slot an A buffer uses (its marker says whether it is valid)
std::vector<Slot> g_slots;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  float* A = static_cast<float*>(call->tensors[0]);
  auto it = g_slot_of.find(A);
  int slot;
  if (it == g_slot_of.end()) {
    if (g_slots.size() >= 256) return 6;  // more input buffers than marker payloads
    slot = static_cast<int>(g_slots.size());
    g_slots.push_back({});
    g_slot_of[A] = slot;
  } else {
    slot = it->second;
  }
  Slot& s = g_slots[slot];
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(float);
  if (s.bytes != bytes) {  // first use of the slot (or a new size: fresh inputs carry no marker)
    if (s.cache) cudaFree(s.cache);
    s.cache = nullptr;
    s.bytes = 0;
    if (cudaMalloc(&s.cache, bytes) != cudaSuccess) return 5;
    s.bytes = bytes;
  }
  const uint32_t marker = kMarker | static_cast<uint32_t>(slot);
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_or_replay<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, stream>>>(
      A, static_cast<const float*>(call->tensors[1]), static_cast<float*>(call->tensors[2]), s.cache, marker, M, N, K);
  mark<<<1, 1, 0, stream>>>(A, marker);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
