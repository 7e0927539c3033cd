// A reference interpreter of the DSL's typed IR on host arrays: every definition evaluated in
// source order over its whole index space, one element at a time, with the IR's semantics
// (NaN-propagating max/min, PyTorch's argmax, inclusive scans, C casts). It checks what a DSL
// program means without a GPU: against a task's float64 reference (Arithmetic::exact), or as
// the GPU rounds it (Arithmetic::typed) to check generated code's numerics.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "dsl/ir.h"
#include "ksol/abi.h"

namespace ksol::codegen {

enum class Arithmetic {
  exact,  // float64 throughout; casts to float types keep the value (a float64 reference)
  typed,  // every float result rounded to its IR type (f32, bf16, f16), as the generated code computes
};

// Tensors by name, values as doubles (integer tensors hold integers); row-major.
using HostArrays = std::map<std::string, std::vector<double>>;

// Evaluates p: `dims` gives every dim's value, `inputs` every input; returns every output.
// Throws std::runtime_error naming the definition for what it cannot evaluate (csr inputs, a
// read outside a tensor, an integer division by zero) or a missing or mis-sized input.
HostArrays interpret(const dsl::Program& p, const std::map<std::string, int64_t>& dims, const HostArrays& inputs,
                     Arithmetic a = Arithmetic::exact);

// The same on a call laid out like a float64 reference's (include/ksol/abi.h): host pointers in
// the task's tensor order, float tensors as double arrays, integer tensors in their own type;
// dims in the task's order. Returns 0, or nonzero for a malformed call (as ksol_reference does).
int interpret_call(const dsl::Program& p, const Binding& b, const ksol_call* call, Arithmetic a = Arithmetic::exact);

}  // namespace ksol::codegen
