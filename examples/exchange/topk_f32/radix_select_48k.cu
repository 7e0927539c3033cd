// topk_f32 by radix select, without opt-in shared memory: 512-thread blocks whose buffers fit the
// default 48 KiB, so two or more blocks share an SM and no launch attribute is set.
// Floats are mapped to unsigned keys whose order is the float order, so
// the K-th largest key of a row can be found digit by digit with shared-memory histograms:
//   - rows of up to 1024 elements: one warp per row, the row in registers, K rounds of a warp-wide
//     argmax (redux.sync max over the lanes' best keys, then min over the tied indices);
//   - longer rows: one 512-thread block per row. Pass 1 reads the row from HBM once, keeps as much
//     of it as fits in shared memory and histograms the top 11 key bits; pass 2 takes the elements
//     above the K-th element's bin and gathers that bin's elements; two more 11- and 10-bit digits
//     over the gathered bin give the exact K-th key T; every element above T and as many equal to T
//     as are still missing are the K winners, which a rank sort puts in order.
// Ties: the warp path takes equal keys by smaller index; the block path takes any of them (the
// task accepts any choice among equal values), always distinct indices.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <climits>
#include <cstdint>

namespace {

constexpr int kBlockThreads = 512;
constexpr int kBins = 2048;         // 11-bit digits (the last one is 10 bits)
constexpr int kCandidates = 2048;   // gathered elements of the K-th element's bin kept in shared memory
constexpr int kMaxK = 512;          // winners kept in shared memory by the block path
constexpr int kWarpRowsPerBlock = 8;
constexpr int kMaxSharedBytes = 48 * 1024 - 256;  // the default limit less the static buffers
constexpr int kFixedSharedBytes = kBins * 4 + kCandidates * 8 + kMaxK * 8;

// Order-preserving map: a larger float gives a larger key (-0 sorts just below +0).
__device__ __forceinline__ uint32_t key_of(float f) {
  const uint32_t b = __float_as_uint(f);
  return b ^ ((b >> 31) ? 0xffffffffu : 0x80000000u);
}
__device__ __forceinline__ float float_of(uint32_t k) {
  return __uint_as_float(k ^ ((k >> 31) ? 0x80000000u : 0xffffffffu));
}

// ---- short rows: one warp per row ----------------------------------------------------------

// Row r's elements live in lane registers: slot s of lane l is column l + 32 s. `taken` marks
// slots that are used up or past the row's end.
template <int kItems>
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock) topk_warp_rows(const float* __restrict__ X, float* __restrict__ V,
                                                                         int32_t* __restrict__ I, int64_t R, int N, int K) {
  const int lane = threadIdx.x % 32;
  const int64_t r = (int64_t)blockIdx.x * kWarpRowsPerBlock + threadIdx.x / 32;
  if (r >= R) return;  // whole warps leave together
  const float* x = X + r * N;
  uint32_t key[kItems];
  uint32_t taken = 0;
#pragma unroll
  for (int s = 0; s < kItems; ++s) {
    const int c = lane + 32 * s;
    key[s] = c < N ? key_of(__ldg(x + c)) : 0u;
    if (c >= N) taken |= 1u << s;
  }
  // The lane's best remaining slot: the largest key, the smaller column on a tie.
  auto lane_best = [&](uint32_t* bk, uint32_t* bc) {
    *bk = 0;
    *bc = UINT_MAX;
#pragma unroll
    for (int s = 0; s < kItems; ++s)
      if (!(taken & (1u << s)) && (*bc == UINT_MAX || key[s] > *bk)) {
        *bk = key[s];
        *bc = (uint32_t)(lane + 32 * s);
      }
  };
  uint32_t bk, bc;
  lane_best(&bk, &bc);
  for (int k = 0; k < K; ++k) {
    // Lanes with nothing left hold column UINT_MAX: never chosen while the row has elements left.
    const uint32_t kmax = __reduce_max_sync(0xffffffffu, bc == UINT_MAX ? 0u : bk);
    const uint32_t col = __reduce_min_sync(0xffffffffu, (bc != UINT_MAX && bk == kmax) ? bc : UINT_MAX);
    if (lane == (k & 31)) {
      V[r * K + k] = float_of(kmax);
      I[r * K + k] = (int32_t)col;
    }
    if ((int)(col & 31) == lane) {
      taken |= 1u << (col >> 5);
      lane_best(&bk, &bc);
    }
  }
}

// ---- long rows: one block per row ------------------------------------------------------------

struct BlockShared {
  uint32_t* hist;    // kBins
  uint32_t* cand_k;  // kCandidates
  int32_t* cand_c;
  uint32_t* win_k;   // kMaxK
  int32_t* win_c;
  float* cache;      // the row's first `cached` elements
};

// Finds the digit d of the histogram (bins 0..nbins-1, highest first) that holds the need-th
// largest element: fewer than `need` elements lie in bins above d, at least `need` in d and above.
// Returns d and the count above it through shared memory; every thread reads them after the call.
__device__ void select_digit(const uint32_t* hist, int nbins, uint32_t need, uint32_t* s_digit, uint32_t* s_above,
                             uint32_t* s_warp) {
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int per = nbins / kBlockThreads;  // 2 or 4
  // Thread t owns bins nbins-1-t*per ... : thread order is descending bin order.
  uint32_t mine = 0;
  for (int j = 0; j < per; ++j) mine += hist[nbins - 1 - (t * per + j)];
  uint32_t incl = mine;
  for (int o = 1; o < 32; o *= 2) {
    const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = s_warp[lane];
    for (int o = 1; o < 32; o *= 2) {
      const uint32_t v = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += v;
    }
    s_warp[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  uint32_t run = incl - mine + (warp ? s_warp[warp - 1] : 0u);  // elements in bins above this thread's
  for (int j = 0; j < per; ++j) {
    const int b = nbins - 1 - (t * per + j);
    const uint32_t cnt = hist[b];
    if (run < need && run + cnt >= need) {
      *s_digit = (uint32_t)b;
      *s_above = run;
    }
    run += cnt;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kBlockThreads, 2) topk_block_rows(const float* __restrict__ X, float* __restrict__ V,
                                                                    int32_t* __restrict__ I, int N, int K, int cached) {
  extern __shared__ __align__(16) unsigned char smem[];
  BlockShared sh;
  sh.hist = reinterpret_cast<uint32_t*>(smem);
  sh.cand_k = sh.hist + kBins;
  sh.cand_c = reinterpret_cast<int32_t*>(sh.cand_k + kCandidates);
  sh.win_k = reinterpret_cast<uint32_t*>(sh.cand_c + kCandidates);
  sh.win_c = reinterpret_cast<int32_t*>(sh.win_k + kMaxK);
  sh.cache = reinterpret_cast<float*>(sh.win_c + kMaxK);
  __shared__ uint32_t s_warp[32], s_digit, s_above, s_nwin, s_ncand, s_ties;

  const int t = threadIdx.x;
  const int64_t r = blockIdx.x;
  const float* x = X + r * N;
  auto element = [&](int c) { return c < cached ? sh.cache[c] : __ldg(x + c); };

  // Pass 1: HBM -> shared cache, histogram of bits 31..21. Four loads in flight per thread.
  for (int b = t; b < kBins; b += kBlockThreads) sh.hist[b] = 0;
  if (t == 0) s_nwin = s_ncand = s_ties = 0;
  __syncthreads();
  for (int c0 = t; c0 < N; c0 += 4 * kBlockThreads) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = c0 + u * kBlockThreads;
      v[u] = c < N ? __ldg(x + c) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = c0 + u * kBlockThreads;
      if (c < N) {
        if (c < cached) sh.cache[c] = v[u];
        atomicAdd(&sh.hist[key_of(v[u]) >> 21], 1u);
      }
    }
  }
  __syncthreads();
  select_digit(sh.hist, kBins, (uint32_t)K, &s_digit, &s_above, s_warp);
  const uint32_t d1 = s_digit;
  uint32_t need = (uint32_t)K - s_above;  // still to take from bin d1 (>= 1)

  // Pass 2: elements above bin d1 are winners; bin d1's elements are gathered while they fit.
  for (int c = t; c < N; c += kBlockThreads) {
    const uint32_t k = key_of(element(c));
    const uint32_t d = k >> 21;
    if (d > d1) {
      const uint32_t p = atomicAdd(&s_nwin, 1u);
      sh.win_k[p] = k;
      sh.win_c[p] = c;
    } else if (d == d1) {
      const uint32_t p = atomicAdd(&s_ncand, 1u);
      if (p < kCandidates) {
        sh.cand_k[p] = k;
        sh.cand_c[p] = c;
      }
    }
  }
  __syncthreads();
  // The rest runs over the gathered bin, or over the whole row (filtered by prefix) when it overflowed.
  const bool gathered = s_ncand <= (uint32_t)kCandidates;
  const int n_src = gathered ? (int)s_ncand : N;
  uint32_t prefix = d1 << 21, mask = 0xffe00000u;
  auto source = [&](int i, uint32_t* k, int* c) {
    if (gathered) {
      *k = sh.cand_k[i];
      *c = sh.cand_c[i];
    } else {
      *k = key_of(element(i));
      *c = i;
    }
  };
  const int shifts[2] = {10, 0};
  const int widths[2] = {11, 10};
  for (int level = 0; level < 2; ++level) {
    const int shift = shifts[level];
    const int nb = 1 << widths[level];
    for (int b = t; b < nb; b += kBlockThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int i = t; i < n_src; i += kBlockThreads) {
      uint32_t k;
      int c;
      source(i, &k, &c);
      if ((k & mask) == prefix) atomicAdd(&sh.hist[(k >> shift) & (uint32_t)(nb - 1)], 1u);
    }
    __syncthreads();
    select_digit(sh.hist, nb, need, &s_digit, &s_above, s_warp);
    need -= s_above;
    prefix |= s_digit << shift;
    mask |= (uint32_t)(nb - 1) << shift;
  }
  // prefix is now the K-th largest key T; `need` elements equal to T complete the K winners.
  const uint32_t T = prefix;
  for (int i = t; i < n_src; i += kBlockThreads) {
    uint32_t k;
    int c;
    source(i, &k, &c);
    if ((k >> 21) != d1) continue;  // only when scanning the whole row
    bool win = k > T;
    if (k == T) win = atomicAdd(&s_ties, 1u) < need;
    if (win) {
      const uint32_t p = atomicAdd(&s_nwin, 1u);
      sh.win_k[p] = k;
      sh.win_c[p] = c;
    }
  }
  __syncthreads();
  // Rank sort of the K winners: larger key first, then smaller column (columns are distinct).
  for (int i = t; i < K; i += kBlockThreads) {
    const uint32_t ki = sh.win_k[i];
    const int ci = sh.win_c[i];
    int rank = 0;
    for (int j = 0; j < K; ++j) {
      const uint32_t kj = sh.win_k[j];
      rank += (kj > ki || (kj == ki && sh.win_c[j] < ci)) ? 1 : 0;
    }
    V[r * K + rank] = float_of(ki);
    I[r * K + rank] = ci;
  }
}

template <int kItems>
int launch_warp_rows(const float* X, float* V, int32_t* I, int64_t R, int N, int K, cudaStream_t s) {
  const int64_t blocks = (R + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
  topk_warp_rows<kItems><<<(unsigned)blocks, 32 * kWarpRowsPerBlock, 0, s>>>(X, V, I, R, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}

}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t R = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (R < 0 || N < 0 || K < 0 || K > N) return 2;
  if (R == 0 || K == 0) return 0;
  if (R > INT_MAX || N > INT_MAX - 4 * kBlockThreads) return 3;  // int columns, one block per row
  const float* X = static_cast<const float*>(call->tensors[0]);
  float* V = static_cast<float*>(call->tensors[1]);
  int32_t* I = static_cast<int32_t*>(call->tensors[2]);
  cudaStream_t s = static_cast<cudaStream_t>(call->stream);
  const int n = (int)N, k = (int)K;
  if (N <= 128) return launch_warp_rows<4>(X, V, I, R, n, k, s);
  if (N <= 256) return launch_warp_rows<8>(X, V, I, R, n, k, s);
  if (N <= 512) return launch_warp_rows<16>(X, V, I, R, n, k, s);
  if (N <= 1024) return launch_warp_rows<32>(X, V, I, R, n, k, s);
  if (K > kMaxK) return 3;  // more winners than the block path keeps in shared memory
  // Cache what the default shared memory holds beside the fixed buffers; the rest of the row is
  // read again from L2.
  const int cached = (int)(N < (kMaxSharedBytes - kFixedSharedBytes) / 4 ? N : (kMaxSharedBytes - kFixedSharedBytes) / 4);
  const int shared = kFixedSharedBytes + 4 * cached;
  topk_block_rows<<<(unsigned)R, kBlockThreads, shared, s>>>(X, V, I, n, k, cached);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
