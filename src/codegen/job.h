// A DSL program bound to a task, as a compile job: the generated CUDA, with the target, flags
// and libraries its family needs, and the program text kept as what the user wrote.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compiler.h"
#include "dsl/ir.h"
#include "task/task.h"

namespace ksol::codegen {

struct Binding;
Binding binding_for(const Task& t);
// Throws std::runtime_error with the reason when the family cannot implement the program.
CompileJob compile_job(const Task& t, const dsl::Program& p, const std::string& label);

// Programs kept beside a run's report: their built libraries are copied into DIR/lib/<name>.so (the
// compile cache serves the build the run verified) and named in doc["libraries"][name] as
// "lib/<name>.so", so that the folder alone loads them. A program that does not build is left out.
// Returns how many were copied.
struct KeptLibrary {
  std::string name;  // best | piece-<i>
  const Task* task = nullptr;
  const dsl::Program* program = nullptr;
};
int export_libraries(const std::string& dir, const std::vector<KeptLibrary>& kept, nlohmann::json& doc);

}  // namespace ksol::codegen
