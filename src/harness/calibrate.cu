#include "harness/calibrate.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <stdexcept>
#include <utility>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

namespace ksol::harness {
namespace {

constexpr int kWarmups = 3;
constexpr int kRepetitions = 15;  // the median of at least 10 samples, as in every ksol timing
constexpr int kGemmSize = 8192;   // large enough that cuBLAS reaches its top rate on H100/H200
constexpr double kFmaTargetSeconds = 0.02;
constexpr int kFmaChains = 8;     // independent FMA chains per thread: hides the FMA latency
constexpr int kFmaUnroll = 16;    // FMAs per chain per loop trip: makes loop overhead small
constexpr int kThreadsPerBlock = 256;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

// Failures inside the measurements unwind to calibrate_device, which turns them into
// CalibrationResult::error; the RAII holders below free what was allocated on the way.
struct CalibrationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CalibrationError(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")");
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CalibrationError(std::string(what) + ": " + cublasGetStatusName(status) + " (" +
                           cublasGetStatusString(status) + ")");
  }
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Event {
 public:
  Event() { check(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class Stream {
 public:
  Stream() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle() { check(cublasCreate(&handle_), "cublasCreate"); }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Restores the caller's current device, whatever path calibrate_device leaves by.
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() { restore_ = cudaGetDevice(&previous_) == cudaSuccess; }
  ~CurrentDeviceGuard() {
    if (restore_) cudaSetDevice(previous_);
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

// ---- kernels -------------------------------------------------------------------------

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  // splitmix64's finalizer: every input bit affects every output bit.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// A value with magnitude in [0.25, 1) and a random sign: never zero, never denormal, and
// representable in every type measured, so no GEMM or FMA runs on trivially cheap data.
__device__ __forceinline__ float random_nonzero(std::uint64_t index, std::uint64_t seed) {
  const std::uint64_t h = mix64(index * 0x9e3779b97f4a7c15ull + seed);
  const float unit = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  const float magnitude = 0.25f + 0.75f * unit;
  return (h & 1) != 0 ? -magnitude : magnitude;
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

template <typename T>
__global__ void fill_random(T* data, std::size_t count, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    data[i] = from_float<T>(random_nonzero(i, seed));
  }
}

// Grid-stride copy in 16-byte words, four loads in flight per thread before the stores.
constexpr int kCopyUnroll = 4;
__global__ void copy_words(const int4* __restrict__ src, int4* __restrict__ dst,
                           std::size_t words) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < words; i += kCopyUnroll * stride) {
    int4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < words; i += stride) dst[i] = src[i];
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// kFmaChains independent chains a = a * b + c per thread. b and c are kernel arguments, so
// the compiler cannot fold the chains; with |b| < 1 each chain settles at c / (1 - b) and
// never overflows or goes denormal. The sum is stored so nothing is dead code. Thread 0
// records SM cycles and global nanoseconds over its run: the grid is one wave, so block 0
// lives as long as the kernel and the ratio is the SM clock under this load.
template <typename T>
__global__ void fma_chains(const T* __restrict__ in, T* __restrict__ out, T b, T c,
                           int iterations, unsigned long long* clock_probe) {
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool probe = tid == 0;
  long long cycles_start = 0;
  std::uint64_t ns_start = 0;
  if (probe) {
    cycles_start = clock64();
    ns_start = global_timer_ns();
  }
  T a[kFmaChains];
  const T seed = in[tid];
#pragma unroll
  for (int k = 0; k < kFmaChains; ++k) a[k] = seed + static_cast<T>(k) * c;
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int u = 0; u < kFmaUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kFmaChains; ++k) a[k] = fma(a[k], b, c);
    }
  }
  T sum = 0;
#pragma unroll
  for (int k = 0; k < kFmaChains; ++k) sum += a[k];
  out[tid] = sum;
  if (probe) {
    clock_probe[0] = static_cast<unsigned long long>(clock64() - cycles_start);
    clock_probe[1] = global_timer_ns() - ns_start;
  }
}

// ---- timing --------------------------------------------------------------------------

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// Warm-up, then one event pair around each repetition, synchronized one by one so that a
// sample never includes queueing behind the previous one.
std::vector<double> time_repetitions(cudaStream_t stream, int warmups, int repetitions,
                                     const std::function<void()>& launch) {
  for (int i = 0; i < warmups; ++i) launch();
  check(cudaStreamSynchronize(stream), "warm-up");
  Event start;
  Event stop;
  std::vector<double> samples;
  samples.reserve(repetitions);
  for (int i = 0; i < repetitions; ++i) {
    check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
    samples.push_back(ms * 1e-3);
  }
  return samples;
}

CalibrationMeasurement make_measurement(std::string name, std::string unit, double work,
                                        std::vector<double> samples, std::string config) {
  CalibrationMeasurement m;
  m.name = std::move(name);
  m.unit = std::move(unit);
  m.work = work;
  m.median_s = median(samples);
  m.rate = m.median_s > 0 ? work / m.median_s : 0;
  m.samples_s = std::move(samples);
  m.config = std::move(config);
  return m;
}

template <typename T>
void fill(const DeviceBuffer& buffer, std::size_t count, std::uint64_t seed, int sm_count,
          cudaStream_t stream) {
  if (count * sizeof(T) > buffer.bytes()) throw CalibrationError("fill: buffer too small");
  fill_random<T><<<sm_count * 8, kThreadsPerBlock, 0, stream>>>(buffer.as<T>(), count, seed);
  check(cudaGetLastError(), "fill_random launch");
}

std::string format_uuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

// ---- measurements --------------------------------------------------------------------

// Device-to-device copy over buffers of at least 4x L2 (1 GiB each where memory allows), so
// the copy streams from DRAM. Bytes counted: read plus written. Both the driver's copy and
// ksol's own kernel are measured; the peak takes the better.
void measure_copy(CalibrationResult& result, cudaStream_t stream) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const std::size_t min_bytes = 4 * static_cast<std::size_t>(result.l2_bytes);
  std::size_t bytes = std::max<std::size_t>(kGiB, min_bytes);
  const std::size_t reserve = 256 * kMiB;
  if (2 * bytes + reserve > free_bytes && free_bytes > reserve) {
    bytes = (free_bytes - reserve) / 2;
  }
  bytes &= ~(std::size_t{4096} - 1);
  if (bytes < min_bytes || 2 * bytes > free_bytes) {
    throw CalibrationError("copy bandwidth: not enough free device memory for two buffers of " +
                           std::to_string(min_bytes) + " bytes (4x L2); free " +
                           std::to_string(free_bytes));
  }
  DeviceBuffer src(bytes);
  DeviceBuffer dst(bytes);
  fill<float>(src, bytes / sizeof(float), 0x5eed0001, result.sm_count, stream);
  const double moved = 2.0 * static_cast<double>(bytes);
  const std::string size_text = "buffer_bytes=" + std::to_string(bytes);

  auto memcpy_samples = time_repetitions(stream, kWarmups, kRepetitions, [&] {
    check(cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes, cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
  });
  result.measurements.push_back(make_measurement("copy_memcpy", "bytes/s", moved,
                                                 std::move(memcpy_samples),
                                                 size_text + " cudaMemcpyAsync D2D"));

  int blocks_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, copy_words, kThreadsPerBlock, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int blocks = result.sm_count * std::max(blocks_per_sm, 1);
  const std::size_t words = bytes / sizeof(int4);
  auto kernel_samples = time_repetitions(stream, kWarmups, kRepetitions, [&] {
    copy_words<<<blocks, kThreadsPerBlock, 0, stream>>>(src.as<int4>(), dst.as<int4>(), words);
    check(cudaGetLastError(), "copy_words launch");
  });
  result.measurements.push_back(make_measurement(
      "copy_kernel", "bytes/s", moved, std::move(kernel_samples),
      size_text + " blocks=" + std::to_string(blocks) + " threads=" + std::to_string(kThreadsPerBlock) +
          " int4 x" + std::to_string(kCopyUnroll)));
}

// FMA rate of type T with ksol's own kernel: one full wave of blocks on every SM; the
// iteration count is scaled from a short pilot so each repetition takes about 20 ms.
template <typename T>
void measure_fma(CalibrationResult& result, cudaStream_t stream, const char* name,
                 bool record_clock) {
  int blocks_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, fma_chains<T>, kThreadsPerBlock, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int blocks = result.sm_count * std::max(blocks_per_sm, 1);
  const std::size_t threads = static_cast<std::size_t>(blocks) * kThreadsPerBlock;
  DeviceBuffer in(threads * sizeof(T));
  DeviceBuffer out(threads * sizeof(T));
  DeviceBuffer probe(2 * sizeof(unsigned long long));
  fill<T>(in, threads, 0x5eed0002, result.sm_count, stream);
  const T b = static_cast<T>(0.9999);
  const T c = static_cast<T>(1e-4);

  int iterations = 1024;
  auto launch = [&] {
    fma_chains<T><<<blocks, kThreadsPerBlock, 0, stream>>>(in.as<T>(), out.as<T>(), b, c,
                                                           iterations,
                                                           probe.as<unsigned long long>());
    check(cudaGetLastError(), "fma_chains launch");
  };
  const double pilot_s = median(time_repetitions(stream, 1, 3, launch));
  if (pilot_s > 0) {
    const double scale = kFmaTargetSeconds / pilot_s;
    iterations = static_cast<int>(std::clamp(iterations * scale, 1024.0, double(1 << 24)));
  }
  auto samples = time_repetitions(stream, kWarmups, kRepetitions, launch);
  const double flops =
      2.0 * static_cast<double>(threads) * kFmaChains * kFmaUnroll * static_cast<double>(iterations);
  result.measurements.push_back(make_measurement(
      name, "flop/s", flops, std::move(samples),
      "blocks=" + std::to_string(blocks) + " threads=" + std::to_string(kThreadsPerBlock) +
          " chains=" + std::to_string(kFmaChains) + " unroll=" + std::to_string(kFmaUnroll) +
          " iterations=" + std::to_string(iterations)));

  if (record_clock) {
    unsigned long long clock_probe[2] = {0, 0};
    check(cudaMemcpy(clock_probe, probe.as<void>(), sizeof(clock_probe), cudaMemcpyDeviceToHost),
          "cudaMemcpy clock probe");
    if (clock_probe[1] > 0) {
      result.sm_clock_under_load_hz =
          static_cast<double>(clock_probe[0]) / static_cast<double>(clock_probe[1]) * 1e9;
    }
  }
}

struct GemmKind {
  const char* name;
  cudaDataType_t data_type;
  cublasComputeType_t compute_type;
  const char* compute_name;
  std::size_t element_bytes;
};

// cuBLAS GEMM at n^3, column-major, no transposes, alpha 1 and beta 0.
void measure_gemm(CalibrationResult& result, cudaStream_t stream, cublasHandle_t handle,
                  const GemmKind& kind, const DeviceBuffer& a, const DeviceBuffer& b,
                  const DeviceBuffer& c) {
  const int n = kGemmSize;
  const std::size_t count = static_cast<std::size_t>(n) * n;
  switch (kind.data_type) {
    case CUDA_R_16BF:
      fill<__nv_bfloat16>(a, count, 0x5eed0010, result.sm_count, stream);
      fill<__nv_bfloat16>(b, count, 0x5eed0011, result.sm_count, stream);
      break;
    case CUDA_R_16F:
      fill<__half>(a, count, 0x5eed0010, result.sm_count, stream);
      fill<__half>(b, count, 0x5eed0011, result.sm_count, stream);
      break;
    case CUDA_R_32F:
      fill<float>(a, count, 0x5eed0010, result.sm_count, stream);
      fill<float>(b, count, 0x5eed0011, result.sm_count, stream);
      break;
    case CUDA_R_64F:
      fill<double>(a, count, 0x5eed0010, result.sm_count, stream);
      fill<double>(b, count, 0x5eed0011, result.sm_count, stream);
      break;
    default:
      throw CalibrationError(std::string("gemm ") + kind.name + ": unsupported data type");
  }
  // Scalars are double for the 64F compute types and float for the 32F ones.
  const bool fp64 = kind.compute_type == CUBLAS_COMPUTE_64F ||
                    kind.compute_type == CUBLAS_COMPUTE_64F_PEDANTIC;
  const double alpha64 = 1.0;
  const double beta64 = 0.0;
  const float alpha32 = 1.0f;
  const float beta32 = 0.0f;
  const void* alpha = fp64 ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha32);
  const void* beta = fp64 ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta32);

  auto samples = time_repetitions(stream, kWarmups, kRepetitions, [&] {
    check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, alpha, a.as<void>(),
                       kind.data_type, n, b.as<void>(), kind.data_type, n, beta, c.as<void>(),
                       kind.data_type, n, kind.compute_type, CUBLAS_GEMM_DEFAULT),
          kind.name);
  });
  const double flops = 2.0 * n * static_cast<double>(n) * n;
  result.measurements.push_back(make_measurement(
      kind.name, "flop/s", flops, std::move(samples),
      "m=n=k=" + std::to_string(n) + " cublasGemmEx " + kind.compute_name + " math=default"));
}

void measure_gemms(CalibrationResult& result, cudaStream_t stream) {
  CublasHandle handle;
  check(cublasSetStream(handle.get(), stream), "cublasSetStream");
  // The default math mode allows neither TF32 nor emulation for plain fp32 compute types;
  // set it explicitly in case a library default ever changes.
  check(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check(cublasGetVersion(handle.get(), &result.cublas_version), "cublasGetVersion");

  // The bf16 and fp16 policies mean fp32 accumulation, hence CUBLAS_COMPUTE_32F. fp32 uses
  // the pedantic compute type so that neither TF32 nor BF16x9 emulation can be chosen (an
  // environment variable such as CUBLAS_EMULATE_SINGLE_PRECISION could otherwise enable it).
  // fp64 uses the default 64F type, which uses the FP64 tensor cores (DMMA) where present.
  const GemmKind kinds[] = {
      {"gemm_bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, "CUBLAS_COMPUTE_32F", 2},
      {"gemm_fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, "CUBLAS_COMPUTE_32F", 2},
      {"gemm_tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, "CUBLAS_COMPUTE_32F_FAST_TF32", 4},
      {"gemm_fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, "CUBLAS_COMPUTE_32F_PEDANTIC", 4},
      {"gemm_fp64", CUDA_R_64F, CUBLAS_COMPUTE_64F, "CUBLAS_COMPUTE_64F", 8},
  };
  const std::size_t bytes = static_cast<std::size_t>(kGemmSize) * kGemmSize * sizeof(double);
  DeviceBuffer a(bytes);
  DeviceBuffer b(bytes);
  DeviceBuffer c(bytes);
  for (const GemmKind& kind : kinds) measure_gemm(result, stream, handle.get(), kind, a, b, c);
}

void read_properties(CalibrationResult& result, int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  result.name = prop.name;
  result.uuid = format_uuid(prop.uuid);
  result.compute_capability = prop.major * 10 + prop.minor;
  result.sm_count = prop.multiProcessorCount;
  result.l2_bytes = prop.l2CacheSize;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  check(cudaDeviceGetAttribute(&result.sm_clock_khz, cudaDevAttrClockRate, device),
        "cudaDeviceGetAttribute(ClockRate)");
  check(cudaDeviceGetAttribute(&result.memory_clock_khz, cudaDevAttrMemoryClockRate, device),
        "cudaDeviceGetAttribute(MemoryClockRate)");
  check(cudaDeviceGetAttribute(&result.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device),
        "cudaDeviceGetAttribute(GlobalMemoryBusWidth)");
  check(cudaRuntimeGetVersion(&result.runtime_version), "cudaRuntimeGetVersion");
  check(cudaDriverGetVersion(&result.driver_version), "cudaDriverGetVersion");
}

}  // namespace

double CalibrationResult::rate(std::string_view measurement_name) const {
  for (const CalibrationMeasurement& m : measurements) {
    if (m.name == measurement_name) return m.rate;
  }
  return 0;
}

CalibrationResult calibrate_device(int device) {
  CalibrationResult result;
  result.device = device;
  CurrentDeviceGuard guard;
  try {
    check(cudaSetDevice(device), "cudaSetDevice");
    read_properties(result, device);
    Stream stream;
    measure_copy(result, stream.get());
    measure_fma<float>(result, stream.get(), "fma_fp32", /*record_clock=*/true);
    measure_fma<double>(result, stream.get(), "fma_fp64", /*record_clock=*/false);
    measure_gemms(result, stream.get());
    check(cudaStreamSynchronize(stream.get()), "final synchronize");
  } catch (const CalibrationError& e) {
    result.error = e.what();
  } catch (const std::bad_alloc&) {
    result.error = "host out of memory during calibration";
  } catch (const std::exception& e) {
    result.error = std::string("calibration: ") + e.what();
  }
  return result;
}

sol::DevicePeaks measured_peaks(const CalibrationResult& result) {
  sol::DevicePeaks peaks;
  peaks.name = result.name;
  peaks.hbm_bytes_per_s = std::max(result.rate("copy_memcpy"), result.rate("copy_kernel"));
  peaks.fp32_flops = std::max(result.rate("fma_fp32"), result.rate("gemm_fp32"));
  peaks.fp64_flops = result.rate("fma_fp64");
  peaks.fp64_tensor_flops = std::max(result.rate("gemm_fp64"), peaks.fp64_flops);
  peaks.tf32_flops = result.rate("gemm_tf32");
  peaks.bf16_flops = result.rate("gemm_bf16");
  peaks.fp16_flops = result.rate("gemm_fp16");
  peaks.int8_ops = 0;
  peaks.l2_bytes = static_cast<double>(result.l2_bytes);
  peaks.sm_count = result.sm_count;
  peaks.source = "calibration: " + result.uuid + ", CUDA runtime " +
                 std::to_string(result.runtime_version) + ", cuBLAS " +
                 std::to_string(result.cublas_version);
  return peaks;
}

void to_json(nlohmann::json& j, const CalibrationMeasurement& m) {
  j = nlohmann::json{
      {"name", m.name},         {"unit", m.unit},   {"work", m.work},
      {"median_s", m.median_s}, {"rate", m.rate},   {"samples_s", m.samples_s},
      {"config", m.config},
  };
}

void to_json(nlohmann::json& j, const CalibrationResult& r) {
  j = nlohmann::json{
      {"error", r.error},
      {"device", r.device},
      {"name", r.name},
      {"uuid", r.uuid},
      {"compute_capability", r.compute_capability},
      {"sm_count", r.sm_count},
      {"l2_bytes", r.l2_bytes},
      {"sm_clock_khz", r.sm_clock_khz},
      {"memory_clock_khz", r.memory_clock_khz},
      {"memory_bus_bits", r.memory_bus_bits},
      {"sm_clock_under_load_hz", r.sm_clock_under_load_hz},
      {"runtime_version", r.runtime_version},
      {"driver_version", r.driver_version},
      {"cublas_version", r.cublas_version},
      {"measurements", r.measurements},
  };
}

}  // namespace ksol::harness
