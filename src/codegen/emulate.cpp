// Host emulation of generated CUDA (see emulate.h): the emulator header, the source rewrite,
// the host build and the sandboxed call.
#include "codegen/emulate.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "core/hash.h"
#include "core/util.h"
#include "ksol/abi.h"

namespace ksol::codegen {
namespace {

namespace fs = std::filesystem;

// Force-included before the generated source. The real CUDA headers come first (types, enums,
// bf16/f16 conversions, which all have host versions); then what only a device has.
const char* const kEmulatorHeader = R"EMU(// ksol host emulation of the CUDA device side (src/codegen/emulate.cpp).
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

// A kernel's static shared arrays are function statics: blocks run one after another, and the
// threads of the running block share them.
#define KSOL_HOST_EMULATION 1
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

namespace ksol_emu {

// A reusable barrier that reports a deadlock instead of hanging: when every thread that has not
// arrived has already left the kernel, none will come.
class Barrier {
 public:
  Barrier(int n, const std::atomic<int>* exited) : n_(n), exited_(exited) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const long generation = generation_;
    if (++count_ == n_) {
      count_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    auto released = [&] { return generation != generation_ || count_ + exited_->load() >= n_; };
    if (!cv_.wait_for(lock, std::chrono::seconds(120), released) || generation == generation_) {
      std::fprintf(stderr, "ksol host emulation: barrier deadlock: %d of %d threads arrived\n", count_, n_);
      std::_Exit(90);
    }
  }
  // Wakes the waiters to look again (a thread has left the kernel).
  void poke() {
    std::lock_guard<std::mutex> lock(m_);
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  long generation_ = 0;
  const std::atomic<int>* exited_;
};

struct Block {
  explicit Block(int threads) : sync(threads, &exited), slots(threads), mma_regs(threads), warp_exited((threads + 31) / 32) {
    for (int w = 0; w < (threads + 31) / 32; ++w)
      warp_sync.push_back(std::make_unique<Barrier>(std::min(32, threads - 32 * w), &warp_exited[w]));
  }
  std::atomic<int> exited{0};
  Barrier sync;
  std::vector<std::unique_ptr<Barrier>> warp_sync;
  std::vector<uint64_t> slots;                 // one per thread, for shuffles
  std::vector<std::array<uint32_t, 6>> mma_regs;  // one per thread: its A and B registers of an mma.sync
  std::vector<std::atomic<int>> warp_exited;
  std::vector<uint4> dynamic_shared;           // 16-byte aligned
};

struct ThreadState {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
  Block* block = nullptr;
};
inline thread_local ThreadState tls;

inline cudaError_t last_error = cudaSuccess;
inline std::map<const void*, int> max_dynamic_shared;

inline int thread_rank() { return (int)(tls.thread_idx.x + tls.block_dim.x * (tls.thread_idx.y + tls.block_dim.y * tls.thread_idx.z)); }

template <typename T>
T exchange(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  Block* b = tls.block;
  const int t = thread_rank(), warp = t / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  b->slots[t] = bits;
  b->warp_sync[warp]->wait();
  T out = v;
  if (src_lane >= 0 && src_lane < 32 && warp * 32 + src_lane < (int)b->slots.size())
    std::memcpy(&out, &b->slots[warp * 32 + src_lane], sizeof(T));
  b->warp_sync[warp]->wait();  // every lane has read before the slots are rewritten
  return out;
}

// mma.sync.m16n8k8 with TF32 operands and f32 accumulators, one warp: each lane publishes its A and
// B registers, then computes its own four outputs from the whole tiles (the operands by their upper
// 19 bits, as the tensor cores read them: an operand the kernel did not round is truncated here as
// there). Lane (g, t) holds A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4], B[t][g], B[t + 4][g]
// and D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]. A lane that does not come deadlocks
// the warp's barrier, as a divergent mma.sync would hang or fault on the GPU.
inline float tf32_operand(uint32_t u) {
  if ((u & 0x7f800000u) != 0x7f800000u) u &= 0xffffe000u;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  Block* blk = tls.block;
  const int t = thread_rank(), warp = t / 32, lane = t % 32;
  if (warp * 32 + 32 > (int)blk->mma_regs.size()) {
    std::fprintf(stderr, "ksol host emulation: mma.sync in a warp of fewer than 32 threads\n");
    std::fflush(stderr);
    std::abort();
  }
  blk->mma_regs[t] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  blk->warp_sync[warp]->wait();
  const auto& r = blk->mma_regs;
  auto A = [&](int row, int k) { return tf32_operand(r[warp * 32 + (row % 8) * 4 + k % 4][(row >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0)]); };
  auto B = [&](int k, int col) { return tf32_operand(r[warp * 32 + col * 4 + k % 4][4 + (k >= 4 ? 1 : 0)]); };
  const int g = lane / 4, q = lane % 4;
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * q + e % 2;
    float s = d[e];
    for (int k = 0; k < 8; ++k) s += A(row, k) * B(k, col);
    out[e] = s;
  }
  blk->warp_sync[warp]->wait();  // every lane has read before the registers are rewritten
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// cp.async as the most patient hardware would run it: a thread's copies wait in their commit
// group until a wait_group asks for that group, so a slice read before its wait reads what the
// buffer held before (the previous block's or slice's data), and the emulated run goes wrong.
struct AsyncCopy {
  void* dst;
  const void* src;
  int bytes, src_bytes;
};
inline thread_local std::vector<AsyncCopy> cp_open;
inline thread_local std::vector<std::vector<AsyncCopy>> cp_groups;
inline void cp_async(void* dst, const void* src, int bytes, int src_bytes) { cp_open.push_back({dst, src, bytes, src_bytes}); }
inline void cp_commit() {
  cp_groups.push_back(std::move(cp_open));
  cp_open.clear();
}
inline void cp_wait(int newest_left) {
  while ((int)cp_groups.size() > newest_left) {
    for (const AsyncCopy& c : cp_groups.front()) {
      std::memset(c.dst, 0, c.bytes);
      std::memcpy(c.dst, c.src, c.src_bytes);
    }
    cp_groups.erase(cp_groups.begin());
  }
}

template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(tls.block->dynamic_shared.data());
}

template <typename F>
void launch(const void* kernel, F body, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t = nullptr) {
  const long threads = (long)block.x * block.y * block.z;
  const long blocks = (long)grid.x * grid.y * grid.z;
  if (threads < 1 || threads > 1024 || blocks < 1 || grid.y > 65535 || grid.z > 65535) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  auto opt_in = max_dynamic_shared.find(kernel);
  const size_t allowed = opt_in == max_dynamic_shared.end() ? 48 * 1024 : (size_t)opt_in->second;
  if (smem > allowed || smem > 232448) {
    last_error = cudaErrorInvalidValue;
    return;
  }
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b((int)threads);
        b.dynamic_shared.resize((smem + 15) / 16);
        std::memset(b.dynamic_shared.data(), 0xFF, b.dynamic_shared.size() * 16);
        std::vector<std::thread> pool;
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx)
              pool.emplace_back([&, tx, ty, tz] {
                tls.thread_idx = uint3{tx, ty, tz};
                tls.block_idx = uint3{bx, by, bz};
                tls.block_dim = block;
                tls.grid_dim = grid;
                tls.block = &b;
                body();
                const int warp = thread_rank() / 32;
                ++b.warp_exited[warp];
                ++b.exited;
                b.warp_sync[warp]->poke();
                b.sync.poke();
              });
        for (std::thread& t : pool) t.join();
      }
}

}  // namespace ksol_emu

#define threadIdx (::ksol_emu::tls.thread_idx)
#define blockIdx (::ksol_emu::tls.block_idx)
#define blockDim (::ksol_emu::tls.block_dim)
#define gridDim (::ksol_emu::tls.grid_dim)

inline void __syncthreads() { ::ksol_emu::tls.block->sync.wait(); }
template <typename T>
T __shfl_sync(unsigned, T v, int src, int = 32) { return ::ksol_emu::exchange(v, src); }
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask, int = 32) { return ::ksol_emu::exchange(v, (::ksol_emu::thread_rank() % 32) ^ mask); }
template <typename T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int = 32) {
  const int lane = ::ksol_emu::thread_rank() % 32;
  return ::ksol_emu::exchange(v, lane - (int)delta >= 0 ? lane - (int)delta : lane);
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::ksol_emu::tls.block->warp_sync[::ksol_emu::thread_rank() / 32]->wait();
}
// Warp matrix operations (mma.h's nvcuda::wmma, which host compilers do not see). Every lane holds
// the whole fragment: a load is each lane reading the tile, mma_sync each lane computing the tile
// product (f32 products of the 16-bit or TF32 elements, summed in f32), a store lane 0 writing the
// tile between two warp barriers. Loads and stores check WMMA's rules (a 32-byte aligned pointer,
// a leading dimension of a multiple of 16 bytes) and stop the run where the GPU would fault.
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
namespace precision {
struct tf32 {};
}  // namespace precision
template <typename Use, int M, int N, int K>
struct extent;
template <int M, int N, int K>
struct extent<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K>
struct extent<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K>
struct extent<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };
template <typename T>
struct storage { using type = T; };
template <>
struct storage<precision::tf32> { using type = float; };
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  using element_type = typename storage<T>::type;
  static constexpr int rows = extent<Use, M, N, K>::rows, cols = extent<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  element_type x[num_elements];  // row-major, the whole tile in every lane
};
inline float ksol_to_f32(float v) { return v; }
inline float ksol_to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float ksol_to_f32(__half v) { return __half2float(v); }
template <typename P>
void ksol_check(const P* p, unsigned ldm, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (ldm * sizeof(P)) % 16 != 0) {
    std::fprintf(stderr, "ksol host emulation: %s with a pointer not 32-byte aligned or a leading dimension of %u "
                 "elements (not a multiple of 16 bytes)\n", what, ldm);
    std::fflush(stderr);
    std::abort();
  }
}
inline float __float_to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // to nearest, ties away (cvt.rna)
  std::memcpy(&x, &u, 4);
  return x;
}
template <typename Use, int M, int N, int K, typename T, typename L, typename P>
void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
  ksol_check(p, ldm, "load_matrix_sync");
  using F = fragment<Use, M, N, K, T, L>;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.x[r * F::cols + c] = std::is_same_v<L, col_major> ? p[c * ldm + r] : p[r * ldm + c];
}
template <typename Use, int M, int N, int K, typename T, typename L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, typename fragment<Use, M, N, K, T, L>::element_type v) {
  for (auto& e : f.x) e = v;
}
// An operand as the tensor cores read it: a TF32 fragment's element by its upper 19 bits (the low 13
// are dropped, not rounded: an element the kernel did not round to TF32 is truncated here as there),
// a 16-bit one converted to f32.
template <typename T, typename V>
float ksol_operand(V v) {
  if constexpr (std::is_same_v<T, precision::tf32>) {
    float x = v;
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u &= 0xffffe000u;
    std::memcpy(&x, &u, 4);
    return x;
  } else {
    return ksol_to_f32(v);
  }
}
template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC>
void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = c.x[i * N + j];
      for (int k = 0; k < K; ++k) s += ksol_operand<TA>(a.x[i * K + k]) * ksol_operand<TB>(b.x[k * N + j]);
      out[i * N + j] = s;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}
template <typename P, int M, int N, int K, typename T>
void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  ksol_check(p, ldm, "store_matrix_sync");
  __syncwarp();
  if (::ksol_emu::thread_rank() % 32 == 0)
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * N + c];
  __syncwarp();
}
}  // namespace wmma
}  // namespace nvcuda
// cuda_runtime.h declares this template for nvcc only.
template <typename T>
cudaError_t cudaFuncSetAttribute(T* entry, enum cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute((const void*)entry, attr, value);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// math = fast's intrinsics, as the IEEE functions they approximate (the host checks the logic;
// their error on the device is the GPU gate's business).
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

extern "C" {
cudaError_t cudaGetLastError(void) {
  cudaError_t e = ::ksol_emu::last_error;
  ::ksol_emu::last_error = cudaSuccess;
  return e;
}
cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value > 232448) return ::ksol_emu::last_error = cudaErrorInvalidValue;
    ::ksol_emu::max_dynamic_shared[func] = value;
  }
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrMultiProcessorCount ? 132 : 0;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
}
)EMU";

size_t matching(const std::string& s, size_t open, char a, char b) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == a) ++depth;
    if (s[i] == b && --depth == 0) return i;
  }
  throw std::runtime_error("host emulation: unbalanced '" + std::string(1, a) + "' in a kernel launch");
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

}  // namespace

std::string rewrite_for_host(const std::string& src) {
  std::string out = src;
  // Kernel launches.
  for (size_t at; (at = out.find("<<<")) != std::string::npos;) {
    size_t start = at;
    if (start > 0 && out[start - 1] == '>') {  // template arguments, e.g. name<kVec>
      int depth = 0;
      do {
        --start;
        if (out[start] == '>') ++depth;
        if (out[start] == '<') --depth;
      } while (depth > 0 && start > 0);
    }
    while (start > 0 && ident_char(out[start - 1])) --start;
    const std::string kernel = out.substr(start, at - start);
    const size_t config_end = out.find(">>>", at);
    const std::string config = out.substr(at + 3, config_end - at - 3);
    const size_t open = out.find('(', config_end);
    const size_t close = matching(out, open, '(', ')');
    const std::string args = out.substr(open + 1, close - open - 1);
    const std::string call = "::ksol_emu::launch((const void*)&" + kernel + ", [&] { " + kernel + "(" + args + "); }, " +
                             config + ")";
    out.replace(start, close + 1 - start, call);
  }
  // Dynamic shared memory: `extern __shared__ T name[];`
  const std::string marker = "extern __shared__ ";
  for (size_t at; (at = out.find(marker)) != std::string::npos;) {
    const size_t end = out.find("[];", at);
    const std::string decl = out.substr(at + marker.size(), end - at - marker.size());
    const size_t space = decl.rfind(' ');
    const std::string type = decl.substr(0, space), name = decl.substr(space + 1);
    out.replace(at, end + 3 - at, type + "* " + name + " = ::ksol_emu::dynamic_shared<" + type + ">();");
  }
  return out;
}

HostBuild build_for_host(const std::string& cuda_source) {
  HostBuild b;
  const std::string source = rewrite_for_host(cuda_source);
  const std::string inc = source_root() + "/include";
  // -fno-gnu-unique: a kernel's __shared__ arrays are function-local statics here, which GCC
  // otherwise makes unique symbols that the dynamic linker binds process-wide, past RTLD_LOCAL and
  // -Bsymbolic: two candidates in one process (the Python worker loads many) would then share the
  // first one's shared memory, sized for its tile.
  const std::vector<std::string> flags = {"g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                                          "-fno-gnu-unique", "-Wl,-Bsymbolic", "-Wno-unknown-pragmas", "-I" + inc,
                                          "-I/usr/local/cuda/include"};
  Sha256 h;
  h.update(kEmulatorHeader);
  h.update(source);
  for (const std::string& f : flags) h.update(f + "\n");
  const fs::path dir = fs::path(cache_dir()) / "codegen-host" / h.hex().substr(0, 24);
  b.so_path = (dir / "candidate.so").string();
  if (fs::exists(b.so_path)) {
    b.ok = true;
    return b;
  }
  fs::create_directories(dir);
  write_file_atomic((dir / "emulator.h").string(), kEmulatorHeader);
  write_file_atomic((dir / "candidate.cpp").string(), source);
  std::vector<std::string> argv = flags;
  for (const std::string& x :
       {std::string("-include"), (dir / "emulator.h").string(), std::string("-x"), std::string("c++"),
        (dir / "candidate.cpp").string(), std::string("-o"), (dir / "candidate.tmp.so").string()})
    argv.push_back(x);
  ProcessResult r = run_process(argv, 600);
  if (r.exit_code != 0) {
    b.message = r.output;
    return b;
  }
  fs::rename(dir / "candidate.tmp.so", b.so_path);
  b.ok = true;
  return b;
}

HostRun run_on_host(const std::string& so_path, std::vector<HostVec<uint8_t>>& tensors,
                    const std::vector<int64_t>& dims, double timeout_s) {
  HostRun result;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Each tensor sits at the end of a shared mapping, 16-byte aligned, before a PROT_NONE page.
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
    uint8_t* data = nullptr;
  };
  std::vector<Mapping> maps;
  auto unmap_all = [&] {
    for (Mapping& m : maps)
      if (m.base) munmap(m.base, m.bytes);
  };
  for (auto& t : tensors) {
    const size_t used = (t.size() + 15) / 16 * 16;
    const size_t data_pages = (used + page - 1) / page;
    Mapping m;
    m.bytes = (data_pages + 1) * page;
    m.base = mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m.base == MAP_FAILED) {
      unmap_all();
      result.message = "mmap failed";
      return result;
    }
    uint8_t* guard = static_cast<uint8_t*>(m.base) + data_pages * page;
    mprotect(guard, page, PROT_NONE);
    m.data = guard - used;
    std::memcpy(m.data, t.data(), t.size());
    maps.push_back(m);
  }
  pid_t pid = fork();
  if (pid < 0) {
    unmap_all();
    result.message = "fork failed";
    return result;
  }
  if (pid == 0) {
    void* lib = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) _exit(101);
    auto run = reinterpret_cast<ksol_run_fn>(dlsym(lib, "ksol_run"));
    if (!run) _exit(102);
    std::vector<void*> ptrs;
    for (Mapping& m : maps) ptrs.push_back(m.data);
    ksol_call call{KSOL_ABI_VERSION, static_cast<int32_t>(ptrs.size()), ptrs.data(), static_cast<int32_t>(dims.size()),
                   dims.data(), nullptr};
    _exit(run(&call) & 0x3f);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (seconds_since(t0) > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      unmap_all();
      result.message = "timed out after " + std::to_string(timeout_s) + " s";
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFSIGNALED(status)) {
    result.message = std::string("killed by signal ") + strsignal(WTERMSIG(status)) +
                     (WTERMSIG(status) == SIGSEGV ? " (an access outside a tensor?)" : "");
  } else {
    int code = WEXITSTATUS(status);
    if (code == 90) result.message = "barrier deadlock (some threads never reached a __syncthreads or shuffle)";
    else if (code == 101) result.message = "dlopen failed: " + so_path;
    else if (code == 102) result.message = "no ksol_run in " + so_path;
    else {
      result.ok = true;
      result.rc = code;
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) std::memcpy(tensors[i].data(), maps[i].data, tensors[i].size());
  unmap_all();
  return result;
}

}  // namespace ksol::codegen
