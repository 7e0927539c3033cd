// ksol's candidate ABI (include/ksol/abi.h) as PyTorch operators, built by abi_op.py with
// torch.utils.cpp_extension and loaded into the calling process:
//
//   ksol::bind(str path, str label, str[] names, Tensor[] table, int num_outputs, int[] dims,
//              Device device) -> int
//       dlopens the library at `path` (the file the gates verified: nothing is recompiled),
//       resolves ksol_run once, and records the tensor table it was verified with (`table`'s
//       shapes and dtypes, given as meta tensors, the last `num_outputs` of them outputs), the
//       dims, and the device type. Returns the number ksol::run takes.
//   ksol::run(int library, Tensor[] inputs) -> Tensor[]
//       checks the inputs against the bound table (count, device, dtype, shape; each one is
//       made contiguous, a copy where it is not, as abi.py does), allocates the outputs, and
//       calls ksol_run with the tensors' pointers, the dims, and PyTorch's current CUDA stream
//       on the inputs' device (no stream for host tensors). The ABI makes the library queue all
//       its work on that stream, so the call is ordered with PyTorch's own work on it, and the
//       inputs and outputs are kept alive by the caching allocator's stream order, as for any
//       PyTorch op. A nonzero status raises.
//   ksol::check(int library, Tensor[] inputs) -> str
//       what ksol::run's check of the inputs would raise, as a value ("" where they are the
//       bound table's), for abi_op.py to raise in Python.
//
// Libraries stay loaded for the life of the process (ctypes.CDLL, the other path, never unloads
// either). The CUDA stream needs c10/cuda's headers, so that part is built only where abi_op.py
// defines KSOL_OP_WITH_CUDA (a PyTorch with CUDA, and cuda_runtime_api.h found); without it
// ksol::bind refuses CUDA libraries, saying why.
//
// The code stays within C++14: PyTorch 1.x builds extensions with -std=c++14, and a later
// PyTorch's own -std flag is left alone.
#include <dlfcn.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#ifdef KSOL_OP_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#ifdef KSOL_OP_ABI_HEADER
#include <ksol/abi.h>
#endif

namespace {

// include/ksol/abi.h's ksol_call, mirrored because an installed package has no include/ of
// its own (abi.py mirrors it with ctypes for the same reason). Built from the source tree,
// abi_op.py puts include/ on the path and the two are checked to agree.
constexpr int32_t kAbiVersion = 1;

struct AbiCall {
  int32_t abi_version;
  int32_t num_tensors;
  void* const* tensors;
  int32_t num_dims;
  const int64_t* dims;
  void* stream;
};
using RunFn = int (*)(const AbiCall*);

#ifdef KSOL_OP_ABI_HEADER
static_assert(KSOL_ABI_VERSION == kAbiVersion, "include/ksol/abi.h changed its version: update AbiCall");
static_assert(sizeof(AbiCall) == sizeof(ksol_call), "AbiCall is not include/ksol/abi.h's ksol_call");
static_assert(offsetof(AbiCall, tensors) == offsetof(ksol_call, tensors), "AbiCall is not ksol_call");
static_assert(offsetof(AbiCall, num_dims) == offsetof(ksol_call, num_dims), "AbiCall is not ksol_call");
static_assert(offsetof(AbiCall, dims) == offsetof(ksol_call, dims), "AbiCall is not ksol_call");
static_assert(offsetof(AbiCall, stream) == offsetof(ksol_call, stream), "AbiCall is not ksol_call");
#endif

// A library bound to the table it was verified with.
struct Bound {
  std::string path;
  std::string label;  // what errors call it: "best.so", "piece 0"
  RunFn run = nullptr;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<at::ScalarType> dtypes;
  size_t num_inputs = 0;
  std::vector<int64_t> dims;
  c10::DeviceType device_type = c10::DeviceType::CPU;
};

std::mutex g_mutex;
std::vector<std::unique_ptr<Bound>> g_bound;  // never shrinks: a Bound never moves or dies

// PyTorch's Python names, which the user reads everywhere else ("float32", not "Float").
std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::ScalarType::Float: return "float32";
    case at::ScalarType::Double: return "float64";
    case at::ScalarType::Half: return "float16";
    case at::ScalarType::BFloat16: return "bfloat16";
    case at::ScalarType::Byte: return "uint8";
    case at::ScalarType::Char: return "int8";
    case at::ScalarType::Short: return "int16";
    case at::ScalarType::Int: return "int32";
    case at::ScalarType::Long: return "int64";
    case at::ScalarType::Bool: return "bool";
    default: return c10::toString(t);
  }
}

std::string shape_text(at::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

const Bound& bound(int64_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < g_bound.size(), "ksol::run: no library is bound as ", id,
              " (ksol::bind returns the number to pass)");
  return *g_bound[static_cast<size_t>(id)];
}

int64_t bind(const std::string& path, const std::string& label, std::vector<std::string> names, at::TensorList table,
             int64_t num_outputs, std::vector<int64_t> dims, c10::Device device) {
  TORCH_CHECK(names.size() == table.size(), "ksol::bind: ", label, ": ", names.size(), " names for ", table.size(), " tensors");
  TORCH_CHECK(num_outputs >= 1 && static_cast<size_t>(num_outputs) <= table.size(), "ksol::bind: ", label, ": ", num_outputs,
              " outputs in a table of ", table.size(), " tensors");
  TORCH_CHECK(device.is_cpu() || device.is_cuda(), "ksol::bind: ", label, ": ksol's libraries run on cpu or cuda, not ", device);
#ifndef KSOL_OP_WITH_CUDA
  TORCH_CHECK(!device.is_cuda(), "ksol::bind: ", label,
              ": this build of ksol's torch op has no CUDA (PyTorch without CUDA, or no cuda_runtime_api.h when it was built), "
              "so it cannot call a CUDA library on PyTorch's stream");
#endif
  std::unique_ptr<Bound> b(new Bound);
  b->path = path;
  b->label = label;
  b->names = std::move(names);
  for (const at::Tensor& t : table) {
    b->shapes.emplace_back(t.sizes().vec());
    b->dtypes.push_back(t.scalar_type());
  }
  b->num_inputs = table.size() - static_cast<size_t>(num_outputs);
  b->dims = std::move(dims);
  b->device_type = device.type();

  // RTLD_LOCAL, as ctypes.CDLL loads: a library's symbols never resolve another's. A library
  // already loaded (by ctypes, or bound before) is the same handle, counted once more.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    TORCH_CHECK(false, "ksol::bind: ", label, ": cannot load ", path, ": ", err ? err : "dlopen failed");
  }
  dlerror();
  void* sym = dlsym(handle, "ksol_run");
  if (!sym) {
    const char* err = dlerror();
    const std::string why = err ? err : "dlsym failed";  // dlclose frees dlerror's text
    dlclose(handle);
    TORCH_CHECK(false, "ksol::bind: ", label, ": ", path, " exports no ksol_run (", why, ")");
  }
  b->run = reinterpret_cast<RunFn>(sym);

  std::lock_guard<std::mutex> lock(g_mutex);
  g_bound.push_back(std::move(b));
  return static_cast<int64_t>(g_bound.size() - 1);
}

// The table's tensor `i`, described for an error.
std::string which(const Bound& b, size_t i) {
  std::ostringstream o;
  o << "tensor " << i << " '" << b.names[i] << "'";
  return o.str();
}

// Why `inputs` are not the inputs `b` was verified with (their count, device, dtype and shape),
// or "" where they are. Meta tensors (tracing) are checked for their count only, as run_meta does.
std::string mismatch(const Bound& b, at::TensorList inputs) {
  std::ostringstream o;
  if (inputs.size() != b.num_inputs) {
    o << b.label << ": ksol::run takes the " << b.num_inputs << " input tensors the library was verified with, got "
      << inputs.size();
    return o.str();
  }
  if (inputs.empty()) return "";
  if (!inputs[0].defined()) {
    o << b.label << ": " << which(b, 0) << " is undefined";
    return o.str();
  }
  if (inputs[0].is_meta()) return "";
  const c10::Device device = inputs[0].device();
  if (device.type() != b.device_type) {
    o << b.label << ": the library runs on " << c10::Device(b.device_type) << " tensors; " << which(b, 0) << " is on " << device
      << " (move the module and its inputs there)";
    return o.str();
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (!t.defined()) {
      o << b.label << ": " << which(b, i) << " is undefined";
    } else if (t.device() != device) {
      o << b.label << ": " << which(b, i) << " is on " << t.device() << ", " << which(b, 0) << " on " << device
        << ": all of a call's tensors are on one device";
    } else if (t.scalar_type() != b.dtypes[i]) {
      o << b.label << ": " << which(b, i) << " is " << dtype_name(t.scalar_type()) << "; the library was verified with "
        << dtype_name(b.dtypes[i]);
    } else if (!t.sizes().equals(b.shapes[i])) {
      o << b.label << ": " << which(b, i) << " has shape " << shape_text(t.sizes()) << "; the library was verified with "
        << shape_text(b.shapes[i]);
    } else {
      continue;
    }
    return o.str();
  }
  return "";
}

// ksol::check: mismatch() as a value. OpKernel (abi_op.py) asks it where its own comparison of
// the inputs with the table fails, and raises the answer in Python: a caller's mistake never
// needs a C++ exception to cross this library's frames.
std::string check(int64_t id, at::TensorList inputs) { return mismatch(bound(id), inputs); }

std::vector<at::Tensor> run(int64_t id, at::TensorList inputs) {
  const Bound& b = bound(id);
  const std::string why = mismatch(b, inputs);
  TORCH_CHECK(why.empty(), why);
  const c10::Device device = inputs.empty() ? c10::Device(b.device_type) : inputs[0].device();

  const size_t n = b.shapes.size();
  std::vector<at::Tensor> table;
  table.reserve(n);
  for (const at::Tensor& t : inputs) table.push_back(t.contiguous());
  for (size_t i = b.num_inputs; i < n; ++i)
    table.push_back(at::empty(b.shapes[i], at::TensorOptions().dtype(b.dtypes[i]).device(device)));

  std::vector<void*> pointers(n);
  for (size_t i = 0; i < n; ++i) pointers[i] = table[i].data_ptr();
  AbiCall call{kAbiVersion, static_cast<int32_t>(n), pointers.data(), static_cast<int32_t>(b.dims.size()), b.dims.data(), nullptr};
  int rc = 0;
  if (device.is_cuda()) {
#ifdef KSOL_OP_WITH_CUDA
    // The library launches on the current device: make it the tensors' one for the call.
    c10::OptionalDeviceGuard guard;
    if (device.has_index()) guard.reset_device(device);
    call.stream = c10::cuda::getCurrentCUDAStream(device.has_index() ? device.index() : -1).stream();
    rc = b.run(&call);
#else
    TORCH_CHECK(false, b.label, ": this build of ksol's torch op has no CUDA");
#endif
  } else {
    rc = b.run(&call);
  }
  TORCH_CHECK(rc == 0, b.label, ": ksol_run returned ", rc, " (", b.path, ")");
  return std::vector<at::Tensor>(table.begin() + static_cast<std::ptrdiff_t>(b.num_inputs), table.end());
}

// Shapes without running: what tracing with meta tensors (torch.compile's fake tensors) sees.
std::vector<at::Tensor> run_meta(int64_t id, at::TensorList inputs) {
  const Bound& b = bound(id);
  TORCH_CHECK(inputs.size() == b.num_inputs, b.label, ": ksol::run takes ", b.num_inputs, " input tensors, got ", inputs.size());
  std::vector<at::Tensor> outs;
  for (size_t i = b.num_inputs; i < b.shapes.size(); ++i)
    outs.push_back(at::empty(b.shapes[i], at::TensorOptions().dtype(b.dtypes[i]).device(c10::DeviceType::Meta)));
  return outs;
}

bool built_with_cuda() {
#ifdef KSOL_OP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace

TORCH_LIBRARY(ksol, m) {
  m.def("bind(str path, str label, str[] names, Tensor[] table, int num_outputs, int[] dims, Device device) -> int", &bind);
  m.def("run(int library, Tensor[] inputs) -> Tensor[]");
  m.def("check(int library, Tensor[] inputs) -> str", &check);
  m.def("built_with_cuda() -> bool", &built_with_cuda);
}

TORCH_LIBRARY_IMPL(ksol, CPU, m) { m.impl("run", &run); }
TORCH_LIBRARY_IMPL(ksol, CUDA, m) { m.impl("run", &run); }
TORCH_LIBRARY_IMPL(ksol, Meta, m) { m.impl("run", &run_meta); }
// Inference only: autograd passes the call through, and the outputs have no grad_fn. Said
// explicitly because PyTorch 1.x has no autograd fallthrough for meta tensors.
TORCH_LIBRARY_IMPL(ksol, Autograd, m) { m.impl("run", torch::CppFunction::makeFallthrough()); }
