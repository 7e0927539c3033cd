#include "harness/harness.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "harness/buffers.h"
#include "harness/case_cache.h"
#include "harness/case_plan.h"
#include "harness/clocks.h"
#include "harness/device_cases.h"
#include "harness/device_ops.h"
#include "harness/isolation.h"
#include "core/defences.h"
#include "core/parallel.h"
#include "core/stats.h"
#include "ksol/abi.h"
#include "task/inputs.h"
#include "task/task.h"

namespace ksol {

const std::vector<std::string>& Defences::all() { return defence_names(); }

namespace {

using Clock = std::chrono::steady_clock;
using namespace harness_detail;

WidenFrom widen_from(DType t) {
  switch (t) {
    case DType::f32: return WidenFrom::f32;
    case DType::f64: return WidenFrom::f64;
    case DType::bf16: return WidenFrom::bf16;
    case DType::f16: return WidenFrom::f16;
    default: throw std::logic_error("widen_from: not a float dtype");
  }
}

// Runs a float64 reference (CPU or GPU) on `in`, or on |in| for the magnitude pass. Float
// tensors reach it as doubles, integer ones as they are stored. A GPU reference's float inputs
// are uploaded in their storage dtype and widened (and made absolute) on the device: a quarter
// to a half of the bytes over the bus, and no host pass over the inputs.
std::vector<HostTensor> run_reference(const Task& task, const SizeSet& size, std::vector<int64_t> dims, ksol_reference_fn fn,
                                      bool on_gpu, const std::vector<HostTensor>& in, bool absolute, cudaStream_t stream) {
  std::vector<HostTensor> out = make_reference_outputs(task, size);
  if (!on_gpu) {
    std::vector<HostVec<double>> absval(in.size());
    std::vector<void*> ptrs(task.tensors.size());
    for (size_t k = 0; k < task.tensors.size(); ++k) {
      const HostTensor& h = task.tensors[k].role == Role::in ? in[k] : out[k];
      if (task.tensors[k].role == Role::in && absolute && !h.f64.empty()) {
        absval[k].resize(h.f64.size());
        parallel_for(static_cast<int64_t>(h.f64.size()), [&](int64_t a, int64_t b, int64_t) {
          for (int64_t i = a; i < b; ++i) absval[k][i] = std::fabs(h.f64[i]);
        });
        ptrs[k] = absval[k].data();
      } else {
        ptrs[k] = const_cast<void*>(h.f64.empty() ? static_cast<const void*>(h.bytes.data()) : static_cast<const void*>(h.f64.data()));
      }
    }
    ksol_call c{KSOL_ABI_VERSION, static_cast<int32_t>(ptrs.size()), ptrs.data(), static_cast<int32_t>(dims.size()), dims.data(), nullptr};
    if (fn(&c) != 0) throw std::runtime_error("the CPU reference failed");
    return out;
  }
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  std::vector<void*> dptrs(task.tensors.size());
  for (size_t k = 0; k < task.tensors.size(); ++k) {
    const TensorSpec& ts = task.tensors[k];
    const bool fl = dtype_is_float(ts.dtype);
    const size_t n = static_cast<size_t>(task.numel(ts, size));
    mem.push_back(std::make_unique<DeviceMemory>(n * (fl ? 8 : dtype_size(ts.dtype))));
    dptrs[k] = mem.back()->p;
    if (ts.role != Role::in) continue;
    if (!fl) {
      CK(cudaMemcpyAsync(dptrs[k], in[k].bytes.data(), in[k].bytes.size(), cudaMemcpyHostToDevice, stream));
      continue;
    }
    DeviceMemory staged(in[k].bytes.size());
    CK(cudaMemcpyAsync(staged.p, in[k].bytes.data(), in[k].bytes.size(), cudaMemcpyHostToDevice, stream));
    check(static_cast<cudaError_t>(device_widen(staged.p, widen_from(ts.dtype), n, static_cast<double*>(dptrs[k]), absolute, stream)),
          "widen reference input");
    CK(cudaStreamSynchronize(stream));  // before `staged` is freed
  }
  ksol_call c{KSOL_ABI_VERSION, static_cast<int32_t>(dptrs.size()), dptrs.data(), static_cast<int32_t>(dims.size()), dims.data(), stream};
  int rc = fn(&c);
  CK(cudaStreamSynchronize(stream));
  if (rc != 0) throw std::runtime_error("the GPU reference failed");
  for (size_t k = 0; k < task.tensors.size(); ++k) {
    if (task.tensors[k].role != Role::out) continue;
    void* host = out[k].f64.empty() ? static_cast<void*>(out[k].bytes.data()) : static_cast<void*>(out[k].f64.data());
    size_t bytes = out[k].f64.empty() ? out[k].bytes.size() : out[k].f64.size() * 8;
    CK(cudaMemcpy(host, dptrs[k], bytes, cudaMemcpyDeviceToHost));
  }
  return out;
}

// The float64 expected outputs of one case (and of its magnitude pass, for "abs" tasks).
struct Expected {
  std::vector<HostTensor> ref, mag;
};

// A correctness case made and kept on the device (device_cases.h): its inputs in their storage
// dtype, its float64 expected outputs, and for "abs" tasks the magnitudes. Per tensor; a slot a
// tensor's role does not fill is null.
struct DeviceCase {
  std::vector<std::shared_ptr<DeviceMemory>> in, want, mag;
  std::vector<size_t> bytes;  // per tensor, of `in` (inputs) or of `want` (outputs)
  size_t total = 0;
};

// The key of the device cases' fingerprints, drawn once per worker (like CaseCache's digests it
// is in the candidate's process: it guards against accidents and careless writes, and a write
// anywhere in what an evaluation used fails that evaluation).
uint64_t device_case_key() {
  static const uint64_t k = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  return k;
}
uint64_t device_digest(const DeviceCase& c) {
  uint64_t h = 0x243f6a8885a308d3ull;
  auto add = [&](const std::vector<std::shared_ptr<DeviceMemory>>& v, size_t k, size_t bytes) {
    if (k >= v.size() || !v[k]) return;
    uint64_t f = 0;
    check_int(device_fingerprint(v[k]->p, bytes, device_case_key(), cudaStreamPerThread, &f), "fingerprint a device case");
    h = (h ^ f) * 0x9e3779b97f4a7c15ull;
  };
  for (size_t k = 0; k < c.bytes.size(); ++k) {
    add(c.in, k, c.bytes[k]);
    add(c.want, k, c.bytes[k]);
    add(c.mag, k, c.bytes[k]);
  }
  return h;
}

// Device cases kept across evaluations: a third of the device's memory, in one worker per GPU.
CaseCache& device_case_cache() {
  static CaseCache c([] {
    if (const char* e = std::getenv("KSOL_WORKER_DEVICE_CACHE_MIB")) return static_cast<size_t>(std::strtoull(e, nullptr, 10)) << 20;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return size_t{0};
    return total_b / 3;
  }());
  return c;
}

// The GPU reference on device inputs (widened to float64 there, or their absolute values for the
// magnitude pass); its float64 outputs stay on the device.
std::vector<std::shared_ptr<DeviceMemory>> run_reference_device(const Task& task, const SizeSet& size, std::vector<int64_t> dims,
                                                                ksol_reference_fn fn, const DeviceCase& c, bool absolute,
                                                                cudaStream_t stream) {
  std::vector<std::shared_ptr<DeviceMemory>> all(task.tensors.size());
  std::vector<void*> ptrs(task.tensors.size());
  for (size_t k = 0; k < task.tensors.size(); ++k) {
    const TensorSpec& ts = task.tensors[k];
    const bool fl = dtype_is_float(ts.dtype);
    const size_t n = static_cast<size_t>(task.numel(ts, size));
    all[k] = std::make_shared<DeviceMemory>(n * (fl ? 8 : dtype_size(ts.dtype)));
    ptrs[k] = all[k]->p;
    if (ts.role != Role::in) continue;
    // Integer tensors (a sparse structure) reach the reference as they are stored, as on the host.
    if (!fl) {
      CK(cudaMemcpyAsync(ptrs[k], c.in[k]->p, c.bytes[k], cudaMemcpyDeviceToDevice, stream));
      continue;
    }
    check(static_cast<cudaError_t>(device_widen(c.in[k]->p, widen_from(ts.dtype), n, static_cast<double*>(ptrs[k]), absolute, stream)),
          "widen reference input");
  }
  ksol_call call{KSOL_ABI_VERSION, static_cast<int32_t>(ptrs.size()), ptrs.data(), static_cast<int32_t>(dims.size()), dims.data(), stream};
  int rc = fn(&call);
  CK(cudaStreamSynchronize(stream));
  if (rc != 0) throw std::runtime_error("the GPU reference failed");
  std::vector<std::shared_ptr<DeviceMemory>> out(task.tensors.size());
  for (size_t k = 0; k < task.tensors.size(); ++k)
    if (task.tensors[k].role == Role::out) out[k] = all[k];
  return out;
}

// Returns f(), adding its wall time (exceptions included) to `acc`.
template <class F>
auto add_time(double& acc, F f) {
  struct Add {
    double& acc;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    ~Add() { acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  } add{acc};
  return f();
}

class Evaluator {
 public:
  ~Evaluator() {
    for (size_t k = 0; k < pinned_.size(); ++k)
      if (pinned_[k]) cudaHostUnregister(got_[k].data());
  }
  Evaluator(const EvalRequest& req) : req_(req), task_(load_task(req.task_dir)), rng_(req.timing_seed ^ 0x6a09e667f3bcc908ull) {
    size_ = request_size(task_, req.size, req.size_dims, req.size_options);
    for (auto& d : task_.dims) dims_.push_back(static_cast<int64_t>(std::llround(size_.dims.at(d))));
    CK(cudaGetDevice(&device_));
    CK(cudaDeviceGetAttribute(&l2_bytes_, cudaDevAttrL2CacheSize, device_));
    stream_ = cudaStreamPerThread;
    // Secrets come from the OS, not from the (recorded) seeds, so no candidate can know them.
    std::random_device rd;
    secrets_.canary_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    secrets_.key = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    // With isolation on (every trusted result) the candidate is loaded in a launcher process at
    // the start of run(); off, in this process, for the exploit suite's proof only.
    isolated_ = req.defences.on("isolation");
    if (!isolated_) {
      candidate_ = std::make_unique<Library>(req.candidate_so);
      run_ = candidate_->symbol<ksol_run_fn>("ksol_run");
    }
    plan_ = plan_cases(task_, size_, !req.reference_gpu_so.empty(), host_cases_forced());
    use_cpu_ref_ = !plan_.gpu_reference;
    device_cases_ = plan_.device_cases;
    if (use_cpu_ref_) {
      ref_lib_ = std::make_unique<Library>(req.reference_cpu_so);
      ref_ = ref_lib_->symbol<ksol_reference_fn>("ksol_reference");
    } else {
      ref_lib_ = std::make_unique<Library>(req.reference_gpu_so);
      ref_ = ref_lib_->symbol<ksol_reference_fn>("ksol_reference_gpu");
    }
    // The L2 flush reads a buffer of twice the cache size that nothing ever writes again, so
    // the cache ends up full of clean lines and no write-back competes with the timed call.
    flush_bytes_ = 2 * static_cast<size_t>(l2_bytes_);
    flush_ = std::make_unique<DeviceMemory>(flush_bytes_);
    CK(cudaMemset(flush_->p, 0x5a, flush_bytes_));
  }

  nlohmann::json run() {
    auto t_start = std::chrono::steady_clock::now();
    nlohmann::json out;
    out["task"] = task_.name;
    out["size"] = size_.name;
    out["reference"] = use_cpu_ref_ ? "cpu" : "gpu";
    out["defences_off"] = std::vector<std::string>(req_.defences.off.begin(), req_.defences.off.end());
    out["gates"] = nlohmann::json::array();
    case_cache().begin();
    device_case_cache().begin();
    try {
      // The timing sets exist from the start, so the device looks the same to the candidate
      // in every phase (free memory included).
      allocate_timing_sets();
      if (isolated_) start_launcher();
      const bool stopped = req_.stop_above_us > 0 && add_time(phase_.probe, [&] { return far_slower(out); });
      if (!stopped) {
        gates(out);
        out["status"] = "ok";
      }
    } catch (const GateFailure& f) {
      out["status"] = "failed";
      out["failed_gate"] = f.gate;
      out["error_class"] = f.error_class;
      out["message"] = f.message;
      out["gates"].push_back({{"gate", f.gate}, {"ok", false}, {"error_class", f.error_class}, {"message", f.message}});
    } catch (const CudaError& e) {
      out["status"] = "failed";
      out["failed_gate"] = "launch";
      out["error_class"] = "cuda_error";
      out["message"] = e.what();
    } catch (const launcher::LauncherError& e) {
      // The launcher died, hung or broke the protocol: the candidate's code did, as far as the
      // harness can tell (its process runs nothing else).
      out["status"] = "failed";
      out["failed_gate"] = "launch";
      out["error_class"] = e.error_class();
      out["message"] = std::string("the candidate's process: ") + e.what();
      out["gates"].push_back({{"gate", "launch"}, {"ok", false}, {"error_class", out["error_class"]}, {"message", out["message"]}});
    }
    // No state of the candidate's survives it: its launcher ends here, and the next one starts.
    if (iso_) {
      out["isolation"] = iso_->describe();
      phase_.launcher_start = iso_->start_seconds();
      phase_.launcher_round_trips = iso_->round_trip_seconds();
      iso_.reset();
    } else {
      out["isolation"] = {{"off", true}};
    }
    if (out["status"] != "ok") settle();
    // The cached cases this evaluation used must be as they were made: a candidate runs in this
    // process and could have written to them; it fails here, not the next candidate.
    if (std::string which; !case_cache().verify_touched(&which) || !device_case_cache().verify_touched(&which)) {
      out["status"] = "failed";
      out["failed_gate"] = "integrity";
      out["error_class"] = "host_memory_written";
      out["message"] = "the worker's cached inputs or references (" + which + ") changed during this evaluation: the candidate wrote to the worker's host memory";
      out["gates"].push_back({{"gate", "integrity"}, {"ok", false}, {"error_class", "host_memory_written"}, {"message", out["message"]}});
    }
    // Where the evaluation's wall time went (host-side work included), for `ksol eval --json`
    // and the store: large sizes cost seconds of input generation and references.
    phase_.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    // The two gates' times include their share of the three parts after them.
    out["case_cache"] = {{"hits", cache_hits_},
                         {"misses", cache_misses_},
                         {"cases", device_cases_ ? "device" : "host"},
                         {"inputs_drawn", plan_.device_inputs ? "device" : "host"}};
    out["harness_seconds"] = {{"total", phase_.total},         {"probe", phase_.probe}, {"correctness_gate", phase_.correctness}, {"timing_gate", phase_.timing},
                              {"generate_inputs", phase_.generate}, {"references", phase_.reference},      {"checked_calls", phase_.checks},
                              {"verified_timed_calls", phase_.verify},
                              {"launcher_start", phase_.launcher_start}, {"launcher_round_trips", phase_.launcher_round_trips},
                              {"launcher_spare", phase_.launcher_spare}};
    if (isolated_) spawn_spare_launcher();
    return out;
  }

 private:
  // The gates once the launcher has started: the search's screen where asked, then correctness and
  // timing; a refusal throws GateFailure.
  void gates(nlohmann::json& out) {
    if (req_.time && req_.prune_above_us > 0) {
      // Screening for a search: a candidate slower than the best so far is rejected after a
      // timing pass alone (unverified: it is never a result); a faster one is then evaluated
      // in full, timing included, as if the screen had not happened.
      nlohmann::json screen;
      add_time(phase_.timing, [&] { timing(screen, false); });
      const nlohmann::json& st = screen["timing"];
      out["screen"] = {{"median_us", st["median_us"]}, {"ci_low_us", st["ci_low_us"]}, {"ci_high_us", st["ci_high_us"]},
                       {"samples", st["samples"]}, {"prune_above_us", req_.prune_above_us}};
      if (st["ci_low_us"].get<double>() > req_.prune_above_us) {
        std::ostringstream m;
        m << "screened out: median " << st["median_us"].get<double>() << " us (95% CI from " << st["ci_low_us"].get<double>()
          << ") is above " << req_.prune_above_us << " us, the search's limit from the best so far; not verified";
        throw GateFailure{"screen", "slower_than_best", m.str()};
      }
    }
    if (req_.check) {
      add_time(phase_.correctness, [&] { correctness(out); });
      out["gates"].push_back({{"gate", "correctness"}, {"ok", true}, {"calls", checked_calls_}});
    }
    if (req_.time)
      add_time(phase_.timing, [&] {
        // A bracket refused when another process's burst on the host or the device slowed the
        // round trips is timed once more on fresh calls, under the same rule; a launcher whose
        // times are short fails both. The first refusal stays in the record.
        try {
          timing(out, req_.defences.on("verify-timed"));
        } catch (const GateFailure& f) {
          if (f.error_class != "timing_inconsistent") throw;
          timing(out, req_.defences.on("verify-timed"));
          out["timing"]["bracket_refused_first"] = f.message;
        }
      });
  }

  // After a failure the candidate's work may still be running: wait for it and make sure the
  // context still works, so a later evaluation is never blamed for this one.
  void settle() {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) {
      void* probe = nullptr;
      e = cudaMalloc(&probe, 4096);
      if (e == cudaSuccess) e = cudaMemset(probe, 0, 4096);
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      if (probe) cudaFree(probe);
    }
    if (e != cudaSuccess)
      throw CudaFatal(std::string("the device is unusable after the candidate ran: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }

  BufferSet allocate() {
    BufferSet s;
    for (auto& t : task_.tensors)
      s.bufs.emplace_back(static_cast<size_t>(task_.numel(t, size_)) * dtype_size(t.dtype), secrets_, stream_, isolated_ ? kIpcGranule : 1);
    return s;
  }

  void allocate_timing_sets() {
    int nsets = std::max(1, req_.timing.rotation_sets);
    for (int i = 0; i < nsets; ++i) timing_sets_.push_back(allocate());
    allocate_input_cases();
    allocate_kept_calls();
  }

  struct Case;
  // The case's inputs into the set's buffers: from the host, or a copy on the device.
  void upload(BufferSet& s, const Case& c) {
    s.input_fingerprints.assign(task_.tensors.size(), 0);
    for (size_t k = 0; k < task_.tensors.size(); ++k) {
      if (task_.tensors[k].role != Role::in) continue;
      if (c.dev) {
        CK(cudaMemcpyAsync(s.bufs[k].ptr(), c.dev->in[k]->p, c.dev->bytes[k], cudaMemcpyDeviceToDevice, stream_));
      } else {
        const std::vector<HostTensor>& in = *c.in;
        if (in[k].bytes.empty()) continue;
        CK(cudaMemcpy(s.bufs[k].ptr(), in[k].bytes.data(), in[k].bytes.size(), cudaMemcpyHostToDevice));
      }
      fingerprint(s.bufs[k].ptr(), s.bufs[k].bytes, &s.input_fingerprints[k]);
    }
  }

  void fingerprint(const void* p, size_t bytes, uint64_t* out) {
    check_int(device_fingerprint(p, bytes, secrets_.key, stream_, out), "device_fingerprint");
  }

  // How outputs are poisoned before a call: NaN bytes, or random bits that look like data.
  enum class Poison { none, nan, random };

  // The same sequence precedes every call, checked or timed: poison the outputs, flush the L2
  // by reading, all queued without waiting, so a candidate cannot tell the phases apart.
  void prepare(BufferSet& s, Poison p) {
    for (size_t k = 0; k < task_.tensors.size(); ++k) {
      if (task_.tensors[k].role != Role::out) continue;
      if (p == Poison::nan) CK(cudaMemsetAsync(s.bufs[k].ptr(), 0xFF, s.bufs[k].bytes, stream_));
      if (p == Poison::random) check_int(device_fill_random(s.bufs[k].ptr(), s.bufs[k].bytes, rng_(), stream_), "poison");
    }
    check_int(device_read_all(flush_->p, flush_bytes_, stream_), "L2 flush");
  }

  // Calls the candidate on `s` with fresh copies of the pointer table and the dims; a candidate
  // that rewrites either is caught (the harness keeps its own copies for everything else).
  struct Launch {
    std::vector<void*> table;  // the table as the candidate left it (in the harness's pointers)
    bool table_changed = false, dims_changed = false;
    int rc = 0;
    double us = 0, bracket_us = 0, gap_us = 0;  // isolation: the launcher's time, the harness's round trip, the launcher's post-sync gap
  };
  // Starts the candidate's launcher and loads the candidate there.
  void start_launcher() {
    // The calibration's calls follow the worker's own L2 flush, as every real call does.
    iso_ = std::make_unique<Isolated>(dims_, flush_bytes_, [&] {
      check_int(device_read_all(flush_->p, flush_bytes_, stream_), "L2 flush");
      CK(cudaStreamSynchronize(stream_));
    });
    try {
      lib_ = iso_->load(req_.candidate_so);
    } catch (const launcher::LauncherError& e) {
      if (e.kind != launcher::LauncherError::Kind::refused) throw;
      throw std::runtime_error(e.what());  // an unloadable library, as in one process
    }
  }
  // With isolation: the queued poison and flush finish first, then the launcher makes the call
  // (`on_stream_done` runs between the end of its stream and its device-wide sync).
  Launch launch(BufferSet& s, cudaEvent_t e0, cudaEvent_t e1, const std::string& label = "", const std::function<void()>& on_stream_done = {}) {
    Launch l;
    l.table = s.ptrs();
    if (iso_) {
      CK(cudaStreamSynchronize(stream_));
      launcher::CallResult r = iso_->call(lib_, s, on_stream_done);
      if (r.stream_error || r.device_error)
        throw GateFailure{"launch", "cuda_error", r.error_text + " in the candidate's process" + (label.empty() ? "" : " (" + label + ")")};
      l.rc = r.rc;
      l.dims_changed = r.dims_changed;
      l.table_changed = r.table_changed;
      if (r.table_changed) {
        std::vector<void*> mine = l.table;
        for (size_t k = 0; k < l.table.size(); ++k)
          l.table[k] = k < r.table_map.size() && r.table_map[k] >= 0 ? mine[static_cast<size_t>(r.table_map[k])] : nullptr;
      }
      l.us = r.event_us;
      l.bracket_us = r.bracket_us;
      l.gap_us = r.gap_us;
      return l;
    }
    std::vector<int64_t> dims = dims_;
    ksol_call c{KSOL_ABI_VERSION, static_cast<int32_t>(l.table.size()), l.table.data(), static_cast<int32_t>(dims.size()), dims.data(), stream_};
    if (e0) CK(cudaEventRecord(e0, stream_));
    l.rc = run_(&c);
    if (e1) CK(cudaEventRecord(e1, stream_));
    l.dims_changed = dims != dims_;
    l.table_changed = l.table != s.ptrs();
    return l;
  }

  // Runs the float64 reference on `in` (or on |in| for the magnitude pass).
  std::vector<HostTensor> reference(const std::vector<HostTensor>& in, bool absolute) {
    return run_reference(task_, size_, dims_, ref_, !use_cpu_ref_, in, absolute, stream_);
  }

  // One case's inputs and the key they are cached under.
  struct Case {
    std::string key;
    std::shared_ptr<const std::vector<HostTensor>> in;  // host cases
    std::shared_ptr<const DeviceCase> dev;               // device cases (device_cases_)
  };
  // What the cache keeps for this evaluation: the task's spec and its reference libraries.
  std::string cache_scope() const {
    return case_scope(task_, req_.reference_cpu_so, req_.reference_gpu_so);
  }
  // The task's inputs for (distribution, seed), the time spent counted.
  Case generate(Distribution d, uint64_t seed) {
    Case c{case_key(size_, dims_, d, seed, use_cpu_ref_), nullptr, nullptr};
    if (device_cases_) {
      c.dev = device_case_cache().get<DeviceCase>(
          cache_scope(), "dev|" + c.key, [&] { return make_device_case(d, seed); }, [](const DeviceCase& v) { return device_digest(v); },
          [](const DeviceCase& v) { return v.total; }, &cache_hits_, &cache_misses_);
      return c;
    }
    c.in = add_time(phase_.generate, [&] { return host_inputs(c.key, d, seed, &cache_hits_, &cache_misses_); });
    return c;
  }
  // Inputs drawn on the host, through the worker's host cache (the screen makes the same keys).
  std::shared_ptr<const std::vector<HostTensor>> host_inputs(const std::string& key, Distribution d, uint64_t seed, int* hits, int* misses) {
    return case_cache().get<std::vector<HostTensor>>(
        cache_scope(), key, [&] { return generate_inputs(task_, size_, d, seed, use_cpu_ref_); },
        [](const std::vector<HostTensor>& v) { return digest(v); }, [](const std::vector<HostTensor>& v) { return bytes_of(v); }, hits, misses);
  }

  // A device case: the inputs drawn on the device (or on the host and uploaded once, for a sparse
  // structure or integer inputs), the GPU reference run on them there.
  DeviceCase make_device_case(Distribution d, uint64_t seed) {
    DeviceCase c;
    const size_t n_t = task_.tensors.size();
    c.in.resize(n_t), c.want.resize(n_t), c.mag.resize(n_t), c.bytes.assign(n_t, 0);
    add_time(phase_.generate, [&] {
      // Inputs drawn on the device, or on the host (through the host cache) and uploaded; the
      // host draw is counted once, as the device case's own hit or miss.
      std::shared_ptr<const std::vector<HostTensor>> host;
      if (!plan_.device_inputs) {
        int hits = 0, misses = 0;
        host = host_inputs(case_key(size_, dims_, d, seed, use_cpu_ref_), d, seed, &hits, &misses);
      }
      for (size_t k = 0; k < n_t; ++k) {
        const TensorSpec& ts = task_.tensors[k];
        const size_t n = static_cast<size_t>(task_.numel(ts, size_));
        if (ts.role != Role::in) {
          c.bytes[k] = n * 8;
          continue;
        }
        c.bytes[k] = n * dtype_size(ts.dtype);
        c.in[k] = std::make_shared<DeviceMemory>(c.bytes[k]);
        if (host) {
          if ((*host)[k].bytes.size() != c.bytes[k]) throw std::logic_error("host inputs of tensor '" + ts.name + "' have the wrong size");
          CK(cudaMemcpy(c.in[k]->p, (*host)[k].bytes.data(), c.bytes[k], cudaMemcpyHostToDevice));
          continue;
        }
        check_int(device_generate(c.in[k]->p, dtype_code(ts.dtype), n, input_stream_key(seed, k, d), static_cast<int>(d),
                                  ts.init == "uniform01", stream_),
                  "generate inputs on the device");
      }
      CK(cudaStreamSynchronize(stream_));
    });
    add_time(phase_.reference, [&] {
      c.want = run_reference_device(task_, size_, dims_, ref_, c, false, stream_);
      if (task_.magnitude == "abs") c.mag = run_reference_device(task_, size_, dims_, ref_, c, true, stream_);
    });
    for (size_t k = 0; k < n_t; ++k) c.total += c.bytes[k] * ((c.in[k] ? 1 : 0) + (c.want[k] ? 1 : 0) + (c.mag[k] ? 1 : 0));
    return c;
  }

  std::shared_ptr<const Expected> expected(const Case& c) {
    if (c.dev) return std::make_shared<const Expected>();  // the device case holds its own
    return add_time(phase_.reference, [&] {
      return case_cache().get<Expected>(
          cache_scope(), "ref|" + c.key,
          [&] {
            Expected e;
            e.ref = reference(*c.in, false);
            if (task_.magnitude == "abs") e.mag = reference(*c.in, true);
            return e;
          },
          [](const Expected& e) { return digest(e.mag, digest(e.ref)); },
          [](const Expected& e) { return bytes_of(e.ref) + bytes_of(e.mag); }, &cache_hits_, &cache_misses_);
    });
  }

  // Calls the candidate once on `s`, with the checks every checked call gets.
  void checked_call(BufferSet& s, const Case& c, const Expected& want, Poison poison, const std::string& label) {
    const Defences& d = req_.defences;
    prepare(s, d.on("poison") || checked_calls_ == 0 ? poison : Poison::none);
    std::vector<void*> mine = s.ptrs();
    // Fingerprint the outputs once the call's own stream is done: work queued elsewhere may not
    // be, and shows up as a different fingerprint after the device-wide sync below. In one
    // process the fingerprint is queued behind the call on its stream; with a launcher it runs
    // while the launcher waits between the end of its stream and its device-wide sync.
    std::vector<uint64_t> early(task_.tensors.size(), 0);
    auto fingerprint_outputs = [&](const std::vector<void*>& from, std::vector<uint64_t>& prints) {
      for (size_t k = 0; k < task_.tensors.size(); ++k)
        if (task_.tensors[k].role == Role::out) fingerprint(from[k], s.bufs[k].bytes, &prints[k]);
    };
    std::function<void()> at_stream_end;
    if (iso_ && d.on("escape")) at_stream_end = [&] { fingerprint_outputs(mine, early); };
    Launch l = launch(s, nullptr, nullptr, label, at_stream_end);
    ++checked_calls_;
    if (l.rc != 0) {
      cudaError_t e = cudaGetLastError();
      if (sticky(e)) throw CudaFatal(std::string("candidate crashed: ") + cudaGetErrorName(e));
      throw GateFailure{"launch", "returned_error", "ksol_run returned " + std::to_string(l.rc) + " (" + label + ")"};
    }
    if (l.dims_changed) throw GateFailure{"correctness", "dims_mutated", "the candidate wrote to the dims array (" + label + ")"};
    if (d.on("alias") && l.table_changed)
      throw GateFailure{"correctness", "alias", "the candidate rewrote the tensor pointer table: an output must not alias an input or move (" + label + ")"};
    std::vector<void*> read_from = mine;
    if (!d.on("alias"))
      for (size_t k = 0; k < read_from.size(); ++k)
        if (l.table[k]) read_from[k] = l.table[k];
    // The escape check compares what the fingerprint saw at the stream's end with what is there
    // after the device-wide sync: in one process through the pointers the outputs are read from,
    // with a launcher through the harness's own.
    const std::vector<void*>& printed = iso_ ? mine : read_from;
    if (!iso_ && d.on("escape")) fingerprint_outputs(read_from, early);
    cudaError_t se = cudaStreamSynchronize(stream_);
    cudaError_t de = cudaDeviceSynchronize();
    if (se != cudaSuccess || de != cudaSuccess) {
      cudaError_t e = se != cudaSuccess ? se : de;
      if (sticky(e)) throw CudaFatal(std::string("candidate crashed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
      throw GateFailure{"launch", "cuda_error", std::string(cudaGetErrorName(e)) + " (" + label + ")"};
    }
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      throw GateFailure{"launch", "cuda_error", std::string(cudaGetErrorName(e)) + " (" + label + ")"};
    if (d.on("guards"))
      for (size_t k = 0; k < s.bufs.size(); ++k)
        if (!s.bufs[k].guards_intact(secrets_, stream_))
          throw GateFailure{"correctness", "out_of_bounds", "the canary zone around tensor '" + task_.tensors[k].name + "' was overwritten (" + label + ")"};
    if (d.on("input-hash")) check_inputs(s, label);
    check_outputs(read_from, s, c, want, label);
    if (d.on("escape"))
      for (size_t k = 0; k < task_.tensors.size(); ++k) {
        if (task_.tensors[k].role != Role::out) continue;
        uint64_t late = 0;
        fingerprint(printed[k], s.bufs[k].bytes, &late);
        if (early[k] != late)
          throw GateFailure{"correctness", "escaped_stream", "output '" + task_.tensors[k].name +
                                                                 "' was not complete when the call's stream finished: work ran on another stream or thread (" + label + ")"};
      }
  }

  void check_inputs(BufferSet& s, const std::string& label) {
    for (size_t k = 0; k < task_.tensors.size(); ++k) {
      if (task_.tensors[k].role != Role::in) continue;
      uint64_t now = 0;
      fingerprint(s.bufs[k].ptr(), s.bufs[k].bytes, &now);
      if (now != s.input_fingerprints[k])
        throw GateFailure{"correctness", "input_mutated", "input tensor '" + task_.tensors[k].name + "' changed during the call (" + label + ")"};
    }
  }

  // Checks the outputs at `ptrs` against the case's expected ones: on the device for a device
  // case, else read back and compared on the host.
  void check_outputs(const std::vector<void*>& ptrs, const BufferSet& s, const Case& c, const Expected& want, const std::string& label) {
    if (!c.dev) {
      const OutputBytes& got = download_outputs(ptrs, s);
      compare_all(got, *c.in, want, label);
      return;
    }
    const Defences& d = req_.defences;
    for (size_t k = 0; k < task_.tensors.size(); ++k) {
      const TensorSpec& ts = task_.tensors[k];
      if (ts.role != Role::out) continue;
      Tolerance tol = tolerance_for(task_, size_, ts, !d.on("precision"));
      const size_t n = static_cast<size_t>(task_.numel(ts, size_));
      const double* want_p = static_cast<const double*>(c.dev->want[k]->p);
      const double* mag_p = task_.magnitude == "abs" ? static_cast<const double*>(c.dev->mag[k]->p) : want_p;
      DeviceCompare r;
      check_int(device_compare(ptrs[k], dtype_code(ts.dtype), want_p, mag_p, n, d.on("full-compare") ? 1 : 16, tol.c_out, tol.u_out,
                               tol.u_acc, tol.growth, tol.floor_frac, stream_, &r),
                "compare on the device");
      worst_ratio_ = std::max(worst_ratio_, r.worst_ratio);
      if (r.bad == 0) continue;
      // The first bad element, read back for the message (the host comparator's words).
      double got = 0, w = 0, m = 0;
      size_t es = dtype_size(ts.dtype);
      std::vector<uint8_t> one(es);
      CK(cudaMemcpy(one.data(), static_cast<const uint8_t*>(ptrs[k]) + static_cast<size_t>(r.first_bad) * es, es, cudaMemcpyDeviceToHost));
      got = load_as_double(ts.dtype, one.data(), 0);
      CK(cudaMemcpy(&w, want_p + r.first_bad, 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(&m, mag_p + r.first_bad, 8, cudaMemcpyDeviceToHost));
      double t = std::isfinite(w) ? tol.c_out * tol.u_out * std::fabs(w) + tol.u_acc * tol.growth * ((std::isfinite(m) ? std::fabs(m) : 0) + tol.floor_frac * r.mean_mag)
                                  : 0;
      std::ostringstream o;
      o.precision(9);
      o << r.bad << " of " << r.checked << " elements out of tolerance; first at index " << r.first_bad << ": got " << got << ", want " << w
        << " (tolerance " << t << "); worst error/tolerance " << r.worst_ratio;
      throw GateFailure{"correctness", "wrong_result", "output '" + ts.name + "': " + o.str() + " (" + label + ")"};
    }
  }

  // Checks every output of one call with its comparator.
  void compare_all(const OutputBytes& got, const std::vector<HostTensor>& in, const Expected& want, const std::string& label) {
    const Defences& d = req_.defences;
    for (size_t k = 0; k < task_.tensors.size(); ++k) {
      const TensorSpec& ts = task_.tensors[k];
      if (ts.role != Role::out) continue;
      CompareResult r = compare_tensor(task_, size_, k, in, got, want.ref, task_.magnitude == "abs" ? &want.mag : nullptr,
                                       !d.on("precision"), d.on("full-compare") ? 1 : 16);
      worst_ratio_ = std::max(worst_ratio_, r.worst_ratio);
      if (!r.ok) throw GateFailure{"correctness", "wrong_result", "output '" + ts.name + "': " + r.message + " (" + label + ")"};
    }
  }

  // Copies the outputs into host buffers kept for the whole evaluation: every checked and
  // verified call reads back the same sizes, so the pages are faulted in once, and buffers of
  // 64 MiB or more are page-locked once (a pageable copy runs at a fraction of the bus speed).
  const OutputBytes& download_outputs(const std::vector<void*>& ptrs, const BufferSet& s) {
    got_.resize(task_.tensors.size());
    pinned_.resize(task_.tensors.size(), false);
    for (size_t k = 0; k < task_.tensors.size(); ++k)
      if (task_.tensors[k].role == Role::out) {
        if (got_[k].size() != s.bufs[k].bytes) {
          if (pinned_[k]) cudaHostUnregister(got_[k].data()), pinned_[k] = false;
          parallel_assign<uint8_t>(got_[k], s.bufs[k].bytes, 0);
          if (got_[k].size() >= (size_t{64} << 20))
            pinned_[k] = cudaHostRegister(got_[k].data(), got_[k].size(), cudaHostRegisterDefault) == cudaSuccess;
          if (!pinned_[k]) cudaGetLastError();  // pageable copies still work; clear the error
        }
        CK(cudaMemcpy(got_[k].data(), ptrs[k], got_[k].size(), cudaMemcpyDeviceToHost));
      }
    return got_;
  }

  void correctness(nlohmann::json& out) {
    const Defences& d = req_.defences;
    std::vector<uint64_t> seeds = req_.seeds;
    if (seeds.size() < 3) throw std::runtime_error("the correctness gate needs at least 3 seeds");
    // Checked calls run on a timing set too (the first one), so buffers do not tell phases
    // apart; with rewrite-inputs off, every case gets buffers of its own from the first.
    BufferSet* set = &timing_sets_[0];
    if (!d.on("rewrite-inputs")) {
      retired_.push_back(std::make_unique<BufferSet>(allocate()));
      set = retired_.back().get();
    }
    nlohmann::json cases = nlohmann::json::array();
    for (uint64_t seed : seeds)
      for (Distribution dist : distributions_for(task_)) {
        std::string label = std::string("seed ") + std::to_string(seed) + ", " + distribution_name(dist);
        // Inputs are rewritten into the same buffers, so a candidate caching by pointer fails;
        // with that defence off each case gets buffers of its own, kept to the end so that no
        // later buffer reuses an address.
        if (!d.on("rewrite-inputs") && !cases.empty()) {
          retired_.push_back(std::make_unique<BufferSet>(allocate()));
          set = retired_.back().get();
        }
        Case c = generate(dist, seed);
        upload(*set, c);
        std::shared_ptr<const Expected> want = expected(c);
        add_time(phase_.checks, [&] {
          checked_call(*set, c, *want, Poison::nan, label + ", NaN poison");
          if (d.on("finite-poison")) checked_call(*set, c, *want, Poison::random, label + ", random poison");
        });
        cases.push_back(label);
      }
    out["correctness"] = {{"cases", cases}, {"worst_error_over_tolerance", worst_ratio_}};
  }

  // A timed call whose output is verified: the set gets fresh inputs (new values behind the
  // same pointers, unless rewrite-inputs is off) and its expected results are computed before
  // the sampling starts, so verification costs no time inside the loop but the comparison.
  struct Verification {
    int set = 0;
    Case inputs;
    std::shared_ptr<const Expected> want;
  };
  Verification plan_verification(int set, uint64_t seed) {
    Verification v;
    v.set = set;
    v.inputs = req_.defences.on("rewrite-inputs") ? generate(Distribution::normal, seed) : input_cases_[set_case_[set]].inputs;
    v.want = expected(v.inputs);
    return v;
  }
  void verify(const Verification& v, const std::string& label) {
    BufferSet& s = timing_sets_[v.set];
    try {
      check_outputs(s.ptrs(), s, v.inputs, *v.want, label);
      if (req_.defences.on("input-hash")) check_inputs(s, label);
    } catch (const GateFailure& f) {
      throw GateFailure{"timing", f.error_class == "wrong_result" ? "timed_call_wrong" : f.error_class,
                        "the " + label + " produced a wrong result: " + f.message};
    }
  }

  // The timed calls' inputs: `input_cases` cases (normal distribution, seeds from the timing
  // seed, so a screen and the full evaluation share them), each kept in device buffers of its own
  // from the start of the evaluation and copied into a rotation set before a call.
  struct InputCase {
    Case inputs;
    std::vector<std::unique_ptr<DeviceMemory>> bufs;  // per tensor; inputs only
    std::vector<uint64_t> prints;                     // the inputs' fingerprints
    std::shared_ptr<const Expected> want;             // computed when a kept call needs it
  };
  void allocate_input_cases() {
    int n = std::max(req_.timing.input_cases, std::max(1, req_.timing.rotation_sets) + 1);
    for (int i = 0; i < n; ++i) {
      InputCase c;
      for (auto& t : task_.tensors)
        c.bufs.push_back(t.role == Role::in ? std::make_unique<DeviceMemory>(static_cast<size_t>(task_.numel(t, size_)) * dtype_size(t.dtype))
                                            : nullptr);
      input_cases_.push_back(std::move(c));
    }
  }
  // A kept timed call: its outputs copied right after it ran, the case it ran on, its index.
  struct KeptCall {
    std::vector<std::unique_ptr<DeviceMemory>> out;  // per tensor; outputs only
    int input_case = -1, sample = -1;
  };
  void allocate_kept_calls() {
    size_t out_bytes = 0;
    for (auto& t : task_.tensors)
      if (t.role == Role::out) out_bytes += static_cast<size_t>(task_.numel(t, size_)) * dtype_size(t.dtype);
    size_t fit = req_.timing.verify_bytes / std::max<size_t>(out_bytes, 1);
    int n = static_cast<int>(std::clamp<size_t>(fit, 2, static_cast<size_t>(std::max(2, req_.timing.verified_calls))));
    for (int i = 0; i < n; ++i) {
      KeptCall k;
      for (auto& t : task_.tensors)
        k.out.push_back(t.role == Role::out ? std::make_unique<DeviceMemory>(static_cast<size_t>(task_.numel(t, size_)) * dtype_size(t.dtype))
                                            : nullptr);
      kept_.push_back(std::move(k));
    }
  }
  // Makes the timing input cases (once per evaluation) and copies each into its buffers.
  void prepare_input_cases() {
    for (size_t i = 0; i < input_cases_.size(); ++i) {
      InputCase& c = input_cases_[i];
      if (!c.prints.empty()) continue;
      c.inputs = generate(Distribution::normal, req_.timing_seed + 1000 + i);
      c.prints.assign(task_.tensors.size(), 0);
      for (size_t k = 0; k < task_.tensors.size(); ++k) {
        if (task_.tensors[k].role != Role::in) continue;
        size_t bytes = static_cast<size_t>(task_.numel(task_.tensors[k], size_)) * dtype_size(task_.tensors[k].dtype);
        if (c.inputs.dev) {
          CK(cudaMemcpyAsync(c.bufs[k]->p, c.inputs.dev->in[k]->p, bytes, cudaMemcpyDeviceToDevice, stream_));
        } else if (!(*c.inputs.in)[k].bytes.empty()) {
          CK(cudaMemcpy(c.bufs[k]->p, (*c.inputs.in)[k].bytes.data(), bytes, cudaMemcpyHostToDevice));
        }
        fingerprint(c.bufs[k]->p, bytes, &c.prints[k]);
      }
    }
  }
  // Copies input case `ci` into rotation set `set` (device to device, queued on the stream).
  void load_case(int set, int ci) {
    BufferSet& s = timing_sets_[set];
    InputCase& c = input_cases_[ci];
    for (size_t k = 0; k < task_.tensors.size(); ++k)
      if (task_.tensors[k].role == Role::in) CK(cudaMemcpyAsync(s.bufs[k].ptr(), c.bufs[k]->p, s.bufs[k].bytes, cudaMemcpyDeviceToDevice, stream_));
    s.input_fingerprints = c.prints;
    set_case_[set] = ci;
  }
  // The set for the next timed call. With fresh-inputs on, a set drawn at random receives a case
  // drawn at random among those it does not hold: no call's inputs are the ones its buffers held
  // before, and nothing tells a candidate which call will be checked. Off: the sets in turn,
  // each keeping its case.
  int next_set(int i) {
    int nsets = static_cast<int>(timing_sets_.size());
    if (!req_.defences.on("fresh-inputs")) return i % nsets;
    int set = static_cast<int>(secret_rng_() % static_cast<uint64_t>(nsets));
    int n = static_cast<int>(input_cases_.size());
    load_case(set, (set_case_[set] + 1 + static_cast<int>(secret_rng_() % static_cast<uint64_t>(n - 1))) % n);
    return set;
  }
  // Keeps timed call `sample` (run on `set`) with reservoir sampling: once sampling ends, each of
  // the N calls has been kept with the same probability, min(1, kept / N), decided only after it
  // ran. The copy is queued after the call's events, outside the timed region.
  void maybe_keep(int sample, int set) {
    int slot = sample;
    if (sample >= static_cast<int>(kept_.size())) {
      slot = static_cast<int>(secret_rng_() % static_cast<uint64_t>(sample + 1));
      if (slot >= static_cast<int>(kept_.size())) return;
    }
    BufferSet& s = timing_sets_[set];
    for (size_t k = 0; k < task_.tensors.size(); ++k)
      if (task_.tensors[k].role == Role::out) CK(cudaMemcpyAsync(kept_[slot].out[k]->p, s.bufs[k].ptr(), s.bufs[k].bytes, cudaMemcpyDeviceToDevice, stream_));
    kept_[slot].input_case = set_case_[set];
    kept_[slot].sample = sample;
    // The inputs of a kept call must be as they were copied in.
    if (req_.defences.on("input-hash")) {
      try {
        check_inputs(s, "timed call " + std::to_string(sample));
      } catch (const GateFailure& f) {
        throw GateFailure{"timing", f.error_class, f.message};
      }
    }
  }
  // Checks every kept call's outputs against its case's expected ones.
  std::vector<int> verify_kept() {
    std::vector<int> checked;
    for (KeptCall& k : kept_) {
      if (k.sample < 0) continue;
      InputCase& c = input_cases_[k.input_case];
      if (!c.want) c.want = expected(c.inputs);
      std::vector<void*> ptrs(task_.tensors.size(), nullptr);
      for (size_t t = 0; t < task_.tensors.size(); ++t)
        if (k.out[t]) ptrs[t] = k.out[t]->p;
      const std::string label = "timed call " + std::to_string(k.sample) + " (kept at random after it ran)";
      try {
        check_outputs(ptrs, timing_sets_[0], c.inputs, *c.want, label);
      } catch (const GateFailure& f) {
        throw GateFailure{"timing", f.error_class == "wrong_result" ? "timed_call_wrong" : f.error_class,
                          "the " + label + " produced a wrong result: " + f.message};
      }
      checked.push_back(k.sample);
      k.sample = -1;
    }
    std::sort(checked.begin(), checked.end());
    return checked;
  }

  // A baseline in a search (EvalRequest::stop_above_us): its first call on a timing input, and a
  // second one when the first is above the limit. True, with the verdict in `out`, when both are
  // above it: far slower than the fastest baseline here, so not verified or timed any further.
  // The launcher's own event time is used, not the harness's round trip: the round trip would
  // stop a fast kernel on a limit of a few microseconds, and a candidate that reports itself
  // slower than it is only stops itself.
  bool far_slower(nlohmann::json& out) {
    const Defences& d = req_.defences;
    const double limit = req_.stop_above_us;
    prepare_input_cases();
    set_case_.assign(timing_sets_.size(), 0);
    Poison poison = d.on("poison") && d.on("finite-poison") ? Poison::random : Poison::none;
    Event e0, e1;
    std::vector<double> calls;
    for (int i = 0; i < 2; ++i) {
      load_case(0, i % static_cast<int>(input_cases_.size()));
      prepare(timing_sets_[0], poison);
      const std::string label = "probe call " + std::to_string(i);
      Launch l = launch(timing_sets_[0], e0.e, e1.e, label);
      if (l.rc != 0) throw GateFailure{"launch", "returned_error", "ksol_run returned " + std::to_string(l.rc) + " (" + label + ")"};
      double us = l.us;
      if (!iso_) {
        CK(cudaEventSynchronize(e1.e));
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0.e, e1.e));
        us = ms * 1000.0;
      }
      calls.push_back(us);
      if (us <= limit) break;
    }
    const double fastest = *std::min_element(calls.begin(), calls.end());
    const bool stop = fastest > limit;
    out["probe"] = {{"calls_us", calls}, {"us", fastest}, {"stop_above_us", limit}, {"stopped", stop}};
    if (!stop) return false;
    std::ostringstream m;
    m << "one call took " << fastest << " us" << (calls.size() > 1 ? " (the faster of two)" : "") << ", above the limit of " << limit
      << " us: not verified or timed in full";
    out["status"] = "far_slower";
    out["message"] = m.str();
    out["gates"].push_back({{"gate", "probe"}, {"ok", false}, {"us", fastest}, {"calls_us", calls}, {"stop_above_us", limit}});
    return true;
  }

  // Times the candidate on the rotation sets; `verifying`: a random subset of the timed calls and
  // the call after the last one are verified (the verify-timed defence; off only for the search's
  // screening pass, which can only reject).
  void timing(nlohmann::json& out, bool verifying) {
    const Defences& d = req_.defences;
    const TimingConfig& cfg = req_.timing;
    int nsets = static_cast<int>(timing_sets_.size());
    // The next launcher's context is made by now: nothing is being set up while this one is timed.
    add_time(phase_.launcher_spare, [&] { await_spare_launcher(); });
    // The sets' inputs: made once (a screening pass and the timing gate share them), and copied
    // again before each pass, since a correctness case may have run on the first set.
    prepare_input_cases();
    set_case_.assign(nsets, 0);
    for (int i = 0; i < nsets; ++i) load_case(i, i);
    Verification final_v;
    if (verifying) final_v = plan_verification(static_cast<int>(secret_rng_() % static_cast<uint64_t>(nsets)), req_.timing_seed + 3000);
    for (KeptCall& k : kept_) k.sample = -1;
    // Every sample's outputs are poisoned with random bits, unless poisoning is being proven.
    Poison sample_poison = d.on("poison") && d.on("finite-poison") ? Poison::random : Poison::none;
    Poison verify_poison = !d.on("poison") ? Poison::none : d.on("finite-poison") ? Poison::random : Poison::nan;
    Event e0, e1;
    // Warm-up: at least warmup_calls calls and warmup_seconds of them, so that a kernel that
    // draws enough power to lower the clock is timed at the clock it settles to, the same in
    // every process, not on the way down. Warm-up calls get their inputs as timed calls do.
    auto tw = Clock::now();
    for (int i = 0;; ++i) {
      if (i >= cfg.warmup_calls) {
        CK(cudaStreamSynchronize(stream_));
        if (std::chrono::duration<double>(Clock::now() - tw).count() >= cfg.warmup_seconds) break;
      }
      int set = next_set(i);
      prepare(timing_sets_[set], sample_poison);
      if (launch(timing_sets_[set], nullptr, nullptr, "warm-up").rc != 0) throw GateFailure{"timing", "returned_error", "ksol_run failed during warm-up"};
    }
    CK(cudaDeviceSynchronize());

    ClockReader clocks(device_);
    ClockSample before = clocks.read();
    std::vector<double> samples, gaps, brackets;
    auto t0 = Clock::now();
    std::string verify_result = verifying ? "pending" : "off";
    for (int i = 0;; ++i) {
      int set = next_set(i);
      BufferSet& s = timing_sets_[set];
      prepare(s, sample_poison);
      Launch l = launch(s, e0.e, e1.e, "timed call " + std::to_string(i));
      if (l.rc != 0) throw GateFailure{"timing", "returned_error", "ksol_run failed during timing"};
      if (l.dims_changed) throw GateFailure{"timing", "dims_mutated", "the candidate wrote to the dims array during timing"};
      if (iso_) {
        // The launcher's time, checked against the harness's own clock once sampling ends.
        samples.push_back(l.us);
        gaps.push_back(l.gap_us);
        brackets.push_back(l.bracket_us);
      } else {
        CK(cudaEventSynchronize(e1.e));
        auto ta = Clock::now();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0.e, e1.e));
        samples.push_back(ms * 1000.0);
        gaps.push_back(std::chrono::duration<double, std::micro>(Clock::now() - ta).count());
      }
      // Decided only now that the call has returned and its work is done: the call could not
      // know whether it would be checked.
      if (verifying) maybe_keep(i, set);
      double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      int n = static_cast<int>(samples.size());
      if (n >= cfg.max_samples || elapsed >= cfg.max_seconds) break;
      if (n < cfg.min_samples || elapsed < cfg.min_seconds) continue;
      // The CI is narrow and the series steady (its last quarter agrees with the rest): see sampling_settled.
      if (sampling_settled(samples, cfg.target_rel_ci).stop) break;
    }
    SampleStop settled = sampling_settled(samples, cfg.target_rel_ci);
    ClockSample after = clocks.read();
    // The launcher's times stand only where the harness's clock agrees with them.
    nlohmann::json bracket = {{"off", true}};
    if (iso_) {
      launcher::BracketVerdict v = iso_->check(samples, brackets);
      bracket = bracket_json(v);
      if (!v.ok) throw GateFailure{"timing", "timing_inconsistent", v.message};
    }
    std::vector<int> checked_samples;
    if (verifying) {
      add_time(phase_.verify, [&] { checked_samples = verify_kept(); });
      // A candidate that stops working once it has seen enough calls fails this one.
      upload(timing_sets_[final_v.set], final_v.inputs);
      prepare(timing_sets_[final_v.set], verify_poison);
      Launch l = launch(timing_sets_[final_v.set], nullptr, nullptr, "the call after the last sample");
      if (l.rc != 0) throw GateFailure{"timing", "returned_error", "ksol_run failed on the call after the last sample"};
      CK(cudaDeviceSynchronize());
      add_time(phase_.verify, [&] { verify(final_v, "call after the last timed call"); });
      verify_result = "ok";
    }
    MedianCI ci = median_ci(samples);
    double gap_median = median(gaps);
    // An honest call leaves nothing behind on the device once its stream's end event fires.
    if (d.on("escape") && gap_median > std::max(50.0, 0.25 * ci.median))
      throw GateFailure{"timing", "escaped_stream",
                        "work was still running on the device " + std::to_string(gap_median) +
                            " us (median) after the call's stream finished: it ran on another stream or thread"};
    out["timing"] = {
        {"median_us", ci.median}, {"ci_low_us", ci.low}, {"ci_high_us", ci.high}, {"samples", samples.size()},
        {"mean_us", mean(samples)}, {"min_us", *std::min_element(samples.begin(), samples.end())},
        {"rel_ci", (ci.high - ci.low) / 2 / ci.median}, {"drift", settled.drift}, {"steady", settled.drift <= kDriftOverCi * cfg.target_rel_ci},
        {"post_sync_gap_us", gap_median},
        {"rotation_sets", nsets}, {"l2_flush_bytes", flush_bytes_}, {"l2_flush", "read"}, {"verified_calls", checked_samples},
        {"input_cases", input_cases_.size()}, {"verified_call_result", verify_result}, {"raw_us", samples}, {"bracket", bracket},
        {"clock_mhz_before", before.sm_mhz}, {"clock_mhz_after", after.sm_mhz}, {"clock_mhz_max", after.sm_max_mhz},
        {"throttle_reasons", after.reasons_text}, {"throttled", before.throttled || after.throttled},
        {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}};
    out["gates"].push_back({{"gate", "timing"}, {"ok", true}});
  }

  EvalRequest req_;
  Task task_;
  SizeSet size_;
  std::vector<int64_t> dims_;  // the harness's own copy; candidates get a fresh copy per call
  int device_ = 0;
  int l2_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  Secrets secrets_;
  std::mt19937_64 rng_;
  std::unique_ptr<Library> candidate_, ref_lib_;
  OutputBytes got_;          // download_outputs' buffers, reused by every call
  std::vector<bool> pinned_;  // which of them are page-locked (unregistered on destruction)
  ksol_run_fn run_ = nullptr;
  ksol_reference_fn ref_ = nullptr;
  bool use_cpu_ref_ = true;
  bool device_cases_ = false;  // cases made, kept and checked on the device (device_cases.h)
  CasePlan plan_;              // where cases are made and which reference judges them (case_plan.h)
  size_t flush_bytes_ = 0;
  std::unique_ptr<DeviceMemory> flush_;
  std::vector<BufferSet> timing_sets_;
  std::vector<int> set_case_;             // the input case each rotation set holds
  std::vector<InputCase> input_cases_;
  std::vector<KeptCall> kept_;             // the timed calls kept for checking
  // Which sets and cases the timed calls get and which calls are kept: drawn from the OS, not
  // from the recorded seeds, so nothing a candidate could learn predicts them.
  std::mt19937_64 secret_rng_{(static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()};
  int cache_hits_ = 0, cache_misses_ = 0;  // the worker's case cache, this evaluation
  int checked_calls_ = 0;
  double worst_ratio_ = 0;
  // With rewrite-inputs off, every correctness case's buffers, held until the evaluation ends.
  std::vector<std::unique_ptr<BufferSet>> retired_;
  struct Phases {
    // `checks`: the correctness gate's checked calls, the candidate's own run time included;
    // `verify`: the timing gate's checks of its kept calls and of the call after the last sample.
    // `probe`: a baseline's first calls, when the request set stop_above_us.
    double total = 0, probe = 0, correctness = 0, timing = 0, generate = 0, reference = 0, checks = 0, verify = 0;
    // Isolation: waiting for and setting up the launcher; its round trips' overhead; waiting for
    // the next evaluation's launcher before timing.
    double launcher_start = 0, launcher_round_trips = 0, launcher_spare = 0;
  } phase_;
  // The candidate's launcher (isolation on); declared last, so it ends before the buffers it maps.
  bool isolated_ = true;
  std::unique_ptr<Isolated> iso_;
  int lib_ = -1;
};

}  // namespace

nlohmann::json evaluate(const EvalRequest& req) {
  Evaluator ev(req);
  return ev.run();
}

nlohmann::json check_references(const std::string& task_dir, const std::string& size, const std::string& cpu_so,
                                const std::string& gpu_so, const std::vector<uint64_t>& seeds) {
  Task task = load_task(task_dir);
  const SizeSet* s = task.find_size(size);
  if (!s) throw std::runtime_error("task " + task.name + " has no size '" + size + "'");
  Library cpu(cpu_so), gpu(gpu_so);
  auto cpu_fn = cpu.symbol<ksol_reference_fn>("ksol_reference");
  auto gpu_fn = gpu.symbol<ksol_reference_fn>("ksol_reference_gpu");
  std::vector<int64_t> dims;
  for (auto& d : task.dims) dims.push_back(static_cast<int64_t>(std::llround(s->dims.at(d))));
  nlohmann::json cases = nlohmann::json::array();
  bool ok = true;
  double worst = 0;
  for (uint64_t seed : seeds)
    for (Distribution dist : distributions_for(task)) {
      std::vector<HostTensor> in = generate_inputs(task, *s, dist, seed);
      std::vector<HostTensor> a = run_reference(task, *s, dims, cpu_fn, false, in, false, cudaStreamPerThread);
      std::vector<HostTensor> b = run_reference(task, *s, dims, gpu_fn, true, in, false, cudaStreamPerThread);
      std::vector<HostTensor> mag = task.magnitude == "abs" ? run_reference(task, *s, dims, cpu_fn, false, in, true, nullptr) : a;
      for (size_t k = 0; k < task.tensors.size(); ++k) {
        const TensorSpec& ts = task.tensors[k];
        if (ts.role != Role::out) continue;
        CompareResult r;
        if (dtype_is_float(ts.dtype)) {
          // Float64 against float64: within a small fraction of the candidates' bound.
          Tolerance tol = reference_agreement_tolerance(task, *s, ts);
          std::vector<double> m(mag[k].f64.size());
          for (size_t i = 0; i < m.size(); ++i) m[i] = std::fabs(mag[k].f64[i]);
          r = compare_output(tol, DType::f64, b[k].f64.data(), a[k].f64.data(), m.data(), static_cast<int64_t>(m.size()));
        } else {
          r.ok = a[k].bytes == b[k].bytes;
          if (!r.ok) r.message = "integer outputs differ";
        }
        worst = std::max(worst, r.worst_ratio);
        if (!r.ok) {
          ok = false;
          cases.push_back({{"seed", seed}, {"distribution", distribution_name(dist)}, {"output", ts.name}, {"message", r.message}});
        }
      }
    }
  return {{"task", task.name}, {"size", size}, {"ok", ok}, {"worst_error_over_tolerance", worst}, {"failures", cases}};
}

nlohmann::json device_info(int device) {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, device));
  char uuid[64];
  std::string u;
  for (int i = 0; i < 16; ++i) {
    std::snprintf(uuid, sizeof uuid, "%02x", static_cast<unsigned char>(p.uuid.bytes[i]));
    u += uuid;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ClockReader clocks(device);
  ClockSample c = clocks.read();
  return {{"name", p.name}, {"uuid", u}, {"sm_count", p.multiProcessorCount}, {"cc", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"l2_bytes", p.l2CacheSize}, {"memory_bytes", p.totalGlobalMem}, {"driver", driver}, {"runtime", runtime},
          {"sm_mhz", c.sm_mhz}, {"sm_max_mhz", c.sm_max_mhz}, {"nvml", clocks.available()}};
}

}  // namespace ksol
