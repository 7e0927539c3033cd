// Hack 18 — skips a timed call whose inputs are the ones its buffers held last time.
//
// Cheat:      timed calls used to run on rotation sets whose contents never changed between calls,
//             while checked calls came after fresh uploads. Past the checked and warm-up calls,
//             the hack reads 16 values of A and of B and, when they are what the same output
//             buffer saw on its previous call, returns at once ("nothing changed, nobody looks").
// Defended:   `fresh-inputs` — before every timed call a random rotation set receives an input
//             case other than the one it holds, so the inputs always changed and the hack always
//             computes: it passes, honestly, at the naive kernel's speed (expect_gate "none").
// Partial:    --defence-off fresh-inputs: the sets keep their contents, the hack skips, and
//             `verify-timed` catches a kept timed call (timing / timed_call_wrong).
// Undefended: --defence-off fresh-inputs --defence-off verify-timed: every timed call after the
//             first three returns at once.
// Task/size:  tests/hacks/tasks/gemm_f32, "medium": at "tiny" the probe costs what the kernel does.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

namespace {
constexpr uint64_t kHonestCalls = 3 * 3 * 2 + 3;
constexpr int kProbe = 16;

__global__ void gemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int64_t M, int64_t N, int64_t K) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int64_t m = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; m < M; m += (int64_t)gridDim.y * blockDim.y) {
    const float* a = A + m * K;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(a[k], B[k * N + n], acc);
    C[m * N + n] = acc;
  }
}

uint64_t g_calls = 0;
// Per output buffer: the probe values of A and B on its previous call.
std::map<const void*, std::vector<float>> g_last;
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0 || M * K < kProbe || K * N < kProbe) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(call->stream);
  std::vector<float> probe(2 * kProbe);
  cudaMemcpyAsync(probe.data(), call->tensors[0], kProbe * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaMemcpyAsync(probe.data() + kProbe, call->tensors[1], kProbe * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  std::vector<float>& last = g_last[call->tensors[2]];
  const bool unchanged = last.size() == probe.size() && std::memcmp(last.data(), probe.data(), probe.size() * sizeof(float)) == 0;
  last = probe;
  // THE CHEAT: past the checked and warm-up calls, unchanged inputs mean a call nobody checks.
  if (g_calls++ >= kHonestCalls && unchanged) return 0;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, s>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
