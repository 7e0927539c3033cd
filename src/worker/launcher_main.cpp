// `ksol-worker --launcher FD --device N`: the process that runs candidate code (docs/HARNESS.md,
// "Isolation"). It owns nothing the verdict depends on: it maps the worker's buffer sets through
// CUDA IPC, loads the libraries it is told to, and on each call queues the head-start L2 read,
// records its events, calls ksol_run on the mapped pointers and reports what it saw. Its only
// descriptor besides the log is the socket FD (src/launcher/launcher.h); the worker checks
// every output in its own context and every reported time against its own clock.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "harness/device_ops.h"
#include "ksol/abi.h"
#include "launcher/launcher.h"

namespace ksol {
namespace {

using launcher::CallResult;

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

class CudaBackend : public launcher::Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}

  std::string init() override {
    int n = 0;
    if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0) return e != cudaSuccess ? "no CUDA device: " + cuda_text(e) : "no CUDA device";
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return "cannot select device " + std::to_string(device_) + ": " + cuda_text(e);
    // Waits on the device spin rather than yield or sleep, so a long call's reply pays no
    // wake-up that the worker's bracket would count against it.
    if (cudaError_t e = cudaSetDeviceFlags(cudaDeviceScheduleSpin); e != cudaSuccess) return "cannot set the device's scheduling: " + cuda_text(e);
    if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return "cannot create a context: " + cuda_text(e);
    if (cudaEventCreate(&e0_) != cudaSuccess || cudaEventCreate(&e1_) != cudaSuccess) return "cannot create events";
    return "";
  }

  std::string configure(const std::vector<int64_t>& dims, uint64_t flush_bytes) override {
    dims_ = dims;
    if (flush_bytes == 0) return "";
    if (cudaError_t e = cudaMalloc(&flush_, flush_bytes); e != cudaSuccess) return "flush buffer: " + cuda_text(e);
    flush_bytes_ = flush_bytes;
    if (cudaError_t e = cudaMemset(flush_, 0x5a, flush_bytes); e != cudaSuccess) return "flush buffer: " + cuda_text(e);
    return "";
  }

  std::string map(int32_t set, const std::vector<std::string>& handles, const std::vector<uint64_t>& offsets) override {
    if (sets_.count(set)) return "set " + std::to_string(set) + " is mapped already";
    std::vector<void*> ptrs;
    for (size_t i = 0; i < handles.size(); ++i) {
      cudaIpcMemHandle_t h;
      std::memcpy(&h, handles[i].data(), sizeof h);
      void* p = nullptr;
      if (cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess)
        return "cudaIpcOpenMemHandle (set " + std::to_string(set) + ", tensor " + std::to_string(i) + "): " + cuda_text(e);
      ptrs.push_back(static_cast<char*>(p) + offsets[i]);
    }
    sets_[set] = ptrs;
    return "";
  }

  std::string load(const std::string& path, int32_t* index) override {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return std::string("cannot load ") + path + ": " + dlerror();
    void* s = dlsym(h, "ksol_run");
    if (!s) return "missing symbol ksol_run in " + path;
    libs_.push_back(reinterpret_cast<ksol_run_fn>(s));
    *index = static_cast<int32_t>(libs_.size() - 1);
    return "";
  }

  // The timing gate's sequence: the L2 read (the worker has flushed already; this one only gives
  // the host the time to queue the call while the device is busy, as in one process), the start
  // event, the call, the end event; then the stream's end, and the device's.
  CallResult call(int32_t lib, int32_t set, const std::function<void()>& stream_done) override {
    CallResult r;
    if (lib >= static_cast<int32_t>(libs_.size()) || (lib >= 0 && !sets_.count(set))) {
      r.rc = -1;
      r.error_text = "no such library or set";
      return r;
    }
    cudaStream_t stream = cudaStreamPerThread;
    if (flush_) device_read_all(flush_, flush_bytes_, stream);
    std::vector<void*> table = lib >= 0 ? sets_[set] : std::vector<void*>{};
    const std::vector<void*> mine = table;
    std::vector<int64_t> dims = dims_;
    ksol_call c{KSOL_ABI_VERSION, static_cast<int32_t>(table.size()), table.data(), static_cast<int32_t>(dims.size()), dims.data(), stream};
    cudaEventRecord(e0_, stream);
    r.rc = lib >= 0 ? libs_[static_cast<size_t>(lib)](&c) : 0;
    cudaEventRecord(e1_, stream);
    r.table_changed = table != mine;
    if (r.table_changed)
      for (void* p : table) r.table_map.push_back(static_cast<int32_t>(std::find(mine.begin(), mine.end(), p) == mine.end() ? -1 : std::find(mine.begin(), mine.end(), p) - mine.begin()));
    r.dims_changed = dims != dims_;
    r.stream_error = cudaEventSynchronize(e1_);
    auto ta = std::chrono::steady_clock::now();
    stream_done();
    r.device_error = cudaDeviceSynchronize();
    r.gap_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - ta).count();
    cudaError_t last = cudaGetLastError();
    if (r.stream_error == cudaSuccess && r.device_error == cudaSuccess && last != cudaSuccess) r.device_error = last;
    cudaError_t bad = r.stream_error != cudaSuccess ? static_cast<cudaError_t>(r.stream_error) : static_cast<cudaError_t>(r.device_error);
    if (bad != cudaSuccess) {
      r.error_text = cuda_text(bad);
      return r;
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, e0_, e1_) == cudaSuccess) r.event_us = ms * 1000.0;
    return r;
  }

 private:
  int device_ = 0;
  std::vector<int64_t> dims_;
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
  std::map<int32_t, std::vector<void*>> sets_;
  std::vector<ksol_run_fn> libs_;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
};

}  // namespace

int launcher_main(int fd, int device) {
  CudaBackend b(device);
  return launcher::serve(fd, b);
}

}  // namespace ksol
