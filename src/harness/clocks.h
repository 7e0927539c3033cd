// SM clock and throttle reasons through NVML, loaded at run time so that builds need no
// driver library; where NVML is missing, clocks read as 0 and `available()` is false.
#pragma once
#include <string>

namespace ksol {

struct ClockSample {
  unsigned sm_mhz = 0, sm_max_mhz = 0;
  unsigned long long reasons = 0;
  std::string reasons_text;
  bool throttled = false;  // power cap, thermal or hardware slowdown active
};

class ClockReader {
 public:
  explicit ClockReader(int cuda_device);
  bool available() const { return device_ != nullptr; }
  ClockSample read() const;

 private:
  void* device_ = nullptr;
};

}  // namespace ksol
