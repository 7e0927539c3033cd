// Host-side input generation and output comparison: the parts of the correctness gate that
// need no GPU, so they are unit-tested everywhere.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "task/task.h"

namespace ksol {

enum class Distribution { normal, heavy, spiky, special };
const char* distribution_name(Distribution d);
Distribution parse_distribution(const std::string& s);  // throws on unknown names
// The distributions an evaluation cycles through for this task.
std::vector<Distribution> distributions_for(const Task& t);

// One tensor on the host: its bytes in the storage dtype, and for float tensors the same
// values widened to double (what the float64 references read).
struct HostTensor {
  DType dtype = DType::f32;
  int64_t numel = 0;
  HostVec<uint8_t> bytes;  // HostVec: resize() leaves it unwritten, for the generator to fill
  HostVec<double> f64;     // float tensors only
};

// Generates every input tensor (outputs are left empty), deterministic in (seed, distribution).
// `with_f64` false leaves HostTensor::f64 empty: only a CPU reference reads it (a GPU reference
// widens the stored values on the device), and at a gigabyte of inputs it is most of the writing.
std::vector<HostTensor> generate_inputs(const Task& t, const SizeSet& s, Distribution d, uint64_t seed, bool with_f64 = true);
// The key of tensor `tensor`'s values under (seed, distribution): element i's value is a function
// of it and i alone (harness/device_cases.cu draws the same values on the GPU).
uint64_t input_stream_key(uint64_t seed, size_t tensor, Distribution d);
// Allocates output tensors of the right size for the references (zeros, in f64 for floats).
std::vector<HostTensor> make_reference_outputs(const Task& t, const SizeSet& s);

// Conversions between storage dtypes and double (round to nearest even).
double load_as_double(DType t, const void* p, int64_t i);
void store_from_double(DType t, void* p, int64_t i, double v);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

struct Tolerance {
  double c_out = 2.0;       // ulps of output rounding allowed relative to |ref|
  double u_out = 0;         // unit roundoff of the output dtype
  double u_acc = 0;         // unit roundoff of the policy's arithmetic
  double growth = 0;        // (8 + 2*sqrt(L)) * rtol_scale [+ L/16 on tensor cores]
  double floor_frac = 0.01; // fraction of mean(mag) added to every element's magnitude
};
// The tolerance for one output of a task at a size; `loose_precision` applies the bf16
// policy instead of the task's (only for the precision defence's switched-off mode).
Tolerance tolerance_for(const Task& t, const SizeSet& s, const TensorSpec& out, bool loose_precision = false);
// How closely a task's CPU and GPU float64 references must agree (ksol refcheck): within 1/1024
// of the bound a candidate is held to, so which reference runs cannot change a verdict. Both
// compute in float64 and differ only in the order of operations, so they agree to ~1e-13, but
// not elementwise-relative: where an output cancels (LayerNorm's x - mean, a softmax weight of
// large scores) two orders differ by ulps of the terms, which the candidate bound covers.
Tolerance reference_agreement_tolerance(const Task& t, const SizeSet& s, const TensorSpec& out);
constexpr double kReferenceAgreementFraction = 1.0 / 1024;
// Products a tensor core adds to its fp32 accumulator per step for 16-bit inputs (WGMMA and
// mma.sync k16): the accumulation term of a tensor-math bf16/fp16 task grows by L / this, one
// rounding toward zero of the running sum per step (docs/TASK_FORMAT.md, Tolerance).
constexpr double kTensorCoreKStep = 16;

struct CompareResult {
  bool ok = true;
  int64_t checked = 0, bad = 0, first_bad = -1;
  double worst_ratio = 0;  // max |err| / tol over checked elements
  double first_got = 0, first_want = 0, first_tol = 0;
  std::string message;     // empty when ok
};
// Compares `out` (storage dtype) with `ref` (double) elementwise. `mag` may equal `ref` (magnitude
// "ref"). Every `stride`-th element is checked (1 = all; larger only when the full-compare
// defence is switched off).
CompareResult compare_output(const Tolerance& tol, DType out_dtype, const void* out, const double* ref,
                             const double* mag, int64_t n, int64_t stride = 1);

// A size for a sparse task from a Matrix Market file (coordinate; real, integer or pattern;
// general or symmetric): the [sparse] rows/cols/nnz dims come from the file (symmetric entries
// mirrored, duplicates merged), other dims from the task's first visible size, and the
// generator then uses the file's structure (values still come from the distributions).
// Throws with file:line on malformed input.
SizeSet matrix_market_size(const Task& t, const std::string& path);

// All of one call's outputs by tensor index (inputs left empty), as the candidate wrote them.
using OutputBytes = std::vector<HostVec<uint8_t>>;

// Checks output `k` with its comparator (docs/TASK_FORMAT.md, "Comparators"). `ref` and `mag`
// are the reference outputs on the inputs and on |inputs| (`mag` may be null: magnitude "ref").
// `loose_precision` and `stride` are the precision and full-compare defences switched off.
CompareResult compare_tensor(const Task& t, const SizeSet& s, size_t k, const std::vector<HostTensor>& inputs,
                             const OutputBytes& got, const std::vector<HostTensor>& ref,
                             const std::vector<HostTensor>* mag, bool loose_precision = false, int64_t stride = 1);

}  // namespace ksol
