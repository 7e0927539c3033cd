// A streaming elementwise kernel (LeakyReLU over n floats) in the shape ksol's elementwise
// generator writes, at several grids: capped at 65536 blocks and looping (grid-stride), covering
// the stream in one step, and persistent; with and without streaming cache hints. Build and run
// on a GPU host:  nvcc -O3 -arch=sm_90 -std=c++17 -o stream_grid scripts/stream_grid_bench.cu && ./stream_grid [n]
// (docs/results/2026-12-06-h100-kernelbench-paths-and-elementwise-grid.txt).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

template <int V> struct alignas(4 * V) P { float v[V]; };

template <int T, int V, int I, bool CS, typename Idx>
__global__ void __launch_bounds__(T) k(const float* __restrict__ x, float* __restrict__ y, Idx groups) {
  const Idx step = (Idx)gridDim.x * T * I;
  for (Idx base = (Idx)blockIdx.x * T * I; base < groups; base += step) {
    P<V> in[I];
#pragma unroll
    for (int it = 0; it < I; ++it) {
      Idx g = base + it * T + threadIdx.x;
      if (g < groups) {
        if constexpr (CS && V == 4) { float4 f = __ldcs(reinterpret_cast<const float4*>(x) + g); in[it] = *reinterpret_cast<P<V>*>(&f); }
        else in[it] = reinterpret_cast<const P<V>*>(x)[g];
      }
    }
#pragma unroll
    for (int it = 0; it < I; ++it) {
      Idx g = base + it * T + threadIdx.x;
      if (g < groups) {
        P<V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = in[it].v[j] > 0.f ? in[it].v[j] : 0.01f * in[it].v[j];
        if constexpr (CS && V == 4) __stcs(reinterpret_cast<float4*>(y) + g, *reinterpret_cast<float4*>(&o));
        else reinterpret_cast<P<V>*>(y)[g] = o;
      }
    }
  }
}

template <int T, int V, int I, bool CS, typename Idx>
float run(const char* name, const float* x, float* y, int64_t n, int64_t maxBlocks) {
  int64_t groups = n / V;
  int64_t blocks = std::min<int64_t>((groups + (int64_t)T * I - 1) / ((int64_t)T * I), maxBlocks);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int w = 0; w < 3; ++w) k<T, V, I, CS, Idx><<<blocks, T>>>(x, y, (Idx)groups);
  std::vector<float> ms;
  for (int r = 0; r < 15; ++r) {
    cudaEventRecord(a); k<T, V, I, CS, Idx><<<blocks, T>>>(x, y, (Idx)groups); cudaEventRecord(b); cudaEventSynchronize(b);
    float t; cudaEventElapsedTime(&t, a, b); ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  float med = ms[ms.size() / 2];
  printf("%-44s blocks %8lld  %8.1f us  %6.3f TB/s\n", name, (long long)blocks, med * 1e3, 2.0 * 4 * n / (med * 1e-3) / 1e12);
  return med;
}

int main(int argc, char** argv) {
  int64_t n = argc > 1 ? atoll(argv[1]) : (int64_t)4096 * 393216;
  float *x, *y; cudaMalloc(&x, n * 4); cudaMalloc(&y, n * 4); cudaMemset(x, 0, n * 4);
  printf("n = %lld floats (%.2f GB each way)\n", (long long)n, n * 4 / 1e9);
  const int64_t K = 65536, U = 1ll << 40;
  run<512, 2, 1, false, int64_t>("ksol-like t512 v2 i1 grid<=65536", x, y, n, K);
  run<256, 4, 1, false, int64_t>("t256 v4 i1 grid<=65536", x, y, n, K);
  run<256, 4, 2, false, int64_t>("t256 v4 i2 grid<=65536", x, y, n, K);
  run<128, 4, 2, false, int64_t>("t128 v4 i2 (triton-like 1024/blk) 1 pass", x, y, n, U);
  run<128, 4, 2, false, int32_t>("t128 v4 i2 1 pass int32", x, y, n, U);
  run<256, 4, 2, false, int64_t>("t256 v4 i2 1 pass", x, y, n, U);
  run<256, 4, 4, false, int64_t>("t256 v4 i4 1 pass", x, y, n, U);
  run<256, 4, 1, true, int64_t>("t256 v4 i1 cs grid<=65536", x, y, n, K);
  run<256, 4, 2, true, int64_t>("t256 v4 i2 cs grid<=65536", x, y, n, K);
  run<128, 4, 2, true, int64_t>("t128 v4 i2 cs 1 pass", x, y, n, U);
  run<256, 4, 2, true, int64_t>("t256 v4 i2 cs 1 pass", x, y, n, U);
  run<256, 4, 4, true, int64_t>("t256 v4 i4 cs 1 pass", x, y, n, U);
  run<512, 4, 2, true, int64_t>("t512 v4 i2 cs grid<=65536", x, y, n, K);
  run<256, 4, 2, true, int64_t>("t256 v4 i2 cs grid 132*8", x, y, n, 132 * 8);
  run<256, 4, 2, false, int64_t>("t256 v4 i2 grid 132*8", x, y, n, 132 * 8);
  return 0;
}
