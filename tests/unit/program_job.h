// A DSL program's generated source as a compile job without a task (the program's own binding):
// its kernel name for the file, the target, flags and libraries its family needs.
#pragma once
#include "codegen/codegen.h"
#include "compile/compiler.h"
#include "dsl/ir.h"

namespace ksol {

inline CompileJob program_job(const dsl::Program& p) {
  const codegen::CompileNeeds needs = codegen::compile_needs(p);
  CompileJob j;
  j.source_path = codegen::kernel_name(p) + ".cu";
  j.source_text = codegen::generate_cuda(p, {});
  j.arch = needs.arch;
  j.extra_flags = needs.extra_flags;
  j.libs = needs.libs;
  return j;
}

}  // namespace ksol
