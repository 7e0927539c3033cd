// A DSL program bound to a task, as a compile job: the generated CUDA, with the target, flags
// and libraries its family needs, and the program text kept as what the user wrote.
#pragma once
#include <string>

#include "compile/compiler.h"
#include "dsl/ir.h"
#include "task/task.h"

namespace ksol::codegen {

struct Binding;
Binding binding_for(const Task& t);
// Throws std::runtime_error with the reason when the family cannot implement the program.
CompileJob compile_job(const Task& t, const dsl::Program& p, const std::string& label);

}  // namespace ksol::codegen
