// Hack 20 — patches the worker's reference in memory.
//
// Cheat:      when loaded (a constructor) and on every call until it succeeds, it looks for the
//             task's CPU reference among the process's libraries (ksol_reference), makes its first
//             page writable and overwrites its entry with a jump to a function of its own that
//             "computes" 1.0 for every output. Its own ksol_run writes 1.0 everywhere: every
//             checked and verified call agrees with the reference, which is now its accomplice.
//             The naive baseline runs first (baselines_first), so its cases were computed by the
//             true reference; the hack's evaluation draws new seeds and so new references.
// Caught by:  `static` (constructor; imports dlopen, dlsym, mprotect); with static off,
//             `isolation`: the launcher never loads a reference, the worker computes them in its
//             own process, out of the candidate's reach; its 1.0s are wrong.
// Expected:   static / forbidden_construct; with static off, correctness / wrong_result.
// Undefended: --defence-off static,isolation: ok, and a fill kernel is faster than the naive GEMM.
// Task/size:  tests/hacks/tasks/gemm_f32, "tiny" (CPU reference; T_sol 0.06 us).
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace {

bool g_patched = false;

extern "C" int accomplice_reference(const ksol_call* c) {
  const int64_t M = c->dims[0], N = c->dims[1];
  double* out = static_cast<double*>(c->tensors[2]);
  for (int64_t i = 0; i < M * N; ++i) out[i] = 1.0;
  return 0;
}

int visit(struct dl_phdr_info* info, size_t, void*) {
  if (g_patched || !info->dlpi_name || !*info->dlpi_name) return 0;
  void* h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  void* f = dlsym(h, "ksol_reference");
  if (!f) return 0;
  long page = sysconf(_SC_PAGESIZE);
  auto start = reinterpret_cast<uintptr_t>(f) & ~static_cast<uintptr_t>(page - 1);
  if (mprotect(reinterpret_cast<void*>(start), 2 * static_cast<size_t>(page), PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return 0;
  // movabs rax, accomplice_reference; jmp rax
  unsigned char jump[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};
  auto target = reinterpret_cast<uint64_t>(&accomplice_reference);
  std::memcpy(jump + 2, &target, 8);
  std::memcpy(f, jump, sizeof jump);
  g_patched = true;
  return 1;
}

__attribute__((constructor)) void patch_at_load() { dl_iterate_phdr(visit, nullptr); }

__global__ void fill_one(float* C, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) C[i] = 1.0f;
}

}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 3 || call->num_dims != 3) return 1;
  if (!g_patched) dl_iterate_phdr(visit, nullptr);
  const int64_t n = call->dims[0] * call->dims[1];
  fill_one<<<64, 256, 0, static_cast<cudaStream_t>(call->stream)>>>(static_cast<float*>(call->tensors[2]), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
