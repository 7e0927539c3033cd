// ksol-worker: one process per GPU. Reads one JSON request per line on stdin, writes one JSON
// reply per line on the protocol stream (the original stdout; candidate output that goes to
// stdout is redirected to stderr so it cannot corrupt the protocol). See docs/PROTOCOL.md.
#include <algorithm>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/calibrate.h"
#include "harness/harness.h"
#include "launcher/launcher.h"

using nlohmann::json;

namespace {

FILE* g_proto = nullptr;

void reply(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::fwrite(s.data(), 1, s.size(), g_proto);
  std::fflush(g_proto);
}

ksol::EvalRequest parse_eval(const json& r) {
  ksol::EvalRequest q;
  q.task_dir = r.at("task_dir");
  q.size = r.at("size");
  if (r.contains("size_dims")) q.size_dims = r["size_dims"].get<std::map<std::string, double>>();
  if (r.contains("size_options")) q.size_options = r["size_options"].get<std::map<std::string, std::string>>();
  q.candidate_so = r.at("candidate_so");
  q.reference_cpu_so = r.at("reference_cpu_so");
  q.reference_gpu_so = r.value("reference_gpu_so", "");
  q.seeds = r.at("seeds").get<std::vector<uint64_t>>();
  q.timing_seed = r.value("timing_seed", uint64_t{7});
  q.time = r.value("time", true);
  q.check = r.value("check", true);
  q.prune_above_us = r.value("prune_above_us", 0.0);
  q.stop_above_us = r.value("stop_above_us", 0.0);
  if (r.contains("timing")) {
    const json& t = r["timing"];
    q.timing.min_samples = t.value("min_samples", q.timing.min_samples);
    q.timing.max_samples = t.value("max_samples", q.timing.max_samples);
    q.timing.min_seconds = t.value("min_seconds", q.timing.min_seconds);
    q.timing.max_seconds = t.value("max_seconds", q.timing.max_seconds);
    q.timing.target_rel_ci = t.value("target_rel_ci", q.timing.target_rel_ci);
    q.timing.rotation_sets = t.value("rotation_sets", q.timing.rotation_sets);
    q.timing.warmup_calls = t.value("warmup_calls", q.timing.warmup_calls);
    q.timing.warmup_seconds = std::clamp(t.value("warmup_seconds", q.timing.warmup_seconds), 0.0, 60.0);
  }
  for (auto& d : r.value("defences_off", std::vector<std::string>{})) q.defences.off.insert(d);
  return q;
}

ksol::ScreenRequest parse_screen(const json& r) {
  ksol::ScreenRequest q;
  q.task_dir = r.at("task_dir");
  q.size = r.at("size");
  if (r.contains("size_dims")) q.size_dims = r["size_dims"].get<std::map<std::string, double>>();
  if (r.contains("size_options")) q.size_options = r["size_options"].get<std::map<std::string, std::string>>();
  q.candidates = r.at("candidates").get<std::vector<std::string>>();
  q.reference_cpu_so = r.value("reference_cpu_so", "");
  q.reference_gpu_so = r.value("reference_gpu_so", "");
  q.timing_seed = r.value("timing_seed", uint64_t{7});
  q.rotation_sets = std::clamp(r.value("rotation_sets", q.rotation_sets), 1, 16);
  q.rounds = std::clamp(r.value("rounds", q.rounds), 1, 1000);
  q.samples_per_round = std::clamp(r.value("samples_per_round", q.samples_per_round), 1, 1000);
  q.warmup_calls = std::clamp(r.value("warmup_calls", q.warmup_calls), 0, 1000);
  q.warmup_seconds = std::clamp(r.value("warmup_seconds", q.warmup_seconds), 0.0, 60.0);
  q.max_seconds = std::clamp(r.value("max_seconds", q.max_seconds), 0.0, 600.0);
  q.drop_above = r.value("drop_above", q.drop_above);
  return q;
}

json calibration_json(const ksol::harness::CalibrationResult& c) {
  json j = c;
  j["peaks"] = ksol::harness::measured_peaks(c);
  return j;
}

}  // namespace

namespace ksol {
int launcher_main(int fd, int device);  // launcher_main.cpp
}

int main(int argc, char** argv) {
  int device = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--device") device = std::stoi(argv[i + 1]);
  // `--launcher FD`: the process that runs candidate code for this worker (launcher_main.cpp).
  if (argc >= 3 && std::string(argv[1]) == "--launcher") {
    signal(SIGINT, SIG_IGN);
    return ksol::launcher_main(std::stoi(argv[2]), device);
  }
  // No other process of this user may read or write this one's memory or open its descriptors
  // through /proc (the launchers above all: they run candidate code).
  ksol::launcher::protect_process();
  // Ctrl-C in a terminal reaches the whole process group: the coordinator finishes the evaluation
  // in flight and then closes this worker (docs/PROTOCOL.md), which must not die under it and
  // have the candidate blamed. A worker whose coordinator is gone sees end of input and exits;
  // one whose coordinator was killed outright while it evaluates exits within a second (its
  // parent changes), so that it does not hold the GPU for whatever runs next.
  signal(SIGINT, SIG_IGN);
  {
    const pid_t parent = getppid();
    std::thread([parent] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        if (getppid() != parent) _exit(4);
      }
    }).detach();
  }
  // Keep the real stdout for the protocol and point fd 1 at stderr for everything else.
  int proto_fd = dup(1);
  dup2(2, 1);
  // Close-on-exec, though every launcher closes all it inherits anyway.
  fcntl(proto_fd, F_SETFD, FD_CLOEXEC);
  g_proto = fdopen(proto_fd, "w");
  std::string once;  // --once FILE: the requests in FILE (one per line), then exit: for running under a profiler
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--once") once = argv[i + 1];
  std::ifstream once_in;
  if (!once.empty()) {
    once_in.open(once);
    if (!once_in) {
      reply({{"ok", false}, {"error", "cannot read " + once}});
      return 2;
    }
  }
  std::istream& in = once.empty() ? std::cin : once_in;

  // Select the device once at start, so every request (also after a restart) runs on it.
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > device) cudaSetDevice(device);

  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json req, out;
    try {
      req = json::parse(line);
    } catch (const std::exception& e) {
      reply({{"ok", false}, {"error", std::string("bad request: ") + e.what()}});
      continue;
    }
    out["id"] = req.contains("id") ? req["id"] : json(0);
    std::string op = req.value("op", "");
    try {
      if (op == "hello") {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        out["ok"] = true;
        out["protocol"] = 1;
        if (e != cudaSuccess || n == 0) {
          out["gpu"] = false;
          out["reason"] = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
        } else {
          if (cudaSetDevice(device) != cudaSuccess) throw std::runtime_error("cannot select device " + std::to_string(device));
          out["gpu"] = true;
          out["device"] = ksol::device_info(device);
          ksol::start_spare_launcher();
        }
      } else if (op == "eval") {
        out["ok"] = true;
        out["result"] = ksol::evaluate(parse_eval(req));
      } else if (op == "screen") {
        out["ok"] = true;
        out["result"] = ksol::screen(parse_screen(req));
      } else if (op == "refcheck") {
        out["ok"] = true;
        out["result"] = ksol::check_references(req.at("task_dir"), req.at("size"), req.at("reference_cpu_so"),
                                               req.at("reference_gpu_so"), req.at("seeds").get<std::vector<uint64_t>>());
      } else if (op == "calibrate") {
        out["ok"] = true;
        out["result"] = calibration_json(ksol::harness::calibrate_device(device));
      } else if (op == "exit") {
        reply({{"id", out["id"]}, {"ok", true}});
        return 0;
      } else {
        out["ok"] = false;
        out["error"] = "unknown op '" + op + "'";
      }
    } catch (const ksol::CudaFatal& e) {
      // The context is unusable after a sticky error: report, then exit for a fresh process.
      json r = {{"id", out["id"]}, {"ok", false}, {"fatal", true}, {"error_class", "sticky_cuda_error"}, {"error", e.what()}};
      if (e.candidate >= 0) r["candidate"] = e.candidate;
      reply(r);
      return 3;
    } catch (const std::exception& e) {
      out["ok"] = false;
      out["error"] = e.what();
    }
    reply(out);
  }
  return 0;
}
