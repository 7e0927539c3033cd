#include "harness/device_ops.h"

#include <cuda_runtime.h>

namespace ksol {
namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fingerprint_words(const uint64_t* w, size_t words, const unsigned char* tail, size_t tail_bytes,
                                  unsigned long long* out) {
  uint64_t acc = 0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    acc += mix64(w[i] ^ mix64(i));
  if (blockIdx.x == 0 && threadIdx.x == 0 && tail_bytes) {
    uint64_t t = 0;
    for (size_t b = 0; b < tail_bytes; ++b) t |= static_cast<uint64_t>(tail[b]) << (8 * b);
    acc += mix64(t ^ mix64(words));
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, static_cast<unsigned long long>(acc));
}

}  // namespace

bool device_fingerprint(const void* p, size_t bytes, void* stream_in, uint64_t* out) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_in);
  static unsigned long long* d_acc = nullptr;
  if (!d_acc && cudaMalloc(&d_acc, sizeof(unsigned long long)) != cudaSuccess) return false;
  if (cudaMemsetAsync(d_acc, 0, sizeof(unsigned long long), stream) != cudaSuccess) return false;
  size_t words = bytes / 8;
  const unsigned char* tail = static_cast<const unsigned char*>(p) + words * 8;
  int blocks = static_cast<int>(words / 256 + 1 < 4096 ? words / 256 + 1 : 4096);
  fingerprint_words<<<blocks, 256, 0, stream>>>(static_cast<const uint64_t*>(p), words, tail, bytes % 8, d_acc);
  if (cudaGetLastError() != cudaSuccess) return false;
  unsigned long long h = 0;
  if (cudaMemcpyAsync(&h, d_acc, sizeof h, cudaMemcpyDeviceToHost, stream) != cudaSuccess) return false;
  if (cudaStreamSynchronize(stream) != cudaSuccess) return false;
  *out = h;
  return true;
}

}  // namespace ksol
