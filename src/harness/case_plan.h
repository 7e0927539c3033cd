// Where an evaluation's cases are made, which float64 reference judges them and where outputs are
// compared: the evaluation (harness.cpp) and the screen (screen.cpp) decide it here, the same way,
// so that they make the same cases under the same keys. No CUDA here: the rule is unit-tested on
// the CPU (tests/unit/test_case_plan.cpp). docs/HARNESS.md, "Cases on the device", gives the why.
#pragma once
#include <cstdlib>
#include <string>

#include "task/task.h"

namespace ksol {

struct CasePlan {
  bool gpu_reference = false;  // the task's GPU float64 reference runs (else its CPU one)
  bool device_cases = false;   // cases are kept on the device and outputs compared there
  bool device_inputs = false;  // ... and their inputs are drawn there too (else on the host, then uploaded)
};

// Inputs the device generator can draw: floats at random (no sparse structure, no integers).
inline bool inputs_drawn_on_device(const Task& t) {
  for (auto& ts : t.tensors)
    if (ts.role == Role::in && (!dtype_is_float(ts.dtype) || (ts.init != "random" && ts.init != "uniform01"))) return false;
  return true;
}

// Outputs the device comparator can check: floats under the tolerance or the exact comparator (an
// exact one is a bound of zero, tolerance_for).
inline bool outputs_compared_on_device(const Task& t) {
  for (auto& ts : t.tensors)
    if (ts.role == Role::out && (!dtype_is_float(ts.dtype) || (ts.compare != "tolerance" && ts.compare != "exact"))) return false;
  return true;
}

// KSOL_HOST_CASES=1 keeps every case on the host, with the reference cpu_max_work chooses.
inline bool host_cases_forced() {
  const char* e = std::getenv("KSOL_HOST_CASES");
  return e && std::string(e) == "1";
}

// `gpu_reference_built`: the request carries the task's GPU reference library.
//  - A task whose inputs the device draws and whose outputs it compares has its cases made, kept
//    and checked on the device at every size, judged by its GPU reference: the host work a CPU
//    reference needs there (drawing every input on the host, the float64 reference on the
//    host's cores, reading back and comparing every output) costs seconds per evaluation at a
//    medium size, the device path milliseconds. `ksol refcheck` holds the two references to
//    1/1024 of the candidates' bound at every size up to cpu_max_work, so which one runs cannot
//    change a verdict.
//  - Otherwise (sparse structures, integer inputs, other comparators) the inputs are drawn on the
//    host; the CPU reference judges sizes up to cpu_max_work, the GPU reference larger ones, and
//    there, where outputs are device-comparable, the case is uploaded once and kept on the device.
inline CasePlan plan_cases(const Task& t, const SizeSet& s, bool gpu_reference_built, bool host_cases) {
  CasePlan p;
  const bool gpu = gpu_reference_built && !t.ref_gpu.empty();
  if (!gpu) return p;
  const bool compare_on_device = !host_cases && outputs_compared_on_device(t);
  if (compare_on_device && inputs_drawn_on_device(t)) return {true, true, true};
  if (t.use_cpu_reference(s)) return p;
  p.gpu_reference = true;
  p.device_cases = compare_on_device;
  return p;
}

}  // namespace ksol
