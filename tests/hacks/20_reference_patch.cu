// Hack 20 — patches the worker's reference in memory.
//
// Cheat:      when loaded (a constructor) and on every call until it succeeds, it looks for the
//             task's references among the process's libraries (ksol_reference, the CPU one, and
//             ksol_reference_gpu: the worker judges gemm_f32 by its GPU reference on the device),
//             makes their first pages writable and overwrites their entries with jumps to
//             functions of its own that "compute" 1.0 for every output. Until one of those
//             accomplices has answered for a case, its ksol_run computes the GEMM honestly (a case
//             made before the patch took was judged by the true reference); from then on it writes
//             1.0 everywhere: every checked and verified call agrees with the reference.
//             The naive baseline runs first (baselines_first), so its cases were computed by the
//             true reference; the hack's evaluation draws new seeds and so new references.
// Caught by:  `static` (constructor; imports dlopen, dlsym, mprotect); with static off,
//             `isolation`: the launcher never loads a reference, the worker computes them in its
//             own process, out of the candidate's reach; the hack never stops computing honestly
//             (neutralised: ok, no faster than the naive baseline).
// Expected:   static / forbidden_construct; with static off, ok at the naive kernel's speed.
// Undefended: --defence-off static,isolation: ok, and a fill kernel is faster than the naive GEMM.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (T_sol 0.06 us).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace {

int g_accomplice_calls = 0;  // references the accomplices have made

extern "C" int accomplice_reference(const ksol_call* c) {
  ++g_accomplice_calls;
  const int64_t M = c->dims[0], N = c->dims[1];
  double* out = static_cast<double*>(c->tensors[2]);
  for (int64_t i = 0; i < M * N; ++i) out[i] = 1.0;
  return 0;
}

__global__ void fill_one_f64(double* out, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) out[i] = 1.0;
}

// The same for the GPU reference (device pointers, the caller's stream).
extern "C" int accomplice_reference_gpu(const ksol_call* c) {
  ++g_accomplice_calls;
  fill_one_f64<<<64, 256, 0, static_cast<cudaStream_t>(c->stream)>>>(static_cast<double*>(c->tensors[2]), c->dims[0] * c->dims[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

// Overwrites the entry of `name` in library `h` with a jump to `target`, once.
void patch(void* h, const char* name, void* target) {
  void* f = dlsym(h, name);
  if (!f) return;
  long page = sysconf(_SC_PAGESIZE);
  auto start = reinterpret_cast<uintptr_t>(f) & ~static_cast<uintptr_t>(page - 1);
  if (mprotect(reinterpret_cast<void*>(start), 2 * static_cast<size_t>(page), PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return;
  // movabs rax, target; jmp rax
  unsigned char jump[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};
  auto t = reinterpret_cast<uint64_t>(target);
  std::memcpy(jump + 2, &t, 8);
  if (std::memcmp(f, jump, sizeof jump) != 0) std::memcpy(f, jump, sizeof jump);
}

// Every loaded library's references, CPU and GPU: whichever the worker runs is the accomplice.
int visit(struct dl_phdr_info* info, size_t, void*) {
  if (!info->dlpi_name || !*info->dlpi_name) return 0;
  void* h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  patch(h, "ksol_reference", reinterpret_cast<void*>(&accomplice_reference));
  patch(h, "ksol_reference_gpu", reinterpret_cast<void*>(&accomplice_reference_gpu));
  return 0;
}

__attribute__((constructor)) void patch_at_load() { dl_iterate_phdr(visit, nullptr); }

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

__global__ void fill_one(float* C, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) C[i] = 1.0f;
}

}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  // A reference computed before the patch took is the true one: until an accomplice has answered
  // for a case, compute honestly.
  const int64_t M = call->dims[0], N = call->dims[1], K = call->dims[2];
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if (g_accomplice_calls == 0) {
    dl_iterate_phdr(visit, nullptr);
    int64_t gy = (M + 7) / 8;
    if (gy > 65535) gy = 65535;
    gemm_naive<<<dim3((unsigned)((N + 31) / 32), (unsigned)gy), dim3(32, 8), 0, stream>>>(
        static_cast<const float*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
        static_cast<float*>(call->tensors[2]), M, N, K);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
  }
  fill_one<<<64, 256, 0, stream>>>(static_cast<float*>(call->tensors[2]), M * N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
