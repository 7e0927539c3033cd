// Test support shared by the CPU-side codegen and seed tests: a task's float64 CPU reference
// compiled by ksol's own compile path and called on the host, and the correctness gate's
// comparator applied to every output.
#pragma once
#include <dlfcn.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "ksol/abi.h"
#include "task/inputs.h"
#include "task/task.h"

namespace ksol::test_support {

class Reference {
 public:
  explicit Reference(const Task& t) {
    CompileResult r = compile(reference_job(t, false));
    if (!r.ok) throw std::runtime_error("reference of " + t.name + " does not compile: " + r.message);
    lib_ = dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) throw std::runtime_error(dlerror());
    fn_ = reinterpret_cast<ksol_reference_fn>(dlsym(lib_, "ksol_reference"));
  }
  ~Reference() { dlclose(lib_); }
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;

  // The reference's outputs on `in` (or on |in| for magnitudes).
  std::vector<HostTensor> run(const Task& t, const SizeSet& s, const std::vector<HostTensor>& in, bool absolute) {
    std::vector<HostTensor> out = make_reference_outputs(t, s);
    std::vector<HostVec<double>> abs_copies(t.tensors.size());
    std::vector<void*> ptrs;
    for (size_t k = 0; k < t.tensors.size(); ++k) {
      const bool input = t.tensors[k].role == Role::in;
      HostTensor& h = input ? const_cast<HostTensor&>(in[k]) : out[k];
      if (!dtype_is_float(h.dtype)) {
        ptrs.push_back(h.bytes.data());
        continue;
      }
      if (input && absolute) {
        abs_copies[k] = h.f64;
        for (double& v : abs_copies[k]) v = std::fabs(v);
        ptrs.push_back(abs_copies[k].data());
        continue;
      }
      ptrs.push_back(h.f64.data());
    }
    std::vector<int64_t> dims;
    for (const std::string& d : t.dims) dims.push_back(static_cast<int64_t>(s.dims.at(d)));
    ksol_call call{KSOL_ABI_VERSION, static_cast<int32_t>(ptrs.size()), ptrs.data(), static_cast<int32_t>(dims.size()),
                   dims.data(), nullptr};
    if (fn_(&call) != 0) throw std::runtime_error("reference failed");
    return out;
  }

 private:
  void* lib_ = nullptr;
  ksol_reference_fn fn_ = nullptr;
};

inline std::vector<int64_t> dims_of(const Task& t, const SizeSet& s) {
  std::vector<int64_t> dims;
  for (const std::string& d : t.dims) dims.push_back(static_cast<int64_t>(s.dims.at(d)));
  return dims;
}

// The outputs a candidate would leave: poisoned buffers (NaN bytes) in the output dtype.
inline OutputBytes poisoned_outputs(const Task& t, const SizeSet& s) {
  OutputBytes out(t.tensors.size());
  for (size_t k = 0; k < t.tensors.size(); ++k)
    if (t.tensors[k].role == Role::out) out[k].assign(t.numel(t.tensors[k], s) * dtype_size(t.tensors[k].dtype), 0xFF);
  return out;
}

// Every output of a run checked by the correctness gate's comparator; failures as text.
inline std::string check_outputs(const Task& t, const SizeSet& s, const std::vector<HostTensor>& in, const OutputBytes& got,
                                 const std::vector<HostTensor>& ref, const std::vector<HostTensor>* mag) {
  std::string failures;
  for (size_t k = 0; k < t.tensors.size(); ++k) {
    if (t.tensors[k].role != Role::out) continue;
    CompareResult r = compare_tensor(t, s, k, in, got, ref, mag);
    if (!r.ok) failures += t.tensors[k].name + ": " + r.message + "\n";
  }
  return failures;
}

}  // namespace ksol::test_support
