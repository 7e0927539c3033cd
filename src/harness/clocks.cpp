#include "harness/clocks.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace ksol {
namespace {

// The few NVML entry points used, declared here to avoid a build-time dependency on nvml.h.
using InitFn = int (*)();
using HandleByBusFn = int (*)(const char*, void**);
using ClockFn = int (*)(void*, int, unsigned*);
using ReasonsFn = int (*)(void*, unsigned long long*);

struct Nvml {
  InitFn init = nullptr;
  HandleByBusFn by_bus = nullptr;
  ClockFn clock = nullptr, max_clock = nullptr;
  ReasonsFn reasons = nullptr;
  bool ok = false;
  Nvml() {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    init = reinterpret_cast<InitFn>(dlsym(h, "nvmlInit_v2"));
    by_bus = reinterpret_cast<HandleByBusFn>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<ClockFn>(dlsym(h, "nvmlDeviceGetClockInfo"));
    max_clock = reinterpret_cast<ClockFn>(dlsym(h, "nvmlDeviceGetMaxClockInfo"));
    reasons = reinterpret_cast<ReasonsFn>(dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons) reasons = reinterpret_cast<ReasonsFn>(dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    ok = init && by_bus && clock && max_clock && reasons && init() == 0;
  }
};
const Nvml& nvml() {
  static Nvml n;
  return n;
}
constexpr int kClockSm = 1;

}  // namespace

ClockReader::ClockReader(int cuda_device) {
  if (!nvml().ok) return;
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) return;
  void* d = nullptr;
  if (nvml().by_bus(bus, &d) == 0) device_ = d;
}

ClockSample ClockReader::read() const {
  ClockSample s;
  if (!device_) return s;
  nvml().clock(device_, kClockSm, &s.sm_mhz);
  nvml().max_clock(device_, kClockSm, &s.sm_max_mhz);
  nvml().reasons(device_, &s.reasons);
  struct { unsigned long long bit; const char* name; bool throttle; } names[] = {
      {0x1, "idle", false}, {0x2, "app_clocks", false}, {0x4, "sw_power_cap", true}, {0x8, "hw_slowdown", true},
      {0x10, "sync_boost", false}, {0x20, "sw_thermal", true}, {0x40, "hw_thermal", true}, {0x80, "hw_power_brake", true},
      {0x100, "display_clocks", false}};
  for (auto& n : names)
    if (s.reasons & n.bit) {
      s.reasons_text += (s.reasons_text.empty() ? "" : ",") + std::string(n.name);
      s.throttled |= n.throttle;
    }
  return s;
}

}  // namespace ksol
