// Internal to src/harness: the device-side pieces the evaluation (harness.cpp) and the search's
// screen (screen.cpp) share: CUDA error checks, guarded device buffers, events, candidate
// libraries, and the worker's case cache.
#pragma once
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/case_cache.h"
#include "harness/case_plan.h"
#include "harness/device_ops.h"
#include "harness/harness.h"
#include "task/inputs.h"
#include "task/task.h"

namespace ksol::harness_detail {

inline bool sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc: case cudaErrorLaunchTimeout: case cudaErrorAssert: case cudaErrorECCUncorrectable:
      return true;
    default: return false;
  }
}

// A CUDA failure inside the harness: sticky ones poison the context and end the worker.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::string m = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (sticky(e)) throw CudaFatal(m);
  throw CudaError(m);
}
#define CK(x) check((x), #x)

// A failed gate, carried to the result as data.
struct GateFailure {
  std::string gate, error_class, message;
};

constexpr size_t kGuard = 64 * 1024;  // canary bytes on each side of every buffer

inline void check_int(int e, const char* what) { check(static_cast<cudaError_t>(e), what); }

// Canary contents and the fingerprint key are drawn per evaluation, so a candidate can neither
// predict what to write back into a guard zone nor forge a fingerprint.
struct Secrets {
  uint64_t canary_seed = 0, key = 0;
};

struct DeviceBuffer {
  uint8_t* base = nullptr;  // includes the guards
  size_t bytes = 0;         // payload
  uint64_t guard_print[2] = {0, 0};
  void* ptr() const { return base + kGuard; }
  DeviceBuffer() = default;
  // `granule`: the allocation is rounded up to a multiple of it. Buffers a launcher maps through
  // CUDA IPC are rounded to whole 2 MiB pages, so that no other allocation of the worker's shares
  // a page with them (isolation.h).
  DeviceBuffer(size_t n, const Secrets& sec, cudaStream_t stream, size_t granule = 1) : bytes(n) {
    size_t total = n + 2 * kGuard;
    CK(cudaMalloc(&base, (total + granule - 1) / granule * granule));
    uint8_t* zones[2] = {base, base + kGuard + n};
    for (int z = 0; z < 2; ++z) {
      check_int(device_fill_random(zones[z], kGuard, sec.canary_seed ^ reinterpret_cast<uintptr_t>(zones[z]), stream), "fill canary");
      check_int(device_fingerprint(zones[z], kGuard, sec.key, stream, &guard_print[z]), "fingerprint canary");
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : base(o.base), bytes(o.bytes) {
    guard_print[0] = o.guard_print[0];
    guard_print[1] = o.guard_print[1];
    o.base = nullptr;
  }
  ~DeviceBuffer() {
    if (base) cudaFree(base);
  }
  bool guards_intact(const Secrets& sec, cudaStream_t stream) const {
    uint8_t* zones[2] = {base, base + kGuard + bytes};
    for (int z = 0; z < 2; ++z) {
      uint64_t now = 0;
      check_int(device_fingerprint(zones[z], kGuard, sec.key, stream, &now), "fingerprint canary");
      if (now != guard_print[z]) return false;
    }
    return true;
  }
};

// Device memory and events released on every path, exceptions included.
struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(size_t n) { CK(cudaMalloc(&p, std::max<size_t>(n, 1))); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (p) cudaFree(p);
  }
};
struct Event {
  cudaEvent_t e = nullptr;
  Event() { CK(cudaEventCreate(&e)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e) cudaEventDestroy(e);
  }
};

struct Library {
  void* handle = nullptr;
  explicit Library(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw std::runtime_error(std::string("cannot load ") + path + ": " + dlerror());
  }
  ~Library() {
    // Libraries stay loaded: unloading code that may still have work queued is unsafe.
  }
  template <class F>
  F symbol(const char* name) const {
    void* s = dlsym(handle, name);
    if (!s) throw std::runtime_error(std::string("missing symbol ") + name);
    return reinterpret_cast<F>(s);
  }
};

// One set of device buffers for every tensor of the task at a size.
struct BufferSet {
  std::vector<DeviceBuffer> bufs;
  int mapped_as = -1;  // its number in the evaluation's launcher, once mapped there (isolation.h)
  std::vector<uint64_t> input_fingerprints;  // taken right after each upload
  std::vector<void*> ptrs() const {
    std::vector<void*> p;
    for (auto& b : bufs) p.push_back(b.ptr());
    return p;
  }
};

// The worker's case cache (case_cache.h), its cap shared with the other GPUs' workers.
inline CaseCache& case_cache() {
  static CaseCache c([] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) n = 1;
    return CaseCache::default_cap(n);
  }());
  return c;
}

// The size a request names: the coordinator's values when it sent them (a Matrix Market file's),
// else the task's size of that name; every dim must have a value.
inline SizeSet request_size(const Task& task, const std::string& name, const std::map<std::string, double>& dims,
                            const std::map<std::string, std::string>& options) {
  SizeSet s;
  if (!dims.empty()) {
    s.name = name;
    s.dims = dims;
    s.options = options;
  } else {
    const SizeSet* found = task.find_size(name);
    if (!found) throw std::runtime_error("task " + task.name + " has no size '" + name + "'");
    s = *found;
  }
  for (auto& d : task.dims)
    if (!s.dims.count(d)) throw std::runtime_error("size '" + s.name + "' gives no value for dim '" + d + "'");
  return s;
}

// The case cache's key of one case's inputs, and the scope of what it keeps (the task's spec and
// its reference libraries): the evaluation and the screen make the same keys, so a screen's
// timing inputs are the ones the candidate's full evaluation then finds.
inline std::string case_key(const SizeSet& size, const std::vector<int64_t>& dims, Distribution d, uint64_t seed, bool cpu_reference) {
  std::string k = "in|" + size.name + "|" + distribution_name(d) + "|" + std::to_string(seed) + "|" + (cpu_reference ? "1" : "0");
  for (int64_t v : dims) k += "|" + std::to_string(v);
  for (auto& [o, v] : size.options) k += "|" + o + "=" + v;
  return k;
}
inline std::string case_scope(const Task& task, const std::string& reference_cpu_so, const std::string& reference_gpu_so) {
  return task.spec_hash + "|" + reference_cpu_so + "|" + reference_gpu_so;
}

inline int dtype_code(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::f64: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 3;
    default: throw std::logic_error("dtype_code: not a float dtype");
  }
}

}  // namespace ksol::harness_detail
