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

int blocks_for(size_t items) { return static_cast<int>(items / 256 + 1 < 8192 ? items / 256 + 1 : 8192); }

__global__ void fingerprint_words(const uint64_t* w, size_t words, const unsigned char* tail, size_t tail_bytes,
                                  uint64_t key, unsigned long long* out) {
  uint64_t acc = 0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    acc += mix64(w[i] ^ mix64(i ^ key) ^ key);
  if (blockIdx.x == 0 && threadIdx.x == 0 && tail_bytes) {
    uint64_t t = 0;
    for (size_t b = 0; b < tail_bytes; ++b) t |= static_cast<uint64_t>(tail[b]) << (8 * b);
    acc += mix64(t ^ mix64(words ^ key) ^ key);
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, static_cast<unsigned long long>(acc));
}

__global__ void fill_random(unsigned char* p, size_t bytes, uint64_t seed) {
  size_t words = bytes / 8;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    reinterpret_cast<uint64_t*>(p)[i] = mix64(seed ^ mix64(i));
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (size_t b = words * 8; b < bytes; ++b) p[b] = static_cast<unsigned char>(mix64(seed ^ mix64(b)) & 0xff);
}

__global__ void read_all(const uint4* p, size_t n, unsigned int* sink) {
  unsigned int acc = 0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // A store that never happens on real data keeps the loads from being optimised away.
  if (acc == 0x9e3779b9u && threadIdx.x == 1023) *sink = acc;
}

}  // namespace

int device_fingerprint(const void* p, size_t bytes, uint64_t key, void* stream_in, uint64_t* out) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_in);
  static unsigned long long* d_acc = nullptr;
  cudaError_t e = cudaSuccess;
  if (!d_acc && (e = cudaMalloc(&d_acc, sizeof(unsigned long long))) != cudaSuccess) return e;
  if ((e = cudaMemsetAsync(d_acc, 0, sizeof(unsigned long long), stream)) != cudaSuccess) return e;
  size_t words = bytes / 8;
  const unsigned char* tail = static_cast<const unsigned char*>(p) + words * 8;
  fingerprint_words<<<blocks_for(words), 256, 0, stream>>>(static_cast<const uint64_t*>(p), words, tail, bytes % 8, key, d_acc);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  unsigned long long h = 0;
  if ((e = cudaMemcpyAsync(&h, d_acc, sizeof h, cudaMemcpyDeviceToHost, stream)) != cudaSuccess) return e;
  if ((e = cudaStreamSynchronize(stream)) != cudaSuccess) return e;
  *out = h;
  return cudaSuccess;
}

int device_fill_random(void* p, size_t bytes, uint64_t seed, void* stream) {
  fill_random<<<blocks_for(bytes / 8), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<unsigned char*>(p), bytes, seed);
  return cudaGetLastError();
}

int device_read_all(const void* p, size_t bytes, void* stream) {
  static unsigned int* sink = nullptr;
  cudaError_t e = cudaSuccess;
  if (!sink && (e = cudaMalloc(&sink, sizeof(unsigned int))) != cudaSuccess) return e;
  read_all<<<blocks_for(bytes / 16), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  return cudaGetLastError();
}

}  // namespace ksol
