// The search's screen (harness.h): many candidates, one size, timing only. The sequence before
// every timed call is the timing gate's (outputs poisoned with random bits, the L2 flushed by a
// read, events around the call, a device-wide sync after it), on the rotation sets' inputs of the
// timing gate, so a screen's median and the timing gate's are the same measurement with fewer
// samples. Candidates take turns within each round, each round starting one further along, so a
// drift of the clock lands on every candidate alike. The candidates run in one launcher process
// of the screen's own (isolation.h): a screen only ranks, so they may share it; none shares one
// with an evaluation, and a launcher that dies or breaks takes only the candidate whose call it
// was, the others going on in a fresh one.
#include <chrono>
#include <cmath>
#include <random>

#include "core/stats.h"
#include "harness/buffers.h"
#include "harness/device_cases.h"
#include "harness/isolation.h"
#include "ksol/abi.h"

namespace ksol {
namespace {

using Clock = std::chrono::steady_clock;
using namespace harness_detail;

struct Entry {
  std::string so;
  int lib = -1;                  // its index in the launcher
  std::vector<double> brackets;  // the harness's round trip of each sample
  std::string status = "ok";  // ok | failed
  std::string error_class, message;
  std::vector<double> samples;
  bool dropped = false;
  bool live() const { return status == "ok" && !dropped; }
};

class Screener {
  // A non-sticky CUDA error in a candidate's call: that candidate fails, the screen goes on.
  struct CandidateFailed {
    std::string message;
  };

 public:
  explicit Screener(const ScreenRequest& req) : req_(req), task_(load_task(req.task_dir)), rng_(req.timing_seed ^ 0x3c6ef372fe94f82bull) {
    size_ = request_size(task_, req.size, req.size_dims, req.size_options);
    for (auto& d : task_.dims) dims_.push_back(static_cast<int64_t>(std::llround(size_.dims.at(d))));
    int device = 0, l2 = 0;
    CK(cudaGetDevice(&device));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    stream_ = cudaStreamPerThread;
    std::random_device rd;
    secrets_.canary_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    secrets_.key = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    flush_bytes_ = 2 * static_cast<size_t>(l2);
    flush_ = std::make_unique<DeviceMemory>(flush_bytes_);
    CK(cudaMemset(flush_->p, 0x5a, flush_bytes_));
    plan_ = plan_cases(task_, size_, !req.reference_gpu_so.empty(), host_cases_forced());
    use_cpu_ref_ = !plan_.gpu_reference;
  }

  nlohmann::json run() {
    auto t0 = Clock::now();
    double gen_s = 0;
    case_cache().begin();
    // The timing gate's rotation sets and their inputs (cached across evaluations, same keys).
    int nsets = std::max(1, req_.rotation_sets);
    for (int i = 0; i < nsets; ++i) {
      BufferSet s;
      for (auto& t : task_.tensors)
        s.bufs.emplace_back(static_cast<size_t>(task_.numel(t, size_)) * dtype_size(t.dtype), secrets_, stream_, kIpcGranule);
      auto tg = Clock::now();
      uint64_t seed = req_.timing_seed + 1000 + static_cast<uint64_t>(i);
      if (plan_.device_inputs) {
        // The evaluation makes these inputs on the device (device_cases.h): so does the screen.
        for (size_t k = 0; k < task_.tensors.size(); ++k) {
          const TensorSpec& ts = task_.tensors[k];
          if (ts.role != Role::in) continue;
          check_int(device_generate(s.bufs[k].ptr(), dtype_code(ts.dtype), static_cast<size_t>(task_.numel(ts, size_)),
                                    input_stream_key(seed, k, Distribution::normal), static_cast<int>(Distribution::normal),
                                    ts.init == "uniform01", stream_),
                    "generate inputs on the device");
        }
        CK(cudaStreamSynchronize(stream_));
        gen_s += std::chrono::duration<double>(Clock::now() - tg).count();
        sets_.push_back(std::move(s));
        continue;
      }
      int hits = 0, misses = 0;
      auto in = case_cache().get<std::vector<HostTensor>>(
          case_scope(task_, req_.reference_cpu_so, req_.reference_gpu_so), case_key(size_, dims_, Distribution::normal, seed, use_cpu_ref_),
          [&] { return generate_inputs(task_, size_, Distribution::normal, seed, use_cpu_ref_); },
          [](const std::vector<HostTensor>& v) { return digest(v); }, [](const std::vector<HostTensor>& v) { return bytes_of(v); }, &hits,
          &misses);
      gen_s += std::chrono::duration<double>(Clock::now() - tg).count();
      for (size_t k = 0; k < task_.tensors.size(); ++k)
        if (task_.tensors[k].role == Role::in && !(*in)[k].bytes.empty())
          CK(cudaMemcpy(s.bufs[k].ptr(), (*in)[k].bytes.data(), (*in)[k].bytes.size(), cudaMemcpyHostToDevice));
      sets_.push_back(std::move(s));
    }
    entries_.resize(req_.candidates.size());
    for (size_t c = 0; c < entries_.size(); ++c) entries_[c].so = req_.candidates[c];
    start_launcher();
    Event e0, e1;
    await_spare_launcher();  // no context is made while the screen times
    auto tw = Clock::now();
    // Warm-up: each candidate's first calls (module loading, first-call setup), then all of them
    // in turn until the clocks are up.
    for (size_t c = 0; c < entries_.size(); ++c)
      for (int i = 0; i < req_.warmup_calls && entries_[c].live(); ++i) call(c, i % nsets, nullptr, nullptr);
    for (size_t i = 0; std::chrono::duration<double>(Clock::now() - tw).count() < req_.warmup_seconds; ++i) {
      bool any = false;
      for (size_t c = 0; c < entries_.size(); ++c)
        if (entries_[c].live()) call(c, static_cast<int>(i % static_cast<size_t>(nsets)), nullptr, nullptr), any = true;
      if (!any) break;
      CK(cudaStreamSynchronize(stream_));
    }
    double warm_s = std::chrono::duration<double>(Clock::now() - tw).count();
    auto ts = Clock::now();
    int rounds = 0;
    for (int r = 0; r < std::max(1, req_.rounds); ++r) {
      if (r > 0 && std::chrono::duration<double>(Clock::now() - ts).count() >= req_.max_seconds) break;
      size_t n = entries_.size();
      for (size_t j = 0; j < n; ++j) {
        size_t c = (j + static_cast<size_t>(r)) % n;
        for (int k = 0; k < std::max(1, req_.samples_per_round) && entries_[c].live(); ++k) {
          int set = static_cast<int>(rng_() % static_cast<uint64_t>(nsets));
          double us = call(c, set, e0.e, e1.e);
          if (entries_[c].live()) entries_[c].samples.push_back(us);
        }
      }
      ++rounds;
      if (r == 0) drop_slow();
    }
    double sample_s = std::chrono::duration<double>(Clock::now() - ts).count();
    // Each candidate's times stand only where the harness's clock agrees with them.
    for (Entry& e : entries_)
      if (e.status == "ok" && !e.samples.empty() && iso_) {
        launcher::BracketVerdict v = iso_->check(e.samples, e.brackets);
        if (!v.ok) fail(e, "timing_inconsistent", v.message);
      }
    nlohmann::json isolation = iso_ ? iso_->describe() : nlohmann::json(nullptr);
    launcher_start_ += iso_ ? iso_->start_seconds() : 0;
    iso_.reset();
    spawn_spare_launcher();
    // A candidate runs in this process and could have written to the cached inputs: they are
    // dropped then (the screen only ranks, so its times stand; the full evaluation checks again).
    std::string which;
    bool intact = case_cache().verify_touched(&which);
    nlohmann::json results = nlohmann::json::array();
    for (Entry& e : entries_) {
      nlohmann::json j = {{"status", e.status}};
      if (e.status == "ok" && !e.samples.empty()) {
        MedianCI ci = median_ci(e.samples);
        j["median_us"] = ci.median;
        j["ci_low_us"] = ci.low;
        j["ci_high_us"] = ci.high;
        j["min_us"] = *std::min_element(e.samples.begin(), e.samples.end());
        j["samples"] = e.samples;
        j["dropped"] = e.dropped;
      } else if (e.status == "ok") {
        j["status"] = "failed";
        j["error_class"] = "no_samples";
        j["message"] = "no sample was taken";
      } else {
        j["error_class"] = e.error_class;
        j["message"] = e.message;
      }
      results.push_back(j);
    }
    return {{"task", task_.name},
            {"size", size_.name},
            {"rounds", rounds},
            {"results", results},
            {"cache_intact", intact},
            {"harness_seconds",
             {{"total", std::chrono::duration<double>(Clock::now() - t0).count()}, {"generate_inputs", gen_s}, {"warmup", warm_s}, {"sampling", sample_s},
              {"launcher_start", launcher_start_}}},
            {"isolation", isolation},
            {"launchers", launchers_}};
  }

 private:
  void fail(Entry& e, const std::string& cls, const std::string& msg) {
    e.status = "failed";
    e.error_class = cls;
    e.message = msg;
  }

  // One call of candidate c on rotation set `set`, as the timing gate makes it; returns its time
  // in microseconds when events are given. A failure marks the candidate failed; a sticky CUDA
  // error ends the worker, naming the candidate.
  double call(size_t c, int set, cudaEvent_t a, cudaEvent_t b) {
    try {
      return timed_call(c, set, a, b);
    } catch (const CandidateFailed& x) {
      fail(entries_[c], "cuda_error", x.message);
      return 0;
    } catch (const launcher::LauncherError& x) {
      fail(entries_[c], x.error_class(), std::string("the candidates' process: ") + x.what());
      start_launcher();
      return 0;
    }
  }

  // A fresh launcher with every candidate still in the running loaded (at the start, and after
  // one broke the last launcher). A library that does not load fails alone.
  void start_launcher() {
    if (iso_) launcher_start_ += iso_->start_seconds();
    iso_.reset();
    bool any = false;
    for (Entry& e : entries_) any = any || e.live();
    if (!any) return;
    iso_ = std::make_unique<Isolated>(dims_, flush_bytes_, [&] {
      check_int(device_read_all(flush_->p, flush_bytes_, stream_), "L2 flush");
      CK(cudaStreamSynchronize(stream_));
    });
    ++launchers_;
    for (BufferSet& s : sets_) s.mapped_as = -1;
    for (size_t c = 0; c < entries_.size(); ++c) {
      Entry& e = entries_[c];
      if (!e.live()) continue;
      try {
        e.lib = iso_->load(e.so);
      } catch (const launcher::LauncherError& x) {
        if (x.kind == launcher::LauncherError::Kind::refused) {
          fail(e, "load", x.what());
          continue;
        }
        fail(e, x.error_class(), std::string("loading it ended the candidates' process: ") + x.what());
        return start_launcher();
      }
    }
  }

  double timed_call(size_t c, int set, cudaEvent_t a, cudaEvent_t b) {
    Entry& e = entries_[c];
    BufferSet& s = sets_[static_cast<size_t>(set)];
    for (size_t k = 0; k < task_.tensors.size(); ++k)
      if (task_.tensors[k].role == Role::out) guard(c, device_fill_random(s.bufs[k].ptr(), s.bufs[k].bytes, rng_(), stream_));
    guard(c, device_read_all(flush_->p, flush_bytes_, stream_));
    guard(c, cudaStreamSynchronize(stream_));
    launcher::CallResult r = iso_->call(e.lib, s);
    if (r.stream_error || r.device_error) {
      // Its launcher's context may be lost: the others go on in a fresh one.
      fail(e, "cuda_error", r.error_text + " in the candidates' process");
      start_launcher();
      return 0;
    }
    if (r.rc != 0) {
      fail(e, "returned_error", "ksol_run returned " + std::to_string(r.rc));
      return 0;
    }
    if (r.dims_changed) {
      fail(e, "dims_mutated", "the candidate wrote to the dims array");
      return 0;
    }
    if (!a || !b) return 0;
    e.brackets.push_back(r.bracket_us);
    return r.event_us;
  }

  // A CUDA error during candidate c's call: sticky ones end the worker (naming c), others fail c.
  void guard(size_t c, int err) {
    auto e = static_cast<cudaError_t>(err);
    if (e == cudaSuccess) return;
    std::string m = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    if (sticky(e)) throw CudaFatal("candidate " + std::to_string(c) + " (" + entries_[c].so + ") crashed: " + m, static_cast<int>(c));
    cudaGetLastError();
    throw CandidateFailed{m};
  }
  void drop_slow() {
    double fastest = 0;
    for (auto& e : entries_)
      if (e.live() && !e.samples.empty()) {
        double m = median(e.samples);
        if (fastest == 0 || m < fastest) fastest = m;
      }
    if (fastest <= 0 || req_.drop_above <= 0) return;
    for (auto& e : entries_)
      if (e.live() && !e.samples.empty() && median(e.samples) > req_.drop_above * fastest) e.dropped = true;
  }

 private:
  ScreenRequest req_;
  Task task_;
  SizeSet size_;
  std::vector<int64_t> dims_;
  cudaStream_t stream_ = nullptr;
  Secrets secrets_;
  std::mt19937_64 rng_;
  size_t flush_bytes_ = 0;
  std::unique_ptr<DeviceMemory> flush_;
  bool use_cpu_ref_ = true;
  CasePlan plan_;  // as the evaluation decides it (case_plan.h), so both make the same cases
  std::vector<BufferSet> sets_;
  std::vector<Entry> entries_;
  std::unique_ptr<Isolated> iso_;  // after the sets it maps, so it ends first
  int launchers_ = 0;
  double launcher_start_ = 0;
};

}  // namespace

nlohmann::json screen(const ScreenRequest& req) {
  Screener s(req);
  return s.run();
}

}  // namespace ksol
