// scan_f32 float64 GPU reference: inclusive prefix sum in double with the naive baseline's
// three kernels (tile scans, one-block scan of tile totals, offsets); no scratch memory.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kTile = 1024;  // elements per tile = threads per block

// Inclusive scan of one value per thread over a 1024-thread block.
__device__ double block_inclusive_scan(double v, double* warp_tot) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int off = 1; off < 32; off *= 2) {
    const double u = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += u;
  }
  if (lane == 31) warp_tot[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = warp_tot[lane];
    for (int off = 1; off < 32; off *= 2) {
      const double u = __shfl_up_sync(0xffffffffu, w, off);
      if (lane >= off) w += u;
    }
    warp_tot[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += warp_tot[warp - 1];
  return v;
}

__device__ __forceinline__ int64_t tile_last(int64_t b, int64_t N) {
  const int64_t end = (b + 1) * kTile;
  return (end < N ? end : N) - 1;
}

// Pass 1: each tile scanned independently into Y.
__global__ void __launch_bounds__(kTile) tile_scan(const double* __restrict__ X, double* __restrict__ Y,
                                                   int64_t N) {
  __shared__ double warp_tot[32];
  const int64_t i = (int64_t)blockIdx.x * kTile + threadIdx.x;
  double v = i < N ? X[i] : 0.0;
  v = block_inclusive_scan(v, warp_tot);
  if (i < N) Y[i] = v;
}

// Pass 2 (one block): inclusive scan of the tile totals, stored back at each tile's last element,
// which is exactly that element's final value.
__global__ void __launch_bounds__(kTile) totals_scan(double* __restrict__ Y, int64_t N, int64_t NB) {
  __shared__ double warp_tot[32];
  __shared__ double incl[kTile];
  const int64_t chunk = (NB + kTile - 1) / kTile;
  const int64_t b0 = (int64_t)threadIdx.x * chunk;
  const int64_t b1 = b0 + chunk < NB ? b0 + chunk : NB;
  double s = 0.0;
  for (int64_t b = b0; b < b1; ++b) s += Y[tile_last(b, N)];
  incl[threadIdx.x] = block_inclusive_scan(s, warp_tot);
  __syncthreads();
  double run = threadIdx.x > 0 ? incl[threadIdx.x - 1] : 0.0;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t p = tile_last(b, N);
    run += Y[p];
    Y[p] = run;
  }
}

// Pass 3: tile b >= 1 adds the final value of the previous tile's last element to its other elements.
__global__ void __launch_bounds__(kTile) add_offsets(double* __restrict__ Y, int64_t N) {
  const int64_t b = (int64_t)blockIdx.x + 1;
  const int64_t i = b * kTile + threadIdx.x;
  const double off = Y[b * kTile - 1];
  if (i < N && i != tile_last(b, N)) Y[i] += off;
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  const int64_t NB = (N + kTile - 1) / kTile;
  if (NB > 2147483647LL) return 3;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  const double* X = static_cast<const double*>(call->tensors[0]);
  double* Y = static_cast<double*>(call->tensors[1]);
  tile_scan<<<(unsigned)NB, kTile, 0, stream>>>(X, Y, N);
  if (cudaGetLastError() != cudaSuccess) return 4;
  if (NB > 1) {
    totals_scan<<<1, kTile, 0, stream>>>(Y, N, NB);
    if (cudaGetLastError() != cudaSuccess) return 4;
    add_offsets<<<(unsigned)(NB - 1), kTile, 0, stream>>>(Y, N);
    if (cudaGetLastError() != cudaSuccess) return 4;
  }
  return 0;
}
