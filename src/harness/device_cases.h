// Correctness cases made and checked on the device, for sizes whose float64 reference runs on the
// GPU: the inputs drawn by the same counter-based generator as task/inputs.cpp (every element a
// function of (seed, tensor, distribution, index)), and the outputs compared with the same
// tolerance rule as compare_output, with no copy of a tensor over the bus. See docs/HARNESS.md.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ksol {

// dtype: 0 f32, 1 f64, 2 bf16, 3 f16 (storage); dist: task/inputs.h's Distribution as an int.
// `stream_key` is generate_inputs' per-tensor stream; `uniform` the "uniform01" init.
int device_generate(void* out, int dtype, size_t n, uint64_t stream_key, int dist, bool uniform, void* stream);

struct DeviceCompare {
  int64_t checked = 0, bad = 0, first_bad = -1;
  double worst_ratio = 0;
  double mean_mag = 0;  // over the finite magnitudes: the floor's base
};
// compare_output's rule on the device: the floor from the mean finite |mag|, then every
// `stride`-th element of `got` (storage dtype) against `want` (float64) under
// c_out*u_out*|want| + u_acc*growth*(|mag| + floor). Deterministic (fixed-order reductions).
int device_compare(const void* got, int dtype, const double* want, const double* mag, size_t n, size_t stride, double c_out,
                   double u_out, double u_acc, double growth, double floor_frac, void* stream, DeviceCompare* out);

}  // namespace ksol
