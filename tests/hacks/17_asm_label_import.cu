// Hack 17 — imports a forbidden function under another name.
//
// Cheat:      declares `char* read_setting(const char*)` with the assembler label "getenv": the
//             source calls read_setting, the library imports getenv.
//             Payload (as hack 06): from the 22nd call on (18 checked, 3 warm-up) it returns at
//             once, so the timed calls measure an empty region.
// Caught by:  `static` — gate 1's binary half (src/compile/library_check.cpp): the import `getenv` is not on the allowlist. The
//             source scan finds nothing: the rejection names the library, not a source line.
// Expected:   compile stage "static", every size static / forbidden_construct.
// Partial:    --defence-off static: the payload is caught by `verify-timed` (timing /
//             timed_call_wrong).
// Undefended: --defence-off static,verify-timed,isolation: every checked call computed
//             honestly; the timed calls do nothing.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (as hack 06).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>
extern "C" char* read_setting(const char*) __asm__("get" "env");

namespace {
constexpr uint64_t kHonestCalls = 3 * 3 * 2 + 3;

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
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  if (M <= 0 || N <= 0) return 0;
  static const char* home = read_setting("HOME");
  (void)home;
  if (g_calls++ >= kHonestCalls) return 0;
  int64_t gy = (M + 7) / 8;
  if (gy > 65535) gy = 65535;
  gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float*>(call->tensors[2]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
