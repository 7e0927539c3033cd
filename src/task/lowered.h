// A program written from a PyTorch module (python/ksol_torch synth.py, or one piece of
// stitch.py's plan) as a ksol task with one size, "module": the module's own shapes.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "task/task.h"

namespace ksol {

// `syn`: the program's JSON (program, family, tensors, dims, dim_order, and optionally flops and
// bytes); `file`: the module's file, which names the task and is hashed into its spec. Throws
// std::runtime_error for a tensor type that is not lowered (only f32 is).
Task lowered_task(const nlohmann::json& syn, const std::string& file, const std::string& name_suffix = "");

}  // namespace ksol
