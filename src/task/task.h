// The task model: what an operator is (tensors, dims, sizes, cost, precision, tolerance,
// references, baselines), loaded from a task folder's task.toml. See docs/TASK_FORMAT.md.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ksol {

enum class DType { f32, f64, bf16, f16, i32, i64 };
size_t dtype_size(DType t);
bool dtype_is_float(DType t);
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(const std::string& s);
// Unit roundoff of a float dtype (2^-24 for f32, 2^-8 for bf16, ...).
double dtype_unit_roundoff(DType t);

enum class Role { in, out };

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  Role role = Role::in;
  std::vector<std::string> shape;  // expressions in the dims
  std::string init = "random";
  // Outputs: how they are checked (docs/TASK_FORMAT.md, "Comparators").
  std::string compare;             // tolerance (floats) | exact (integers) | relative | sorted_rows | index_of
  double rtol = 0, atol = 0;       // relative
  std::string of, values;          // index_of: the input indexed, the output holding the values
};

struct SizeSet {
  std::string name;
  std::map<std::string, double> dims;
  std::map<std::string, std::string> options;
  double weight = 1.0;
  bool hidden = false;
};

struct BaselineSpec {
  std::string name;
  std::string source;  // absolute path
  std::string kind;    // naive | vendor | user
  std::vector<std::string> libs;
  std::string function;  // plain C declaration for kind=user sources without the ksol ABI
  std::vector<std::string> defines;  // NAME or NAME=VALUE, passed as -D: two baselines from one source
};

struct SparseSpec {
  std::string rows, cols, nnz;
  std::string pattern = "uniform";
};

struct Task {
  std::string dir;        // absolute folder
  std::string spec_path;  // absolute path of task.toml
  std::string spec_text;
  std::string spec_hash;  // sha256 of task.toml and every source it names
  std::string name, family, description;
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | fp16 | fp64
  bool special_values = false;
  std::vector<std::string> dims;
  std::vector<TensorSpec> tensors;
  std::string flops = "0", bytes = "0", math = "fma";
  std::string accumulation = "1", magnitude = "ref";
  double rtol_scale = 1.0;
  double floor_frac = 0.01;  // fraction of mean(mag) added to every element's magnitude
  std::string ref_cpu, ref_gpu;  // absolute paths; ref_gpu may be empty
  double cpu_max_work = 4e9;
  std::optional<SparseSpec> sparse;
  std::vector<SizeSet> sizes;
  std::vector<BaselineSpec> baselines;

  const SizeSet* find_size(const std::string& name) const;
  const BaselineSpec* find_baseline(const std::string& name) const;
  std::map<std::string, double> env(const SizeSet& s) const;
  std::vector<int64_t> shape_of(const TensorSpec& t, const SizeSet& s) const;
  int64_t numel(const TensorSpec& t, const SizeSet& s) const;
  double eval(const std::string& expr, const SizeSet& s) const;
  double flops_at(const SizeSet& s) const { return eval(flops, s); }
  double bytes_at(const SizeSet& s) const { return eval(bytes, s); }
  // True when the CPU float64 reference is cheap enough for this size.
  bool use_cpu_reference(const SizeSet& s) const;
  // Unit roundoff of the arithmetic the precision policy allows.
  double policy_unit_roundoff() const;
  // True for tensor-math tasks with bf16/fp16 inputs: their fp32 sums are a tensor core's,
  // whose accumulation term carries one rounding toward zero per k-step (tolerance_for).
  bool tensor_core_accumulation() const;
};

// A user error in a task file: carries file, 1-based line and column, and prints with a caret.
class TaskError : public std::runtime_error {
 public:
  TaskError(std::string file, int line, int column, const std::string& message, const std::string& source_line);
  std::string file;
  int line, column;
};

// Loads a task from a folder (or a task.toml path). Throws TaskError on any bad input.
Task load_task(const std::string& path);
// Finds a task by name or path: a path that exists, else tasks/**/<name> under the search roots
// ($KSOL_TASKS, the source tree's tasks/).
std::string resolve_task_path(const std::string& name_or_path);
std::vector<std::string> builtin_task_dirs();

}  // namespace ksol
